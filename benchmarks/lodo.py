"""Leave-one-dataset-out choice of the linear engine's settings (issue 36): each setting is varied
alone around the defaults, every value trained on every dev dataset and scored on its validation
split; then, for each dataset left out, the value with the best mean P@1 over the *other* datasets
is chosen and scored on the one left out. The value chosen most often is the setting's
leave-one-out default.

    python benchmarks/lodo.py                                   # every setting, augmentation none, seed 0
    python benchmarks/lodo.py --settings beam leaf_size --augment gandalf-tempered --seeds 0 1
    python benchmarks/lodo.py --settings leaf_size solver.C --values leaf_size=[400] --values solver.C=[0.5] --seeds 0 1 2
    python benchmarks/lodo.py --settings solver.loss            # squared hinge or logistic (at three costs)
    python benchmarks/lodo.py --augment gandalf-tempered --settings augment.label_point_positive_cost --new-items
    python benchmarks/lodo.py --model astec --augment gandalf-tempered --settings augment.label_point_positive_cost

Settings named ``augment.*`` are the augmentation's (its recipe), the others the linear model's;
``--model`` trains another model of the table on the augmentation's settings alone.
``--new-items`` adds, for each dataset with labelled new items (its ``val`` split), a column scored
on them with every training point kept: the choice is then made over random and new-items
validation alike.

Ties (in the mean over the other datasets, or in how often a value is chosen) go to the current
default. Prints one table a setting (P@1 of each value on each dataset), then the summary: per
setting, the values chosen when each dataset is left out, the most frequent, and the mean P@1
change on the left-out dataset against the current default. Writes
``benchmarks/results/lodo-<augment>.json`` (every run) for the analysis to be redone.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace

import numpy as np
from suite import AUGMENT, HERE, NEW_ITEMS_SPLIT, augment_config, run_grid, run_one

from gandalf_xmc.data.dataset import find_split_file
from gandalf_xmc.data.suite import SUITE, suite_path
from gandalf_xmc.models.linear import LinearConfig

DEFAULTS = LinearConfig()
# each setting's values, its current default among them
GRID: dict[str, list] = {
    "branching": [8, 16, 32],
    "leaf_size": [50, 100, 200, 400],
    "beam": [5, 10, 20, 50],
    "label_text_weight": [0.0, 1.0, 2.0, 4.0],
    "ngram_max": [1, 2, 3],
    "min_df": [1, 2, 3],
    "char_ngrams": [None, [3, 5]],
    "solver.C": [0.5, 1.0, 2.0, 4.0],
    "solver.threshold": [0.03, 0.1, 0.2],
    "solver.positive_cost": [1.0, 2.0, 4.0],
    "solver.min_parent_target": [0.1, 0.5, 1.0],  # acts on soft targets only (label points)
    # a value that is an object sets several settings together: the logistic loss at napkinXC's cost too
    "solver.loss": [
        "squared-hinge",
        "logistic",
        {"solver.loss": "logistic", "solver.C": 10.0},
        {"solver.loss": "logistic", "solver.C": 32.0},
    ],
    "augment.label_point_positive_cost": [1.0, 2.0, 4.0, 8.0],  # a label point's positives' cost factor
}


def default_of(name: str, augment: str = "none"):
    value = augment_config(augment, 0) if name.startswith(AUGMENT) else DEFAULTS
    for part in name.removeprefix(AUGMENT).split("."):
        value = getattr(value, part)
    return list(value) if isinstance(value, tuple) else value


def settings_of(name: str, value) -> dict:
    """The settings a run of ``value`` of ``name`` trains with (an object: several at once)."""
    if name == "default" or name.startswith(AUGMENT):
        return {}
    if isinstance(value, dict):
        return {key: tuple(v) if isinstance(v, list) else v for key, v in value.items()}
    return {name: tuple(value) if isinstance(value, list) else value}


def recipe_of(name: str, value, augment: str):
    """The augmentation a run of ``value`` of ``name`` trains with (None: ``augment`` as named)."""
    if not name.startswith(AUGMENT):
        return None
    return replace(augment_config(augment, 0), **{name.removeprefix(AUGMENT): value})


def columns(datasets: list[str], new_items: bool) -> list[tuple[str, str]]:
    """``(dataset, split)`` scored: each dataset's validation split, and with ``new_items`` its
    labelled new items where it has them."""
    out = [(d, "valid") for d in datasets]
    if new_items:
        out += [(d, "new-items") for d in datasets if find_split_file(suite_path(d), NEW_ITEMS_SPLIT)]
    return out


def column_name(dataset: str, split: str) -> str:
    return dataset if split == "valid" else f"{dataset} (new items)"


def leave_one_out(scores: dict[str, dict[str, float]], default: str) -> list[dict]:
    """``scores[value][dataset]``: P@1 (values as JSON text). For each dataset left out: the value
    with the best mean over the other datasets (ties: ``default``, else the first listed), and its
    P@1 and the default's on the dataset left out."""
    datasets = list(next(iter(scores.values())))
    out = []
    for left in datasets:
        means = {v: np.mean([by[d] for d in datasets if d != left]) for v, by in scores.items()}
        best = max(means.values())
        tied = [v for v in scores if means[v] >= best - 1e-9]
        chosen = default if default in tied else tied[0]
        out.append({"left_out": left, "chosen": chosen, "P@1": scores[chosen][left], "default_P@1": scores[default][left]})
    return out


