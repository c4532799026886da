"""Label points weighted by how well a label's text describes the items that carry it (issue 35,
a candidate against the loss on new items): gandalf-tempered with each label point's loss weight
(0.5 in the preset) multiplied by

* ``centroid``: the cosine between the label's text and the mean of its carriers' rows;
* ``neighbours``: the share of the label text's 10 nearest training items that carry the label;

(TF-IDF of words; a label without a training point keeps its weight) beside the preset and no
augmentation, for the linear model of words alone (as measured, before character n-grams). Not
adopted (docs/decisions.md, "Augmentation with the linear model"); kept so that the measurement
can be repeated.

    python benchmarks/label_text_fit.py --split valid      # the random-split sets (what is chosen on)
    python benchmarks/label_text_fit.py --split test --datasets debian-new-packages gene-ontology-new-terms

Prints the suite's table and writes ``benchmarks/results/label-text-fit-<split>.json``.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize
from suite import METRICS, scored_split, variants_main

from gandalf_xmc.augment import preset, training_set
from gandalf_xmc.metrics import evaluate
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow.fitting import fit_model

RANDOM_SPLIT_SETS = ("debian-bookworm", "gene-ontology", "manpages", "jargon")
VARIANTS = ("none", "gandalf-tempered", "centroid", "neighbours")
NEIGHBOURS = 10


def label_text_fit(texts: list[str], Y: sp.csr_matrix, label_texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centroid cosine, nearest-items share, has a training point) of each label."""
    vectorizer = TfidfVectorizer(sublinear_tf=True)
    X = normalize(vectorizer.fit_transform(texts))
    Z = normalize(vectorizer.transform(label_texts))
    centroid = np.asarray(Z.multiply(normalize(sp.csr_matrix(Y.T @ X))).sum(axis=1)).ravel()
    carried = np.asarray(Y.sum(axis=0)).ravel() > 0
    S, Yc = (Z @ X.T).tocsr(), Y.tocsc()
    share = np.zeros(len(label_texts))
    for j in range(S.shape[0]):
        lo, hi = S.indptr[j], S.indptr[j + 1]
        if hi > lo:
            nearest = S.indices[lo:hi][np.argsort(-S.data[lo:hi], kind="stable")[:NEIGHBOURS]]
            share[j] = np.isin(nearest, Yc.indices[Yc.indptr[j] : Yc.indptr[j + 1]]).mean()
    return centroid, share, carried


def run_variant(dataset: str, variant: str, seed: int, split: str) -> dict:
    ds, rest, target, inv = scored_split(dataset, seed, split)
    t0 = time.perf_counter()
    train = training_set(rest, preset("none" if variant == "none" else "gandalf-tempered", seed=seed))
    weights = None
    if variant in ("centroid", "neighbours"):
        original = rest.original_train()
        centroid, share, carried = label_text_fit(original.texts, sp.csr_matrix(original.Y), rest.label_texts)
        fit = np.where(carried, centroid if variant == "centroid" else share, 1.0)
        label_rows = np.flatnonzero(train.is_label_point)  # one label point a label, in label order
        weights = np.where(train.is_label_point, train.label_point_weight, 1.0)
        weights[label_rows] *= fit
    model = build_model(replace(model_config("linear", seed=seed), char_ngrams=None))  # as measured: words alone
    if weights is None:
        fit_model(model, train, rest.label_texts, progress=False)
    else:
        model.fit(train.texts, train.Y, label_texts=rest.label_texts, sample_weight=weights, progress=False)
    seconds = time.perf_counter() - t0
    res = evaluate(model.predict(target.texts, k=10), target.Y, inv, (1, 3, 5), target.filter_pairs)
    return {
        "dataset": dataset,
        "model": "linear",
        "augment": variant,
        "seed": seed,
        "split": split,
        "settings": {},
        "n_eval": int(target.Y.shape[0]),
        "train_seconds": seconds,
        **{m: res[m] for m in METRICS},
    }


def main() -> None:
    variants_main(__doc__, RANDOM_SPLIT_SETS, VARIANTS, run_variant, "label-text-fit")


if __name__ == "__main__":
    main()
