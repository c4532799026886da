"""Would sentence embeddings add to the linear-knn blend? Chosen on validation splits (a new-items
set's test split scored at the cell chosen, for reporting).

    python benchmarks/embedding_blend.py [--datasets ...] [--splits valid new-items]
        [--augments none gandalf-tempered] [--seeds 0] [--near-powers 2]

For each dataset, split, training set and seed: the scored split is the suite's validation split
carved from the training points (``valid``) or a new-items set's labelled new items (``new-items``:
its ``val``, every training point kept; ``suite.scored_split``). The tree and the TF-IDF
neighbours are trained on the rest (as ``blend_weights.py`` does), and two all-MiniLM-L6-v2
signals are computed for each scored query: ``label`` (cosine to each label's text, the
dual-encoder's starting point, zero-shot) and ``near`` (the vote of the query's nearest training
points by embedding, :class:`~gandalf_xmc.models.neighbours.EmbeddingNeighbours` as the
dual-encoder's, its cosines to each power of ``--near-powers``). Every ``tree + v * vote + e *
label + n * near`` of the grids below is scored (P@1, PSP@5). Prints, per row, the best blend
without embeddings, the best with each signal and with both, and writes
``benchmarks/results/embedding-blend.json`` (or ``--out``) with every grid point.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from suite import augment_config, markdown_table, run_grid, scored_split, write_results

from gandalf_xmc import sentence
from gandalf_xmc.augment import training_set
from gandalf_xmc.data.dataset import find_split_file
from gandalf_xmc.data.suite import NEW_ITEMS_SPLIT, SUITE, suite_path
from gandalf_xmc.engine.records import Validation, validation_metrics
from gandalf_xmc.models.blend import BlendConfig, LinearKnnBlend
from gandalf_xmc.models.neighbours import EmbeddingNeighbours
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.sparse_ops import text_scores, top_k_per_row
from gandalf_xmc.workflow.fitting import fit_model

HERE = Path(__file__).resolve().parent
VOTE = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)
LABEL = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)
NEAR = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)
K = 100


def grid_scores(blend, label_vectors: np.ndarray, index: EmbeddingNeighbours, target, inv, near_powers: list[float]) -> dict:
    """P@1 and PSP@5 of every ``tree + v * vote + e * label + n * near`` on ``target``'s queries
    (``label``: their top-K cosines to the label texts' embeddings ``label_vectors``)."""
    v = Validation(target.texts, target.Y, inv, target.filter_pairs)
    queries = list(target.texts)
    tree, vote = blend.parts(queries)
    Q = sentence.embed(queries, precision="float32")
    label = text_scores(Q, label_vectors, K)
    grid = {}
    for power in near_powers:
        near = index.vote(Q, K, power=power)
        for w_vote, w_label, w_near in itertools.product(VOTE, LABEL, NEAR):
            if w_near == 0 and power != near_powers[0]:
                continue  # the same blend as at the first power
            S = tree + w_vote * vote + w_label * label + w_near * near
            m = validation_metrics(top_k_per_row(sp.csr_matrix(S), 10), v)
            grid[f"{w_vote},{w_label},{w_near}" + (f",{power:g}" if w_near else "")] = (m["P@1"], m["PSP@5"])
    return grid


def measure(dataset: str, split: str, augment: str, seed: int, near_powers: list[float]) -> dict | None:
    new_items = split == "new-items"
    if new_items and not find_split_file(suite_path(dataset), NEW_ITEMS_SPLIT):
        return None
    ds, rest, target, inv = scored_split(dataset, seed, split, splits=("trn", NEW_ITEMS_SPLIT, "tst") if new_items else None)
    config: BlendConfig = model_config("linear-knn", seed=seed)
    train = training_set(rest, augment_config(augment, seed))
    blend = fit_model(LinearKnnBlend(config), train, rest.label_texts, progress=False)
    label_vectors = sentence.embed(rest.label_texts, precision="float32")  # once for both scored splits
    index = EmbeddingNeighbours(
        sentence.embed(list(train.texts), precision="float32"), train.Y, config.knn.n_neighbours, config.knn.power
    )
    row = {
        "dataset": dataset,
        "split": split,
        "augment": augment,
        "seed": seed,
        "n_eval": len(target.texts),
        "grid": grid_scores(blend, label_vectors, index, target, inv, near_powers),
    }
    if new_items:  # the new items' test split, scored at every cell for the cell validation chooses (reporting only)
        row["n_test"] = len(ds.test.texts)
        row["test_grid"] = grid_scores(blend, label_vectors, index, ds.test, inv, near_powers)
    return row


def best(grid: dict, keep) -> tuple[str, float, float]:
    """The grid point of highest P@1 (then the smaller weights) among those ``keep`` allows."""
    pts = [(k, *v) for k, v in grid.items() if keep(*map(float, k.split(",")[:3]))]
    k, p1, psp = max(pts, key=lambda t: (t[1], -sum(map(float, t[0].split(",")[:3]))))
    return k, p1, psp


KINDS = {
    "tree": lambda v, e, n: v == 0 and e == 0 and n == 0,
    "tree + vote": lambda v, e, n: e == 0 and n == 0,
    "+ label cosine": lambda v, e, n: n == 0,
    "+ embedding neighbours": lambda v, e, n: e == 0,
    "+ both": lambda v, e, n: True,
}


def summary(rows: list[dict]) -> str:
    """The best cell of each kind per row (chosen and scored on its split); then, for the new-items
    rows, each kind's cell chosen on the new items' validation and its figures on their test split."""
    out = [
        markdown_table(
            ["dataset", "split", "augment", "seed", *list(KINDS)[1:]],
            [
                [r["dataset"], r["split"], r["augment"], r["seed"]]
                + [f"{p1:.2f} / {psp:.2f} ({k})" for k, p1, psp in (best(r["grid"], keep) for keep in list(KINDS.values())[1:])]
                for r in rows
            ],
        )
    ]
    tested = [r for r in rows if "test_grid" in r]
    if tested:
        cells = []
        for r in tested:
            chosen = [best(r["grid"], keep)[0] for keep in KINDS.values()]
            cells.append(
                [r["dataset"], r["augment"], r["seed"]]
                + [f"{r['test_grid'][k][0]:.2f} / {r['test_grid'][k][1]:.2f} ({k})" for k in chosen]
            )
        out += ["", "Chosen on the new items' validation, scored on their test split:", ""]
        out.append(markdown_table(["dataset", "augment", "seed", *KINDS], cells))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--splits", nargs="+", choices=("valid", "new-items"), default=["valid"])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf-tempered"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--near-powers", nargs="+", type=float, default=[2.0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = run_grid(
        args.datasets,
        [(split, a, s) for split in args.splits for a in args.augments for s in args.seeds],
        lambda dataset, split, augment, seed: measure(dataset, split, augment, seed, args.near_powers),
    )
    print(summary(rows))
    write_results(args.out or HERE / "results" / "embedding-blend.json", rows)


if __name__ == "__main__":
    main()
