"""Every trainable model by name: one way to configure, build and load them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .classifier import FAMILIES, ModelConfig, NeuralXMC
from .linear import LinearConfig, SparseLinearXMC

MODEL_NAMES = ("linear", *FAMILIES)


def model_config(name: str, **train_overrides) -> ModelConfig | LinearConfig:
    """The default settings of model ``name`` with ``train_overrides`` applied to its training settings."""
    if name == "linear":
        base = LinearConfig()
        return replace(base, train=replace(base.train, **train_overrides))
    if name not in FAMILIES:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return ModelConfig(family=name, train=FAMILIES[name].train_config(**train_overrides))


def build_model(config: ModelConfig | LinearConfig) -> NeuralXMC | SparseLinearXMC:
    """An untrained model for ``config``."""
    return SparseLinearXMC(config) if isinstance(config, LinearConfig) else NeuralXMC(config)


def load_trained(directory: str | Path) -> NeuralXMC | SparseLinearXMC:
    """A saved model of any kind (``model.json`` says which)."""
    spec = json.loads((Path(directory) / "model.json").read_text())
    return SparseLinearXMC.load(directory) if spec.get("kind") == "linear" else NeuralXMC.load(directory)
