"""One query's answer from the neighbours' index and from the blend, as arrays: the arithmetic of
:class:`~.knn.TfidfKNN` and :class:`~.blend.LinearKnnBlend` for a single text, in numpy alone, so
that the numpy-only reader (:mod:`.linear_reader`) and the full models' single-query paths (which
pass a compiled product) give the same numbers as the batch path (tested)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..row_ops import row_times, top_k_of_row

# a CSR matrix's arrays and its number of columns: (indptr, indices, data, n_columns)
CSRArrays = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def knn_row(
    ids: np.ndarray,
    values: np.ndarray,
    points: CSRArrays,
    targets: CSRArrays,
    n_neighbours: int,
    power: float,
    k: int,
    share: bool,
    product: Callable = row_times,
) -> tuple[np.ndarray, np.ndarray]:
    """A text's knn scores from its TF-IDF row (``ids``, ``values``): its ``n_neighbours`` most
    similar points by the product with ``points`` (features x points), their similarities to the
    ``power``, the product with their ``targets`` (points x labels) and its top ``k``, in label
    order; ``share``: divided by the sum of the neighbours' weights (the vote, in [0, 1])."""
    points_touched, similarities = product(ids, values, *points)
    neighbours, sims = top_k_of_row(points_touched, similarities, n_neighbours)
    sims = np.power(np.maximum(sims, 0.0), power)
    labels_touched, sums = product(neighbours, sims, *targets)
    labels, scores = top_k_of_row(labels_touched, sums, k)
    if share:  # the weights added up as scipy's row sum adds them (numpy's reduceat)
        total = np.add.reduceat(sims, [0]) if sims.size else np.zeros(1, dtype=np.float32)
        scores = scores * (1.0 / np.where(total > 0, total, 1.0)).astype(np.float32)
    return labels, scores


def blend_row(
    tree_labels: np.ndarray, tree_scores: np.ndarray, voted: np.ndarray, votes: np.ndarray, weight: float, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` of ``tree + weight * vote`` for one text (each part's labels distinct), in
    label order, summed as scipy sums the two rows (float32; a zero sum left out); with weight 0,
    the tree's entries alone."""
    labels, scores = np.asarray(tree_labels), np.asarray(tree_scores, dtype=np.float32)
    if weight:
        labels = np.concatenate([labels, voted])
        scores = np.concatenate([scores, votes * weight])
        order = np.argsort(labels, kind="stable")  # the tree's entry first where both have a label
        labels, scores = labels[order], scores[order]
        twin = np.flatnonzero(labels[1:] == labels[:-1])
        scores[twin] = scores[twin] + scores[twin + 1]
        keep = np.ones(labels.size, dtype=bool)
        keep[twin + 1] = False
        keep &= scores != 0
        labels, scores = labels[keep], scores[keep]
    return top_k_of_row(labels, scores, k)
