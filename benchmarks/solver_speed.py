"""The linear model's training time and weights, this checkout against another one, side by side:
for a change to the engine that must keep the same weights at no loss of speed.

    git worktree add /tmp/before <commit>
    python benchmarks/solver_speed.py --against /tmp/before/src --datasets debian-bookworm manpages

Each run is a fresh process (numba's compiled kernels come from each tree's cache; a warm-up fit
compiles them first), the two trees alternate, and the table gives the median of ``--repeats``
fits, their ratio, and whether the weights hash alike. Writes ``benchmarks/results/solver_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

RUN = """
import hashlib, json, sys, time
from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.linear import LinearConfig, XRLinear
ds = load_dataset(sys.argv[1])
train = ds.original_train()
def fit():
    return XRLinear(LinearConfig(seed=0, threads=int(sys.argv[2]))).fit(train.texts, train.Y, ds.label_texts, progress=False)
fit()  # compiles or loads the kernels
started = time.perf_counter()
model = fit()
seconds = time.perf_counter() - started
h = hashlib.sha256()
for W in model.weights.levels:
    h.update(W.indptr.tobytes()); h.update(W.indices.tobytes()); h.update(W.data.tobytes())
print(json.dumps({"seconds": seconds, "weights": h.hexdigest()[:16]}))
"""


def one_run(src: Path, dataset: str, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", RUN, dataset, str(threads)], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", type=Path, required=True, help="the other checkout's src directory")
    ap.add_argument("--datasets", nargs="+", default=["debian-bookworm", "manpages", "gene-ontology"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "solver_speed.json")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent.parent / "src"
    rows = []
    print("| dataset | this checkout (s) | the other (s) | ratio | same weights |")
    print("| --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        runs: dict[str, list[dict]] = {"this": [], "other": []}
        for _ in range(args.repeats):
            runs["this"].append(one_run(here, dataset, args.threads))
            runs["other"].append(one_run(args.against, dataset, args.threads))
        this = statistics.median(r["seconds"] for r in runs["this"])
        other = statistics.median(r["seconds"] for r in runs["other"])
        same = len({r["weights"] for r in runs["this"] + runs["other"]}) == 1
        rows.append(
            {"dataset": dataset, "this_s": this, "other_s": other, "ratio": this / other, "same_weights": same, "runs": runs}
        )
        print(f"| {dataset} | {this:.2f} | {other:.2f} | {this / other:.3f} | {'yes' if same else 'NO'} |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"against": str(args.against), "threads": args.threads, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
