"""Scale: the label graph from 10^4 points to LF-AmazonTitles-1.3M size on one machine and on Dask,
and training / streamed prediction at 1.3M labels.

    python benchmarks/scale.py                          # graph: scales 0.005 .. 1 of LF-AmazonTitles-1.3M
    python benchmarks/scale.py --scales 0.005 0.02      # a quick look
    python benchmarks/scale.py --train --train-points 300000   # + astec at full size, streamed prediction

Synthetic sets (``synthetic.py``: the paper's Table 1 statistics of LF-AmazonTitles-1.3M, scaled in
N and L) are generated under ``--data-cache`` when missing. Every measurement runs in its own child
process, so its peak resident memory (wait4) is its own:

* ``numba``: :func:`gandalf_xmc.graph.label_graph` on one machine (delta 0.1), timed after the data
  are loaded and the kernel compiled; "peak MiB" is the resident memory at its highest from the
  start of the graph step (the loaded data included), "step MiB" what the step added to it; then
  the extra points themselves (``points s``: label texts + rows of G, no copy of G);
* ``labels``: the same graph in a process that holds only the training labels (read from a
  ``.npz`` the ``numba`` run writes): "peak MiB" is then the whole process's, which is what
  building Gandalf's targets for a dataset costs;
* ``dask``: the same graph on a ``LocalCluster`` of ``--workers`` processes (one thread each),
  partitioned by rows of Y; the cluster is started before the clock starts; the result is
  compared with the single-machine graph (``identical``); "worker MiB" is the largest worker peak;
* ``train``: one epoch of ``astec`` over ``--train-points`` points with every label, then the
  test split predicted in batches streamed to a file (``gandalf predict --out`` does the same).

Prints a table, draws ``benchmarks/results/scale.png`` (time and memory against N) and writes
``benchmarks/results/scale.json``.
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

GRAPH_CHILD = r"""
import json, resource, sys, time
import numpy as np, scipy.sparse as sp
from gandalf_xmc.data import load_dataset
from gandalf_xmc.graph import GraphConfig, label_graph
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0
path, how, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = GraphConfig(delta=0.1)
labels_file = f"{path}/trn_labels.npz"  # the training labels alone, written by the numba run
if how == "labels":
    Y = sp.load_npz(labels_file)
    out = {"N": Y.shape[0], "L": Y.shape[1], "labels_nnz": int(Y.nnz)}
    label_graph(sp.csr_matrix(Y[:50]), config)  # compile outside the timing
    t0 = time.perf_counter()
    G = label_graph(Y, config)
    out.update(seconds=time.perf_counter() - t0, step_mib=float("nan"), nnz=int(G.nnz))
    print(json.dumps(out))
    sys.exit(0)
from gandalf_xmc.augment import gandalf_points
ds = load_dataset(path, splits=("trn",))
Y = ds.original_train_Y()
out = {"N": Y.shape[0], "L": Y.shape[1], "labels_nnz": int(Y.nnz)}
if how == "numba":
    sp.save_npz(labels_file + ".tmp.npz", Y, compressed=False)
    import os; os.replace(labels_file + ".tmp.npz", labels_file)
    label_graph(sp.csr_matrix(Y[:50]), config)  # compile outside the timing
    rss = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    t0 = time.perf_counter()
    G = label_graph(Y, config)
    out.update(seconds=time.perf_counter() - t0, step_mib=status("VmHWM:") - rss, nnz=int(G.nnz))
    t0 = time.perf_counter()
    points = gandalf_points(ds, G)  # Gandalf's extra points: a label's text and row of G
    out.update(points_seconds=time.perf_counter() - t0, points_step_mib=status("VmHWM:") - rss)
else:
    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    out["cluster_start_seconds"] = time.perf_counter() - t0
    rss = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    t0 = time.perf_counter()
    G = label_graph(Y, config, client=client)
    out.update(seconds=time.perf_counter() - t0, step_mib=status("VmHWM:") - rss, nnz=int(G.nnz))
    peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    out["worker_peak_mib"] = max(peaks.values())
    out["workers"] = workers
    client.close(); cluster.close()
    R = label_graph(Y, config)
    out["identical"] = bool(np.array_equal(G.indptr, R.indptr) and np.array_equal(G.indices, R.indices)
                            and np.array_equal(G.data, R.data))
print(json.dumps(out))
"""

TRAIN_CHILD = r"""
import json, sys, tempfile, time
import numpy as np
from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.neural_xmc import NeuralXMC
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.workflow.pipeline import write_predictions
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024.0
path, n_points, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = load_dataset(path)
n = min(n_points, len(ds.train))
config = model_config("astec", epochs=1)
config.max_cluster_size = 128
model = NeuralXMC(config)
t0 = time.perf_counter()
model.fit(ds.train.texts[:n], ds.train.Y[:n], ds.label_texts, progress=False)
fit_s = time.perf_counter() - t0
train_peak = status("VmHWM:")
h = model.result.history[0]
texts = ds.test.texts[:n_test]
rss = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    write_predictions(model, texts, ds.n_labels, f"{tmp}/pred.txt", k=100, batch_size=4096, progress=False)
    pred_s = time.perf_counter() - t0
