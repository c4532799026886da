"""XR-Linear: a tree of sparse one-vs-rest linear classifiers over a balanced label tree, searched
by beam (the model of PECOS's ``xmc.xlinear``, written here to learn soft targets).

* Features: word uni/bi-gram TF-IDF rows plus a bias feature.
* Label tree: balanced spherical bisection of PIFA + label-text vectors (:mod:`..engine.label_tree`).
* Classifiers: at every level, one squared-hinge classifier a node, trained on the instances
  active at its parent: those with a target of at least ``solver.min_parent_target`` below the
  parent (teacher-forced negatives, PECOS's ``tfn``), and the node's own positives. A soft target
  ``t`` is a positive of weight ``t`` (positives at twice the cost) and a negative of weight
  ``1 - t``; an instance's loss weight (a label point's ``--label-point-weight``) multiplies both,
  and its factor on the positives' cost (``--label-point-positive-cost``) the positive alone.
* Prediction: beam search, a path scored by the product of its levels' ``l3-hinge`` scores.

Training and prediction use numpy, scipy and numba (the word TF-IDF is written out); no torch.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numba
import numpy as np
import scipy.sparse as sp

from ..engine.beam_search import TreeWeights
from ..engine.label_tree import LabelTree, build_tree, label_vectors
from ..engine.level_store import LaidOutLevel, open_level, page_in
from ..engine.linear_solver import SolverConfig, kernels_cached
from ..engine.records import TrainResult, Validation, validation_metrics
from ..engine.tree_levels import Scratch, remove_scratch, train_levels
from ..errors import ConfigError
from ..features import PrecomputedFeatures, TextFeaturizer, is_feature_matrix, load_featurizer
from ..settings import check_ranges
from ..sparse_ops import one_row
from .base import Inputs, LabelledModel, checked_positive_weights
from .linear_check import check_level_rows, level_rows, read_saved
from .spec import write_spec

PREDICT_BATCH = 8192  # queries featurised and searched at a time


@dataclass
class LinearConfig:
    """Settings of :class:`XRLinear` (defaults chosen on the dev suite's validation splits)."""

    MODEL: ClassVar[str] = "linear"
    branching: int = 16  # children of a tree node (a power of two)
    leaf_size: int = 200  # labels of a leaf cluster at most
    beam: int = 10  # nodes kept at each level of the search
    label_text_weight: float = 2.0  # weight of the label's text beside PIFA in its tree vector
    bias: float = 1.0  # value of the bias feature
    ngram_max: int = 2
    min_df: int = 2  # word n-grams in fewer texts (training and label texts together) are left out
    char_ngrams: tuple[int, int] | None = (3, 5)  # character n-grams beside the words (None: words alone)
    char_ngrams_max_texts: int | None = 200_000  # ... up to this many texts, training and label texts (None: any)
    solver: SolverConfig = field(default_factory=SolverConfig)
    tree_iterations: int = 8
    seed: int = 0
    threads: int | None = None  # None: numba's thread count

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("beam", "leaf_size", "ngram_max", "min_df"),
            non_negative=("label_text_weight", "bias", "tree_iterations"),
        )
        if not _whole(self.branching) or self.branching < 2 or self.branching & (self.branching - 1):
            raise ConfigError(f"branching must be a power of two (2, 4, 8, ...), got {self.branching!r}")
        limit = self.char_ngrams_max_texts
        if limit is not None and not (_whole(limit) and limit >= 0):
            raise ConfigError(f"char_ngrams_max_texts must be a whole number >= 0 or null, got {limit!r}")
        if self.threads is not None and not (_whole(self.threads) and self.threads >= 1):
            raise ConfigError(f"threads must be a whole number of at least 1 (or null: numba's count), got {self.threads!r}")
        if self.char_ngrams is not None and not (
            isinstance(self.char_ngrams, (tuple, list))
            and len(self.char_ngrams) == 2
            and all(_whole(n) and n >= 1 for n in self.char_ngrams)
            and self.char_ngrams[0] <= self.char_ngrams[1]
        ):
            raise ConfigError(
                f"char_ngrams must be null or [shortest, longest], 1 <= shortest <= longest, got {self.char_ngrams!r}"
            )

    @classmethod
    def from_dict(cls, d: dict) -> LinearConfig:
        return cls(**{**d, "solver": SolverConfig(**d.get("solver", {}))})


