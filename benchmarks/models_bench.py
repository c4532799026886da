"""Train every model without augmentation, with Gandalf and with identity targets on the
embedded dataset; report test P@1/3/5, PSP@1/3/5, C@1/5, training time, peak memory, single-query
latency p50/p99 and batch throughput.

    python benchmarks/models_bench.py                       # all models x {none, gandalf, identity}
    python benchmarks/models_bench.py --models linear --augments none gandalf --seeds 0 1 2
    python benchmarks/models_bench.py --models linear --augments none gandalf-tempered auto --seeds 0 1 2

An augment is a training set name (``gandalf train --augment``), including ``auto`` (the chosen
variant is reported), or the name of one of auto's candidates (``gandalf-tempered``, ...).

``knn`` (TF-IDF kNN, training-free) is a reference row. Settings are each model's defaults
(chosen on a validation split carved from the training data);
the test split is only scored here. Each configuration runs in its own process, so the peak
resident memory (wait4) is its own. Prints a table (and mean +- standard deviation over seeds when
there are several) and writes ``benchmarks/results/models.json`` (or ``--out``). When the
first two or more candidates of ``--augment auto`` for a model were run, in auto's order
(``train.auto.candidates_for``: the neural models also have the ``-targets-only`` ones), an
``auto`` row per model and seed is derived from them (see ``auto_rows``): auto with every
candidate, or with a time budget that covers the first n.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

CHILD = r"""
import json, sys, time, tempfile
import numpy as np
from gandalf_xmc.engine.threads import limit_threads
threads = int(sys.argv[4])
if threads:
    limit_threads(threads)
from gandalf_xmc.augment import AugmentConfig
from gandalf_xmc.data import load_dataset
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.workflow.auto import AUTO_CANDIDATES
from gandalf_xmc.workflow.pipeline import train_model
from dataclasses import replace
from pathlib import Path
family, augment, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
aug = replace(AUTO_CANDIDATES[augment], seed=seed) if augment in AUTO_CANDIDATES else AugmentConfig(augment, seed=seed)
if sys.argv[5] == "0":  # --no-label-point-negatives; otherwise the candidate keeps its own setting
    aug = replace(aug, label_point_negatives=False)
ds = load_dataset()
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as out:
    config = model_config(family, seed=seed)
    if family == "dual-encoder":
        config = replace(config, encoder_precision=sys.argv[6])  # --encoder-precision
    trained = train_model(ds, Path(out) / "model", config, aug, progress=False)
model = trained.model
chosen = trained.search["chosen"] if trained.search else None
best_epoch, examples_per_second = trained.validated.best_epoch, model.result.examples_per_second
valid = {k: trained.validated.history[best_epoch][k] for k in ("P@1", "P@5", "PSP@1", "PSP@5")}
train_seconds = time.perf_counter() - t0
texts = ds.test.texts
model.predict(texts[:50], k=10)  # warm up
t0 = time.perf_counter()
pred = model.predict(texts, k=100)
batch_seconds = time.perf_counter() - t0
lat = []
for text in texts[:300]:
    t1 = time.perf_counter()
    model.predict([text], k=5)
    lat.append(1000 * (time.perf_counter() - t1))
w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
res = evaluate(pred, ds.test.Y, w, ks=(1, 3, 5), filter_pairs=ds.test.filter_pairs)
out = {k: res[k] for k in ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "C@1", "C@5")}
precision = model.config.encoder_precision if family == "dual-encoder" else None  # auto resolved
out.update(train_seconds=train_seconds, best_epoch=best_epoch, chosen=chosen, valid=valid, encoder_precision=precision,
            train_examples_per_second=examples_per_second,
           latency_ms_p50=float(np.percentile(lat, 50)), latency_ms_p99=float(np.percentile(lat, 99)),
           batch_queries_per_second=len(texts) / batch_seconds)
