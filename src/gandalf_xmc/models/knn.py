"""TF-IDF k-nearest-neighbour predictor: a strong, training-free baseline that uses soft targets.

A query's score for label l is ``sum over its K most similar training points n of
cos(x, x_n)^power * y_n[l]``, so label points with soft targets (Gandalf) or self-annotation
contribute like any other training point, weighted by their target values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..engine.records import TrainResult, Validation, validation_metrics
from ..errors import ConfigError
from ..features import PrecomputedFeatures, TextFeaturizer, is_feature_matrix, load_featurizer
from ..jsonio import read_json_file
from ..settings import check_ranges
from ..sparse_ops import csr_arrays, neighbour_vote, one_row, row_normalised, row_times_compiled, top_k_per_row
from .base import Inputs, LabelledModel
from .one_query import knn_row
from .spec import write_spec


@dataclass
class KNNConfig:
    """Settings of :class:`TfidfKNN` (fixed a priori, never tuned on a test split)."""

    MODEL: ClassVar[str] = "knn"
    n_neighbours: int = 30
    power: float = 2.0
    ngram_max: int = 2
    batch_size: int = 2048
    seed: int = 0  # nothing is random; kept so that every model's settings have a seed

    def __post_init__(self) -> None:
        check_ranges(self, positive=("n_neighbours", "ngram_max", "batch_size"), non_negative=("power",))


def config_for(name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None) -> KNNConfig:
    """The default settings (the registry's hook)."""
    return KNNConfig() if seed is None else replace(KNNConfig(), seed=seed)


class TfidfKNN(LabelledModel):
    """Fit on texts and (soft) targets; predict the top-k labels of new texts."""

    kind = "knn"

    def __init__(self, config: KNNConfig | None = None):
        self.config = config or KNNConfig()
        self.featurizer: TextFeaturizer | PrecomputedFeatures | None = None
        self.XT: sp.csr_matrix | None = None  # features x points: a query's similarities are one product
        self.Y: sp.csr_matrix | None = None
        self.result: TrainResult | None = None

    def fit(
        self,
        inputs,
        Y: sp.spmatrix,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        sample_weight=None,
        checkpoint_dir=None,
        resume: bool = False,
        progress: bool = False,
    ) -> TfidfKNN:
        """Index the training texts ``inputs``; ``Y`` may hold soft targets in [0, 1]. Every point is
        indexed alike: ``sample_weight`` means nothing to an index without a loss.

        ``inputs`` may instead be feature rows computed by the caller (a scipy sparse matrix or a
        2-D numpy array, such as sentence embeddings): neighbours are then by the cosine of those
        rows, and the model predicts feature rows of the same width."""
        texts = inputs
        started = time.perf_counter()
        Y = sp.csr_matrix(Y, dtype=np.float32)
        self.set_labels(list(label_texts) if label_texts is not None else [""] * Y.shape[1])
        if is_feature_matrix(texts):
            self.featurizer = PrecomputedFeatures(texts.shape[1])
            X = row_normalised(self.featurizer.transform(texts))  # cosine, as TF-IDF rows of unit norm give
            if X.shape[0] != Y.shape[0]:
                raise ConfigError(f"{X.shape[0]:,} feature rows for {Y.shape[0]:,} rows of targets")
        else:
            texts = list(texts)
            self.featurizer = TextFeaturizer(self.config.ngram_max).fit(texts)
            X = self.featurizer.transform(texts)
        # transposed once here: doing it per call made a single query cost a pass over the index
        self.XT = X.T.tocsr()
        self.Y = Y
        seconds = time.perf_counter() - started
        record = {"epoch": 0, "seconds": seconds, "examples": X.shape[0]}
        if valid is not None:
            inputs = valid.inputs if is_feature_matrix(valid.inputs) else list(valid.inputs)
            record.update(validation_metrics(self.predict(inputs, k=10), valid))
        self.result = TrainResult(0, record.get("P@1", 0.0), [record], seconds, X.shape[0] / max(seconds, 1e-9))
        return self

    def predict(self, texts: Inputs, k: int = 100, progress: bool = False) -> sp.csr_matrix:
        """Top-``k`` label scores for each text (``len(texts) x L`` CSR)."""
        return self._scores(texts, k, share=False)

    def vote(self, texts: list[str], k: int = 100) -> sp.csr_matrix:
        """:meth:`predict`'s scores divided by the sum of the text's neighbour weights: the share
        of its neighbours that carry each label (soft targets counted by their value), in [0, 1],
        comparable from one query to the next."""
        return self._scores(texts, k, share=True)

    def _scores(self, texts: Inputs, k: int, share: bool) -> sp.csr_matrix:
        if self.featurizer is None or self.XT is None or self.Y is None:
            raise RuntimeError("fit the model before predicting")
        cfg = self.config
        rows = is_feature_matrix(texts)
        if not rows and len(texts) == 1 and isinstance(self.featurizer, TextFeaturizer):
            return one_row(*self.scores_of_text(texts[0], k, share), self.Y.shape[1])
        blocks = []
        for start in range(0, texts.shape[0] if rows else len(texts), cfg.batch_size):
            Q = self.featurizer.transform(texts[start : start + cfg.batch_size])
            if rows:
                Q = row_normalised(Q)
            sims = top_k_per_row(Q @ self.XT, cfg.n_neighbours, distinct=True)
            blocks.append(neighbour_vote(sims, self.Y, k, cfg.power, "share" if share else None))
        if not blocks:
            return sp.csr_matrix((0, self.Y.shape[1]), dtype=np.float32)
        return sp.vstack(blocks, format="csr", dtype=np.float32)

    def scores_of_text(self, text: str, k: int, share: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """One text's row of :meth:`predict` (or of :meth:`vote`, ``share=True``) as its labels
        (ascending) and float32 scores, the same numbers without building matrices (a server's
        request)."""
        if not isinstance(self.featurizer, TextFeaturizer) or self.XT is None or self.Y is None:
            raise RuntimeError("fit the model on texts before predicting one")
        cfg = self.config
        ids, values = self.featurizer.row(text)
        points, targets = csr_arrays(self.XT), csr_arrays(self.Y)
        return knn_row(ids, values, points, targets, cfg.n_neighbours, cfg.power, k, share, row_times_compiled)

    def save(self, directory: str | Path) -> None:
        """Write the settings, the features and the index (JSON, ``.npy``, ``.npz``; no pickles)."""
        if self.featurizer is None:
            raise RuntimeError("fit the model before saving it")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.featurizer.save(d)
        self.save_labels(d)
        sp.save_npz(d / "knn_points.npz", self.XT, compressed=False)
        sp.save_npz(d / "knn_targets.npz", self.Y, compressed=False)
        write_spec(d, self.kind, self.config, self.result, n_labels=int(self.Y.shape[1]))

    @classmethod
    def load(cls, directory: str | Path) -> TfidfKNN:
        d = Path(directory)
        spec = read_json_file(d / "model.json")
        model = cls(KNNConfig(**spec["model"]))
        model.featurizer = load_featurizer(d)
        model.XT = sp.load_npz(d / "knn_points.npz").tocsr()
        model.Y = sp.load_npz(d / "knn_targets.npz").tocsr()
        model.result = TrainResult(**spec["result"]) if spec.get("result") else None
        model.load_labels(d, model.Y.shape[1])
        return model
