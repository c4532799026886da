"""The one place for per-dataset constants (propensity A/B and Table 1 statistics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetPreset:
    """Constants of a known dataset.

    ``propensity_a``/``propensity_b`` are the A/B of Jain et al.'s inverse propensity model;
    the remaining fields are the paper's Table 1 statistics (None where not applicable).
    """

    name: str
    propensity_a: float
    propensity_b: float
    n_train: int | None = None
    n_labels: int | None = None
    avg_points_per_label: float | None = None
    avg_labels_per_point: float | None = None
    avg_words_per_point: float | None = None


PRESETS: dict[str, DatasetPreset] = {
    p.name: p
    for p in (
        DatasetPreset("LF-AmazonTitles-131K", 0.6, 2.6, 294_805, 131_073, 5.15, 2.29, 6.92),
        DatasetPreset("LF-WikiSeeAlsoTitles-320K", 0.55, 1.5, 693_082, 312_330, 4.67, 2.11, 3.01),
        DatasetPreset("LF-WikiTitles-500K", 0.5, 0.4, 1_813_391, 501_070, 17.15, 4.74, 3.10),
        DatasetPreset("LF-AmazonTitles-1.3M", 0.6, 2.6, 2_248_619, 1_305_265, 38.24, 22.20, 8.74),
        DatasetPreset("debian-bookworm", 0.55, 1.5, 34_759, 42_200, 3.57, 4.33, 6.55),
    )
}

DEFAULT_PROPENSITY = (0.55, 1.5)


def preset_for(name: str) -> DatasetPreset | None:
    """Find the preset whose name matches a dataset (directory) name, case-insensitively.

    Exact names win; otherwise the family is recognised from the name (``...AmazonTitles...``,
    ``...WikiSeeAlso...``, ``...WikiTitles...``), so that ``LF-AmazonTitles-131K-small`` still
    gets Amazon's A/B.
    """
    key = name.lower()
    for preset in PRESETS.values():
        if preset.name.lower() == key:
            return preset
    if "amazon" in key:
        return PRESETS["LF-AmazonTitles-131K"]
    if "wikiseealso" in key:
        return PRESETS["LF-WikiSeeAlsoTitles-320K"]
    if "wikititles" in key or "wikipedia" in key:
        return PRESETS["LF-WikiTitles-500K"]
    if "debian" in key:
        return PRESETS["debian-bookworm"]
    return None


def propensity_constants(name: str, a: float | None = None, b: float | None = None) -> tuple[float, float]:
    """A and B for a dataset: explicit overrides first, then its preset, then 0.55/1.5; checked
    by :func:`check_propensity`."""
    preset = preset_for(name)
    default = (preset.propensity_a, preset.propensity_b) if preset else DEFAULT_PROPENSITY
    a, b = (default[0] if a is None else a, default[1] if b is None else b)
    check_propensity(a, b)
    return a, b


def propensity_problem(a, b) -> str | None:
    """Why ``(A, B)`` cannot be propensity constants, or None: both finite numbers, A > 0, B >= 0,
    and C = (ln N - 1)(B + 1)^A of a representable size (A ln(B + 1) below 700, so for any N
    float64 holds C; ``metrics.inverse_propensity`` still checks the weights it computes)."""
    import math

    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if not numbers or not (math.isfinite(a) and math.isfinite(b)) or not (a > 0 and b >= 0):
        return f"propensity constants must be finite numbers with A > 0 and B >= 0, got A = {a}, B = {b}"
    if a * math.log1p(b) >= 700:
        return f"propensity constants A = {a:g}, B = {b:g} overflow the weights ((B + 1)^A is past 1e304)"
    return None


def check_propensity(a, b) -> None:
    """Raise ConfigError with :func:`propensity_problem`'s reason."""
    problem = propensity_problem(a, b)
    if problem:
        from ..errors import ConfigError

        raise ConfigError(problem)
