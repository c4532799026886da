"""``model.json``: a saved model's kind, settings and training history, shared by every model."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

from ..engine.records import TrainConfig, TrainResult

# settings that a model saved by an earlier version holds under another name: old -> new
RENAMED_SETTINGS = {"cpu_pairs_per_epoch": "pairs_per_epoch"}


def write_spec(directory: str | Path, kind: str, config, result: TrainResult | None, **extra) -> Path:
    """Create ``directory`` and write its ``model.json`` (``kind``, the settings as ``model``, the
    ``extra`` fields in their order, then the training history as ``result``): the one writer of
    every model's description. Returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    spec = {"kind": kind, "model": asdict(config), **extra, "result": asdict(result) if result else None}
    (d / "model.json").write_text(json.dumps(spec, indent=1, default=float) + "\n")
    return d


def read_spec(directory: str | Path, config_class) -> tuple[Any, dict]:
    """The saved settings as ``config_class`` (its nested settings, such as ``TrainConfig``, rebuilt
    from their objects; a nested group that a model saved before it existed takes its defaults)
    and the whole spec."""
    spec = json.loads((Path(directory) / "model.json").read_text())
    m = dict(spec["model"])
    m["train"] = TrainConfig(**m["train"])
    for f in fields(config_class):
        nested = f.default_factory if f.default_factory is not MISSING else None
        if f.name != "train" and isinstance(m.get(f.name), dict) and is_dataclass(nested):
            m[f.name] = nested(**{RENAMED_SETTINGS.get(k, k): v for k, v in m[f.name].items()})
    return config_class(**m), spec


def read_result(spec: dict) -> TrainResult | None:
    """The training history saved in a ``model.json`` (None if the model was saved untrained)."""
    return TrainResult(**spec["result"]) if spec.get("result") else None
