"""Whether the training release foresees what label points do to a deployment's queries (issue 35,
item 3): for each augmentation, the linear model's P@1 gain over none predicted on validation,
beside the gain measured on the test split (reporting only: nothing is chosen on it).

    python benchmarks/foresee.py                                  # the eight dev sets, seed 0
    python benchmarks/foresee.py --datasets debian-new-packages gene-ontology-new-terms --seeds 0 1 2

The prediction depends on what the deployment's queries are, which its owner knows:

* **the catalogue's own items** (the random-split sets, whose test items are held-out items of the
  same catalogue and whose filter file removes each item's own label, as ``predict --uid`` does):
  the ``random`` protocol's gain;
* **new items** (the new-items sets): the queries' own labels do not exist yet, and some of the
  labels that do have exactly a query's text (an older version, a sibling) without being right.
  So the prediction mixes two validations of the training release alone:
  ``(1 - s) x`` the ``future`` protocol's gain (held-out items' own labels leave the label space;
  whole families of them where the data's group key names families: ``future-family``)
  ``+ s x`` the gain on held-out items whose own label stays, unfiltered, as a wrong namesake (the
  label point "text of X -> X" puts X first: a miss), where ``s`` is the share of the deployment's
  query texts that equal a label's text. ``s`` is read from unlabelled query texts (the dataset's
  ``val`` split, its texts only; the test split is not read for it). The share comes from a
  sample of the deployment's queries drawn by family, so the forecast also carries its value at
  both ends of a 90% interval of ``s`` (the families resampled); where the two ends differ in
  sign, the forecast is "undecided".

A forecast within two standard errors of its validation (paired over the validation items, per
seed, combined over seeds) is undecided too: it says the validation cannot tell.

The share and its interval are :mod:`gandalf_xmc.workflow.forecast`'s, which ``gandalf train
--augment auto --queries new-items`` also reads to choose.

Prints one table (dataset, augmentation, predicted gain and its parts, test gain with two paired
standard errors over the test items, whether the signs agree) and writes
``benchmarks/results/foresee.json``; ``--runs FILE...`` tabulates earlier runs' rows again (several files together).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from suite import HERE, NEW_ITEMS_SPLIT, augment_config, query_sample, valid_fraction

from gandalf_xmc.augment import training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.dataset import find_split_file
from gandalf_xmc.data.suite import SUITE, build, is_available, suite_path
from gandalf_xmc.metrics.ranking import prepare, remove_pairs
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow import forecast
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.forecast import paired_gain
from gandalf_xmc.workflow.validation import carve_validation, folds_available

AUGMENTS = ("none", "gandalf", "gandalf-tempered", "identity")


def deployment_share(ds, dataset: str) -> tuple[float, tuple[float, float]]:
    """``s`` and its interval from the set's :func:`query_sample`."""
    share, interval = forecast.deployment_share(query_sample(ds, dataset), ds.label_texts)
    return share or 0.0, interval


def top1_hits(model, split, filter_predictions: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Each scored point's top-1 hit (0/1) and which rows of ``split`` were scored (those with a
    target once the filter pairs are removed), by :func:`hits_of` ``model``'s predictions."""
    return hits_of(model.predict(split.texts, k=5), split, filter_predictions)


