"""The recipe a model was trained with, or that a ``gandalf augment`` directory holds, read back
from its files, so that a command can describe the same label points without being told them again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..augment import AugmentConfig
from ..data.dataset import AUGMENT_METADATA
from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file
from .pipeline import TRAINING_FILE


@dataclass(frozen=True)
class Recipe:
    """Attributes:
    augment: the augmentation (``auto``'s winner for a model trained with ``--augment auto``).
    data: where the training data was read from, as recorded (None where it was not).
    origin: the file the recipe was read from.
    """

    augment: AugmentConfig
    data: str | None
    origin: Path


def read_recipe(directory: str | Path) -> Recipe:
    """The recipe of a model directory (its ``training.json``) or of a ``gandalf augment`` directory
    (its ``augment.json``). A model trained as given (``none``) on a directory that ``gandalf
    augment`` wrote has that directory's recipe.

    Raises:
        ConfigError: ``directory`` holds neither file.
        DataFormatError: the file is not JSON or lacks the recipe.
    """
    d = Path(directory)
    if (d / TRAINING_FILE).is_file():
        path = d / TRAINING_FILE
        info = read_json_file(path)
        config = _augment_config(path, info, "augment")
        source = info.get("source") if isinstance(info.get("source"), str) else None
        if config.augmentation == "none" and source and (Path(source) / AUGMENT_METADATA).is_file():
            return read_recipe(source)
        return Recipe(config, source, path)
    if (d / AUGMENT_METADATA).is_file():
        path = d / AUGMENT_METADATA
        info = read_json_file(path)
        source = info.get("source") if isinstance(info.get("source"), str) else None
        return Recipe(_augment_config(path, info, "config"), source, path)
    raise ConfigError(f"{d}: neither a model directory ({TRAINING_FILE}) nor a `gandalf augment` directory ({AUGMENT_METADATA})")


def _augment_config(path: Path, info, key: str) -> AugmentConfig:
    if not isinstance(info, dict) or not isinstance(info.get(key), dict):
        raise DataFormatError(path, None, f"no {key!r} object: not a recipe this version wrote")
    try:
        return AugmentConfig.from_dict(info[key])
    except (TypeError, ValueError) as exc:
        raise DataFormatError(path, None, f"{key!r} is not a recipe this version reads ({exc})") from None
