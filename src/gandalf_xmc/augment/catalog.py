"""Every training set (``--augment``) as one row of :data:`AUGMENTATIONS`: its name, what it is,
the graph it needs and how to build it. Adding an augmentation is one builder and one row here.

The heavy modules (graph kernels, numba) are imported inside the builders, so that the command line
can list the training sets at start-up without loading them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:  # annotations only: importing these here would load numba at start-up
    from ..data.dataset import Split, XMCDataset
    from ..graph import GraphConfig
    from .transforms import BatchTransform

# Share of a batch (or of the training set, for the feature mixes) that a batch transform changes
TRANSFORM_PROBABILITY = 0.4
# gandalf-tempered-firm's factor on a label point's positives' cost (docs/decisions.md, "Firm label
# points"): its tempered co-label targets (about 0.1) then outweigh each entry's negative part
FIRM_POSITIVE_COST = 8.0


@dataclass(frozen=True)
class TrainingSet:
    """A built training set, all that a model trains on: its points (original points first), which
    of them are label points (``is_label_point``) and how they count (their loss weight, the share
    drawn into each epoch, whether shortlist labels outside their targets are negatives, whether
    their soft targets are floors, a factor on the cost of their positive entries), and the batch
    transform applied while training (or None). The workflow hands it to a model as inputs, targets
    and sample weights, plus what the model's row of the model table declares it takes
    (``workflow.fitting.fit_model``)."""

    split: Split
    is_label_point: np.ndarray
    batch_transform: BatchTransform | None = None
    label_point_weight: float = 1.0
    label_point_share: float = 1.0
    label_point_negatives: bool = True
    label_point_floors: bool = False
    label_point_positive_cost: float = 1.0

    @property
    def texts(self) -> list[str]:
        return self.split.texts

    @property
    def Y(self):  # noqa: N802 - the field's name for the targets
        return self.split.Y

    @property
    def uids(self) -> list[str]:
        return self.split.uids

    def __len__(self) -> int:
        return len(self.split)

    @property
    def sample_weight(self) -> np.ndarray | None:
        """Each point's loss weight: ``label_point_weight`` for a label point, 1 for the others;
        None where every point weighs 1."""
        if self.label_point_weight == 1.0 or not self.is_label_point.any():
            return None
        return np.where(self.is_label_point, self.label_point_weight, 1.0)

    @property
    def positive_weight(self) -> np.ndarray | None:
        """Each point's factor on the cost of its positive entries: ``label_point_positive_cost`` for
        a label point, 1 for the others; None where every factor is 1."""
        if self.label_point_positive_cost == 1.0 or not self.is_label_point.any():
            return None
        return np.where(self.is_label_point, self.label_point_positive_cost, 1.0)

    @property
    def label_points(self):
        """The label points as a model trained in epochs takes them (a ``LabelPoints``), or None
        without any."""
        from ..engine.records import LabelPoints

        if not self.is_label_point.any():
            return None
        return LabelPoints(self.is_label_point, self.label_point_share, self.label_point_negatives, self.label_point_floors)


@dataclass(frozen=True)
class Augmentation:
    """One training set: ``build(dataset, config) -> TrainingSet``.

    Attributes:
        name: the ``--augment`` name.
        description: one line for the command line's help and the docs.
        build: makes the training set from a dataset and an ``AugmentConfig``.
        graph_kind: the label-graph kind this training set always uses (None: the config's).
        writes_files: whether ``gandalf augment`` writes it as a dataset (original + label points);
            the others act while training.
        has_label_points: whether it holds label points (whose graph ``gandalf analyze`` describes).
        preset_of: for a preset, the training set it builds (its ``AugmentConfig.augmentation``);
            ``preset_settings()`` gives the settings that differ from that set's defaults.
    """

    name: str
    description: str
    build: Callable[[XMCDataset, object], TrainingSet]
    graph_kind: str | None = None
    writes_files: bool = False
    has_label_points: bool = False
    preset_of: str | None = None
    preset_settings: Callable[[], dict] | None = None


def graph_for(config) -> GraphConfig:
    """The graph a training set needs (its row's ``graph_kind``, else the config's); its random
    walks take the augmentation's seed, so one seed decides everything random."""
    row = AUGMENTATIONS.get(config.augmentation)
    kind = row.graph_kind if row is not None and row.graph_kind else config.graph.kind
    return replace(config.graph, kind=kind, walk=replace(config.graph.walk, seed=config.seed))


def label_points(dataset: XMCDataset, config, client=None) -> tuple[Split, np.ndarray]:
    """Gandalf's label points for ``config`` and the label ids they come from (the label graph on
    ``client``'s Dask cluster when one is given)."""
    from ..graph import label_graph
    from .gandalf import gandalf_points, select_labels

    graph = label_graph(dataset.original_train_Y(), graph_for(config), client=client)
    labels = None
    if config.labels_fraction < 1.0:
        labels = select_labels(dataset.label_frequencies(), config.labels_fraction, config.labels_sampling, config.seed)
    points = gandalf_points(dataset, graph, labels)
    ids = np.arange(dataset.n_labels) if labels is None else labels
    return points, ids


def tempered_graph() -> GraphConfig:
    """Label-point targets that do not hand a rare label's co-labels hard 1.0 targets: shrinkage
    alpha = 1, a point with n labels counts 1/n, at most 10 co-labels, co-labels at half the label's
    own target (the ``gandalf-tempered`` preset's graph)."""
    from ..graph import GraphConfig

    return GraphConfig(delta=0.1, shrinkage=1.0, point_weights="inverse-size", top_k=10, co_label_scale=0.5)


# --- builders: one per kind of training set ---------------------------------------------------


def _as_given(dataset: XMCDataset, config) -> TrainingSet:
    n = dataset.n_original
    return TrainingSet(dataset.train, np.arange(len(dataset.train)) >= n)


def _original_plus_label_points(dataset: XMCDataset, config) -> TrainingSet:
    from .gandalf import combine

    original = dataset.original_train()
    combined = combine(original, label_points(dataset, config)[0])
    return TrainingSet(combined, np.arange(len(combined)) >= len(original))


def _label_points_only(dataset: XMCDataset, config) -> TrainingSet:
    points = label_points(dataset, config)[0]
    return TrainingSet(points, np.ones(len(points), dtype=bool))


def _uniform(dataset: XMCDataset, config) -> TrainingSet:
    from .gandalf import uniform_indices, uniform_sample

    full = _original_plus_label_points(dataset, config)
    n = dataset.n_original
    idx = uniform_indices(len(full.split), n, config.seed)
    return TrainingSet(uniform_sample(full.split, n, config.seed), full.is_label_point[idx])


def _with_transform(transform: Callable[[XMCDataset, object], BatchTransform]):
    def build(dataset: XMCDataset, config) -> TrainingSet:
        original = dataset.original_train()
        return TrainingSet(original, np.zeros(len(original), dtype=bool), transform(dataset, config))

    return build


def _labelmix(dataset: XMCDataset, config) -> BatchTransform:
    from ..graph import label_graph
    from .labelmix import LabelMix, tail_weights

    graph = label_graph(dataset.original_train_Y(), replace(config.graph, kind="cooccurrence"))
    return LabelMix(
        graph,
        dataset.label_texts,
        tail_weights(dataset.label_frequencies()),
        prob=TRANSFORM_PROBABILITY,
        threshold=config.graph.delta,
        seed=config.seed,
    )


def _synonym(dataset: XMCDataset, config) -> BatchTransform:
    from .conventional import SynonymReplacement, word_synonyms

    texts = dataset.original_train().texts + list(dataset.label_texts)
    return SynonymReplacement(word_synonyms(texts), prob=TRANSFORM_PROBABILITY, seed=config.seed)


def _feature_mix(kind: str):
    def transform(dataset: XMCDataset, config) -> BatchTransform:
        from .conventional import FeatureMix
        from .labelmix import tail_weights

        return FeatureMix(
            kind, share=TRANSFORM_PROBABILITY, label_weights=tail_weights(dataset.label_frequencies()), seed=config.seed
        )

    return transform


def _refuse(message: str):
    def build(dataset: XMCDataset, config) -> TrainingSet:
        raise ConfigError(message)

    return build


_ROWS = (
    Augmentation("none", "D: the training points as given (a directory written by `gandalf augment` gives D u Z)", _as_given),
    Augmentation(
        "gandalf",
        "G = D u Z: original + label points with co-occurrence soft targets (the paper)",
        _original_plus_label_points,
        writes_files=True,
        has_label_points=True,
    ),
    Augmentation(
        "gandalf-tempered",
        "D u Z with tempered soft targets (shrunk, size-weighted, at most 10 co-labels "
        "at half weight) and label points at half loss weight",
        _original_plus_label_points,
        writes_files=True,
        has_label_points=True,
        preset_of="gandalf",
        preset_settings=lambda: {"graph": tempered_graph(), "label_point_weight": 0.5},
    ),
    Augmentation(
        "gandalf-tempered-firm",
        f"gandalf-tempered whose label points' positives cost {FIRM_POSITIVE_COST:g} times more "
        "(the linear models): catalogue queries, not new items",
        _original_plus_label_points,
        has_label_points=True,
        preset_of="gandalf",
        preset_settings=lambda: {
            "graph": tempered_graph(),
            "label_point_weight": 0.5,
            "label_point_positive_cost": FIRM_POSITIVE_COST,
        },
    ),
    Augmentation(
        "identity",
        "Z^1 u D: original + label points with self-annotation only",
        _original_plus_label_points,
        graph_kind="identity",
        writes_files=True,
        has_label_points=True,
    ),
    Augmentation("z-only", "Z: label points only", _label_points_only, has_label_points=True),
    Augmentation("uniform", "U(G, N): N points drawn uniformly from G", _uniform, has_label_points=True),
    Augmentation(
        "glas",
        "G with y = sigmoid(S) (GLaS's symmetrised conditionals)",
        _original_plus_label_points,
        graph_kind="glas",
        writes_files=True,
        has_label_points=True,
    ),
    Augmentation(
        "random-walk",
        "D u Z with ECLARE's random-walk graph",
        _original_plus_label_points,
        graph_kind="random-walk",
        writes_files=True,
        has_label_points=True,
    ),
    Augmentation(
        "labelmix", "D, each batch transformed by LabelMix (p 0.4, tail-skewed label choice)", _with_transform(_labelmix)
    ),
    Augmentation(
        "synonym",
        "D, each batch's texts rewritten with nearest-word synonyms (p 0.4 a point, 0.3 a word)",
        _with_transform(_synonym),
    ),
    Augmentation(
        "mixup", "D + 0.4 N MixUp points (two points' inputs and targets interpolated)", _with_transform(_feature_mix("mixup"))
    ),
    Augmentation(
        "label-mixup",
        "D + 0.4 N Label-MixUp points (a point's input interpolated with one of its labels' text)",
        _with_transform(_feature_mix("label-mixup")),
    ),
    Augmentation(
        "auto",
        "the training set that does best on the validation split (see workflow/auto.py)",
        _refuse("'auto' is a search over training sets: train with gandalf_xmc.workflow.pipeline.train_model"),
    ),
)
AUGMENTATIONS: dict[str, Augmentation] = {row.name: row for row in _ROWS}
