"""A sentence encoder's model (the dual-encoder, or ngame with ``--model ngame``): the mix of its
classifiers and its training points' vote, across the dev suite on validation only (the suite's
random validation splits and the new-items sets' labelled new items), with a leave-one-dataset-out
choice of the mix and the vote's power used when a model has no validation split.

    python benchmarks/neighbour_mix.py [--model dual-encoder|ngame] [--datasets ...]
        [--splits valid new-items] [--seeds 0] [--classifier-epochs 1 2 3 4] [--with EARLIER.json ...]
        [--vote share|mean]

For each dataset, split and seed: the model trains once (the suite's settings: its default
epochs, no validation, so ngame keeps its fine-tuned encoder) on the training part
(``suite.scored_split``), and every mix of ``ModelConfig.neighbour_mixes`` is scored with the vote
at every power of ``--powers``, as a share and as a mean (``ModelConfig.neighbour_share``; P@1,
PSP@5). With ``--classifier-epochs`` the classifiers are scored after each of those epoch counts
too (one run, resumed from its checkpoints: the fine-tuning once), each cell named ``e<epochs>/...``,
the model's default count first. Then, for each dataset left out (all its splits), the cell (epochs,
share or mean, power, mix) of best mean P@1 over the other datasets' rows (on a tie the earlier
cell), and what it scores on the one left out, beside the classifiers alone (the first cell's epochs,
mix 0) and that row's own best. ``--with`` adds the rows of earlier runs (their JSON, the same
model) to that choice, so sets measured apart are chosen on together, on the cells all the runs
scored (``--unrecorded-precision`` names the encoder precision of rows run before it was
recorded); ``--vote share`` keeps the choice to the library's vote. A second table gives each
row's seeds summed up on the first cell's mixes (P@1 mean ± sd, PSP@5 mean). Writes
``benchmarks/results/neighbour-mix.json``
(``neighbour-mix-ngame.json`` for ngame; or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from suite import augment_config, markdown_table, run_grid, scored_split, write_results

from gandalf_xmc.augment import training_set
from gandalf_xmc.data.dataset import find_split_file
from gandalf_xmc.data.suite import NEW_ITEMS_SPLIT, SUITE, suite_path
from gandalf_xmc.engine.records import Validation, validation_metrics
from gandalf_xmc.engine.threads import limit_threads
from gandalf_xmc.models.neighbours import mixed
from gandalf_xmc.models.neural_xmc import ModelConfig
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.forecast import paired_gain

HERE = Path(__file__).resolve().parent


def epoch_counts(default: int, asked: list[int] | None) -> list[int]:
    """The classifier epoch counts a run scores: the model's default first, then the others asked for."""
    return list(dict.fromkeys([default, *(asked or [])]))