def hits_of(predictions, split, filter_predictions: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top1_hits` of predictions already made. The filter pairs always leave the truth; with
    ``filter_predictions`` False they stay in the predictions, where they can only be misses."""
    truth = remove_pairs(sp.csr_matrix(split.Y), split.filter_pairs)
    prepared = prepare(predictions, truth, 1, split.filter_pairs if filter_predictions else None)
    return prepared.hits[:, 0].astype(float), prepared.kept_rows


def trained(rest, augment: str, seed: int):
    model = build_model(model_config("linear", seed=seed))
    return fit_model(model, training_set(rest, augment_config(augment, seed)), rest.label_texts, progress=False)


def random_parts(model, valid, own: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """One random share's top-1 hits, and the unfiltered hits of its held-out items that are labels
    too (their own label, left in the predictions, plays a wrong namesake)."""
    predictions = model.predict(valid.texts, k=5)  # scored twice: filtered, and not
    hits, _ = hits_of(predictions, valid)
    unfiltered, kept = hits_of(predictions, valid, filter_predictions=False)
    own_rows = np.array([uid in own for uid in valid.uids], dtype=bool)
    return hits, unfiltered[own_rows[kept]]


def measure(dataset: str, seed: int, augments: tuple[str, ...], folds: int = 1) -> list[dict]:
    """Every augmentation's validation parts and test P@1 on ``dataset``; the ``random`` carve's
    parts pooled over its first ``folds`` disjoint shares (as auto pools them while undecided)."""
    new_items = find_split_file(suite_path(dataset), NEW_ITEMS_SPLIT) is not None
    ds = load_dataset(dataset, splits=("trn", "tst", NEW_ITEMS_SPLIT) if new_items else ("trn", "tst"))
    frac = valid_fraction(ds.n_original_train or len(ds.train))
    folds = min(folds, folds_available(ds.n_original, frac))
    carves = [carve_validation(ds, frac, seed, "random", fold=f) for f in range(folds)]
    own = set(ds.label_uids)
    share, interval, future_protocol = None, None, None
    if new_items:
        share, interval = deployment_share(ds, dataset)
        future_protocol = "future-family" if ds.groups_are_families else "future"
        future_rest, future_valid = carve_validation(ds, frac, seed, future_protocol)
    rows: list[dict] = []
    hits_by: dict[str, dict[str, np.ndarray]] = {}  # each measurement's hits by augmentation, to pair with none's
    for augment in augments:
        parts = [random_parts(trained(rest, augment, seed), valid, own) for rest, valid in carves]
        hits, namesake = (np.concatenate(part) for part in zip(*parts))
        row = {
            "dataset": dataset,
            "seed": seed,
            "augment": augment,
            "deployment": "new items" if new_items else "catalogue items",
            "folds": folds,
            "n_random": int(hits.size),
            "random": 100 * hits.mean(),
            "namesake_kept": 100 * namesake.mean() if namesake.size else None,
            "n_namesake_kept": int(namesake.size),
            "share": share,
            "share_interval": interval,
            "future_protocol": future_protocol,
        }
        measured = {"random": hits, "namesake_kept": namesake}
        if new_items:
            measured["future"], _ = top1_hits(trained(future_rest, augment, seed), future_valid)
            row["future"] = 100 * measured["future"].mean()
        measured["test"], _ = top1_hits(trained(ds, augment, seed), ds.test)
        row["test"] = 100 * measured["test"].mean()
        hits_by[augment] = measured
        if augment != "none":  # the paired standard error of each gain over none (the same items)
            for key, values in measured.items():
                row[f"{key}_gain_se"] = paired_gain(values, hits_by["none"][key])[1]
        rows.append(row)
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    return rows


def two_se(per_seed: list[float]) -> float:
    """Two standard errors of a mean over seeds, from each seed's standard error."""
    return 2 * float(np.sqrt(np.sum(np.square(per_seed)))) / len(per_seed)


def predicted_gains(rows: list[dict]) -> list[dict]:
    """Each augmentation's predicted and test P@1 gains over none (means over seeds)."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):

        def mean(augment: str, key: str, dataset=dataset) -> float:
            return float(np.mean([r[key] for r in rows if r["dataset"] == dataset and r["augment"] == augment]))

        sub = [r for r in rows if r["dataset"] == dataset]
        new_items = sub[0]["deployment"] == "new items"
        share = sub[0]["share"] or 0.0
        interval = sub[0].get("share_interval") or (share, share)
        for augment in dict.fromkeys(r["augment"] for r in sub if r["augment"] != "none"):
            gains = {key: mean(augment, key) - mean("none", key) for key in ("random", "test")}
            if new_items:
                gains["future"] = mean(augment, "future") - mean("none", "future")
                gains["namesake_kept"] = mean(augment, "namesake_kept") - mean("none", "namesake_kept")

                def at(s: float, gains=gains) -> float:
                    return (1 - s) * gains["future"] + s * gains["namesake_kept"]

                predicted, ends = at(share), [at(s) for s in interval]
                forecast_se = [
                    np.hypot((1 - share) * r.get("future_gain_se", 0.0), share * r.get("namesake_kept_gain_se", 0.0))
                    for r in sub
                    if r["augment"] == augment
                ]
            else:
                predicted = gains["random"]
                ends = [predicted, predicted]
                forecast_se = [r.get("random_gain_se", 0.0) for r in sub if r["augment"] == augment]
            test = gains["test"]
            noise = two_se([r["test_gain_se"] for r in sub if r["augment"] == augment])
            forecast_noise = two_se(forecast_se)
            undecided = [
                why
                for why, bad in (("share", np.sign(ends[0]) != np.sign(ends[1])), ("noise", abs(predicted) <= forecast_noise))
                if bad
            ]
            out.append(
                {
                    "dataset": dataset,
                    "augment": augment,
                    "deployment": sub[0]["deployment"],
                    "share": share if new_items else None,
                    "share_interval": [round(s, 3) for s in interval] if new_items else None,
                    "future_protocol": sub[0].get("future_protocol"),
                    **{f"{k}_gain": round(v, 2) for k, v in gains.items()},
                    "predicted_gain": round(predicted, 2),
                    "predicted_range": [round(e, 2) for e in ends],
                    "forecast_noise": round(forecast_noise, 2),
                    # one sign across the share's interval, and beyond two standard errors of validation
                    "decided": not undecided,
                    "undecided_by": undecided,
                    "test_noise": round(noise, 2),
                    "signs_agree": bool(np.sign(predicted) == np.sign(test)),
                    "beyond_noise": bool(abs(test) > noise),
                }
            )
    return out


def table(gains: list[dict]) -> str:
    lines = [
        "| dataset | deployment | augmentation | random | future | namesake kept | s | predicted (2 SE) | test (2 SE) "
        "| same sign |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def cell(value) -> str:
        return "" if value is None else f"{value:+.2f}"

    for g in gains:
        decided = g.get("decided", True)
        agree = ("yes" if g["signs_agree"] else "no") if decided else f"undecided ({', '.join(g['undecided_by'])})"
        agree += "" if g["beyond_noise"] else " (within noise)"
        share = "" if g["share"] is None else f"{g['share']:.3f}"
        if g.get("share_interval"):
            share += f" ({g['share_interval'][0]:.3f}-{g['share_interval'][1]:.3f})"
        predicted = f"{cell(g['predicted_gain'])} ({g.get('forecast_noise', 0.0):.2f})"
        if g.get("share_interval"):
            predicted += " {} to {}".format(*map(cell, g["predicted_range"]))
        future = cell(g.get("future_gain")) + (" (families)" if g.get("future_protocol") == "future-family" else "")
        lines.append(
            f"| {g['dataset']} | {g['deployment']} | {g['augment']} | {cell(g['random_gain'])} | {future} | "
            f"{cell(g.get('namesake_kept_gain'))} | {share} | {predicted} | "
            f"{cell(g['test_gain'])} ({g['test_noise']:.2f}) | {agree} |"
        )
    decided = [g for g in gains if g.get("decided", True)]
    judged = [g for g in decided if g["beyond_noise"]]
    lines.append(
        f"\nsigns agree in {sum(g['signs_agree'] for g in decided)} of the {len(decided)} decided pairs "
        f"({len(gains) - len(decided)} undecided); in {sum(g['signs_agree'] for g in judged)} of the "
        f"{len(judged)} decided ones whose test gain is beyond two standard errors"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--augments", nargs="+", default=list(AUGMENTS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--folds", type=int, default=1, help="disjoint random shares pooled a seed (auto takes up to 5)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "foresee.json")
    ap.add_argument("--runs", type=Path, nargs="+", help="tabulate the runs of earlier --out files again (nothing is trained)")
    args = ap.parse_args()
    augments = tuple(dict.fromkeys(["none", *args.augments]))
    rows = []
    if args.runs:
        rows = [row for path in args.runs for row in json.loads(path.read_text())["runs"]]
        intervals: dict[str, tuple[float, float]] = {}
        for row in rows:  # a file written before the share's interval was recorded
            if row["deployment"] == "new items" and row.get("share_interval") is None:
                if row["dataset"] not in intervals:
                    ds = load_dataset(row["dataset"], splits=("trn", NEW_ITEMS_SPLIT))
                    intervals[row["dataset"]] = deployment_share(ds, row["dataset"])[1]
                row["share_interval"] = intervals[row["dataset"]]
    for dataset in [] if args.runs else args.datasets:
        if not is_available(dataset):
            build(dataset)
        for seed in args.seeds:
            rows += measure(dataset, seed, augments, args.folds)
    gains = predicted_gains(rows)
    print(table(gains))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": rows, "gains": gains}, indent=1) + "\n")


if __name__ == "__main__":
    main()
