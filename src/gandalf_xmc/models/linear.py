"""Sparse linear one-vs-all classifiers on TF-IDF features, trained with soft targets.

Label l scores a text x by ``w_l . x + b_l + a . f(x, l)`` where ``f`` are the shortlist's two
pair scores (neighbours' vote, label-text cosine) and ``a`` is learnt. Like PECOS's rankers,
each classifier is trained only on the points that shortlist its label ("matcher-aware"
negatives) plus its (soft) positives, so ``w_l`` is sparse: it has a weight only for the
features of those points. The weights are stored as one sorted table of ``feature * L + label``
keys (a :class:`WeightTable`); a (feature, label) pair that no training point produced has weight 0.

The loss is the shared soft-target BCE of :func:`gandalf_xmc.train.loop.run`, batched over points
(every candidate pair of a point is in the point's batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..augment.conventional import FeatureMix
from ..errors import ConfigError
from ..sparse_ops import threads_for, top_k_per_row, unique_int
from ..train.loop import ExtraPoints, TrainConfig, TrainResult, run, validation_metrics
from ..train.shortlist import NeighbourShortlist, shortlist_recall
from .features import TextFeaturizer
from .spec import read_result, read_spec, write_spec


def _linear_train_defaults() -> TrainConfig:
    # chosen on the validation split of the embedded dataset (never the test split)
    return TrainConfig(epochs=8, batch_size=64, lr=0.005, dense_lr=0.05, patience=2)


@dataclass
class LinearConfig:
    """Settings of :class:`SparseLinearXMC`."""

    n_neighbours: int = 30  # nearest training points whose labels are candidates
    knn_labels: int = 100  # best-voted labels kept from the neighbours
    text_labels: int = 50  # labels whose text is most similar to the query
    pair_init: float = 3.0  # initial weight of each pair score
    # whether augmentation (label) points join the neighbour index. They do not by default: label
    # texts already reach the shortlist through its label-text half, and as neighbours they crowded
    # out original points (validation, gandalf-tempered: shortlist recall 56.3 -> 57.5, P@1 45.1 ->
    # 47.6, PSP@5 32.5 -> 34.6 when left out)
    index_extra_points: bool = False
    train: TrainConfig = field(default_factory=_linear_train_defaults)


class PairScorer(torch.nn.Module):
    """Scores candidate (point, label) pairs: sparse weights + label bias + pair-score weights."""

    def __init__(self, n_weights: int, n_labels: int, n_pair_features: int, pair_init: float = 3.0):
        super().__init__()
        # the last slot is padding: (feature, label) pairs without a trained weight land there
        self.weights = torch.nn.EmbeddingBag(n_weights + 1, 1, mode="sum", sparse=True, padding_idx=n_weights)
        self.bias = torch.nn.Embedding(n_labels, 1, sparse=True)
        self.pair = torch.nn.Linear(n_pair_features, 1)
        torch.nn.init.zeros_(self.weights.weight)
        torch.nn.init.zeros_(self.bias.weight)
        torch.nn.init.constant_(self.pair.weight, pair_init)
        torch.nn.init.zeros_(self.pair.bias)

    def forward(self, weight_ids: torch.Tensor, offsets: torch.Tensor, values: torch.Tensor, labels: torch.Tensor,
                pair_features: torch.Tensor) -> torch.Tensor:
        s = self.weights(weight_ids, offsets, per_sample_weights=values).squeeze(1)
        return s + self.bias(labels).squeeze(1) + self.pair(pair_features).squeeze(1)


def _pair_keys(X: sp.csr_matrix, rows: np.ndarray, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """Keys ``feature * L + label`` of every feature of ``X[rows[p]]`` for every pair p."""
    lengths = np.diff(X.indptr)[rows]
    starts = np.repeat(X.indptr[rows].astype(np.int64) - np.cumsum(lengths) + lengths, lengths)
    pos = starts + np.arange(int(lengths.sum()))
    return X.indices[pos].astype(np.int64) * n_labels + np.repeat(labels, lengths)


@numba.njit(parallel=True, cache=True)
def _bag_ids(w_ptr, w_labels, x_ptr, x_idx, x_val, rows, labels, offsets, pad):
    ids = np.empty(offsets[-1], dtype=np.int64)
    values = np.empty(offsets[-1], dtype=np.float32)
    for p in numba.prange(rows.size):
        r, lab, at = rows[p], labels[p], offsets[p]
        for j in range(x_ptr[r], x_ptr[r + 1]):
            lo, hi = w_ptr[x_idx[j]], w_ptr[x_idx[j] + 1]
            pos = lo + np.searchsorted(w_labels[lo:hi], lab)
            ids[at] = pos if pos < hi and w_labels[pos] == lab else pad
            values[at] = x_val[j]
            at += 1
    return ids, values


class WeightTable:
    """Which (feature, label) pairs have a weight: CSR by feature, labels ascending in each row.

    Weight id of (f, l) = its position in the table; absent pairs map to the padding id ``size``.
    """

    def __init__(self, indptr: np.ndarray, labels: np.ndarray):
        self.indptr, self.labels = indptr.astype(np.int64), labels.astype(np.int32)

    @property
    def size(self) -> int:
        return int(self.labels.size)

    @classmethod
    def from_keys(cls, keys: np.ndarray, n_features: int, n_labels: int) -> WeightTable:
        """From sorted unique keys ``feature * L + label``."""
        indptr = np.searchsorted(keys, np.arange(n_features + 1, dtype=np.int64) * n_labels)
        return cls(indptr, keys % n_labels)

    def bags(self, X: sp.csr_matrix, rows: np.ndarray, labels: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weight ids, TF-IDF values, bag offsets) of pairs ``(rows[p], labels[p])``: pair p sums
        ``value x weight`` over its row's features."""
        lengths = np.diff(X.indptr)[rows]
        offsets = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        with threads_for(X.shape[0]):
            ids, values = _bag_ids(self.indptr, self.labels, X.indptr.astype(np.int64, copy=False), X.indices,
                                   X.data.astype(np.float32, copy=False), rows.astype(np.int64, copy=False),
                                   labels.astype(np.int32, copy=False), offsets, self.size)
        return ids, values, offsets


