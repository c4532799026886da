"""Gandalf and LabelMix: label-feature data augmentation for extreme multi-label classification.

The names most programs need, importable from here (each is imported on first use, so that
``import gandalf_xmc`` stays cheap and does not import torch)::

    from gandalf_xmc import load_dataset, preset, training_set, XRLinear, evaluate

* data: :func:`load_dataset`, :func:`dataset_stats`;
* the label graph: :class:`GraphConfig`, :func:`label_graph`;
* augmentation: :class:`AugmentConfig`, :func:`preset`, :func:`training_set` (a :class:`TrainingSet`,
  which :func:`fit_model` hands to any model as ``gandalf train`` does);
* models: :class:`XRLinear` / :class:`LinearConfig`, :class:`TfidfKNN`, :class:`NeuralXMC` /
  :class:`ModelConfig`, :func:`model_config`, :func:`load_trained`;
* training one model on a training set: :func:`fit_model`; the whole pipeline (validation
  split, augmentation, checkpoints): :func:`train_model`;
* metrics: :func:`evaluate`, :func:`inverse_propensity`.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_WHERE = {
    "load_dataset": "data",
    "dataset_stats": "data",
    "GraphConfig": "graph",
    "label_graph": "graph",
    "AugmentConfig": "augment",
    "preset": "augment",
    "training_set": "augment",
    "TrainingSet": "augment",
    "XRLinear": "models",
    "LinearConfig": "models",
    "TfidfKNN": "models",
    "NeuralXMC": "models",
    "ModelConfig": "models",
    "model_config": "models",
    "load_trained": "models",
    "train_model": "workflow.pipeline",
    "fit_model": "workflow.fitting",
    "evaluate": "metrics",
    "inverse_propensity": "metrics",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
