"""Models (one file each) and the registry that names them. Names are imported on first use, so
that ``import gandalf_xmc.models`` does not import torch."""

from __future__ import annotations

import importlib

_WHERE = {
    "FAMILIES": "neural_xmc",
    "ModelConfig": "neural_xmc",
    "NeuralXMC": "neural_xmc",
    "KNNConfig": "knn",
    "TfidfKNN": "knn",
    "LinearConfig": "linear",
    "XRLinear": "linear",
    "MODEL_NAMES": "registry",
    "build_model": "registry",
    "load_trained": "registry",
    "model_config": "registry",
    "BlendConfig": "blend",
    "LinearKnnBlend": "blend",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
