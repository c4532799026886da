"""The linear tree's scores blended with the neighbours' vote, the blend weight chosen on validation.

A query's score for label l is ``tree(l) + w * vote(l)``: ``tree`` is :class:`~.linear.XRLinear`'s
score and ``vote`` the share of the query's TF-IDF neighbours (weighted as :class:`~.knn.TfidfKNN`
weighs them) that carry l, in [0, 1]. Both parts train on the same points; each ranks its top
``candidates`` labels and the blend ranks their union. ``w`` is chosen on the validation split
among :attr:`BlendConfig.weights` (0 among them, so on that split the blend is never below the
tree alone in P@1); without a validation split, the configured ``knn_weight``, else the weight
chosen by leaving each dev dataset out (:data:`UNVALIDATED_WEIGHT`). A model
retrained on every point after validation keeps the weight chosen (:func:`refit_config`).

Why: the tree generalises over words, the neighbours remember near copies of the training texts
(small dictionaries, families of near-identical package descriptions); which helps more differs
by corpus, so the corpus's own validation decides (docs/decisions.md, "Blending").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..engine.records import ExtraPoints, TrainResult, Validation, validation_metrics
from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file
from ..settings import check_ranges
from ..sparse_ops import top_k_per_row
from .base import LabelledModel, unpack_training_set
from .knn import KNNConfig, TfidfKNN
from .linear import LinearConfig, XRLinear
from .spec import write_spec


@dataclass
class BlendConfig:
    """Settings of :class:`LinearKnnBlend`: its two parts' and the blend's own."""

    MODEL: ClassVar[str] = "linear-knn"
    linear: LinearConfig = field(default_factory=LinearConfig)
    knn: KNNConfig = field(default_factory=KNNConfig)
    weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)  # tried on validation, in order
    knn_weight: float | None = None  # fixed; None: chosen on validation (else UNVALIDATED_WEIGHT)
    candidates: int = 100  # labels each part ranks for the blend
    seed: int = 0

    def __post_init__(self) -> None:
        check_ranges(self, positive=("candidates",))
        if not self.weights or any(not isinstance(w, (int, float)) or not 0 <= w < float("inf") for w in self.weights):
            raise ConfigError(f"weights must be a non-empty list of finite numbers >= 0, got {self.weights!r}")
        if self.knn_weight is not None and not 0 <= self.knn_weight < float("inf"):
            raise ConfigError(f"knn_weight must be a finite number >= 0 or null, got {self.knn_weight!r}")

    @classmethod
    def from_dict(cls, d: dict) -> BlendConfig:
        return cls(
            **{
                **d,
                "linear": LinearConfig.from_dict(d.get("linear", {})),
                "knn": KNNConfig(**d.get("knn", {})),
                "weights": tuple(d.get("weights", cls.weights)),
            }
        )


# knn_weight None and no validation split: the weight that wins leaving each dev dataset out
# (benchmarks/blend_weights.py; docs/decisions.md, "Blending"), with label points and without
UNVALIDATED_WEIGHT = {True: 0.35, False: 0.1}


def config_for(name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None) -> BlendConfig:
    """The default settings (the registry's hook): the linear and knn models' defaults."""
    from .linear import config_for as linear_config

    seed = 0 if seed is None else seed
    return BlendConfig(linear=linear_config("linear", seed=seed, threads=threads), knn=replace(KNNConfig(), seed=seed), seed=seed)


def refit_config(config: BlendConfig, result: TrainResult) -> BlendConfig:
    """``config`` with the blend weight its validation run chose fixed (for the final model on every point)."""
    chosen = result.history[result.best_epoch].get("knn_weight") if result.history else None
    return config if chosen is None else replace(config, knn_weight=float(chosen))


class LinearKnnBlend(LabelledModel):
    """Fit both parts on one training set; predict their blended top-k."""

    kind = "linear-knn"

    def __init__(self, config: BlendConfig | None = None):
        self.config = config or BlendConfig()
        self.tree = XRLinear(replace(self.config.linear, seed=self.config.seed))
        self.knn = TfidfKNN(replace(self.config.knn, seed=self.config.seed))
        self.knn_weight = self.config.knn_weight if self.config.knn_weight is not None else UNVALIDATED_WEIGHT[False]
        self.result: TrainResult | None = None

    @property
    def featurizer(self):  # the tree's vocabulary decides what a query knows (known_queries)
        return self.tree.featurizer

    def fit(
        self,
        texts,
        Y: sp.spmatrix | None = None,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        example_weights: np.ndarray | None = None,
        checkpoint_dir=None,
        resume: bool = False,
        progress: bool = True,
        mixer=None,
        extra: ExtraPoints | None = None,
    ) -> LinearKnnBlend:
        """Train the tree and index the neighbours on the same points (arguments as
        :meth:`.linear.XRLinear.fit`); with ``valid`` and no fixed ``knn_weight``, choose the weight
        of highest validation P@1 (the earlier, smaller weight on a tie)."""
        texts, Y, label_texts, mixer, extra = unpack_training_set(texts, Y, label_texts, mixer, extra)
        started = time.perf_counter()
        self.set_labels(label_texts, self.label_uids if self.label_uids and len(self.label_uids) == len(label_texts) else None)
        self.tree.fit(
            texts,
            Y,
            label_texts,
            example_weights=example_weights,
            checkpoint_dir=checkpoint_dir,
            progress=progress,
            mixer=mixer,
            extra=extra,
        )
        self.knn.fit(texts, Y, label_texts, mixer=mixer)
        if self.config.knn_weight is None:  # the neighbours' vote is worth more where label points carry label texts
            self.knn_weight = UNVALIDATED_WEIGHT[extra is not None and bool(np.any(extra.mask))]
        record: dict = {"epoch": 0}
        if valid is not None:
            inputs = list(valid.inputs)
            tree, vote = self.parts(inputs)
            tried = {}
            weights = self.config.weights if self.config.knn_weight is None else (self.config.knn_weight,)
            for w in weights:
                tried[w] = validation_metrics(self.combine(tree, vote, w, 10), valid)
            best = max(weights, key=lambda w: (tried[w]["P@1"], -weights.index(w)))
            self.knn_weight = float(best)
            record.update(tried[best])
            record["knn_weight"] = self.knn_weight
            record["weights_tried"] = {str(w): m["P@1"] for w, m in tried.items()}
        else:
            record["knn_weight"] = self.knn_weight
        seconds = time.perf_counter() - started
        record["seconds"] = seconds
        self.result = TrainResult(
            best_epoch=0,
            best_score=record.get("P@1", 0.0),
            history=[record],
            seconds=seconds,
            examples_per_second=len(texts) / max(seconds, 1e-9),
        )
        if progress:
            print(
                f"blend: knn weight {self.knn_weight:g}"
                + (f" (validation P@1 by weight: {record['weights_tried']})" if "weights_tried" in record else ""),
                flush=True,
            )
        return self

    def parts(self, texts: list[str], k: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """The tree's top candidates and the neighbours' votes (a share in [0, 1]) for ``texts``:
        ``candidates`` labels of each, or ``k`` where more are asked for."""
        k = min(max(self.config.candidates, k), self.n_labels)
        return sp.csr_matrix(self.tree.predict(texts, k=k)), self.knn.vote(texts, k=k)

    def combine(self, tree: sp.csr_matrix, vote: sp.csr_matrix, weight: float, k: int) -> sp.csr_matrix:
        """The top ``k`` of ``tree + weight * vote`` (the parts of :meth:`parts`) a row."""
        return top_k_per_row(tree + weight * vote if weight else tree, min(k, self.n_labels))

    @property
    def n_labels(self) -> int:
        return len(self.label_uids) if self.label_uids is not None else self.tree.n_labels

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        """Top-``k`` blended label scores for each text (``len(texts) x L`` CSR)."""
        if self.result is None and self.tree.weights is None:
            raise RuntimeError("fit or load the model first")
        tree, vote = self.parts(list(texts), k)
        return self.combine(tree, vote, self.knn_weight, k)

    def save(self, directory: str | Path) -> None:
        """The two parts in ``linear/`` and ``knn/``, the labels and ``model.json`` (the weight used)."""
        if self.result is None:
            raise RuntimeError("fit the model before saving it")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.tree.save(d / "linear")
        self.knn.save(d / "knn")
        self.save_labels(d)
        write_spec(d, self.kind, self.config, self.result, knn_weight=self.knn_weight, n_labels=self.n_labels)

    @classmethod
    def load(cls, directory: str | Path) -> LinearKnnBlend:
        d = Path(directory)
        spec = read_json_file(d / "model.json")
        weight = spec.get("knn_weight") if isinstance(spec, dict) else None
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0 <= weight < float("inf"):
            raise DataFormatError(d / "model.json", None, "a linear-knn model needs a finite 'knn_weight' >= 0")
        model = cls(BlendConfig.from_dict(spec["model"]))
        model.tree, model.knn = XRLinear.load(d / "linear"), TfidfKNN.load(d / "knn")
        model.knn_weight = float(weight)
        model.result = TrainResult(**spec["result"]) if spec.get("result") else None
        model.load_labels(d, int(spec["n_labels"]))
        return model

    def page_in(self) -> int:
        return self.tree.page_in()

    def hold_in_memory(self) -> int:
        return self.tree.hold_in_memory()

    def mapped_files(self) -> list[str]:
        return self.tree.mapped_files()
