"""The augmentation settings (:class:`AugmentConfig`, presets) and building a training set from its row
of :data:`.catalog.AUGMENTATIONS`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..data.dataset import XMCDataset
from ..errors import ConfigError
from ..graph import GraphConfig, RandomWalkConfig
from .catalog import AUGMENTATIONS, TRAINING_SETS, TrainingSet, extra_points, graph_for
from .conventional import FeatureMix, SynonymReplacement
from .gandalf import LABEL_UID_PREFIX, combine, gandalf_points, select_labels, uniform_sample
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
        if self.training_set not in AUGMENTATIONS or self.training_set == "gandalf-tempered":
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


_FLAT_WALK_KEYS = {
    "seed": "seed",
    "walk_length": "walk_length",
    "restart_prob": "restart_prob",
    "walk_neighbours": "neighbours",
    "head_threshold": "head_threshold",
}


def preset(name: str, seed: int = 0, **changes) -> AugmentConfig:
    """The AugmentConfig that ``--augment name`` means: ``gandalf-tempered`` is Gandalf with
    :data:`TEMPERED_GRAPH` at half loss weight; any other name is that training set with the
    paper's graph. ``changes`` override fields (``graph`` a GraphConfig)."""
    if name == "gandalf-tempered":
        base = AugmentConfig("gandalf", TEMPERED_GRAPH, extra_weight=0.5, seed=seed)
    else:
        base = AugmentConfig(name, seed=seed)
    return replace(base, **changes)


def build_training_set(dataset: XMCDataset, config: AugmentConfig) -> TrainingSet:
    """The training set named by ``config.training_set`` (its row of :data:`AUGMENTATIONS`), with
    its label-point mask and transform."""
    config.validate()
    built = AUGMENTATIONS[config.training_set].build(dataset, config)
    return replace(
        built, extra_weight=config.extra_weight, extra_share=config.extra_share, extra_negatives=config.extra_negatives
    )


def training_set(dataset: XMCDataset, config: AugmentConfig) -> TrainingSet:
    """The training set named by ``config.training_set`` (original points first), with how its
    label points count: what ``gandalf train`` trains on, for any model's ``fit``."""
    return build_training_set(dataset, config)


__all__ = [
    "AugmentConfig",
    "TEMPERED_GRAPH",
    "preset",
    "AUGMENTATIONS",
    "TRAINING_SETS",
    "LABEL_UID_PREFIX",
    "FeatureMix",
    "LabelMix",
    "SynonymReplacement",
    "combine",
    "extra_points",
    "gandalf_points",
    "graph_for",
    "select_labels",
    "tail_weights",
    "training_set",
    "uniform_sample",
    "TrainingSet",
    "build_training_set",
]
