"""Augmentations: Gandalf's label points (with subsampling), LabelMix and the conventional ones,
and the training sets built from them. Names are imported on first use, so that the command line
can list the training sets (:mod:`.catalog`) without building anything."""

from __future__ import annotations

import importlib

_NAMES = (  # training_sets.__all__ (tests/test_contract.py holds the two together)
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
)
_WHERE = {name: "training_sets" for name in _NAMES}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_WHERE)
