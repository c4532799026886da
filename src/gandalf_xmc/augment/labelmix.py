"""LabelMix (earlier paper, Algorithm 1): an on-the-fly, seeded transform of training batches."""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp


def tail_weights(freq: np.ndarray, power: float = 0.5) -> np.ndarray:
    """Label sampling weights ``r_j = freq_j^-power`` (labels without positives get the largest weight)."""
    freq = np.asarray(freq, dtype=np.float64)
    return np.power(np.maximum(freq, 1.0), -power)


class LabelMix:
    """With probability ``prob`` replace a point (x, y) by (x + " " + z_j, y_a).

    ``j`` is one of the point's positive labels, drawn with probability proportional to
    ``weights[j]`` (tail-skewed); ``y_a = min(y + graph[j], 1)`` with entries not above
    ``threshold`` zeroed, where ``graph`` holds the conditional soft targets ``G_j. / G_jj``
    (see :func:`gandalf_xmc.graph.label_graph`). Points without positives are left alone.

    The transform owns a generator seeded with ``seed``: the same seed and the same sequence of
    batches give the same augmented batches.
    """

    acts_on: Literal["texts", "features"] = "texts"  # see augment.transforms

    def __init__(
        self,
        graph: sp.csr_matrix,
        label_texts: list[str],
        weights: np.ndarray,
        prob: float = 0.4,
        threshold: float = 0.1,
        seed: int = 0,
    ):
        if not 0.0 <= prob <= 1.0:
            raise ValueError("prob must be in [0, 1]")
        self.graph = sp.csr_matrix(graph, dtype=np.float32)
        self.label_texts = label_texts
        self.weights = np.asarray(weights, dtype=np.float64)
        self.prob = prob
        self.threshold = threshold
        self.rng = np.random.default_rng(seed)

    def __call__(self, texts: list[str], Y: sp.csr_matrix) -> tuple[list[str], sp.csr_matrix]:
        """Transform one batch: returns new texts and targets (inputs are not modified)."""
        Y = sp.csr_matrix(Y, dtype=np.float32)
        n = Y.shape[0]
        draws = self.rng.random(n)
        picks = self.rng.random(n)
        out_texts = list(texts)
        rows = []
        for i in range(n):
            lo, hi = Y.indptr[i], Y.indptr[i + 1]
            row = Y[i]
            if draws[i] < self.prob and hi > lo:
                labels = Y.indices[lo:hi]
                p = self.weights[labels] * (Y.data[lo:hi] > 0)
                if p.sum() > 0:
                    cdf = np.cumsum(p / p.sum())
                    j = int(labels[min(int(np.searchsorted(cdf, picks[i], side="right")), labels.size - 1)])
                    mixed = row + self.graph[j]
                    mixed.data = np.minimum(mixed.data, 1.0)
                    mixed.data[mixed.data <= self.threshold] = 0.0
                    mixed.eliminate_zeros()
                    row = mixed
                    out_texts[i] = f"{texts[i]} {self.label_texts[j]}"
            rows.append(row)
        return out_texts, sp.vstack(rows, format="csr", dtype=np.float32) if rows else Y
