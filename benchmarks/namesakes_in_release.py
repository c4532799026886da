"""Whether one release's validation can show what label points do to items with a namesake label
(issue 35): the training release alone, validation points held out as if they did not exist yet
(the ``future`` protocol), split by whether a remaining label has exactly their text.

    python benchmarks/namesakes_in_release.py [--dataset debian-new-packages] [--seed 0]

Prints, for the validation points with and without a namesake: their share, P@1 of the linear
model with each training set and its gain over none, and how often a namesake is a true label,
among those validation points and among the dataset's test items (the new items of a later
release; only this share is read from the test split, no score). Validation only otherwise.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from suite import augment_config, valid_fraction

from gandalf_xmc.augment import training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.metrics.ranking import prepare
from gandalf_xmc.models.base import folded_text
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.validation import carve_validation


def namesakes_right(texts: list[str], Y, label_texts: list[str]) -> tuple[np.ndarray, float]:
    """Which texts have a label of exactly their text, and the share of those (with a target)
    whose namesake is one of their targets."""
    by_text: dict[str, list[int]] = {}
    for j, text in enumerate(label_texts):
        by_text.setdefault(folded_text(text), []).append(j)
    Y = Y.tocsr()
    has = np.array([folded_text(t) in by_text for t in texts])
    rows = [i for i in np.flatnonzero(has) if Y[i].nnz]
    right = sum(any(Y[i, j] > 0 for j in by_text[folded_text(texts[i])]) for i in rows)
    return has, 100.0 * right / max(len(rows), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="debian-new-packages")
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf", "gandalf-tempered", "identity"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ds = load_dataset(args.dataset, splits=("trn", "tst"))
    rest, valid = carve_validation(ds, valid_fraction(ds.n_original_train or len(ds.train)), args.seed, "future")
    twin, valid_right = namesakes_right(valid.texts, valid.Y, rest.label_texts)
    _, test_right = namesakes_right(ds.test.texts, ds.test.Y, ds.label_texts)
    record = {
        "dataset": args.dataset,
        "seed": args.seed,
        "n_valid": len(valid),
        "valid_with_namesake_pct": round(100.0 * twin.mean(), 2),
        "namesake_is_a_target_pct": {"valid": round(valid_right, 2), "test (new items)": round(test_right, 2)},
        "P@1": {},
    }
    hits = {}
    for augment in args.augments:
        model = build_model(model_config("linear", seed=args.seed))
        fit_model(model, training_set(rest, augment_config(augment, args.seed)), rest.label_texts, progress=False)
        prepared = prepare(model.predict(valid.texts, k=5), valid.Y, 1, valid.filter_pairs)
        hits[augment] = (prepared.hits[:, 0].astype(float), twin[prepared.kept_rows])
        h, t = hits[augment]
        record["P@1"][augment] = {
            "all": round(100 * h.mean(), 2),
            "with namesake": round(100 * h[t].mean(), 2),
            "without": round(100 * h[~t].mean(), 2),
        }
    base, t = hits["none"][0], hits["none"][1]
    record["gain_over_none"] = {
        a: {"with namesake": round(100 * (h - base)[t].mean(), 2), "without": round(100 * (h - base)[~t].mean(), 2)}
        for a, (h, _) in hits.items()
        if a != "none"
    }
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
