"""Levels kept in files against levels held in memory, on the dev suite (issue 36's model size).

    python benchmarks/level_files.py [--datasets ...] [--augment none] [--seeds 0] [--split valid]

A level whose weights outgrow the solver's memory budget goes to files, where its search layout is
its only copy and its weights are float16 (``engine/level_chunks.py``). The suite's models never
reach that budget, so each is trained twice, the same way: as usual, and with a budget of one byte,
which sends every level to files. The table gives both models' scores on the split, the share of
queries whose top 5 changed, and the bytes each model directory holds. Writes
``benchmarks/results/level-files-<split>.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from suite import HERE, METRICS, run_grid, scored_split

from gandalf_xmc.data.suite import SUITE
from gandalf_xmc.engine import linear_solver
from gandalf_xmc.metrics import evaluate
from gandalf_xmc.models.linear import LinearConfig, XRLinear


def directory_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def measure(dataset: str, augment: str, seed: int, split: str) -> dict:
    """Both models of ``dataset`` (no augmentation: the engine alone) on the suite's split of
    ``seed``, and what differs."""
    if augment != "none":
        raise SystemExit("only --augment none: this compares how weights are stored, not training sets")
    ds, rest, target, inv = scored_split(dataset, seed, split)
    row: dict = {"dataset": dataset, "seed": seed, "split": split, "n_eval": len(target.texts)}
    tops = {}
    budget = linear_solver.SPILL_BYTES
    for where in ("memory", "files"):
        linear_solver.SPILL_BYTES = budget if where == "memory" else 1
        try:
            with tempfile.TemporaryDirectory(prefix="gandalf-level-files-") as scratch:
                model = XRLinear(LinearConfig(seed=seed))
                model.set_labels(rest.label_texts, rest.label_uids)
                model.fit(rest.train.texts, rest.train.Y, rest.label_texts, checkpoint_dir=Path(scratch) / "c", progress=False)
                model.save(Path(scratch) / "m")
                row[f"{where}_bytes"] = directory_bytes(Path(scratch) / "m")
                pred = model.predict(target.texts, k=5)
                del model
        finally:
            linear_solver.SPILL_BYTES = budget
        metrics = evaluate(pred, target.Y, inv, (1, 3, 5), target.filter_pairs)
        row.update({f"{where}_{m}": round(float(metrics[m]), 2) for m in METRICS})
        tops[where] = [tuple(pred.indices[pred.indptr[i] : pred.indptr[i + 1]]) for i in range(pred.shape[0])]
    row["top5_changed"] = round(sum(a != b for a, b in zip(tops["memory"], tops["files"])) / max(len(tops["files"]), 1), 4)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--augment", default="none")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    args = ap.parse_args()
    rows = run_grid(args.datasets, [(s,) for s in args.seeds], lambda d, s: measure(d, args.augment, s, args.split))
    print("\n| dataset | P@1 memory -> files | P@5 | PSP@5 | top 5 changed | model bytes memory -> files |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['dataset']} | {r['memory_P@1']:.2f} -> {r['files_P@1']:.2f} | {r['memory_P@5']:.2f} -> {r['files_P@5']:.2f} "
            f"| {r['memory_PSP@5']:.2f} -> {r['files_PSP@5']:.2f} | {100 * r['top5_changed']:.2f}% "
            f"| {r['memory_bytes']:,} -> {r['files_bytes']:,} |"
        )
    out = HERE / "results" / f"level-files-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