def measure(
    model_name: str,
    dataset: str,
    split: str,
    augment: str,
    seed: int,
    powers: list[float],
    threads: int | None,
    classifier_epochs: list[int] | None = None,
    encoder_precision: str = "auto",
) -> dict | None:
    if split == "new-items" and not find_split_file(suite_path(dataset), NEW_ITEMS_SPLIT):
        return None
    _, rest, target, inv = scored_split(dataset, seed, split)
    config: ModelConfig = replace(
        model_config(model_name, seed=seed, threads=threads), neighbour_mix=1.0, encoder_precision=encoder_precision
    )  # a mix above 0 keeps the index
    counts = epoch_counts(config.train.epochs, classifier_epochs)
    valid = Validation(target.texts, target.Y, inv, target.filter_pairs)
    points = training_set(rest, augment_config(augment, seed))
    p1: dict[int, dict[str, float]] = {}  # by epoch count, then cell
    psp5: dict[int, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    E = None
    with tempfile.TemporaryDirectory() as checkpoints:
        # in rising order, each run resuming the last: epoch e's weights are a run of e epochs' (no schedule spans epochs)
        for i, epochs in enumerate(sorted(counts)):
            started = time.perf_counter()
            model = fit_model(
                build_model(replace(config, train=replace(config.train, epochs=epochs))),
                points,
                rest.label_texts,
                checkpoint_dir=checkpoints,
                resume=i > 0,
                progress=False,
            )
            seconds[str(epochs)] = time.perf_counter() - started
            if E is None:  # the encoder is the same in every resumed run (ngame's fine-tuning is not repeated)
                E = model.features(list(target.texts))
            prefix = "" if classifier_epochs is None else f"e{epochs}/"
            classifier, _ = model.parts(E)
            assert model.neighbours is not None
            p1[epochs], psp5[epochs] = {}, {}
            for share in (True, False):
                for power in powers:
                    vote = model.neighbours.vote(E, config.candidates, power=power, share=share)
                    for mix in config.neighbour_mixes:
                        scores = validation_metrics(mixed(classifier, vote, mix, 10), valid)
                        cell = f"{prefix}{'share' if share else 'mean'}/{power:g}/{mix:g}"
                        p1[epochs][cell], psp5[epochs][cell] = scores["P@1"], scores["PSP@5"]
    return {
        "model": model_name,
        "dataset": dataset,
        "split": split,
        "augment": augment,
        "seed": seed,
        "n_eval": int(target.Y.shape[0]),
        "encoder_precision": model.config.encoder_precision,  # as resolved: auto is bfloat16 where the CPU has it natively
        "train_seconds": seconds,
        "P@1": {c: v for e in counts for c, v in p1[e].items()},  # the default count first
        "PSP@5": {c: v for e in counts for c, v in psp5[e].items()},
    }


def joined(rows: list[dict], earlier: list[dict], unrecorded_precision: str | None = None) -> list[dict]:
    """``earlier`` rows (another run's) before ``rows``, each kept to the cells every row scored (a run of
    one classifier epoch count beside one of four: the cells of the count they share). Refused where a
    row is measured twice, or the runs differ in model or encoder precision, or share no cell with a mix
    0 (their leave-one-out would compare unlike things). A row run before the precision was recorded is
    taken at ``unrecorded_precision`` (refused without it where another row records one)."""
    both = [*earlier, *rows]
    if len({(r["dataset"], r["split"], r["augment"], r["seed"]) for r in both}) < len(both):
        raise ValueError("a dataset, split, augmentation and seed is in more than one run")
    both = [
        r if "encoder_precision" in r or unrecorded_precision is None else {**r, "encoder_precision": unrecorded_precision}
        for r in both
    ]
    if len({(r.get("model"), r.get("encoder_precision")) for r in both}) > 1:
        raise ValueError("the runs differ in their model or their encoder's precision")
    shared = [c for c in both[0]["P@1"] if all(c in r["P@1"] for r in both)]
    if not any(c.endswith("/0") for c in shared):
        raise ValueError("the runs share no cell with the classifiers alone (mix 0): they scored unlike cells")
    return [{**r, **{m: {c: r[m][c] for c in shared} for m in ("P@1", "PSP@5")}} for r in both]


def leave_one_out(rows: list[dict], vote: str | None = None) -> list[dict]:
    """For each dataset: the cell (share or mean/power/mix) of best mean P@1 over the other datasets' rows (each
    dataset and split a row, seeds averaged), and its figures on each of the left-out rows; with ``vote``
    (``share`` or ``mean``) among that vote's cells only (the library's is the share)."""
    cells = [c for c in rows[0]["P@1"] if vote is None or f"/{vote}/" in f"/{c}"]
    keys = list(dict.fromkeys((r["dataset"], r["split"], r["augment"]) for r in rows))

    def mean(key, metric: str, cell: str) -> float:
        return float(np.mean([r[metric][cell] for r in rows if (r["dataset"], r["split"], r["augment"]) == key]))

    def mean_over(chosen_keys, cell: str) -> float:
        return float(np.mean([mean(k, "P@1", cell) for k in chosen_keys]))

    out = []
    for left in dict.fromkeys(k[0] for k in keys):
        others = [k for k in keys if k[0] != left]
        # the best mean P@1 on the others; on a tie the earlier cell (share, the lower power, the smaller mix)
        chosen = max(cells, key=lambda c: (round(mean_over(others, c), 6), -cells.index(c))) if others else None
        for key in (k for k in keys if k[0] == left):
            own = max(cells, key=lambda c: (round(mean(key, "P@1", c), 6), -cells.index(c)))
            alone = next(c for c in cells if c.endswith("/0"))
            out.append(
                {
                    "dataset": left,
                    "split": key[1],
                    "augment": key[2],
                    "chosen_on_others": chosen,
                    "P@1_chosen": None if chosen is None else mean(key, "P@1", chosen),
                    "PSP@5_chosen": None if chosen is None else mean(key, "PSP@5", chosen),
                    "P@1_classifiers": mean(key, "P@1", alone),
                    "PSP@5_classifiers": mean(key, "PSP@5", alone),
                    "own_best": own,
                    "P@1_own_best": mean(key, "P@1", own),
                }
            )
    return out


def over_seeds(rows: list[dict], cells: list[str]) -> list[dict]:
    """For each dataset and split (a row of the choice): its seeds, and on each of ``cells`` the mean and the
    standard deviation (ddof 1; 0 for one seed) of P@1 over them, and the mean PSP@5."""
    keys = list(dict.fromkeys((r["dataset"], r["split"], r["augment"]) for r in rows))
    out = []
    for key in keys:
        mine = [r for r in rows if (r["dataset"], r["split"], r["augment"]) == key]
        p1 = np.array([[r["P@1"][c] for c in cells] for r in mine])
        psp5 = np.array([[r["PSP@5"][c] for c in cells] for r in mine])
        sd = p1.std(axis=0, ddof=1) if len(mine) > 1 else np.zeros(len(cells))
        out.append(
            {
                "dataset": key[0],
                "split": key[1],
                "augment": key[2],
                "seeds": [r["seed"] for r in mine],
                "P@1_mean": dict(zip(cells, p1.mean(axis=0).tolist(), strict=True)),
                "P@1_sd": dict(zip(cells, sd.tolist(), strict=True)),
                "PSP@5_mean": dict(zip(cells, psp5.mean(axis=0).tolist(), strict=True)),
            }
        )
    return out


def compared(seeds: list[dict], cell: str, reference: str) -> dict:
    """``cell`` against ``reference`` over the rows of ``over_seeds``: each row's P@1 difference (seeds
    averaged), their mean and its standard error (the library's ``paired_gain``, the rows as the pairs), and
    both cells' mean P@1 and PSP@5 over the rows."""
    ours, theirs = (np.array([r["P@1_mean"][c] for r in seeds]) for c in (cell, reference))
    mean_difference, standard_error = paired_gain(ours / 100, theirs / 100)  # it takes hits and returns points
    return {
        "cell": cell,
        "reference": reference,
        "P@1_differences": (ours - theirs).tolist(),
        "mean_difference": mean_difference,
        "standard_error": standard_error,
        "P@1": {c: float(np.mean([r["P@1_mean"][c] for r in seeds])) for c in (cell, reference)},
        "PSP@5": {c: float(np.mean([r["PSP@5_mean"][c] for r in seeds])) for c in (cell, reference)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("dual-encoder", "ngame"), default="dual-encoder")
    ap.add_argument("--datasets", nargs="*", default=[d.name for d in SUITE], help="none: only --with's rows are chosen on")
    ap.add_argument("--splits", nargs="+", choices=("valid", "new-items"), default=["valid", "new-items"])
    ap.add_argument("--augments", nargs="+", default=["none"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--powers", nargs="+", type=float, default=[2.0, 4.0, 8.0, 16.0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--classifier-epochs", nargs="+", type=int, default=None, help="score the classifiers after these epoch counts too"
    )
    ap.add_argument(
        "--encoder-precision",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="the sentence encoder's (auto: bfloat16 where the CPU has it natively, as the library)",
    )
    ap.add_argument("--vote", choices=("share", "mean"), default=None, help="choose among this vote's cells only")
    ap.add_argument("--with", dest="earlier", nargs="+", type=Path, default=[], help="earlier runs' JSON joining the choice")
    ap.add_argument(
        "--unrecorded-precision",
        choices=("float32", "bfloat16"),
        default=None,
        help="the encoder precision of --with rows run before it was recorded",
    )
    ap.add_argument("--compare", nargs=2, metavar=("CELL", "REFERENCE"), default=None, help="a cell against another, row by row")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not args.datasets and not args.earlier:
        ap.error("no --datasets and no --with: nothing to choose on")
    if args.threads:
        limit_threads(args.threads)
    earlier = [r for path in args.earlier for r in json.loads(path.read_text())["runs"]]
    rows = run_grid(
        args.datasets,
        [(split, a, s) for split in args.splits for a in args.augments for s in args.seeds],
        lambda dataset, split, augment, seed: measure(
            args.model, dataset, split, augment, seed, args.powers, args.threads, args.classifier_epochs, args.encoder_precision
        ),
    )
    both = joined(rows, earlier, args.unrecorded_precision)
    loo = leave_one_out(both, args.vote)
    headers = ["dataset", "split", "vote/power/mix chosen on the others", "its P@1 / PSP@5", "classifiers alone", "own best"]
    print()
    print(
        markdown_table(
            [*headers, "its P@1"],
            [
                [
                    r["dataset"],
                    r["split"],
                    r["chosen_on_others"],
                    "-" if r["chosen_on_others"] is None else f"{r['P@1_chosen']:.2f} / {r['PSP@5_chosen']:.2f}",
                    f"{r['P@1_classifiers']:.2f} / {r['PSP@5_classifiers']:.2f}",
                    r["own_best"],
                    f"{r['P@1_own_best']:.2f}",
                ]
                for r in loo
            ],
        )
    )
    first = next(iter(both[0]["P@1"]))  # the first epoch count, vote and power: its mixes, seeds averaged
    shown = [c for c in both[0]["P@1"] if c.rsplit("/", 1)[0] == first.rsplit("/", 1)[0]]
    seeds = over_seeds(both, list(both[0]["P@1"]))  # every cell in the JSON; the table shows the first count's
    print()
    print(
        markdown_table(
            ["dataset", "split", "seeds", *(f"{c}: P@1 ± sd / PSP@5" for c in shown)],
            [
                [
                    r["dataset"],
                    r["split"],
                    len(r["seeds"]),
                    *(f"{r['P@1_mean'][c]:.2f} ± {r['P@1_sd'][c]:.2f} / {r['PSP@5_mean'][c]:.2f}" for c in shown),
                ]
                for r in seeds
            ]
            + [
                [
                    "mean of the rows",
                    "",
                    "",
                    *(
                        f"{np.mean([r['P@1_mean'][c] for r in seeds]):.2f} / {np.mean([r['PSP@5_mean'][c] for r in seeds]):.2f}"
                        for c in shown
                    ),
                ]
            ],
        )
    )
    comparison = None if args.compare is None else compared(seeds, *args.compare)
    if comparison is not None:
        c, ref = args.compare
        print(
            f"\n{c} minus {ref}, row by row (P@1): {', '.join(f'{d:+.2f}' for d in comparison['P@1_differences'])}; "
            f"mean {comparison['mean_difference']:+.2f}, standard error {comparison['standard_error']:.2f}; "
            f"mean P@1 / PSP@5 {comparison['P@1'][c]:.2f} / {comparison['PSP@5'][c]:.2f} against "
            f"{comparison['P@1'][ref]:.2f} / {comparison['PSP@5'][ref]:.2f}"
        )
    default = "neighbour-mix.json" if args.model == "dual-encoder" else f"neighbour-mix-{args.model}.json"
    write_results(
        args.out or HERE / "results" / default,
        {"runs": rows, "with": [str(p) for p in args.earlier], "leave_one_out": loo, "over_seeds": seeds, "compared": comparison},
    )


if __name__ == "__main__":
    main()
