"""Would a fine-tuned encoder's scores add to the linear family's? (issue 40, item 5.)

    python benchmarks/encoder_hybrid.py [--datasets ...] [--seeds 0] [--threads 1]
        [--augment gandalf-tempered-firm] [--out benchmarks/results/encoder-hybrid.json]

For each dataset and seed, on the training part less the suite's validation split of that seed,
two models train as ``gandalf train`` trains them (``train_model``: each its own 5% validation
share, then the final model on all of the training part): ``linear-knn`` with ``--augment`` (the
recommended recipe) and ``ngame`` without label points (its recommended augmentation). Each
scores its top 100 labels on the suite's validation split and on the test split; every
``(1 - m) * linear-knn + m * ngame`` of the mixes below is scored on both. The mix of best
validation P@1 (the smaller on a tie) is the hybrid's; its test figures are reported beside each
model alone (m = 0 and 1), all three trained on the same points. Writes every grid point to
``--out`` and the four score matrices to ``<out stem>-<dataset>-seed<s>-<model>-<split>.npz`` (to score other blends without
training again). ``--report FILE ...`` prints the tables of result files (or of the JSON lines a
run printed, saved under the name its ``--out`` had), scored again from the saved matrices, with
the mix each dataset left out would choose (for a model trained without a validation split).

``--queries new-items`` (the new-items sets) asks the question for a deployment that meets new
items: each part trains on every training point as ``gandalf train --queries new-items`` trains it
(its own choices on a share held out as if new; ``--augment auto`` there chooses by its forecast),
and the set's labelled new items (its ``val`` split) stand for the validation split.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from suite import augment_config, markdown_table, run_grid, scored_split, valid_fraction, validation_chose, write_results

from gandalf_xmc.engine.threads import limit_threads
from gandalf_xmc.metrics import evaluate, prepare
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.sparse_ops import top_k_per_row
from gandalf_xmc.workflow.forecast import deployment_for, namesakes
from gandalf_xmc.workflow.pipeline import train_model

HERE = Path(__file__).resolve().parent
MIXES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
K = 100
SPLITS = ("valid", "test")
MODELS = {"linear-knn": None, "ngame": "none"}  # each model's augmentation (None: --augment)


def trained(rest, model: str, augment: str, seed: int, threads: int, deployment):
    config = model_config(model, seed=seed, threads=threads)
    with tempfile.TemporaryDirectory(prefix="gandalf-hybrid-") as tmp:
        t0 = time.perf_counter()
        result = train_model(
            rest,
            Path(tmp) / "model",
            config,
            augment_config(augment, seed),
            valid_fraction=valid_fraction(rest.n_original_train or len(rest.train)),
            progress=False,
            valid_protocol=deployment.valid_protocol,
            new_items=deployment.new_items,
        )
        return result.model, time.perf_counter() - t0, validation_chose(result)


def scores(S: sp.csr_matrix, split, inv, has_namesake: np.ndarray | None = None) -> dict:
    """P@1, P@5, PSP@1 and PSP@5 of ``S`` on ``split``; with ``has_namesake`` (a flag a row), P@1
    on the rows with a label of their own text and on the rest too (None where there are none)."""
    top = top_k_per_row(S, 10)
    res = evaluate(top, split.Y, inv, (1, 3, 5), split.filter_pairs)
    out = {m: res[m] for m in ("P@1", "P@5", "PSP@1", "PSP@5")}
    if has_namesake is not None:
        for key, rows in (("P@1 with a namesake", has_namesake), ("P@1 without", ~has_namesake)):
            out[key] = subset_p1(top, split, rows)
    return out


def subset_p1(top: sp.csr_matrix, split, rows: np.ndarray) -> float | None:
    """P@1 of the predictions ``top`` on the rows of ``split`` where ``rows`` holds (filtered as
    ``evaluate`` filters), None where no such row has a label."""
    prepared = prepare(top, split.Y, 1, split.filter_pairs)  # drops the rows without a label left
    chosen = rows[prepared.kept_rows]
    return 100.0 * float(prepared.hits[chosen, 0].mean()) if chosen.any() else None


def matrix_path(out: Path, dataset: str, seed: int, model: str, split: str) -> Path:
    return out.with_name(f"{out.stem}-{dataset}-seed{seed}-{model}-{split}.npz")


def loaded_splits(dataset: str, seed: int, queries: str) -> tuple:
    """``scored_split``'s four for the validation split that stands for the deployment's queries:
    the suite's validation split of ``seed`` (catalogue), or the labelled new items (new-items)."""
    return scored_split(dataset, seed, "valid" if queries == "catalogue" else "new-items", splits=("trn", "tst"))


def scored_mixes(out: Path, dataset: str, seed: int, loaded: tuple | None = None, queries: str = "catalogue") -> dict:
    """Every mix's scores on both splits, from the saved matrices of run ``out``; ``loaded``: the
    dataset's ``loaded_splits``, where the caller has it."""
    ds, _, valid, inv = loaded or loaded_splits(dataset, seed, queries)
    grid = {}
    for split_name, split in zip(SPLITS, (valid, ds.test)):
        lk, ng = (sp.load_npz(matrix_path(out, dataset, seed, m, split_name)) for m in MODELS)
        has = namesakes(list(split.texts), ds.label_texts) > 0  # a label of the item's own text (new items: rarely right)
        grid[split_name] = {f"{m:g}": scores((1 - m) * lk + m * ng, split, inv, has) for m in MIXES}
        grid[split_name]["namesake share"] = float(has.mean())
    return grid


def chosen_mix(grid: dict) -> float:
    """The mix of best validation P@1, the smaller on a tie (as the model chooses)."""
    return max(MIXES, key=lambda m: (grid["valid"][f"{m:g}"]["P@1"], -m))


