"""Would sentence embeddings add to the linear-knn blend? Validation splits only.

    python benchmarks/embedding_blend.py [--datasets ...] [--augments none gandalf-tempered] [--seeds 0]

For each dataset, training set and seed: the suite's validation split is carved from the training
points, the tree and the TF-IDF neighbours are trained on the rest (as ``blend_weights.py`` does),
and two all-MiniLM-L6-v2 signals are computed for each validation query: ``label`` (cosine to
each label's text, the dual-encoder's starting point, zero-shot) and ``near`` (the vote of the
query's nearest training points by embedding, weighed as the TF-IDF neighbours are). Every
``tree + v * vote + e * label + n * near`` of the grids below is scored (P@1, PSP@5). Prints, per
dataset, the best blend without embeddings, the best with each signal and with both, and writes
``benchmarks/results/embedding-blend.json`` (or ``--out``) with every grid point.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from suite import augment_config, run_grid, valid_fraction

from gandalf_xmc import sentence
from gandalf_xmc.augment import training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.suite import SUITE
from gandalf_xmc.engine.records import Validation, validation_metrics
from gandalf_xmc.metrics import inverse_propensity
from gandalf_xmc.models.blend import BlendConfig, LinearKnnBlend, text_scores
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.sparse_ops import top_k_per_row
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.validation import carve_validation

HERE = Path(__file__).resolve().parent
VOTE = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)
LABEL = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)
NEAR = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
K = 100


def embedding_signals(train_texts, train_Y, label_texts, queries, n_neighbours: int, power: float):
    """``label``: top-K cosines of each query to the label texts; ``near``: the embedding neighbours' vote."""
    Q = sentence.embed(queries, precision="float32")
    Z = sentence.embed(label_texts, precision="float32")
    E = sentence.embed(train_texts, precision="float32")
    label = text_scores(Q, Z, K)
    sims = text_scores(Q, E, n_neighbours)  # negative cosines count 0, as the TF-IDF neighbours' do
    sims.data = np.power(sims.data, power)
    votes = top_k_per_row(sp.csr_matrix(sims @ train_Y), K, distinct=True)
    total = np.asarray(sims.sum(axis=1)).ravel()
    near = sp.csr_matrix(sp.diags(1.0 / np.where(total > 0, total, 1.0)) @ votes, dtype=np.float32)
    return label, near


def measure(dataset: str, augment: str, seed: int) -> dict:
    ds = load_dataset(dataset, splits=("trn",))
    rest, valid = carve_validation(ds, valid_fraction(ds.n_original_train or len(ds.train)), seed)
    config: BlendConfig = model_config("linear-knn", seed=seed)
    train = training_set(rest, augment_config(augment, seed))
    blend = fit_model(LinearKnnBlend(config), train, rest.label_texts, progress=False)
    v = Validation(
        valid.texts, valid.Y, inverse_propensity(rest.original_train_Y(), *ds.propensity_constants()), valid.filter_pairs
    )
    tree, vote = blend.parts(list(valid.texts))
    label, near = embedding_signals(
        list(train.texts), sp.csr_matrix(train.Y), rest.label_texts, list(valid.texts), config.knn.n_neighbours, config.knn.power
    )
    grid = {}
    for w_vote, w_label, w_near in itertools.product(VOTE, LABEL, NEAR):
        S = tree + w_vote * vote + w_label * label + w_near * near
        m = validation_metrics(top_k_per_row(sp.csr_matrix(S), 10), v)
        grid[f"{w_vote},{w_label},{w_near}"] = (m["P@1"], m["PSP@5"])
    return {"dataset": dataset, "augment": augment, "seed": seed, "grid": grid}


def best(grid: dict, keep) -> tuple[str, float, float]:
    """The grid point of highest P@1 (then the smaller weights) among those ``keep`` allows."""
    pts = [(k, *v) for k, v in grid.items() if keep(*map(float, k.split(",")))]
    k, p1, psp = max(pts, key=lambda t: (t[1], -sum(map(float, t[0].split(",")))))
    return k, p1, psp


def summary(rows: list[dict]) -> str:
    out = [
        "| dataset | augment | seed | tree + vote | + label cosine | + embedding neighbours | + both |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        g = r["grid"]
        cells = [
            best(g, lambda v, e, n: e == 0 and n == 0),
            best(g, lambda v, e, n: n == 0),
            best(g, lambda v, e, n: e == 0),
            best(g, lambda v, e, n: True),
        ]
        out.append(
            f"| {r['dataset']} | {r['augment']} | {r['seed']} | "
            + " | ".join(f"{p1:.2f} / {psp:.2f} ({k})" for k, p1, psp in cells)
            + " |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf-tempered"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = run_grid(args.datasets, [(a, s) for a in args.augments for s in args.seeds], measure)
    print(summary(rows))
    out = args.out or HERE / "results" / "embedding-blend.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows) + "\n")


if __name__ == "__main__":
    main()
