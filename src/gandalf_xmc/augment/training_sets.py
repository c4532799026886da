"""The augmentation settings (:class:`AugmentConfig`, presets) and building a training set from its row
of :data:`.catalog.AUGMENTATIONS`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..data.dataset import XMCDataset
from ..errors import ConfigError
from ..graph import GraphConfig, RandomWalkConfig
from .catalog import AUGMENTATIONS, TrainingSet, graph_for, label_points, tempered_graph
from .conventional import FeatureMix, SynonymReplacement
from .gandalf import LABEL_UID_PREFIX, combine, gandalf_points, select_labels, uniform_sample
from .labelmix import LabelMix, tail_weights

TEMPERED_GRAPH = tempered_graph()  # the gandalf-tempered preset's graph


@dataclass
class AugmentConfig:
    """Which augmentation builds the training set, and how (``augmentation``: a row of
    :data:`.catalog.AUGMENTATIONS`).

    ``label_point_weight``, ``label_point_share``, ``label_point_negatives``,
    ``label_point_floors`` and ``label_point_positive_cost`` act while training: the loss weight of
    a label point, the original points weighing 1; the share of the label points drawn into each
    epoch; whether a label point's shortlist labels outside its targets count as negatives (models
    trained in epochs; off, it contributes its soft targets only); whether its soft targets are
    floors, an entry with target 0 < t < 1 costing nothing once its probability reaches t (models
    trained in epochs; off, t is a value to meet, from above too); and a factor on the cost of a
    label point's positive entries (the linear models), so that its soft targets can outweigh each
    entry's negative part ``1 - t``.
    """

    augmentation: str = "gandalf"
    graph: GraphConfig = field(default_factory=GraphConfig)
    labels_fraction: float = 1.0
    labels_sampling: str = "random"
    label_point_weight: float = 1.0
    label_point_share: float = 1.0
    label_point_negatives: bool = True
    label_point_floors: bool = False
    label_point_positive_cost: float = 1.0
    seed: int = 0

    def validate(self) -> None:
        row = AUGMENTATIONS.get(self.augmentation)
        if row is None:
            raise ConfigError(f"unknown augmentation {self.augmentation!r}; choose one of {', '.join(AUGMENTATIONS)}")
        if row.preset_of is not None:
            raise ConfigError(f"{row.name!r} is a preset of {row.preset_of!r}: build its settings with augment.preset")
        if self.augmentation == "auto" and (given := _set_beside_auto(self)):
            raise ConfigError(
                f"{', '.join(given)}: 'auto' trains its own candidates' recipes (workflow/auto.py); "
                "name an augmentation to set them"
            )
        if not 0 <= self.label_point_weight < float("inf"):
            raise ConfigError(f"label-point weight must be a finite number >= 0, got {self.label_point_weight}")
        if not 0 < self.label_point_positive_cost < float("inf"):
            raise ConfigError(f"label-point positive cost must be a finite number > 0, got {self.label_point_positive_cost}")
        if not 0.0 < self.label_point_share <= 1.0:
            raise ConfigError(f"label-point share must be in (0, 1], got {self.label_point_share}")
        graph_for(self).validate()

    @classmethod
    def from_dict(cls, d: dict) -> AugmentConfig:
        """Inverse of ``dataclasses.asdict`` (e.g. a ``training.json``'s ``augment``)."""
        d = {_RENAMED.get(k, k): v for k, v in d.items()}  # files written before label points had their name
        graph = dict(d.get("graph", {}))
        walk = dict(graph.pop("walk", {}))
        for old, new in _FLAT_WALK_KEYS.items():  # files written before the walk had its own section
            if old in graph:
                walk[new] = graph.pop(old)
        return cls(**{**d, "graph": GraphConfig(**graph, walk=RandomWalkConfig(**walk))})


def _set_beside_auto(config: AugmentConfig) -> list[str]:
    """The fields of ``config`` set away from their defaults, other than its name and seed: what
    ``auto`` would ignore, since each of its candidates is a whole recipe."""
    default = AugmentConfig("auto", seed=config.seed)
    return [f.name for f in fields(config) if getattr(config, f.name) != getattr(default, f.name)]


_RENAMED = {  # names in files written before the vocabulary was one (issue 39)
    "training_set": "augmentation",
    "extra_weight": "label_point_weight",
    "extra_share": "label_point_share",
    "extra_negatives": "label_point_negatives",
}
_FLAT_WALK_KEYS = {
    "seed": "seed",
    "walk_length": "walk_length",
    "restart_prob": "restart_prob",
    "walk_neighbours": "neighbours",
    "head_threshold": "head_threshold",
}


def preset(name: str, seed: int = 0, **changes) -> AugmentConfig:
    """The AugmentConfig that ``--augment name`` means: a preset row of :data:`AUGMENTATIONS` (such
    as ``gandalf-tempered``) is the training set it builds with the row's settings; any other name
    is that training set with the paper's graph. ``changes`` override fields (``graph`` a GraphConfig)."""
    row = AUGMENTATIONS.get(name)
    if row is not None and row.preset_of is not None:
        base = AugmentConfig(row.preset_of, seed=seed, **(row.preset_settings() if row.preset_settings else {}))
    else:
        base = AugmentConfig(name, seed=seed)
    return replace(base, **changes)


def build_training_set(dataset: XMCDataset, config: AugmentConfig) -> TrainingSet:
    """The training set named by ``config.augmentation`` (its row of :data:`AUGMENTATIONS`), with
    its label-point mask and transform."""
    config.validate()
    built = AUGMENTATIONS[config.augmentation].build(dataset, config)
    return replace(
        built,
        label_point_weight=config.label_point_weight,
        label_point_share=config.label_point_share,
        label_point_negatives=config.label_point_negatives,
        label_point_floors=config.label_point_floors,
        label_point_positive_cost=config.label_point_positive_cost,
    )


def training_set(dataset: XMCDataset, config: AugmentConfig) -> TrainingSet:
    """The training set named by ``config.augmentation`` (original points first), with how its
    label points count: what ``gandalf train`` trains on, for any model's ``fit``."""
    return build_training_set(dataset, config)


__all__ = [
    "AugmentConfig",
    "TEMPERED_GRAPH",
    "preset",
    "AUGMENTATIONS",
    "LABEL_UID_PREFIX",
    "FeatureMix",
    "LabelMix",
    "SynonymReplacement",
    "combine",
    "label_points",
    "gandalf_points",
    "graph_for",
    "select_labels",
    "tail_weights",
    "training_set",
    "uniform_sample",
    "TrainingSet",
    "build_training_set",
]