print(json.dumps(out))
"""


def run(
    family: str, augment: str, seed: int, threads: int = 0, label_point_negatives: bool = True, encoder_precision: str = "auto"
) -> dict:
    t0 = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            family,
            augment,
            str(seed),
            str(threads),
            "1" if label_point_negatives else "0",
            encoder_precision,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{family}/{augment} failed:\n{err[-3000:]}")
    row = json.loads(out.strip().splitlines()[-1])
    row.update(
        model=family,
        augment=augment,
        seed=seed,
        threads=threads,
        peak_rss_mib=usage.ru_maxrss / 1024.0,
        wall_seconds=time.perf_counter() - t0,
    )
    return row


def auto_rows(rows: list[dict]) -> list[dict]:
    """``--augment auto`` rows derived from runs of auto's candidates: for each model and seed, the
    candidate that auto's rule picks from the runs' validation scores. This is what ``--augment
    auto`` would return (its final model is the winning trial, trained on the same split with the
    same seed) without training every candidate twice. When only the first n candidates (in auto's
    order, n >= 2) were run, the row is auto under a time budget that covers those n
    (``auto_candidates``; ``auto_train_seconds`` is their training time)."""
    from gandalf_xmc.models.registry import entry
    from gandalf_xmc.workflow.auto import AutoConfig, candidates_for, choose

    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        for seed in dict.fromkeys(r["seed"] for r in rows):
            runs = {r["augment"]: r for r in rows if r["model"] == model and r["seed"] == seed and r.get("valid")}
            names = candidates_for(entry(model))
            # auto runs its candidates in order until its time budget is spent: a prefix of the list
            ran = next((i for i, name in enumerate(names) if name not in runs), len(names))
            if ran < 2:
                continue
            trials = [{"name": name, "valid": runs[name]["valid"]} for name in names[:ran]]
            winner = choose(trials, AutoConfig().p1_tolerance)
            out.append(
                {
                    **runs[winner],
                    "augment": "auto",
                    "chosen": winner,
                    "auto_candidates": ran,
                    "auto_train_seconds": sum(runs[name]["train_seconds"] for name in names[:ran]),
                }
            )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["knn", "linear", "astec", "inceptionxml", "dual-encoder"])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf", "identity"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--out", type=Path, default=RESULTS / "models.json")
    ap.add_argument("--threads", type=int, default=0, help="torch/numba threads per run (0: library default)")
    ap.add_argument("--parallel", type=int, default=1, help="runs at a time (each in its own process)")
    ap.add_argument(
        "--encoder-precision",
        choices=("auto", "float32", "bfloat16", "int8"),
        default="auto",
        help="the dual-encoder's sentence encoder (see gandalf train --encoder-precision)",
    )
    ap.add_argument(
        "--no-label-point-negatives",
        action="store_true",
        help="extra points contribute their targets only (neural models; see gandalf train)",
    )
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    cols = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "C@1", "C@5")
    print(
        f"{'model':<13} {'augment':<22} {'seed':>4} "
        + " ".join(f"{c:>6}" for c in cols)
        + f" {'train s':>8} {'peak MiB':>8} {'p50 ms':>7} {'p99 ms':>7} {'q/s':>7}",
        flush=True,
    )

    def show(r: dict) -> None:
        shown = r["augment"] if r.get("chosen") is None else f"auto={r['chosen']}"
        print(
            f"{r['model']:<13} {shown:<22} {r['seed']:>4} "
            + " ".join(f"{r[c]:>6.2f}" for c in cols)
            + f" {r['train_seconds']:>8.0f} {r['peak_rss_mib']:>8.0f} {r['latency_ms_p50']:>7.2f}"
            f" {r['latency_ms_p99']:>7.2f} {r['batch_queries_per_second']:>7.0f}",
            flush=True,
        )

    jobs = [(family, augment, seed) for family in args.models for augment in args.augments for seed in args.seeds]
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        negatives = not args.no_label_point_negatives
        futures = [pool.submit(run, *job, args.threads, negatives, args.encoder_precision) for job in jobs]
        for future in as_completed(futures):
            r = future.result()
            rows.append(r)
            show(r)
            args.out.write_text(json.dumps({"rows": rows, "summary": summarise(rows, cols)}, indent=1) + "\n")
    derived = auto_rows(rows)
    for r in derived:
        show(r)
    rows += derived
    args.out.write_text(json.dumps({"rows": rows, "summary": summarise(rows, cols)}, indent=1) + "\n")
    if len(args.seeds) > 1:
        print("\nmean +- std over seeds " + " ".join(map(str, args.seeds)))
        for key, stats in summarise(rows, cols).items():
            print(f"{key:<36} " + " ".join(f"{stats[c][0]:>6.2f}+-{stats[c][1]:<4.2f}" for c in cols))
    print(f"wrote {args.out}")


def summarise(rows: list[dict], cols: tuple[str, ...]) -> dict:
    """ "model/augment" -> metric -> (mean, sample standard deviation) over seeds."""
    import statistics

    groups: dict = {}
    for r in rows:
        groups.setdefault(f"{r['model']}/{r['augment']}", []).append(r)
    return {
        key: {
            c: (statistics.fmean(g[c] for g in rs), statistics.stdev(g[c] for g in rs) if len(rs) > 1 else 0.0)
            for c in (*cols, "train_seconds")
        }
        for key, rs in groups.items()
    }


if __name__ == "__main__":
    main()
