"""Time and peak memory of the label graph and of `gandalf augment`, with a scipy reference.

    python benchmarks/augment_bench.py                      # embedded dataset only
    python benchmarks/augment_bench.py --synthetic 1.3M     # + a synthetic LF-AmazonTitles-1.3M
    python benchmarks/augment_bench.py --synthetic 1.3M --scale 0.1

Each measurement runs in its own child process, so the peak resident memory (from wait4) belongs
to that measurement alone. "graph" is the co-occurrence graph of paper eq. 6 (delta 0.1) from
the training labels, timed without reading the data; "scipy one-shot" is the reference
``Y.T @ Y`` followed by the same normalisation and threshold (run where L <= --reference-max-labels).
Prints a table and writes ``benchmarks/results/augment.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

GRAPH_CHILD = r"""
import json, sys, time
import numpy as np, scipy.sparse as sp
from gandalf_xmc.data import load_dataset
from gandalf_xmc.graph import GraphConfig, label_graph
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0
path, how = sys.argv[1], sys.argv[2]
ds = load_dataset(None if path == "-" else path, splits=("trn",))
Y = ds.original_train_Y()
label_graph(sp.csr_matrix(Y[:50]), GraphConfig())  # compile the kernel outside the timing
rss_before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak-RSS mark, so VmHWM below is the graph step's own peak
t0 = time.perf_counter()
if how == "ours":
    G = label_graph(Y, GraphConfig(delta=0.1))
    nnz = G.nnz
else:
    B = Y.copy(); B.data[:] = 1
    C = (B.T @ B).tocsr()
    d = C.diagonal()
    C = sp.diags(1.0 / np.maximum(d, 1)) @ C
    C.data[C.data <= 0.1] = 0
    C.eliminate_zeros()
    C.setdiag(1.0)
    nnz = C.nnz
seconds = time.perf_counter() - t0
# memory the graph step itself needed on top of the loaded data (peak minus resident before it)
extra = status("VmHWM:") - rss_before
print(json.dumps({"seconds": seconds, "nnz": int(nnz), "n_points": Y.shape[0], "n_labels": Y.shape[1],
                  "graph_extra_peak_mib": extra, "rss_before_mib": rss_before}))
"""


def measure(cmd: list[str]) -> dict:
    """Run ``cmd``; return wall seconds, the child's own peak RSS (MiB, via wait4) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # read output fully, then reap with wait4 to get this child's rusage
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return {"wall_seconds": wall, "peak_rss_mib": usage.ru_maxrss / 1024.0, "stdout": out}


def bench_dataset(name: str, path: str | None, reference_max_labels: int, workdir: Path) -> list[dict]:
    rows = []
    arg = path or "-"
    py = sys.executable
    ours = measure([py, "-c", GRAPH_CHILD, arg, "ours"])
    info = json.loads(ours["stdout"])
    rows.append(
        {
            "dataset": name,
            "stage": "graph (ours, numba two-pass)",
            "seconds": info["seconds"],
            "peak_rss_mib": ours["peak_rss_mib"],
            "graph_extra_peak_mib": info["graph_extra_peak_mib"],
            "nnz": info["nnz"],
            "N": info["n_points"],
            "L": info["n_labels"],
        }
    )
    if info["n_labels"] <= reference_max_labels:
        ref = measure([py, "-c", GRAPH_CHILD, arg, "scipy"])
        rinfo = json.loads(ref["stdout"])
        rows.append(
            {
                "dataset": name,
                "stage": "graph (scipy one-shot Y.T @ Y)",
                "seconds": rinfo["seconds"],
                "peak_rss_mib": ref["peak_rss_mib"],
                "graph_extra_peak_mib": rinfo["graph_extra_peak_mib"],
                "nnz": rinfo["nnz"],
                "N": rinfo["n_points"],
                "L": rinfo["n_labels"],
            }
        )
        rows[-1]["ratio_vs_ours"] = rinfo["seconds"] / max(info["seconds"], 1e-9)
    gandalf = str(Path(py).with_name("gandalf"))
    out_dir = workdir / f"aug-{name}"
    cmd = [gandalf, "augment", *([path] if path else []), "--out", str(out_dir)]
    full = measure(cmd)
    rows.append(
        {
            "dataset": name,
            "stage": "gandalf augment (read, graph, write all files)",
            "seconds": full["wall_seconds"],
            "peak_rss_mib": full["peak_rss_mib"],
            "N": info["n_points"],
            "L": info["n_labels"],
        }
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synthetic", choices=["1.3M"], help="Also run on a synthetic LF-AmazonTitles-1.3M.")
    ap.add_argument("--scale", type=float, default=1.0, help="Scale of the synthetic set.")
    ap.add_argument("--data-cache", type=Path, default=RESULTS / "data", help="Where synthetic data is generated.")
    ap.add_argument("--reference-max-labels", type=int, default=200_000)
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    datasets: list[tuple[str, str | None]] = [("debian-bookworm", None)]
    if args.synthetic:
        sys.path.insert(0, str(HERE))
        from synthetic import generate, preset_arguments

        kw = preset_arguments("LF-AmazonTitles-1.3M")
        kw["n_points"], kw["n_labels"] = int(kw["n_points"] * args.scale), int(kw["n_labels"] * args.scale)
        target = args.data_cache / f"synthetic-amazon13m-x{args.scale:g}"
        if not (target / "trn.json.gz").exists():
            print(f"generating {target} ...", file=sys.stderr)
            generate(target, **kw)
        datasets.append((target.name, str(target)))
    rows = []
    with tempfile.TemporaryDirectory(dir=RESULTS) as work:
        for name, path in datasets:
            rows.extend(bench_dataset(name, path, args.reference_max_labels, Path(work)))
    print(f"{'dataset':<26} {'stage':<48} {'seconds':>8} {'peak MiB':>9} {'step MiB':>9}")
    for r in rows:
        step = r.get("graph_extra_peak_mib")
        print(
            f"{r['dataset']:<26} {r['stage']:<48} {r['seconds']:>8.1f} {r['peak_rss_mib']:>9.0f} "
            f"{'' if step is None else format(step, '.0f'):>9}"
        )
    print("peak MiB: whole process (data loading included); step MiB: peak memory the graph step added on top of the loaded data")
    out = RESULTS / "augment.json"
    out.write_text(json.dumps({"machine_cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
