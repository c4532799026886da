"""Gandalf's extra training points and the training sets built from them (paper Table 2)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Split, XMCDataset
from ..data.stats import frequency_bins
from ..errors import ConfigError

LABEL_UID_PREFIX = "label:"


def gandalf_points(dataset: XMCDataset, graph: sp.csr_matrix, labels: np.ndarray | None = None) -> Split:
    """One label point per label: the label's text as input, row j of ``graph`` as targets.

    Args:
        graph: ``L x L`` soft targets (from :func:`gandalf_xmc.graph.label_graph`).
        labels: which labels become points (sorted ids); all labels if None.
    """
    if graph.shape != (dataset.n_labels, dataset.n_labels):
        raise ConfigError(f"graph must be {dataset.n_labels} x {dataset.n_labels}, got {graph.shape}")
    ids = np.arange(dataset.n_labels) if labels is None else np.asarray(labels, dtype=np.int64)
    uids = [LABEL_UID_PREFIX + dataset.label_uids[j] for j in ids.tolist()]
    texts = [dataset.label_texts[j] for j in ids.tolist()]
    # all labels: the graph's rows as they are (a fancy-indexed copy would double the memory)
    targets = graph if labels is None else graph[ids]
    return Split(uids, texts, sp.csr_matrix(targets, copy=False).astype(np.float32, copy=False))


def combine(*splits: Split) -> Split:
    """Concatenate splits (e.g. D u Z): texts and target rows in the given order."""
    uids = [u for s in splits for u in s.uids]
    texts = [t for s in splits for t in s.texts]
    Y = sp.vstack([s.Y for s in splits], format="csr", dtype=np.float32)
    offset, pairs = 0, []
    for s in splits:
        if s.filter_pairs.size:
            pairs.append(s.filter_pairs + np.array([offset, 0]))
        offset += len(s)
    fp = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    return Split(uids, texts, Y, fp)


def uniform_sample(split: Split, n: int, seed: int = 0) -> Split:
    """U(split, n): ``n`` points drawn uniformly without replacement (kept in their original order)."""
    if not 0 <= n <= len(split):
        raise ConfigError(f"cannot sample {n} points from {len(split)}")
    idx = uniform_indices(len(split), n, seed)
    return Split([split.uids[i] for i in idx], [split.texts[i] for i in idx], split.Y[idx])


def uniform_indices(n_total: int, n: int, seed: int = 0) -> np.ndarray:
    """The rows :func:`uniform_sample` keeps, ascending."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_total, size=n, replace=False))


def select_labels(freq: np.ndarray, fraction: float, sampling: str = "random", seed: int = 0, n_bins: int = 5) -> np.ndarray:
    """Which labels get a label point when only ``fraction`` of them are used (paper Fig. 3 c/d).

    * ``random``: ``round(fraction * L)`` labels uniformly at random;
    * ``tail``: the same number, filled from the five equi-voluminous frequency bins starting
      at the tail bin; the bin where the budget runs out is sampled at random.

    Returns sorted label ids.
    """
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"labels fraction must be in (0, 1], got {fraction}")
    n_labels = len(freq)
    m = int(round(fraction * n_labels))
    rng = np.random.default_rng(seed)
    if sampling == "random":
        return np.sort(rng.choice(n_labels, size=m, replace=False))
    if sampling != "tail":
        raise ConfigError(f"labels sampling must be 'random' or 'tail', got {sampling!r}")
    bins = frequency_bins(freq, n_bins)
    chosen: list[np.ndarray] = []
    budget = m
    for b in range(n_bins - 1, -1, -1):
        members = np.flatnonzero(bins == b)
        if budget <= 0:
            break
        if members.size <= budget:
            chosen.append(members)
            budget -= members.size
        else:
            chosen.append(rng.choice(members, size=budget, replace=False))
            budget = 0
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
