"""What label points do to new items, and why: the linear model trained on a new-items set's older
release with each training set, scored on the items the newer release adds, with the figures
that separate the mechanisms (issue 35).

    python benchmarks/new_items.py [--datasets debian-new-packages gene-ontology-new-terms]
                                   [--augments none gandalf gandalf-tempered identity] [--seed 0]

Per training set: P@1 and PSP@5 (test split, nothing chosen on it), and again with every label of
the item's own text left out of its answer (what a deployment could do for items that are not in its
catalogue); "namesake top-1": the share of
test items whose top label has exactly the item's text (case and spacing folded) and how often such
a top label is right; P@1 on the items that have a namesake label and on those that have none;
and where the top labels sit in the label-frequency bins (1 = head ... 5 = tail, each bin a fifth of
the training positives). Writes ``benchmarks/results/new-items.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from suite import augment_config, run_grid

from gandalf_xmc.augment import training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.stats import frequency_bins
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.metrics.ranking import top_k_indices
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow.fitting import fit_model

RESULTS = Path(__file__).resolve().parent / "results"


def folded(text: str) -> str:
    return " ".join(text.lower().split())


def measure(dataset: str, augment: str, seed: int) -> dict:
    ds = load_dataset(dataset)
    train = training_set(ds, augment_config(augment, seed))
    t0 = time.perf_counter()
    model = fit_model(build_model(model_config("linear", seed=seed)), train, ds.label_texts, progress=False)
    seconds = time.perf_counter() - t0
    test = ds.test
    pred = model.predict(test.texts, k=10)
    inv = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    scores = evaluate(pred, test.Y, inv, (1, 5), test.filter_pairs)
    top1 = top_k_indices(pred, 1)[:, 0]
    label_keys = [folded(t) for t in ds.label_texts]
    by_key: dict[str, set[int]] = {}
    for j, key in enumerate(label_keys):
        by_key.setdefault(key, set()).add(j)
    item_keys = [folded(t) for t in test.texts]
    has_namesake = np.array([key in by_key for key in item_keys])
    namesake_top1 = np.array([t >= 0 and label_keys[t] == key for t, key in zip(top1.tolist(), item_keys)])
    Y = test.Y.tocsr()
    right = np.array([t >= 0 and Y[i, t] > 0 for i, t in enumerate(top1.tolist())])
    # the deployment twin of a filter file for items outside the catalogue: labels of the query's
    # own text left out of its answer
    rows, cols = np.repeat(np.arange(pred.shape[0]), np.diff(pred.indptr)), pred.indices
    namesakes = np.array([label_keys[j] == item_keys[i] for i, j in zip(rows.tolist(), cols.tolist())], dtype=bool)
    unnamed = pred.copy()
    unnamed.data[namesakes] = 0.0
    unnamed.eliminate_zeros()
    scores_unnamed = evaluate(unnamed, test.Y, inv, (1, 5), test.filter_pairs)
    bins = frequency_bins(ds.label_frequencies())
    top_bins = np.bincount(bins[top1[top1 >= 0]], minlength=5)

    def pct(mask: np.ndarray) -> float:
        return round(100.0 * float(mask.mean()), 2) if mask.size else 0.0

    return {
        "dataset": dataset,
        "augment": augment,
        "seed": seed,
        "n_test": len(test),
        "train_seconds": round(seconds, 2),
        "P@1": round(scores["P@1"], 2),
        "PSP@5": round(scores["PSP@5"], 2),
        "P@1_namesakes_left_out": round(scores_unnamed["P@1"], 2),
        "PSP@5_namesakes_left_out": round(scores_unnamed["PSP@5"], 2),
        "items_with_namesake_label_pct": pct(has_namesake),
        "namesake_top1_pct": pct(namesake_top1),
        "namesake_top1_right_pct": pct(right[namesake_top1]),
        "P@1_items_with_namesake": pct(right[has_namesake]),
        "P@1_items_without": pct(right[~has_namesake]),
        "top1_bin_pct": [round(100.0 * c / max(top_bins.sum(), 1), 1) for c in top_bins.tolist()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["debian-new-packages", "gene-ontology-new-terms"])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf", "gandalf-tempered", "identity"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "new-items.json")
    args = ap.parse_args()
    rows = run_grid(args.datasets, [(a, args.seed) for a in args.augments], measure)
    print(
        "\n| dataset | training set | P@1 | PSP@5 | namesakes left out: P@1 / PSP@5 | namesake top-1 % | "
        "of them right % | P@1 with namesake | P@1 without | top-1 in bins 1-5 % |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['dataset']} | {r['augment']} | {r['P@1']:.2f} | {r['PSP@5']:.2f} | "
            f"{r['P@1_namesakes_left_out']:.2f} / {r['PSP@5_namesakes_left_out']:.2f} | {r['namesake_top1_pct']:.2f} | "
            f"{r['namesake_top1_right_pct']:.2f} | {r['P@1_items_with_namesake']:.2f} | {r['P@1_items_without']:.2f} | "
            f"{' / '.join(f'{v:.0f}' for v in r['top1_bin_pct'])} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
