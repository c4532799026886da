"""The records that training passes around, free of torch so that the linear model and the
command line can use them without importing it: settings of epoch training, which points are
augmentation points, and what training achieved."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError
from ..metrics import evaluate
from ..settings import check_ranges
from .devices import GPU_PRECISIONS, check_device_name

# what validation scores, so what training may select its best epoch by
VALIDATION_METRICS = ("P@1", "P@5", "PSP@1", "PSP@5")


LAST = "last.pt"  # the checkpoint a resumed run continues from


def has_checkpoint(directory: str | Path | None) -> bool:
    """Whether the epoch loop (:func:`.loop.run`) left a checkpoint to resume from in ``directory``."""
    return directory is not None and (Path(directory) / LAST).is_file()


def holds_checkpoints(directory: str | Path | None) -> bool:
    """Whether a model's training left any checkpoint under ``directory`` (a model trained in
    stages keeps one a stage, some in folders of their own): a stage that left none starts afresh
    when its run resumes."""
    return directory is not None and Path(directory).is_dir() and any(p.is_file() for p in Path(directory).rglob("*"))


@dataclass
class TrainConfig:
    """Settings of :func:`fit` (defaults are fixed a priori, never tuned on a test split)."""

    epochs: int = 20
    batch_size: int = 256
    lr: float = 0.01  # SparseAdam, sparse tables
    dense_lr: float = 0.002  # AdamW, dense layers
    weight_decay: float = 0.0
    train_clusters: int = 4  # top meta clusters per point whose labels are hard negatives
    predict_clusters: int = 128  # clusters searched per query when predicting (docs/decisions.md, "The neural models")
    meta_loss_weight: float = 1.0
    correction_l2: float = 0.0  # weight of the penalty on corrections to label-text-initialised classifiers
    patience: int = 3
    select_metric: str = "P@1"
    seed: int = 0
    device: str = "auto"  # auto (a CUDA GPU when torch sees one), cpu, cuda or cuda:N (engine/devices.py)
    gpu_precision: str = "bfloat16"  # on a GPU: bfloat16 autocast or float32 (the CPU runs float32)

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("epochs", "batch_size", "lr", "dense_lr", "train_clusters", "predict_clusters", "patience"),
            non_negative=("weight_decay", "meta_loss_weight", "correction_l2"),
        )
        if self.select_metric not in VALIDATION_METRICS:
            raise ConfigError(f"select_metric must be one of {', '.join(VALIDATION_METRICS)}, got {self.select_metric!r}")
        check_device_name(self.device)
        if self.gpu_precision not in GPU_PRECISIONS:
            raise ConfigError(f"gpu_precision must be one of {', '.join(GPU_PRECISIONS)}, got {self.gpu_precision!r}")


@dataclass
class LabelPoints:
    """Which training examples are label points (Gandalf's, or another augmentation's added points),
    for a model trained in epochs: the ``share`` of them drawn, afresh and seeded, into each epoch
    (the original points are all in every epoch), whether shortlist labels outside their targets
    count as ``negatives``, and whether their soft targets are ``floors``: an entry with target
    0 < t < 1 costs nothing once its probability reaches t. Their loss weight comes with the sample
    weights."""

    mask: np.ndarray
    share: float = 1.0
    negatives: bool = True  # False: a label point's loss covers its (soft) targets only
    floors: bool = False  # True: a soft target is a lower bound, not a value to meet

    def __post_init__(self) -> None:
        self.mask = np.asarray(self.mask, dtype=bool)
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"label-point share must be in (0, 1], got {self.share}")

    def epoch_order(self, rng: np.random.Generator) -> np.ndarray:
        """This epoch's examples in shuffled order: every original point and ``share`` of the label points."""
        if self.share >= 1.0:
            return rng.permutation(self.mask.size)
        points = np.flatnonzero(self.mask)
        drawn = rng.choice(points, size=int(round(self.share * points.size)), replace=False)
        return rng.permutation(np.concatenate([np.flatnonzero(~self.mask), drawn]))

    def extended(self, n_more: int) -> LabelPoints:
        """The same settings after ``n_more`` original points were appended (e.g. MixUp's)."""
        return LabelPoints(np.concatenate([self.mask, np.zeros(n_more, dtype=bool)]), self.share, self.negatives, self.floors)


@dataclass
class TrainResult:
    best_epoch: int
    best_score: float
    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    examples_per_second: float = 0.0
    device: str = "cpu"  # where it trained (engine.devices.describe)
    encoder_history: list[dict] = field(default_factory=list)  # a fine-tuned encoder's epochs (ngame), before history's

    def best_record(self) -> dict:
        """The best epoch's history record (what validation chose and scored), or {} without history."""
        return self.history[self.best_epoch] if self.history else {}


@dataclass(frozen=True)
class Validation:
    """The points a model is selected on: ``inputs`` (texts, or their features once a model has
    featurised them), their targets ``Y``, the labels' inverse propensities and the (row, label)
    pairs removed before scoring."""

    inputs: Any
    Y: sp.csr_matrix
    inv_propensity: np.ndarray
    filter_pairs: np.ndarray | None = None

    def with_inputs(self, inputs) -> Validation:
        return replace(self, inputs=inputs)


def validation_metrics(predictions: sp.csr_matrix, valid: Validation) -> dict[str, float]:
    """P@1/5 and PSP@1/5 of ``predictions`` on ``valid``."""
    scores = evaluate(predictions, valid.Y, valid.inv_propensity, ks=(1, 3, 5), filter_pairs=valid.filter_pairs)
    return {m: scores[m] for m in VALIDATION_METRICS}