print(json.dumps({"labels": ds.n_labels, "points": n, "fit_seconds": fit_s, "epoch_seconds": h["seconds"],
                  "setup_seconds": fit_s - h["seconds"], "examples_per_second": h["examples_per_second"],
                  "train_peak_mib": train_peak, "predicted": len(texts), "predict_seconds": pred_s,
                  "queries_per_second": len(texts) / pred_s, "predict_step_mib": status("VmHWM:") - rss}))
"""


def measure(cmd: list[str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{err[-3000:]}")
    row = json.loads(out.strip().splitlines()[-1])
    row.update(peak_rss_mib=usage.ru_maxrss / 1024.0, wall_seconds=time.perf_counter() - t0)
    return row


def dataset_at(scale: float, cache: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from synthetic import generate, preset_arguments

    target = cache / f"synthetic-amazon13m-x{scale:g}"
    if not (target / "trn.json.gz").exists():
        kw = preset_arguments("LF-AmazonTitles-1.3M")
        kw["n_points"], kw["n_labels"] = int(kw["n_points"] * scale), int(kw["n_labels"] * scale)
        print(f"generating {target} ...", file=sys.stderr, flush=True)
        generate(target, **kw)
    return target


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for how, label in (("numba", "one machine (numba)"), ("labels", "one machine, labels only"), ("dask", "Dask LocalCluster")):
        pts = sorted((r["N"], r) for r in rows if r["how"] == how)
        if not pts:
            continue
        xs = [n for n, _ in pts]
        axes[0].plot(xs, [r["seconds"] for _, r in pts], marker="o", label=label)
        mem = [max(r["peak_rss_mib"], r.get("worker_peak_mib", 0.0)) for _, r in pts]
        axes[1].plot(xs, mem, marker="o", label=f"{label}, largest process")
        if how == "numba":
            axes[1].plot(xs, [r["step_mib"] for _, r in pts], marker="s", linestyle="--", label="one machine, graph step")
    for ax, ylabel in zip(axes, ("seconds", "peak memory (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training points N (L = 0.58 N, 22 labels a point)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title("label graph (delta 0.1): time")
    axes[1].set_title("label graph: peak resident memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.005, 0.02, 0.1, 0.3, 1.0])
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (one thread each)")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--train", action="store_true", help="also train astec at the largest scale and stream predictions")
    ap.add_argument("--train-points", type=int, default=300_000)
    ap.add_argument("--predict-points", type=int, default=50_000)
    ap.add_argument("--data-cache", type=Path, default=RESULTS / "data")
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows, train = [], None
    print(
        f"{'N':>10} {'L':>10} {'how':<6} {'seconds':>8} {'peak MiB':>9} {'step MiB':>9} {'worker MiB':>10} "
        f"{'G nnz':>12} {'identical':>9} {'points s':>8}",
        flush=True,
    )
    for scale in args.scales:
        path = dataset_at(scale, args.data_cache)
        for how in ("numba", "labels") + (() if args.no_dask else ("dask",)):
            r = measure([sys.executable, "-c", GRAPH_CHILD, str(path), how, str(args.workers)])
            r.update(how=how, scale=scale)
            rows.append(r)
            print(
                f"{r['N']:>10,} {r['L']:>10,} {how:<6} {r['seconds']:>8.1f} {r['peak_rss_mib']:>9.0f} "
                f"{r['step_mib']:>9.0f} {r.get('worker_peak_mib', float('nan')):>10.0f} {r['nnz']:>12,} "
                f"{str(r.get('identical', '')):>9} {r.get('points_seconds', float('nan')):>8.2f}",
                flush=True,
            )
    for scale in args.scales:
        a = next(r for r in rows if r["scale"] == scale and r["how"] == "numba")
        b = next((r for r in rows if r["scale"] == scale and r["how"] == "dask"), None)
        if b:
            print(f"scale {scale:g}: dask / numba time = {b['seconds'] / a['seconds']:.2f}")
    if args.train:
        path = dataset_at(max(args.scales), args.data_cache)
        train = measure([sys.executable, "-c", TRAIN_CHILD, str(path), str(args.train_points), str(args.predict_points)])
        # resetting the high-water mark before predicting also resets what wait4 reports
        train["peak_rss_mib"] = max(train["peak_rss_mib"], train["train_peak_mib"])
        for key, value in train.items():
            print(f"{key:<22} {value:,.2f}" if isinstance(value, float) else f"{key:<22} {value}")
    plot(rows, RESULTS / "scale.png")
    out = RESULTS / "scale.json"
    out.write_text(json.dumps({"machine_cpus": os.cpu_count(), "graph": rows, "train": train}, indent=1) + "\n")
    print(f"wrote {out} and {RESULTS / 'scale.png'}")


if __name__ == "__main__":
    main()