class SparseLinearXMC:
    """Fit on texts and (soft) targets; predict the top-k labels of new texts (CSR of probabilities)."""

    def __init__(self, config: LinearConfig | None = None):
        self.config = config or LinearConfig()
        self.featurizer: TextFeaturizer | None = None
        self.shortlist: NeighbourShortlist | None = None
        self.table: WeightTable | None = None
        self.scorer: PairScorer | None = None
        self.n_labels = 0
        self.result: TrainResult | None = None

    def _new_shortlist(self) -> NeighbourShortlist:
        c = self.config
        return NeighbourShortlist(c.n_neighbours, c.knn_labels, c.text_labels)

    def features(self, texts: list[str], progress: bool = False) -> sp.csr_matrix:
        """TF-IDF rows of ``texts``."""
        if self.featurizer is None:
            raise RuntimeError("fit or load the model first")
        return self.featurizer.transform(list(texts))

    def _score(self, X: sp.csr_matrix, rows: np.ndarray, labels: np.ndarray, pair_features: np.ndarray) -> torch.Tensor:
        assert self.scorer is not None and self.table is not None
        ids, values, offsets = self.table.bags(X, rows, labels)
        return self.scorer(torch.from_numpy(ids), torch.from_numpy(offsets[:-1]),
                           torch.from_numpy(values), torch.from_numpy(labels), torch.from_numpy(pair_features))

    def fit(self, texts: list[str], Y: sp.csr_matrix, label_texts: list[str], valid: tuple | None = None,
            example_weights: np.ndarray | None = None, checkpoint_dir: str | Path | None = None,
            resume: bool = False, progress: bool = True, mixer=None, extra: ExtraPoints | None = None
            ) -> SparseLinearXMC:
        """Train on ``texts`` with (soft) targets ``Y``; ``valid = (texts, Y, inverse propensities[,
        filter pairs])`` selects the best epoch; ``extra`` marks the augmentation points and sets
        their loss weight and share of each epoch.

        ``mixer`` (LabelMix, SynonymReplacement or FeatureMix) is drawn once, before training, and
        the transformed points are added to the training set: candidate pairs and the weight table
        are fixed before the first epoch, so this model cannot re-mix each batch as the neural ones do.
        """
        if extra is not None and not extra.negatives:
            raise ConfigError("extra points without negatives (--no-extra-negatives) apply to the neural models; "
                              "the linear model fixes its candidate pairs for every point alike")
        cfg = self.config
        torch.manual_seed(cfg.train.seed)
        Y = sp.csr_matrix(Y, dtype=np.float32)
        feature_mix = mixer if isinstance(mixer, FeatureMix) else None
        if mixer is not None and feature_mix is None:
            texts = list(texts)
            mixed_texts, mixed_Y = mixer(texts, Y)
            changed = np.flatnonzero([a != b for a, b in zip(mixed_texts, texts)])
            texts = texts + [mixed_texts[i] for i in changed]
            Y = sp.vstack([Y, mixed_Y[changed]], format="csr")
            if example_weights is not None:
                example_weights = np.concatenate([example_weights, np.asarray(example_weights)[changed]])
            if extra is not None:
                extra = extra.extended(changed.size)
        if extra is not None:
            example_weights = extra.example_weights(example_weights)
        self.n_labels = Y.shape[1]
        self.featurizer = TextFeaturizer().fit(list(texts) + list(label_texts))
        X = self.features(texts)
        Z = self.features(label_texts)
        if feature_mix is not None:
            X, Y, example_weights, extra = _append_mixed(feature_mix, X, Y, Z, example_weights, extra)
        indexed = None if extra is None or cfg.index_extra_points else ~extra.mask
        self.shortlist = self._new_shortlist().fit(X, Y, Z, rows=indexed)
        indptr, labels, pair_feats = self.shortlist.pairs(X, exclude_self=True, extra=Y, progress=progress)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(indptr))
        targets = np.asarray(Y[rows, labels]).ravel().astype(np.float32)
        # the weight table: every (feature, label) pair some training pair touches, built in chunks
        uniques = []
        for start in range(0, rows.size, 1 << 20):
            stop = start + (1 << 20)
            uniques.append(unique_int(_pair_keys(X, rows[start:stop], labels[start:stop], self.n_labels)))
        keys = unique_int(np.concatenate(uniques)) if uniques else np.zeros(0, dtype=np.int64)
        self.table = WeightTable.from_keys(keys, X.shape[1], self.n_labels)
        del keys, uniques
        self.scorer = PairScorer(self.table.size, self.n_labels, NeighbourShortlist.N_FEATURES, cfg.pair_init)
        v = None
        if valid is not None:
            Xv = self.features(valid[0])
            v = (Xv, *valid[1:], self.shortlist.pairs(Xv))
        objective = _PairObjective(self, X, indptr, labels, pair_feats, targets, example_weights, v)
        self.result = run(objective, cfg.train, checkpoint_dir, resume, progress, extra=extra)
        return self

    @torch.no_grad()
    def _predict_features(self, X: sp.csr_matrix, k: int, pairs: tuple | None = None) -> sp.csr_matrix:
        assert self.shortlist is not None and self.scorer is not None
        self.scorer.eval()
        indptr, labels, pair_feats = pairs if pairs is not None else self.shortlist.pairs(X)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(indptr))
        scores = self._score(X, rows, labels, pair_feats).numpy() if rows.size else np.zeros(0, dtype=np.float32)
        P = sp.csr_matrix((1.0 / (1.0 + np.exp(-scores.astype(np.float64))), labels, indptr),
                          shape=(X.shape[0], self.n_labels), dtype=np.float32)
        return top_k_per_row(P, k)

    def predict(self, texts: list[str], k: int = 100, progress: bool = False, batch_size: int = 2048) -> sp.csr_matrix:
        """Top-``k`` label probabilities of each text (``len(texts) x L`` CSR)."""
        if self.scorer is None:
            raise RuntimeError("fit or load the model first")
        blocks = [self._predict_features(self.features(texts[s:s + batch_size]), k)
                  for s in tqdm(range(0, len(texts), batch_size), desc="predict", disable=not progress, unit="batch")]
        if not blocks:
            return sp.csr_matrix((0, self.n_labels), dtype=np.float32)
        return sp.vstack(blocks, format="csr", dtype=np.float32)

    def save(self, directory: str | Path) -> None:
        """Write config, features, shortlist index, weight keys and weights into ``directory``."""
        assert self.scorer is not None and self.shortlist is not None and self.table is not None
        d = write_spec(directory, "linear", self.config, self.result, n_labels=self.n_labels,
                       n_weights=self.table.size)
        self.featurizer.save(d)
        self.shortlist.save(d)
        np.save(d / "weights_indptr.npy", self.table.indptr)
        np.save(d / "weights_labels.npy", self.table.labels)
        torch.save(self.scorer.state_dict(), d / "weights.pt")

    @classmethod
    def load(cls, directory: str | Path) -> SparseLinearXMC:
        d = Path(directory)
        config, spec = read_spec(d, LinearConfig)
        model = cls(config)
        model.result = read_result(spec)
        model.n_labels = int(spec["n_labels"])
        model.featurizer = TextFeaturizer.load(d)
        model.shortlist = model._new_shortlist().load_arrays(d)
        model.table = WeightTable(np.load(d / "weights_indptr.npy"), np.load(d / "weights_labels.npy"))
        model.scorer = PairScorer(model.table.size, model.n_labels, NeighbourShortlist.N_FEATURES)
        model.scorer.load_state_dict(torch.load(d / "weights.pt", weights_only=True))
        model.scorer.eval()
        return model


