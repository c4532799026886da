"""The training points' vote in a sentence encoder's space: the neighbour part of the
dual-encoder's and ngame's scores.

A query's vote for label l is ``sum over its K nearest training points n of cos(q, x_n)^power *
y_n[l]``, divided either by the sum of those weights (``share``: the share of its neighbours that
carry l, soft targets counted by their value, as :meth:`.knn.TfidfKNN.vote` computes it on TF-IDF
rows) or by K (a mean: small where even the nearest points are far, so that the classifiers decide
for a text unlike any training point); in [0, 1] either way. The rows are dense unit-length
embeddings, so the cosines are one dense product a block of queries at a time
(:func:`~gandalf_xmc.sparse_ops.text_scores`); a sparse product of dense rows would cost far more.
The search is exact: a query costs a product with every training point.

Why a vote beside the classifiers: one-vs-all classifiers on frozen embeddings, trained a few
epochs from the label texts' vectors, keep little of what the nearest training points say about a
new text (docs/decisions.md, "The dual-encoder's neighbours").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError
from ..sparse_ops import neighbour_vote, text_scores, top_k_per_row

POINTS_FILE = "neighbour_points.npy"
TARGETS_FILE = "neighbour_targets.npz"


class EmbeddingNeighbours:
    """Training points' unit-length embeddings ``points`` (``n x d`` float32) and their (soft)
    targets ``targets`` (``n x L``); the vote of ``n_neighbours`` nearest, cosines to ``power``."""

    def __init__(self, points: np.ndarray, targets: sp.spmatrix, n_neighbours: int, power: float, share: bool = True):
        if points.ndim != 2 or points.shape[0] != targets.shape[0]:
            raise ValueError(f"{points.shape[0]:,} points for {targets.shape[0]:,} rows of targets")
        self.points = np.ascontiguousarray(points, dtype=np.float32)
        self.targets = sp.csr_matrix(targets, dtype=np.float32)
        self.n_neighbours = int(n_neighbours)
        self.power = float(power)
        self.share = bool(share)

    def vote(self, queries: np.ndarray, k: int, power: float | None = None, share: bool | None = None) -> sp.csr_matrix:
        """Each query's top ``k`` labels by its neighbours' vote (``queries``: unit-length
        embeddings in the points' space; ``power`` and ``share`` replace the configured ones, for a
        benchmark that compares them on one index)."""
        power = self.power if power is None else float(power)
        share = self.share if share is None else bool(share)
        n_labels = self.targets.shape[1]
        if queries.shape[0] == 0 or self.points.shape[0] == 0:
            return sp.csr_matrix((queries.shape[0], n_labels), dtype=np.float32)
        sims = text_scores(queries, self.points, min(self.n_neighbours, self.points.shape[0]))
        return neighbour_vote(sims, self.targets, min(k, n_labels), power, "share" if share else self.n_neighbours)

    def save(self, directory: Path) -> None:
        """``neighbour_points.npy`` and ``neighbour_targets.npz`` (no pickles)."""
        np.save(directory / POINTS_FILE, self.points)
        sp.save_npz(directory / TARGETS_FILE, self.targets, compressed=False)

    @classmethod
    def load(
        cls, directory: Path, n_labels: int, dim: int, n_neighbours: int, power: float, share: bool = True
    ) -> EmbeddingNeighbours:
        """The index :meth:`save` wrote, checked against the model's labels and embedding width."""
        points = np.load(directory / POINTS_FILE, allow_pickle=False)
        if points.ndim != 2 or points.shape[1] != dim or points.dtype != np.float32:
            raise DataFormatError(directory / POINTS_FILE, None, f"expected float32 rows of {dim} embedding values")
        targets = sp.load_npz(directory / TARGETS_FILE).tocsr()
        if targets.shape != (points.shape[0], n_labels):
            raise DataFormatError(
                directory / TARGETS_FILE, None, f"expected {points.shape[0]:,} rows of {n_labels:,} labels, got {targets.shape}"
            )
        return cls(points, targets, n_neighbours, power, share)


def mixed(classifier: sp.csr_matrix, vote: sp.csr_matrix, mix: float, k: int) -> sp.csr_matrix:
    """The top ``k`` of ``(1 - mix) * classifier + mix * vote`` a row (both in [0, 1]: sigmoid
    probabilities and shares); ``mix`` 0 is the classifiers alone, 1 the vote alone."""
    if mix <= 0.0:
        return top_k_per_row(classifier, k)
    if mix >= 1.0:
        return top_k_per_row(vote, k)
    return top_k_per_row(sp.csr_matrix((1.0 - mix) * classifier + mix * vote), k)
