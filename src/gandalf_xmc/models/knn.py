"""TF-IDF k-nearest-neighbour predictor: a strong, training-free baseline that uses soft targets.

A query's score for label l is ``sum over its K most similar training points n of
cos(x, x_n)^power * y_n[l]``, so extra points with soft targets (Gandalf) or self-annotation
contribute like any other training point, weighted by their target values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from ..sparse_ops import top_k_per_row
from .features import TextFeaturizer


@dataclass
class KNNConfig:
    """Settings of :class:`TfidfKNN` (fixed a priori, never tuned on a test split)."""

    n_neighbours: int = 30
    power: float = 2.0
    ngram_max: int = 2
    batch_size: int = 2048


class TfidfKNN:
    """Fit on texts and (soft) targets; predict the top-k labels of new texts."""

    def __init__(self, config: KNNConfig | None = None):
        self.config = config or KNNConfig()
        self.featurizer: TextFeaturizer | None = None
        self.XT: sp.csr_matrix | None = None  # features x points: a query's similarities are one product
        self.Y: sp.csr_matrix | None = None

    def fit(self, texts: list[str], Y: sp.spmatrix) -> TfidfKNN:
        """Index the training texts; ``Y`` may hold soft targets in [0, 1]."""
        self.featurizer = TextFeaturizer(self.config.ngram_max).fit(texts)
        # transposed once here: doing it per call made a single query cost a pass over the index
        self.XT = self.featurizer.transform(texts).T.tocsr()
        self.Y = sp.csr_matrix(Y, dtype=np.float32)
        return self

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        """Top-``k`` label scores for each text (``len(texts) x L`` CSR)."""
        if self.featurizer is None or self.XT is None or self.Y is None:
            raise RuntimeError("fit the model before predicting")
        cfg = self.config
        blocks = []
        starts = range(0, len(texts), cfg.batch_size)
        for start in tqdm(starts, desc="knn predict", disable=not progress, unit="batch"):
            Q = self.featurizer.transform(texts[start:start + cfg.batch_size])
            sims = top_k_per_row(Q @ self.XT, cfg.n_neighbours)
            sims.data = np.power(np.maximum(sims.data, 0.0), cfg.power)
            blocks.append(top_k_per_row(sims @ self.Y, k))
        if not blocks:
            return sp.csr_matrix((0, self.Y.shape[1]), dtype=np.float32)
        return sp.vstack(blocks, format="csr", dtype=np.float32)
