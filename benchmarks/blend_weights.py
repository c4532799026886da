"""The linear-knn blend's weight across the dev suite, on validation splits only, with a
leave-one-dataset-out choice of the weight used when a model has no validation split.

    python benchmarks/blend_weights.py [--datasets ...] [--augments none gandalf-tempered] [--seeds 0 1 2]

For each dataset, training set and seed: the suite's validation split (``suite.valid_fraction``,
seed s) is carved from the training points, the tree and the neighbours are trained once on the
rest, and every weight of ``BlendConfig.weights`` is scored on the validation split (P@1, PSP@5).
Then, for each dataset left out, the weight of best mean P@1 over the *other* datasets, and what
it scores on the one left out, beside weight 0 (the tree alone) and that dataset's own best.
Writes ``benchmarks/results/blend-weights.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from suite import augment_config, markdown_table, run_grid, valid_fraction, write_results

from gandalf_xmc.augment import training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.suite import SUITE
from gandalf_xmc.engine.records import Validation, validation_metrics
from gandalf_xmc.metrics import inverse_propensity
from gandalf_xmc.models.blend import BlendConfig, LinearKnnBlend
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.workflow.validation import carve_validation

HERE = Path(__file__).resolve().parent


def measure(dataset: str, augment: str, seed: int) -> dict:
    ds = load_dataset(dataset, splits=("trn",))
    rest, valid = carve_validation(ds, valid_fraction(ds.n_original_train or len(ds.train)), seed)
    config: BlendConfig = model_config("linear-knn", seed=seed)
    blend = LinearKnnBlend(config).fit(
        training_set(rest, augment_config(augment, seed)), label_texts=rest.label_texts, progress=False
    )
    v = Validation(
        valid.texts, valid.Y, inverse_propensity(rest.original_train_Y(), *ds.propensity_constants()), valid.filter_pairs
    )
    tree, vote = blend.parts(list(valid.texts))
    scores = {str(w): validation_metrics(blend.combine(tree, vote, w, 10), v) for w in config.weights}
    return {
        "dataset": dataset,
        "augment": augment,
        "seed": seed,
        "P@1": {w: m["P@1"] for w, m in scores.items()},
        "PSP@5": {w: m["PSP@5"] for w, m in scores.items()},
    }


def leave_one_out(rows: list[dict], augment: str) -> list[dict]:
    """For each dataset: the weight of best mean P@1 on the others, and its P@1 there."""
    sub = [r for r in rows if r["augment"] == augment]
    datasets = list(dict.fromkeys(r["dataset"] for r in sub))
    weights = list(sub[0]["P@1"])

    def mean_p1(names: list[str], w: str) -> float:
        return float(np.mean([r["P@1"][w] for r in sub if r["dataset"] in names]))

    out = []
    for left in datasets:
        others = [d for d in datasets if d != left]
        chosen = max(weights, key=lambda w: (round(mean_p1(others, w), 6), -weights.index(w)))
        own = max(weights, key=lambda w: (round(mean_p1([left], w), 6), -weights.index(w)))
        out.append(
            {
                "dataset": left,
                "augment": augment,
                "chosen_on_others": chosen,
                "P@1_chosen": mean_p1([left], chosen),
                "P@1_tree": mean_p1([left], "0.0"),
                "own_best": own,
                "P@1_own_best": mean_p1([left], own),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf-tempered"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = run_grid(args.datasets, [(a, s) for a in args.augments for s in args.seeds], measure)
    loo = [row for augment in args.augments for row in leave_one_out(rows, augment)]
    headers = ["dataset", "training set", "weight chosen on the others", "its P@1", "tree alone", "own best weight", "its P@1"]
    print()
    print(
        markdown_table(
            headers,
            [
                [r["dataset"], r["augment"], r["chosen_on_others"], f"{r['P@1_chosen']:.2f}", f"{r['P@1_tree']:.2f}"]
                + [r["own_best"], f"{r['P@1_own_best']:.2f}"]
                for r in loo
            ],
        )
    )
    write_results(args.out or HERE / "results" / "blend-weights.json", {"runs": rows, "leave_one_out": loo})


if __name__ == "__main__":
    main()
