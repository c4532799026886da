"""Settings dataclasses changed by name, and the checks that keep them in range.

``gandalf train --set solver.max_iter=10`` (and the dev-suite benchmark's ``--set``) reach any
field of a model's nested settings by a dotted name; values are JSON (``10``, ``0.5``, ``true``,
``[3, 5]``) or else plain strings, and must have the type of the setting they replace (``null``
where the setting is annotated ``X | None``). Each
settings class checks its own ranges in ``__post_init__`` with :func:`check_ranges`, so a bad
value fails where it is given, as one line, not deep inside training.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, is_dataclass, replace
from typing import Any

from .errors import ConfigError


def check_ranges(
    settings: Any,
    positive: tuple[str, ...] = (),
    non_negative: tuple[str, ...] = (),
    below_one: tuple[str, ...] = (),
    at_most_one: tuple[str, ...] = (),
) -> None:
    """Raise :class:`ConfigError` for the first named number of ``settings`` out of its range.

    Args:
        settings: a settings dataclass instance.
        positive: names that must be > 0; non_negative: >= 0; below_one: in [0, 1);
            at_most_one: in [0, 1]. Every one of them must also be a finite number.
    """
    rules = (
        [(n, lambda v: v > 0, "a number > 0") for n in positive]
        + [(n, lambda v: v >= 0, "a number >= 0") for n in non_negative]
        + [(n, lambda v: 0 <= v < 1, "a number in [0, 1)") for n in below_one]
        + [(n, lambda v: 0 <= v <= 1, "a number in [0, 1]") for n in at_most_one]
    )
    for name, ok, what in rules:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise ConfigError(f"{name} must be {what}, got {value!r}")


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``["solver.C=2", "char_ngrams=[3,5]"]`` -> ``{"solver.C": 2, "char_ngrams": (3, 5)}``.

    Args:
        pairs: ``NAME=VALUE`` strings; a VALUE that is not JSON is kept as a string.
    Returns:
        The settings by dotted name (JSON lists become tuples).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        if not equals or not name.strip():
            raise ConfigError(f"--set {pair!r}: expected NAME=VALUE, e.g. solver.max_iter=10")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        out[name.strip()] = tuple(value) if isinstance(value, list) else value
    return out


def apply_settings(config: Any, settings: dict[str, Any]) -> Any:
    """A copy of the settings dataclass ``config`` with dotted ``settings`` applied (``config`` itself
    is not changed); an unknown name, a value of another type or out of range raises
    :class:`ConfigError` naming the setting."""
    for name, value in settings.items():
        try:
            config = _with_one(config, name.split("."), value)
        except ConfigError as exc:
            raise ConfigError(f"--set {name}={_shown(value)}: {exc}") from None
    return config


def _with_one(config: Any, path: list[str], value: Any) -> Any:
    names = [f.name for f in fields(config)]
    head = path[0]
    if head not in names:
        raise ConfigError(f"no setting {head!r} here; the settings are {', '.join(names)}")
    current = getattr(config, head)
    if len(path) > 1:
        if not is_dataclass(current):
            raise ConfigError(f"{head} is a single setting, not a group")
        return replace(config, **{head: _with_one(current, path[1:], value)})
    if is_dataclass(current):
        inner = ", ".join(f"{head}.{f.name}" for f in fields(current))
        raise ConfigError(f"{head} is a group of settings: set one of {inner}")
    optional = "None" in str(next(f.type for f in fields(config) if f.name == head))  # annotated "X | None"
    return replace(config, **{head: None if value is None and optional else _typed_like(current, value)})


def _typed_like(current: Any, value: Any) -> Any:
    """``value`` as the type of the setting's ``current`` value (an int where a float is wanted
    becomes a float; a setting that is None by default takes any value its class accepts)."""
    if current is None:
        return value
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(current))
    if not ok:
        raise ConfigError(f"expected {_kind(current)}, got {_shown(value)}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, tuple):
        return "a list such as [3, 5]"
    return "a string" if isinstance(value, str) else type(value).__name__


def _shown(value: Any) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)