def used_char_ngrams(config: LinearConfig, n_texts: int) -> tuple[int, int] | None:
    """The character n-grams a model of ``n_texts`` texts (training and label texts) uses:
    ``config.char_ngrams`` up to ``config.char_ngrams_max_texts`` texts, none above, where their
    denser rows would cost more than they give (docs/decisions.md, "Character n-grams")."""
    limit = config.char_ngrams_max_texts
    if config.char_ngrams is None or (limit is not None and n_texts > limit):
        return None
    return int(config.char_ngrams[0]), int(config.char_ngrams[1])


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def config_for(name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None) -> LinearConfig:
    """The default settings (the registry's hook; the linear model has no epochs)."""
    changes: dict[str, Any] = {k: v for k, v in (("seed", seed), ("threads", threads)) if v is not None}
    return replace(LinearConfig(), **changes)


class XRLinear(LabelledModel):
    """Fit on texts and (soft) targets; predict the top-k labels of new texts (CSR of scores in (0, 1])."""

    kind = "linear"

    def __init__(self, config: LinearConfig | None = None):
        self.config = config or LinearConfig()
        self.featurizer: TextFeaturizer | PrecomputedFeatures | None = None
        self.tree: LabelTree | None = None
        self.weights: TreeWeights | None = None
        self.n_labels = 0
        self.result: TrainResult | None = None
        self._level_files: list[Path | None] = []  # where each level's arrays are files (None: in memory)
        self._scratch: Scratch | None = None  # training's directory for levels that outgrow memory

    def _with_bias(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """``[X, bias]``: the bias is the last feature, appended to every row (built directly: a
        scipy hstack costs more than a single query's search)."""
        X = sp.csr_matrix(X, dtype=np.float32)
        X.sort_indices()
        n, d = X.shape
        indptr = X.indptr.astype(np.int64) + np.arange(n + 1)
        last = indptr[1:] - 1
        keep = np.ones(X.nnz + n, dtype=bool)
        keep[last] = False
        indices = np.empty(X.nnz + n, dtype=np.int32)
        data = np.empty(X.nnz + n, dtype=np.float32)
        indices[keep], indices[last] = X.indices, d
        data[keep], data[last] = X.data, self.config.bias
        return sp.csr_matrix((data, indices, indptr), shape=(n, d + 1))

    def features(self, texts) -> sp.csr_matrix:
        """The classifiers' input: TF-IDF rows of ``texts`` (or, for a model trained on precomputed
        features, the feature rows given) with the bias feature."""
        if self.featurizer is None:
            raise RuntimeError("fit or load the model first")
        return self._with_bias(self.featurizer.transform(texts if is_feature_matrix(texts) else list(texts)))

    def fit(
        self,
        inputs,
        Y: sp.spmatrix,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        sample_weight: np.ndarray | None = None,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        progress: bool = True,
        feature_mix=None,
        label_features=None,
        positive_weight: np.ndarray | None = None,
    ) -> XRLinear:
        """Train on texts ``inputs`` with (soft) targets ``Y`` (``N x L``), the labels' texts and
        per-point loss weights ``sample_weight`` (1 when None) and per-point factors on the cost of
        a point's positive entries ``positive_weight`` (1 when None; on top of
        ``solver.positive_cost``); a training set with label points is handed over by
        ``workflow.fitting.fit_model``.

        ``inputs`` may instead be feature rows computed by the caller (a scipy sparse matrix or a
        2-D numpy array, ``N x D``), as PECOS's ``XLinearModel.train(X, Y)`` takes them; the model
        then predicts feature rows of the same ``D`` columns. ``label_texts`` are then optional (the
        labels' names in ranked answers), and ``label_features`` (``L x D``, optional) places each
        label in the tree beside PIFA, as a label's text does for a model of texts.

        ``valid`` (a :class:`~gandalf_xmc.engine.records.Validation` of texts) is scored once at the
        end (the training record's only epoch); ``feature_mix`` (MixUp, Label-MixUp) is drawn once
        on the TF-IDF rows and its points added. ``resume`` is accepted for the common signature:
        training takes seconds to minutes and restarts from the beginning. Levels too large for
        memory are written under ``checkpoint_dir`` (else the system's temporary directory) and
        removed with the model.
        """
        texts = inputs
        given_rows = is_feature_matrix(texts)
        if given_rows and feature_mix is not None:
            raise ConfigError("a feature mix acts on the features the model computes from texts, not on precomputed feature rows")
        if label_texts is None and not given_rows:
            raise ConfigError("fit needs the labels' texts (label_texts=dataset.label_texts)")
        if label_features is not None and not given_rows:
            raise ConfigError("label_features go with precomputed feature rows; a model of texts reads the label texts")
        from ..augment.conventional import append_mixed

        started = time.perf_counter()
        say = (
            (lambda m: print(f"[{time.perf_counter() - started:6.1f} s{_resident()}] {m}", flush=True))
            if progress
            else (lambda m: None)
        )
        if progress and not kernels_cached():
            say("compiling the solver's kernels (numba, once for this Python: about a minute) ...")
        Y = sp.csr_matrix(Y, dtype=np.float32)
        weights = _checked_weights(sample_weight, Y.shape[0])
        positives = checked_positive_weights(positive_weight, Y.shape[0])
        if not given_rows:
            texts = list(texts)
        X, Z = self._fit_features(texts, label_texts, label_features, Y.shape)
        if feature_mix is not None:
            X, Y, weights, _, positives = append_mixed(feature_mix, X, Y, Z, weights, None, positives)
        say(f"features: {X.shape[0]:,} points x {X.shape[1]:,} features, {self.n_labels:,} labels")
        self._fit_tree_and_levels(X, Y, Z, weights, positives, checkpoint_dir, say, progress)
        seconds = time.perf_counter() - started
        record = {
            "epoch": 0,
            "seconds": seconds,
            "examples": int(X.shape[0]),
            "examples_per_second": X.shape[0] / max(seconds, 1e-9),
            "weights": int(sum(W.nnz for W in self.weights.levels)),
        }
        if valid is not None:
            pred = self.predict(valid.inputs if is_feature_matrix(valid.inputs) else list(valid.inputs), k=10)
            record.update(validation_metrics(pred, valid))
        self.result = TrainResult(
            best_epoch=0,
            best_score=record.get("P@1", 0.0),
            history=[record],
            seconds=seconds,
            examples_per_second=record["examples_per_second"],
        )
        say(
            f"trained in {seconds:.1f} s ({record['weights']:,} weights)"
            + (f"; valid P@1 {record['P@1']:.2f}, PSP@5 {record['PSP@5']:.2f}" if "P@1" in record else "")
        )
        return self

    def _fit_features(self, texts, label_texts, label_features, y_shape: tuple[int, int]):
        """Sets the labels and fits the featurizer; returns the points' and the labels' feature rows
        (``Z`` None for precomputed rows without label features). Character n-grams are used up
        to ``char_ngrams_max_texts`` texts, and the saved settings say whether they were."""
        self.n_labels = y_shape[1]
        given_rows = is_feature_matrix(texts)
        if label_texts is None:  # feature rows without names: a label is its position
            label_texts = [str(j) for j in range(self.n_labels)]
        if len(label_texts) != self.n_labels:
            raise ConfigError(f"{len(label_texts):,} label texts for {self.n_labels:,} labels")
        self.set_labels(label_texts)
        cfg = self.config
        chars = None if given_rows else used_char_ngrams(cfg, len(texts) + len(label_texts))
        self.config = cfg = replace(cfg, char_ngrams=chars)
        if given_rows:
            return self._precomputed(texts, label_features, y_shape[0])
        self.featurizer = TextFeaturizer(cfg.ngram_max, min_df=cfg.min_df, char_ngrams=chars)
        XZ = self.featurizer.fit_transform(texts + list(label_texts))
        X, Z = XZ[: len(texts)], XZ[len(texts) :]
        del XZ  # copies were sliced off; at a million labels each of these matrices is gigabytes
        return X, Z

    def _fit_tree_and_levels(self, X, Y, Z, weights: np.ndarray, positives, checkpoint_dir, say, progress: bool) -> None:
        """The label tree (on PIFA and label-text vectors), then its classifiers level by level."""
        cfg = self.config
        vectors = label_vectors(X, Y, Z, cfg.label_text_weight, threads=cfg.threads)
        self.tree = build_tree(vectors, cfg.branching, cfg.leaf_size, cfg.seed, cfg.tree_iterations, cfg.threads)
        del vectors, Z
        say(f"label tree: {' -> '.join(str(b.size - 1) for b in self.tree.bounds)} nodes -> {self.n_labels:,} labels")
        Xb = self._with_bias(X)
        del X
        if self._scratch is not None:  # an earlier fit's levels
            self._scratch.remove()
        self._scratch = scratch = Scratch.new(checkpoint_dir)
        weakref.finalize(self, remove_scratch, scratch.path, scratch.made_parent)
        trained = train_levels(
            Xb,
            Y,
            weights,
            self.tree,
            cfg.solver,
            cfg.seed,
            cfg.threads or numba.get_num_threads(),
            scratch.path,
            say,
            progress,
            positive_weights=positives,
        )
        self._level_files = trained.files
        self.weights = TreeWeights(
            trained.levels,
            [self.tree.children(t) for t in range(len(self.tree.bounds))],
            chunk_dirs=self._level_files,
            sigmoid=cfg.solver.loss == "logistic",
        )

    def _precomputed(self, rows, label_features, n_targets: int) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """The caller's feature rows and label features, checked, with the part that reads such rows."""
        self.featurizer = PrecomputedFeatures(rows.shape[1])
        X = self.featurizer.transform(rows)
        if X.shape[0] != n_targets:
            raise ConfigError(f"{X.shape[0]:,} feature rows for {n_targets:,} rows of targets")
        Z = None if label_features is None else self.featurizer.transform(label_features)
        if Z is not None and Z.shape[0] != self.n_labels:
            raise ConfigError(f"{Z.shape[0]:,} rows of label features for {self.n_labels:,} labels")
        return X, Z

    def predict(self, texts: Inputs, k: int = 100, progress: bool = False, batch_size: int = PREDICT_BATCH) -> sp.csr_matrix:
        """Top-``k`` labels of each text, ``len(texts) x L`` CSR of path scores (best = largest)."""
        if self.weights is None or self.tree is None:
            raise RuntimeError("fit or load the model first")
        row = self.query_row(texts)
        if row is not None:
            return one_row(*self.labels_of_row(row, k), self.n_labels)
        blocks = []
        for start in range(0, texts.shape[0] if is_feature_matrix(texts) else len(texts), batch_size):
            blocks.append(self.predict_features(self.features(texts[start : start + batch_size]), k))
        if not blocks:
            return sp.csr_matrix((0, self.n_labels), dtype=np.float32)
        return blocks[0] if len(blocks) == 1 else sp.vstack(blocks, format="csr", dtype=np.float32)

    def predict_features(self, Qb: sp.csr_matrix, k: int) -> sp.csr_matrix:
        """:meth:`predict` of rows already featurised by :meth:`features` (bias included)."""
        P = self._search(Qb, k)
        P.sort_indices()
        return P

    def query_row(self, texts: Inputs) -> tuple[np.ndarray, np.ndarray] | None:
        """Where ``texts`` is one text and the model reads texts, its row of :meth:`features` (bias
        last) as feature ids (int32, ascending) and float32 values, without a matrix (a server's
        request); else None."""
        if is_feature_matrix(texts) or len(texts) != 1 or not isinstance(self.featurizer, TextFeaturizer):
            return None
        ids, values = self.featurizer.row(texts[0])
        return np.append(ids, np.int32(self.featurizer.n_features)), np.append(values, np.float32(self.config.bias))

    def labels_of_row(self, row: tuple[np.ndarray, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top-``k`` labels of a :meth:`query_row` and their path scores, in label order (the
        entries of its row of :meth:`predict`)."""
        assert self.weights is not None and self.tree is not None
        positions, scores = self.weights.search_one(*row, self.config.beam, k)
        ok = positions >= 0
        labels = self.tree.order[positions[ok]]
        order = np.argsort(labels, kind="stable")
        return labels[order], scores[ok][order]

    def scores_and_known(self, texts: Inputs, k: int) -> tuple[sp.csr_matrix, list[bool]]:
        """Each query featurised once for its scores and for whether the model knows a word of it."""
        row = self.query_row(texts) if self.weights is not None else None
        if row is not None:
            return one_row(*self.labels_of_row(row, k), self.n_labels), [row[0].size > 1]
        rows = self.one_batch_rows(texts)
        if rows is None:
            return super().scores_and_known(texts, k)
        return self.predict_features(rows, k), self.known_rows(rows)

    def one_batch_rows(self, texts: Inputs) -> sp.csr_matrix | None:
        """The texts' rows of :meth:`features` where a fitted model predicts them in one batch
        (else None: the caller goes the usual way, batch by batch)."""
        n = texts.shape[0] if is_feature_matrix(texts) else len(texts)
        return self.features(texts) if self.weights is not None and 0 < n <= PREDICT_BATCH else None

    @staticmethod
    def known_rows(rows: sp.csr_matrix) -> list[bool]:
        """For rows of :meth:`features`, whether each holds a feature of the query (every row holds the bias)."""
        return (np.diff(rows.indptr) > 1).tolist()

    def _search(self, Qb: sp.csr_matrix, k: int) -> sp.csr_matrix:
        positions, scores = self.weights.search(Qb, self.config.beam, k)
        ok = positions >= 0
        labels = self.tree.order[np.where(ok, positions, 0)]
        indptr = np.concatenate([[0], np.cumsum(ok.sum(axis=1))])
        return sp.csr_matrix((scores[ok], labels[ok], indptr), shape=(Qb.shape[0], self.n_labels), dtype=np.float32)

    def save(self, directory: str | Path) -> None:
        """Write settings, features, tree and weights (plain JSON, ``.npy`` and ``.npz``; no pickles)."""
        if self.weights is None or self.tree is None or self.featurizer is None:
            raise RuntimeError("fit the model before saving it")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.featurizer.save(d)
        self.save_labels(d)
        self.tree.save(d)
        sources = self._level_files if len(self._level_files) == len(self.weights.levels) else []
        self.weights.save(d, sources)
        write_spec(d, self.kind, self.config, self.result, n_labels=self.n_labels, n_levels=len(self.weights.levels))
        if self._scratch is not None:  # levels mapped from training's files are mapped from the saved ones instead
            spilled = [t for t, source in enumerate(sources) if source is not None]
            self.weights.map_saved(d, spilled, self.featurizer.n_features + 1)
            for t in spilled:
                self._level_files[t] = d / f"weights_level{t}"
            self._scratch.remove()
            self._scratch = None

    def page_in(self) -> int:
        """Read the weights the search maps from disk into the page cache (see
        :func:`.level_store.page_in`)."""
        if self.weights is None:
            raise RuntimeError("fit or load the model first")
        return page_in(self.weights.mapped_arrays())

    def hold_in_memory(self) -> int:
        """See :meth:`.beam_search.TreeWeights.hold_in_memory`."""
        if self.weights is None:
            raise RuntimeError("fit or load the model first")
        return self.weights.hold_in_memory()

    def mapped_files(self) -> list[str]:
        return [] if self.weights is None else self.weights.mapped_files()

    @classmethod
    def load(cls, directory: str | Path) -> XRLinear:
        d = Path(directory)
        spec, features, idf, order, bounds = read_saved(d)  # the checks the numpy-only reader runs too
        model = cls(LinearConfig.from_dict(spec["model"]))
        model.n_labels = int(spec["n_labels"])
        model.result = TrainResult(**spec["result"]) if spec.get("result") else None
        model.featurizer = load_featurizer(d, spec=features, idf=idf)
        model.tree = LabelTree(order, bounds)
        levels = [
            _read_weights(d, t, model.featurizer.n_features + 1, level_rows(t, model.n_labels, bounds))
            for t in range(int(spec["n_levels"]))
        ]
        for t, level in enumerate(levels):
            check_level_rows(d, t, level.shape[0], model.n_labels, bounds)
        model._level_files = [d / f"weights_level{t}" if (d / f"weights_level{t}").is_dir() else None for t in range(len(levels))]
        model.weights = TreeWeights(
            levels,
            [model.tree.children(t) for t in range(len(bounds))],
            chunk_dirs=model._level_files,
            sigmoid=model.config.solver.loss == "logistic",
        )
        model.load_labels(d, model.n_labels)
        return model


def _read_weights(d: Path, level: int, n_columns: int, n_rows: int) -> sp.csr_matrix | LaidOutLevel:
    """A saved level, mapped from its ``.npy`` files (models saved before them: one ``.npz``)."""
    if (d / f"weights_level{level}").is_dir():
        return open_level(d / f"weights_level{level}", n_columns, n_rows)
    return sp.load_npz(d / f"weights_level{level}.npz").tocsr()


def _checked_weights(sample_weight, n: int) -> np.ndarray:
    """``n`` instance weights as float64 (1 when None), each finite and >= 0."""
    weights = np.ones(n, dtype=np.float64) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if weights.shape != (n,) or not np.all(np.isfinite(weights) & (weights >= 0)):
        raise ConfigError(f"sample_weight must be {n:,} finite numbers >= 0, one a point")
    return weights


def _resident() -> str:
    """The process's resident memory now, for progress lines (Linux; empty elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return ""
    import os

    return f", {pages * os.sysconf('SC_PAGE_SIZE') / 1e9:4.1f} GB"
