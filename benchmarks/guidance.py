"""Which model to start with: each recipe of the README's guidance table on every dev dataset,
scored on validation (seed 0), with its training time and the peak memory of the process that
loaded the data, trained and predicted (each run in a fresh process, so the peaks are its own).

    python benchmarks/guidance.py                       # the four recipes of the table, 7 datasets
    python benchmarks/guidance.py --recipes linear:none astec:none --datasets manpages jargon

A recipe is MODEL:AUGMENTATION. Prints a table per dataset and a summary (mean and range over the
datasets), and writes ``benchmarks/results/guidance.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
from pathlib import Path

import numpy as np
from suite import HERE, METRICS, run_grid

from gandalf_xmc.data.suite import SUITE

RECIPES = ("linear:none", "knn:none", "linear:gandalf-tempered", "linear-knn:gandalf-tempered")


def _child(dataset: str, model: str, augment: str, seed: int, split: str, out) -> None:
    import sys

    sys.path.insert(0, str(HERE))
    from suite import run_one

    row = run_one(dataset, model, augment, seed, split, {}, None)
    row["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes
    out.put(row)


def measure(dataset: str, recipe: str, seed: int, split: str) -> dict:
    """One recipe on one dataset in a fresh process: the suite's row plus that process's peak memory."""
    model, augment = recipe.split(":")
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(dataset, model, augment, seed, split, queue))
    process.start()
    row = queue.get()
    process.join()
    return row


def summary(rows: list[dict]) -> str:
    out = [
        "| recipe | datasets | mean P@1 | mean PSP@5 | best P@1 on (ties count) | train s (min-max) | peak memory MB (min-max) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    recipes = list(dict.fromkeys(f"{r['model']}:{r['augment']}" for r in rows))
    best = {d: max(r["P@1"] for r in rows if r["dataset"] == d) for d in {r["dataset"] for r in rows}}
    for recipe in recipes:
        rs = [r for r in rows if f"{r['model']}:{r['augment']}" == recipe]
        wins = sum(r["P@1"] == best[r["dataset"]] for r in rs)  # ties count for each
        secs, mem = [r["train_seconds"] for r in rs], [r["peak_memory_mb"] for r in rs]
        out.append(
            f"| {recipe} | {len(rs)} | {np.mean([r['P@1'] for r in rs]):.2f} | "
            f"{np.mean([r['PSP@5'] for r in rs]):.2f} | {wins} | {min(secs):.1f}-{max(secs):.1f} | "
            f"{min(mem):.0f}-{max(mem):.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "guidance.json")
    args = ap.parse_args()
    rows = run_grid(
        args.datasets,
        [(recipe,) for recipe in args.recipes],
        lambda dataset, recipe: measure(dataset, recipe, args.seed, args.split),
    )
    for dataset in args.datasets:
        sub = [r for r in rows if r["dataset"] == dataset]
        print(f"\n{dataset} ({args.split}, {sub[0]['n_eval']:,} points)\n")
        print("| recipe | " + " | ".join(METRICS) + " | train s | peak memory MB |")
        print("|" + " --- |" * (len(METRICS) + 3))
        for r in sub:
            print(
                f"| {r['model']}:{r['augment']} | "
                + " | ".join(f"{r[m]:.2f}" for m in METRICS)
                + f" | {r['train_seconds']:.1f} | {r['peak_memory_mb']:.0f} |"
            )
    print("\n" + summary(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