def _append_mixed(mix: FeatureMix, X, Y: sp.csr_matrix, Z, example_weights: np.ndarray | None,
                  extra: ExtraPoints | None):
    """Inputs, targets, weights and extra-point marks with ``mix``'s points appended (as original
    points: like LabelMix's, they stand for training points, not label points)."""
    Xm, Ym = mix(X, Y, Z)
    X_all = sp.vstack([X, Xm], format="csr") if sp.issparse(X) else np.concatenate([X, Xm])
    if example_weights is not None:
        example_weights = np.concatenate([example_weights, np.ones(Ym.shape[0], dtype=np.float32)])
    if extra is not None:
        extra = extra.extended(Ym.shape[0])
    return X_all, sp.vstack([Y, Ym], format="csr", dtype=np.float32), example_weights, extra


class _PairObjective:
    """Soft-target BCE over every candidate pair of a batch of points."""

    def __init__(self, model: SparseLinearXMC, X: sp.csr_matrix, indptr: np.ndarray, labels: np.ndarray,
                 pair_feats: np.ndarray, targets: np.ndarray, example_weights: np.ndarray | None, valid: tuple | None):
        assert model.scorer is not None
        self.model, self.X, self.indptr, self.labels = model, X, indptr, labels
        self.pair_feats, self.targets, self.valid = pair_feats, targets, valid
        self.weights = None if example_weights is None else np.asarray(example_weights, dtype=np.float32)
        self.module = model.scorer
        self.n_examples = X.shape[0]
        cfg = model.config.train
        self.optimizers = {
            "sparse": torch.optim.SparseAdam([model.scorer.weights.weight, model.scorer.bias.weight], lr=cfg.lr),
            "dense": torch.optim.Adam(model.scorer.pair.parameters(), lr=cfg.dense_lr)}

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        lengths = self.indptr[idx + 1] - self.indptr[idx]
        pairs = np.repeat(self.indptr[idx] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
        rows = np.repeat(idx, lengths)
        logits = self.model._score(self.X, rows, self.labels[pairs], self.pair_feats[pairs])
        w = None if self.weights is None else torch.from_numpy(self.weights[rows])
        return F.binary_cross_entropy_with_logits(logits, torch.from_numpy(self.targets[pairs]), weight=w)

    def start_epoch(self, epoch: int) -> None:
        pass

    def validate(self) -> dict[str, float] | None:
        if self.valid is None:
            return None
        Xv, Yv, pairs = self.valid[0], self.valid[1], self.valid[-1]
        pred = self.model._predict_features(Xv, 10, pairs)
        metrics = validation_metrics(pred, self.valid[:-1])
        metrics["shortlist_recall"] = shortlist_recall(NeighbourShortlist.candidate_matrix(pairs, pred.shape[1]), Yv)
        return metrics
