"""The one metrics module: P@k, nDCG@k, PSP@k, PSnDCG@k, R@k, C@k and frequency-bin contributions."""

from .ranking import bin_contributions, bootstrap_intervals, evaluate, inverse_propensity, prepare, remove_pairs, top_k_indices

METRIC_NAMES = ("P", "nDCG", "PSP", "PSnDCG", "R", "C")

__all__ = [
    "METRIC_NAMES",
    "bin_contributions",
    "bootstrap_intervals",
    "evaluate",
    "inverse_propensity",
    "prepare",
    "remove_pairs",
    "top_k_indices",
]
