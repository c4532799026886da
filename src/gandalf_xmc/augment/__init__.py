"""Augmentations: Gandalf's extra points (with subsampling) and LabelMix."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.dataset import Split, XMCDataset
from ..errors import ConfigError
from ..graph import GraphConfig, label_graph
from .conventional import FeatureMix, SynonymReplacement, word_synonyms
from .gandalf import LABEL_UID_PREFIX, combine, gandalf_points, select_labels, uniform_sample
from .labelmix import LabelMix, tail_weights

# Training sets of the paper's Table 2, by name.
TRAINING_SETS = {
    "none": "D: the training points as given (a directory written by `gandalf augment` gives D u Z)",
    "gandalf": "G = D u Z: original + label points with co-occurrence soft targets",
    "z-only": "Z: label points only",
    "uniform": "U(G, N): N points drawn uniformly from G",
    "identity": "Z^1 u D: original + label points with self-annotation only",
    "glas": "G with y = sigmoid(S) (GLaS's symmetrised conditionals)",
    "random-walk": "D u Z with ECLARE's random-walk graph",
    "labelmix": "D, each batch transformed by LabelMix (p 0.4, tail-skewed label choice)",
    "synonym": "D, each batch's texts rewritten with nearest-word synonyms (p 0.4 a point, 0.3 a word)",
    "mixup": "D + 0.4 N MixUp points (two points' inputs and targets interpolated)",
    "label-mixup": "D + 0.4 N Label-MixUp points (a point's input interpolated with one of its labels' text)",
    "auto": "the variant (and settings) that does best on the validation split: see train/auto.py",
}


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
        if self.training_set not in TRAINING_SETS:
            raise ConfigError(f"unknown training set {self.training_set!r}; choose one of {', '.join(TRAINING_SETS)}")
        if self.extra_weight < 0:
            raise ConfigError(f"extra-point weight must be >= 0, got {self.extra_weight}")
        if not 0.0 < self.extra_share <= 1.0:
            raise ConfigError(f"extra-point share must be in (0, 1], got {self.extra_share}")
        self.graph.validate()

    @classmethod
    def from_dict(cls, d: dict) -> AugmentConfig:
        """Inverse of ``dataclasses.asdict`` (e.g. a ``training.json``'s ``augment``)."""
        return cls(**{**d, "graph": GraphConfig(**d.get("graph", {}))})


def graph_for(config: AugmentConfig) -> GraphConfig:
    """The graph a training set needs (identity/glas/random-walk override the graph kind)."""
    kind = {"identity": "identity", "glas": "glas", "random-walk": "random-walk"}.get(config.training_set, config.graph.kind)
    return GraphConfig(**{**config.graph.__dict__, "kind": kind})


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


def training_set(dataset: XMCDataset, config: AugmentConfig) -> Split:
    """The training split named by ``config.training_set`` (original points first)."""
    config.validate()
    name = config.training_set
    if name == "auto":
        raise ConfigError("'auto' is a search over training sets: train with gandalf_xmc.train.pipeline.train_model")
    if name == "none":
        return dataset.train
    n = dataset.n_original_train or len(dataset.train)
    original = Split(dataset.train.uids[:n], dataset.train.texts[:n], dataset.original_train_Y(),
                     dataset.train.filter_pairs)
    if name in BATCH_TRANSFORMS:  # these act while training: see mixer_for
        return original
    extra, _ = extra_points(dataset, config)
    if name == "z-only":
        return extra
    combined = combine(original, extra)
    if name == "uniform":
        return uniform_sample(combined, len(original), config.seed)
    return combined


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
    graph = label_graph(dataset.original_train_Y(), GraphConfig(**{**config.graph.__dict__, "kind": "cooccurrence"}))
    return LabelMix(graph, dataset.label_texts, tail_weights(dataset.label_frequencies()), prob=prob,
                    threshold=config.graph.delta, seed=config.seed)


def extra_mask(split: Split) -> np.ndarray:
    """Which points of ``split`` are Gandalf's label points (their uids carry ``LABEL_UID_PREFIX``)."""
    return np.fromiter((u.startswith(LABEL_UID_PREFIX) for u in split.uids), dtype=bool, count=len(split))


__all__ = ["AugmentConfig", "BATCH_TRANSFORMS", "TRAINING_SETS", "LABEL_UID_PREFIX", "FeatureMix", "LabelMix",
           "SynonymReplacement", "combine", "extra_mask", "extra_points", "gandalf_points", "graph_for", "mixer_for",
           "select_labels", "tail_weights", "training_set", "uniform_sample"]