def most_often(picks: list[dict], default: str) -> tuple[str, int]:
    """The value chosen most often when a dataset is left out (ties: the default, else the first)."""
    counts = Counter(p["chosen"] for p in picks)
    top = max(counts.values())
    return (default if counts.get(default) == top else next(v for v, c in counts.items() if c == top)), top


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--settings", nargs="+", default=list(GRID), choices=list(GRID))
    ap.add_argument("--augment", default="none")
    ap.add_argument("--model", default="linear", help="the model trained (another than linear: augment.* settings only)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--new-items", action="store_true", help="also score on each dataset's labelled new items (val)")
    ap.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="SETTING=JSON_LIST",
        help="the values tried for a setting instead of the grid's (its default is added)",
    )
    args = ap.parse_args()
    if args.model != "linear" and not all(name.startswith(AUGMENT) for name in args.settings):
        ap.error(f"--model {args.model}: only the augmentation's settings (augment.*) apply to it")
    for given in args.values:
        name, values = given.split("=", 1)
        if name not in GRID:
            ap.error(f"--values: unknown setting {name!r}")
        GRID[name] = [default_of(name, args.augment), *[v for v in json.loads(values) if v != default_of(name, args.augment)]]
    for name in args.settings:  # the augmentation's own default among its values
        if name.startswith(AUGMENT) and default_of(name, args.augment) not in GRID[name]:
            GRID[name] = [default_of(name, args.augment), *GRID[name]]
    runs = [
        (name, value, seed)
        for name in args.settings
        for value in GRID[name]
        if value != default_of(name, args.augment)
        for seed in args.seeds
    ]
    runs = [("default", None, seed) for seed in args.seeds] + runs
    scored = columns(args.datasets, args.new_items)
    rows = run_grid(
        args.datasets,
        [(split, *run) for split in ("valid", "new-items") for run in runs],
        lambda dataset, split, name, value, seed: (
            {
                **run_one(
                    dataset,
                    args.model,
                    args.augment,
                    seed,
                    split,
                    settings_of(name, value),
                    None,
                    recipe=recipe_of(name, value, args.augment),
                ),
                "setting": name,
                "value": value,
                "column": column_name(dataset, split),
            }
            if (dataset, split) in scored
            else None
        ),
    )
    names = [column_name(*c) for c in scored]
    base = {c: np.mean([r["P@1"] for r in rows if r["setting"] == "default" and r["column"] == c]) for c in names}
    summary = []
    for name in args.settings:
        scores = {}
        for value in GRID[name]:
            if value == default_of(name, args.augment):
                scores[json.dumps(value)] = dict(base)
            else:
                scores[json.dumps(value)] = {
                    c: np.mean([r["P@1"] for r in rows if r["setting"] == name and r["value"] == value and r["column"] == c])
                    for c in names
                }
        print(f"\n{name} (validation P@1, {args.model}, {args.augment}; default {default_of(name, args.augment)})\n")
        print("| value | " + " | ".join(names) + " | mean |")
        print("|" + " --- |" * (len(names) + 2))
        for value, by in scores.items():
            print(f"| {value} | " + " | ".join(f"{by[c]:.2f}" for c in names) + f" | {np.mean(list(by.values())):.2f} |")
        default = json.dumps(default_of(name, args.augment))
        picks = leave_one_out(scores, default)
        most, top = most_often(picks, default)
        change = np.mean([p["P@1"] - p["default_P@1"] for p in picks])
        summary.append(
            {
                "setting": name,
                "default": default,
                "chosen_when_left_out": {p["left_out"]: p["chosen"] for p in picks},
                "most_often": most,
                "times": top,
                "mean_left_out_change": round(float(change), 3),
                "left_out_changes": {p["left_out"]: round(p["P@1"] - p["default_P@1"], 2) for p in picks},
            }
        )
    print(
        "\n| setting | default | chosen when each dataset is left out | most often | P@1 change on the left-out set "
        "(mean; per set) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for s in summary:
        chosen = ", ".join(f"{d}: {v}" for d, v in s["chosen_when_left_out"].items())
        per = ", ".join(f"{v:+.2f}" for v in s["left_out_changes"].values())
        print(
            f"| {s['setting']} | {s['default']} | {chosen} | {s['most_often']} ({s['times']}/{len(names)}) | "
            f"{s['mean_left_out_change']:+.2f} ({per}) |"
        )
    out = HERE / "results" / ("lodo-" + ("" if args.model == "linear" else f"{args.model}-") + f"{args.augment}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": rows, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
