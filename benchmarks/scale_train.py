"""Training throughput and peak memory of a neural model at LF-AmazonTitles-1.3M scale.

    python benchmarks/synthetic.py --preset LF-AmazonTitles-1.3M --out /tmp/amazon13m
    python benchmarks/scale_train.py /tmp/amazon13m --points 300000 --model astec

All labels take part (label clustering, meta-classifier and classifiers over every label); the
epoch runs over the first ``--points`` training points so that the measurement fits in minutes.
The run happens in a child process, so the peak resident memory (wait4) is the run's own. Prints
a table and writes ``benchmarks/results/scale_train.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

CHILD = r"""
import json, sys, time
import numpy as np
from gandalf_xmc.engine.threads import limit_threads
if int(sys.argv[5]):
    limit_threads(int(sys.argv[5]))
from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.neural_xmc import NeuralXMC
from gandalf_xmc.models.registry import model_config
path, n_points, model_name, cluster_size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
t0 = time.perf_counter()
ds = load_dataset(path, splits=("trn",))
read_s = time.perf_counter() - t0
n = min(n_points, len(ds.train))
config = model_config(model_name, epochs=1)
config.max_cluster_size = cluster_size
model = NeuralXMC(config)
t0 = time.perf_counter()
model.fit(ds.train.texts[:n], ds.train.Y[:n], ds.label_texts, progress=False)
fit_s = time.perf_counter() - t0
res = model.result
queries = ds.train.texts[:200]
lat = []
for q in queries:
    t1 = time.perf_counter(); model.predict([q], k=5); lat.append(1000 * (time.perf_counter() - t1))
print(json.dumps({"labels": ds.n_labels, "points": n, "read_seconds": read_s, "fit_seconds": fit_s,
                  "epoch_seconds": res.history[0]["seconds"], "examples_per_second": res.history[0]["examples_per_second"],
                  "setup_seconds": fit_s - res.history[0]["seconds"], "clusters": int(model.members.shape[0]),
                  "latency_ms_p50": float(np.percentile(lat, 50)), "latency_ms_p99": float(np.percentile(lat, 99))}))
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path)
    ap.add_argument("--points", type=int, default=300_000)
    ap.add_argument("--model", default="astec", choices=["astec", "inceptionxml"])
    ap.add_argument("--cluster-size", type=int, default=128, help="labels per meta cluster (32 at <= 200k labels)")
    ap.add_argument("--threads", type=int, default=0, help="torch/numba threads (0: library default)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(args.data), str(args.points), args.model, str(args.cluster_size), str(args.threads)],
        stdout=subprocess.PIPE,
    )
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"run failed (exit {os.waitstatus_to_exitcode(status)})")
    row = json.loads(out.strip().splitlines()[-1])
    row.update(
        model=args.model,
        cluster_size=args.cluster_size,
        threads=args.threads,
        peak_rss_mib=usage.ru_maxrss / 1024.0,
        wall_seconds=time.perf_counter() - t0,
    )
    for key, value in row.items():
        print(f"{key:<22} {value:,.2f}" if isinstance(value, float) else f"{key:<22} {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale_train.json").write_text(json.dumps(row, indent=1) + "\n")
    print(f"wrote {RESULTS / 'scale_train.json'}")


if __name__ == "__main__":
    main()