def measure(dataset: str, seed: int, augment: str, threads: int, out: Path, queries: str = "catalogue") -> dict:
    loaded = loaded_splits(dataset, seed, queries)
    ds, rest, valid, _ = loaded
    deployment = deployment_for(ds, queries, None, False)
    seconds, chose = {}, {}
    for name, aug in MODELS.items():
        model, seconds[name], chose[name] = trained(rest, name, aug or augment, seed, threads, deployment)
        for split_name, split in zip(SPLITS, (valid, ds.test)):
            sp.save_npz(matrix_path(out, dataset, seed, name, split_name), sp.csr_matrix(model.predict(list(split.texts), k=K)))
    grid = scored_mixes(out, dataset, seed, loaded)
    return {
        "dataset": dataset,
        "seed": seed,
        "augment": augment,
        "queries": queries,
        "n_valid": int(valid.Y.shape[0]),
        "n_test": int(ds.test.Y.shape[0]),
        "train_seconds": seconds,
        "validation_chose": chose,
        "chosen_mix": chosen_mix(grid),
        "grid": grid,
    }


def left_out_mixes(rows: list[dict]) -> list[list]:
    """For each dataset left out: the mix of best mean validation P@1 over the other datasets'
    rows (the smaller on a tie), and the left-out dataset's validation and test P@1 under it."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        others = [r for r in rows if r["dataset"] != dataset]
        mean = {m: sum(r["grid"]["valid"][f"{m:g}"]["P@1"] for r in others) / len(others) for m in MIXES}
        best = max(MIXES, key=lambda m: (round(mean[m], 9), -m))
        own = [r for r in rows if r["dataset"] == dataset]
        valid = sum(r["grid"]["valid"][f"{best:g}"]["P@1"] for r in own) / len(own)
        test = sum(r["grid"]["test"][f"{best:g}"]["P@1"] for r in own) / len(own)
        out.append([dataset, f"{best:g}", f"{valid:.2f}", f"{test:.2f}"])
    return out


def read_rows(path: Path) -> list[dict]:
    """The rows of a result file, or of the JSON lines a run prints as each row comes (a run stopped
    before its last dataset wrote no file), each row's grid scored again from its saved matrices
    (where the run scored another grid)."""
    text = path.read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    for row in rows:
        row["grid"] = scored_mixes(path, row["dataset"], row["seed"], queries=row.get("queries", "catalogue"))
        row["chosen_mix"] = chosen_mix(row["grid"])
    return rows


def report(rows: list[dict]) -> None:
    """The table of each row (each model alone and the hybrid at the mix chosen on validation) and
    the mix each dataset left out would choose."""
    table = []
    for r in rows:
        chosen = f"{r['chosen_mix']:g}"
        for split_name in SPLITS:
            g = r["grid"][split_name]
            table.append(
                [
                    r["dataset"],
                    r["seed"],
                    split_name,
                    *(f"{g[key]['P@1']:.2f} / {g[key]['PSP@5']:.2f}" for key in ("0", "1", chosen)),
                    chosen,
                ]
            )
    headers = ["dataset", "seed", "split", "linear-knn", "ngame", "hybrid", "mix (chosen on valid)"]
    print(markdown_table(headers, table))
    print("\nP@1 by mix on validation and test, each also on its items with a label of their own text / the rest\n")
    by_mix = []
    for r in rows:
        for m in MIXES:
            cells = []
            for split_name in SPLITS:
                cell = r["grid"][split_name][f"{m:g}"]
                parts = (cell.get("P@1 with a namesake"), cell.get("P@1 without"))
                cells += [f"{cell['P@1']:.2f}", " / ".join("-" if x is None else f"{x:.2f}" for x in parts)]
            by_mix.append([r["dataset"], r["seed"], f"{m:g}", *cells])
        shares = [r["grid"][split_name].get("namesake share") for split_name in SPLITS]
        by_mix.append(
            [r["dataset"], r["seed"], "namesake share", *(x for v in shares for x in ("", "-" if v is None else f"{v:.3f}"))]
        )
    headers = ["dataset", "seed", "mix", "valid P@1", "with a namesake / without", "test P@1", "with a namesake / without"]
    print(markdown_table(headers, by_mix))
    if len({r["dataset"] for r in rows}) > 1:
        print("\nEach dataset left out: the mix of best mean validation P@1 on the others\n")
        print(markdown_table(["left out", "mix", "its valid P@1", "its test P@1"], left_out_mixes(rows)))
        mean = {m: sum(r["grid"]["valid"][f"{m:g}"]["P@1"] for r in rows) / len(rows) for m in MIXES}
        print("\nMean validation P@1 by mix: " + ", ".join(f"{m:g} {v:.2f}" for m, v in mean.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["jargon", "manpages", "cmake-help", "python-api"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--augment", default="gandalf-tempered-firm")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "encoder-hybrid.json")
    parser.add_argument(
        "--queries",
        choices=("catalogue", "new-items"),
        default="catalogue",
        help="what the deployment meets; new-items: each part validates on points held out as if new, and the set's "
        "labelled new items (its val split) stand for the validation split",
    )
    parser.add_argument("--report", type=Path, nargs="+", help="print the tables of these result files (nothing trained)")
    args = parser.parse_args()
    if args.report:
        report([row for path in args.report for row in read_rows(path)])
        return
    limit_threads(args.threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = run_grid(
        args.datasets,
        [(seed,) for seed in args.seeds],
        lambda dataset, seed: measure(dataset, seed, args.augment, args.threads, args.out, args.queries),
    )
    write_results(args.out, rows)
    report(rows)


if __name__ == "__main__":
    main()
