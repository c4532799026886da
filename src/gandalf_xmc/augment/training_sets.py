"""Augmentations: Gandalf's extra points (with subsampling) and LabelMix."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..data.dataset import Split, XMCDataset
from ..errors import ConfigError
from ..graph import GraphConfig, RandomWalkConfig, label_graph
from .catalog import TRAINING_SETS
from .conventional import FeatureMix, SynonymReplacement, word_synonyms
from .gandalf import LABEL_UID_PREFIX, combine, gandalf_points, select_labels, uniform_indices, uniform_sample
from .labelmix import LabelMix, tail_weights

# Label-point targets that do not hand a rare label's co-labels hard 1.0 targets: shrinkage alpha = 1,
# a point with n labels counts 1/n, at most 10 co-labels, co-labels at half the label's own target
TEMPERED_GRAPH = GraphConfig(delta=0.1, shrinkage=1.0, point_weights="inverse-size", top_k=10, co_label_scale=0.5)


@dataclass
class AugmentConfig:
    """Which training set to build and how (see ``TRAINING_SETS``).

    ``extra_weight``, ``extra_share`` and ``extra_negatives`` act while training: the loss weight
    of an extra (label) point, the original points weighing 1; the share of the extra points drawn
    into each epoch; and whether an extra point's shortlist labels outside its targets count as
    negatives (neural models; off, it contributes its soft targets only).
    """

    training_set: str = "gandalf"
    graph: GraphConfig = field(default_factory=GraphConfig)
    labels_fraction: float = 1.0
    labels_sampling: str = "random"
    extra_weight: float = 1.0
    extra_share: float = 1.0
    extra_negatives: bool = True
    seed: int = 0

    def validate(self) -> None:
        if self.training_set not in TRAINING_SETS or self.training_set == "gandalf-tempered":
            raise ConfigError(f"unknown training set {self.training_set!r}; choose one of {', '.join(TRAINING_SETS)}")
        if not 0 <= self.extra_weight < float("inf"):
            raise ConfigError(f"extra-point weight must be a finite number >= 0, got {self.extra_weight}")
        if not 0.0 < self.extra_share <= 1.0:
            raise ConfigError(f"extra-point share must be in (0, 1], got {self.extra_share}")
        graph_for(self).validate()

    @classmethod
    def from_dict(cls, d: dict) -> AugmentConfig:
        """Inverse of ``dataclasses.asdict`` (e.g. a ``training.json``'s ``augment``)."""
        graph = dict(d.get("graph", {}))
        walk = dict(graph.pop("walk", {}))
        for old, new in _FLAT_WALK_KEYS.items():  # files written before the walk had its own section
            if old in graph:
                walk[new] = graph.pop(old)
        return cls(**{**d, "graph": GraphConfig(**graph, walk=RandomWalkConfig(**walk))})


_FLAT_WALK_KEYS = {"seed": "seed", "walk_length": "walk_length", "restart_prob": "restart_prob",
                   "walk_neighbours": "neighbours", "head_threshold": "head_threshold"}


def preset(name: str, seed: int = 0, **changes) -> AugmentConfig:
    """The AugmentConfig that ``--augment name`` means: ``gandalf-tempered`` is Gandalf with
    :data:`TEMPERED_GRAPH` at half loss weight; any other name is that training set with the
    paper's graph. ``changes`` override fields (``graph`` a GraphConfig)."""
    if name == "gandalf-tempered":
        base = AugmentConfig("gandalf", TEMPERED_GRAPH, extra_weight=0.5, seed=seed)
    else:
        base = AugmentConfig(name, seed=seed)
    return replace(base, **changes)


def graph_for(config: AugmentConfig) -> GraphConfig:
    """The graph a training set needs (identity/glas/random-walk override the graph kind); its
    random walks take the augmentation's seed, so one seed decides everything random."""
    kind = {"identity": "identity", "glas": "glas", "random-walk": "random-walk"}.get(config.training_set, config.graph.kind)
    return replace(config.graph, kind=kind, walk=replace(config.graph.walk, seed=config.seed))


def extra_points(dataset: XMCDataset, config: AugmentConfig, client=None) -> tuple[Split, np.ndarray]:
    """Gandalf's extra points for ``config`` and the label ids they come from (the label graph on
    ``client``'s Dask cluster when one is given)."""
    graph = label_graph(dataset.original_train_Y(), graph_for(config), client=client)
    labels = None
    if config.labels_fraction < 1.0:
        labels = select_labels(dataset.label_frequencies(), config.labels_fraction, config.labels_sampling, config.seed)
    points = gandalf_points(dataset, graph, labels)
    ids = np.arange(dataset.n_labels) if labels is None else labels
    return points, ids


@dataclass(frozen=True)
class TrainingSet:
    """A built training set: its points (original points first), which of them are label points
    (``extra``, a boolean mask), and the transform applied while training (or None)."""

    split: Split
    extra: np.ndarray
    transform: LabelMix | SynonymReplacement | FeatureMix | None = None


def build_training_set(dataset: XMCDataset, config: AugmentConfig) -> TrainingSet:
    """The training set named by ``config.training_set``, with its label-point mask and transform."""
    config.validate()
    name = config.training_set
    if name == "auto":
        raise ConfigError("'auto' is a search over training sets: train with gandalf_xmc.workflow.pipeline.train_model")
    n = dataset.n_original_train or len(dataset.train)
    if name == "none":  # a directory written by `gandalf augment` holds its label points after the originals
        return TrainingSet(dataset.train, np.arange(len(dataset.train)) >= n)
    original = Split(dataset.train.uids[:n], dataset.train.texts[:n], dataset.original_train_Y(),
                     dataset.train.filter_pairs)
    if name in BATCH_TRANSFORMS:  # these act while training
        return TrainingSet(original, np.zeros(n, dtype=bool), mixer_for(dataset, config))
    extra, _ = extra_points(dataset, config)
    if name == "z-only":
        return TrainingSet(extra, np.ones(len(extra), dtype=bool))
    combined = combine(original, extra)
    mask = np.arange(len(combined)) >= n
    if name == "uniform":
        idx = uniform_indices(len(combined), n, config.seed)
        return TrainingSet(uniform_sample(combined, n, config.seed), mask[idx])
    return TrainingSet(combined, mask)


def training_set(dataset: XMCDataset, config: AugmentConfig) -> Split:
    """The training split named by ``config.training_set`` (original points first)."""
    return build_training_set(dataset, config).split


BATCH_TRANSFORMS = ("labelmix", "synonym", "mixup", "label-mixup")


def mixer_for(dataset: XMCDataset, config: AugmentConfig, prob: float = 0.4
              ) -> LabelMix | SynonymReplacement | FeatureMix | None:
    """The transform a training set applies while training (else None).

    ``labelmix``: :class:`LabelMix` with co-occurrence soft targets thresholded at
    ``config.graph.delta`` and label choice weighted by ``freq^-0.5``; ``synonym``:
    :class:`SynonymReplacement` with synonyms from the training and label texts; ``mixup`` /
    ``label-mixup``: :class:`FeatureMix` (label choice weighted by ``freq^-0.5``). Each is seeded
    with ``config.seed``.
    """
    name = config.training_set
    if name == "synonym":
        n = dataset.n_original_train or len(dataset.train)
        return SynonymReplacement(word_synonyms(dataset.train.texts[:n] + list(dataset.label_texts)), prob=prob,
                                  seed=config.seed)
    if name in ("mixup", "label-mixup"):
        return FeatureMix(name, share=prob, label_weights=tail_weights(dataset.label_frequencies()), seed=config.seed)
    if name != "labelmix":
        return None
    graph = label_graph(dataset.original_train_Y(), replace(config.graph, kind="cooccurrence"))
    return LabelMix(graph, dataset.label_texts, tail_weights(dataset.label_frequencies()), prob=prob,
                    threshold=config.graph.delta, seed=config.seed)


def extra_mask(split: Split) -> np.ndarray:
    """Which points of ``split`` are Gandalf's label points (their uids carry ``LABEL_UID_PREFIX``)."""
    return np.fromiter((u.startswith(LABEL_UID_PREFIX) for u in split.uids), dtype=bool, count=len(split))


__all__ = ["AugmentConfig", "TEMPERED_GRAPH", "preset",
           "BATCH_TRANSFORMS", "TRAINING_SETS", "LABEL_UID_PREFIX", "FeatureMix", "LabelMix",
           "SynonymReplacement", "combine", "extra_mask", "extra_points", "gandalf_points", "graph_for", "mixer_for",
           "select_labels", "tail_weights", "training_set", "uniform_sample", "TrainingSet", "build_training_set"]
