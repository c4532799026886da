"""Ranking metrics of the XMC field, computed as pyxclib and napkinXC compute them.

All metrics share one preparation step (:func:`prepare`): filter pairs are removed from the
predictions and the ground truth, test points left without labels are dropped, and each row's
top-k predicted labels are read off (ties broken by the lower label id). Ground truth entries
count as relevant when their value is > 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def inverse_propensity(train_Y: sp.spmatrix, a: float = 0.55, b: float = 1.5) -> np.ndarray:
    """Jain et al.'s inverse propensities ``w_l = 1 + C (N_l + B)^-A``, ``C = (ln N - 1)(B + 1)^A``.

    ``train_Y`` must hold the ORIGINAL training labels; ``N_l`` counts each label's positives.
    """
    Y = sp.csr_matrix(train_Y)
    n = Y.shape[0]
    freq = np.bincount(Y.indices[Y.data > 0], minlength=Y.shape[1]).astype(np.float64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        c = (np.log(n) - 1.0) * np.power(np.float64(b) + 1.0, a)
        w = 1.0 + c * np.power(freq + b, -a)
    if not np.isfinite(w).all():
        from ..errors import ConfigError

        why = "B = 0 and a label without training positives" if b == 0 and (freq == 0).any() else "an overflow"
        raise ConfigError(f"propensity constants A = {a:g}, B = {b:g} give infinite weights ({why})")
    return w


def remove_pairs(M: sp.spmatrix, pairs: np.ndarray | None) -> sp.csr_matrix:
    """Return a copy of ``M`` without the ``(row, label)`` entries listed in ``pairs``."""
    M = sp.csr_matrix(M, copy=True)
    if pairs is None or len(pairs) == 0:
        return M
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    rows = np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr))
    codes = rows * M.shape[1] + M.indices
    keep = ~np.isin(codes, pairs[:, 0] * M.shape[1] + pairs[:, 1])
    # rebuild rather than zero out, so that stored scores of exactly 0 survive
    return sp.csr_matrix((M.data[keep], (rows[keep], M.indices[keep])), shape=M.shape)


def top_k_indices(scores: sp.spmatrix, k: int) -> np.ndarray:
    """Top-``k`` label ids of each row by score (ties: lower id first), -1 where a row has fewer."""
    S = sp.csr_matrix(scores)
    S.sum_duplicates()
    n = S.shape[0]
    out = np.full((n, k), -1, dtype=np.int64)
    lengths = np.diff(S.indptr)
    rows = np.repeat(np.arange(n), lengths)
    # sort by row, then score descending, then label id ascending
    order = np.lexsort((S.indices, -S.data.astype(np.float64), rows))
    # rows stay contiguous after the sort, so position minus row start is the rank
    rank = np.arange(S.nnz) - np.repeat(S.indptr[:-1], lengths)
    keep = rank < k
    out[rows[keep], rank[keep]] = S.indices[order][keep]
    return out


@dataclass
class Prepared:
    """Predictions and truth after filtering and dropping label-less points."""

    top: np.ndarray  # (n, k) predicted label ids, -1 = none
    hits: np.ndarray  # (n, k) bool: top[i, r] is relevant
    truth: sp.csr_matrix  # (n, L) binary relevance
    kept_rows: np.ndarray  # indices of the original rows that were kept


def prepare(predictions: sp.spmatrix, truth: sp.spmatrix, k: int, filter_pairs: np.ndarray | None = None) -> Prepared:
    """Filter, drop points without labels and compute the top-k hit matrix."""
    P = sp.csr_matrix(predictions)
    T = sp.csr_matrix(truth)
    if P.shape != T.shape:
        raise ValueError(f"predictions are {P.shape[0]} x {P.shape[1]} but the ground truth is {T.shape[0]} x {T.shape[1]}")
    P = remove_pairs(P, filter_pairs)
    T = remove_pairs(T, filter_pairs)
    T.data = (T.data > 0).astype(np.float32)
    T.eliminate_zeros()
    kept = np.flatnonzero(np.diff(T.indptr) > 0)
    P, T = P[kept], T[kept]
    # a row ranks no more labels than it scores: a huge k costs nothing more than that
    top = top_k_indices(P, max(1, min(k, int(np.diff(P.indptr).max(initial=0)))))
    n_labels = T.shape[1]
    rows = np.repeat(np.arange(T.shape[0], dtype=np.int64), np.diff(T.indptr))
    truth_codes = np.sort(rows * n_labels + T.indices)
    cand = np.arange(T.shape[0], dtype=np.int64)[:, None] * n_labels + np.maximum(top, 0)
    hits = np.zeros(top.shape, dtype=bool)
    if truth_codes.size:
        pos = np.minimum(np.searchsorted(truth_codes, cand), truth_codes.size - 1)
        hits = (top >= 0) & (truth_codes[pos] == cand)
    return Prepared(top, hits, T, kept)


def _ideal_weights(T: sp.csr_matrix, w: np.ndarray, k: int) -> np.ndarray:
    """(n, k) inverse propensities of each row's true labels, sorted descending, 0-padded."""
    n = T.shape[0]
    out = np.zeros((n, k))
    lengths = np.diff(T.indptr)
    rows = np.repeat(np.arange(n), lengths)
    vals = w[T.indices]
    order = np.lexsort((-vals, rows))
    rank = np.arange(T.nnz) - np.repeat(T.indptr[:-1], lengths)
    keep = rank < k
    out[rows[order][keep], rank[keep]] = vals[order][keep]
    return out


def evaluate(
    predictions: sp.spmatrix,
    truth: sp.spmatrix,
    inv_propensity: np.ndarray | None = None,
    ks: tuple[int, ...] = (1, 3, 5),
    filter_pairs: np.ndarray | None = None,
) -> dict[str, float]:
    """Every metric at every k, in percent: P, nDCG, PSP, PSnDCG, R and C.

    * ``P@k`` = mean over points of |top-k ∩ y| / k;
    * ``nDCG@k`` = DCG@k / ideal DCG over min(k, |y|) positions, discount 1/log2(rank + 1);
    * ``PSP@k`` = [mean of sum of w over correct labels in top-k / k] divided by the same for the
      best ranking (the min(k, |y|) true labels with the largest w); ``PSnDCG@k`` likewise with
      the DCG discount;
    * ``R@k`` = mean of |top-k ∩ y| / |y|;
    * ``C@k`` = distinct labels correctly predicted in some top-k / distinct labels in the truth.

    PS metrics are skipped when ``inv_propensity`` is None. Also returns ``n_points`` (after
    dropping points without labels).
    """
    kmax = max(ks)
    prep = prepare(predictions, truth, kmax, filter_pairs)
    T = prep.truth
    n = T.shape[0]
    res: dict[str, float] = {"n_points": float(n)}
    if n == 0:
        raise ValueError("no test point has a label left after filtering")
    n_true = np.diff(T.indptr).astype(np.float64)
    width = prep.top.shape[1]  # ranks held (at most kmax)
    ideal_width = int(min(kmax, n_true.max()))  # ranks an ideal ranking fills (at most kmax)
    discount = 1.0 / np.log2(np.arange(max(width, ideal_width)) + 2.0)
    hits = prep.hits.astype(np.float64)
    if inv_propensity is not None:
        w = np.asarray(inv_propensity, dtype=np.float64)
        w_hits = np.where(prep.hits, w[np.maximum(prep.top, 0)], 0.0)
        ideal_w = _ideal_weights(T, w, ideal_width)
    true_labels = np.unique(T.indices)
    for k in ks:
        kh, ki = min(k, width), min(k, ideal_width)
        h = hits[:, :kh]
        res[f"P@{k}"] = 100.0 * h.sum(axis=1).mean() / k
        dcg = (h * discount[:kh]).sum(axis=1)
        idcg = np.cumsum(discount[:ki])[np.minimum(n_true, ki).astype(np.int64) - 1]
        res[f"nDCG@{k}"] = 100.0 * np.mean(dcg / idcg)
        if inv_propensity is not None:
            res[f"PSP@{k}"] = 100.0 * w_hits[:, :kh].sum() / ideal_w[:, :ki].sum()
            res[f"PSnDCG@{k}"] = 100.0 * (w_hits[:, :kh] * discount[:kh]).sum() / (ideal_w[:, :ki] * discount[:ki]).sum()
        res[f"R@{k}"] = 100.0 * np.mean(h.sum(axis=1) / n_true)
        covered = np.unique(prep.top[:, :k][prep.hits[:, :k]])
        res[f"C@{k}"] = 100.0 * covered.size / true_labels.size
    return {key: float(value) for key, value in res.items()}


def bin_contributions(
    predictions: sp.spmatrix,
    truth: sp.spmatrix,
    label_bins: np.ndarray,
    k: int = 5,
    filter_pairs: np.ndarray | None = None,
    n_bins: int | None = None,
    inv_propensity: np.ndarray | None = None,
) -> np.ndarray:
    """Each label-frequency bin's contribution to P@k, in percent (they sum to P@k); with
    ``inv_propensity``, each bin's contribution to PSP@k instead (they sum to PSP@k).

    ``label_bins[l]`` is the bin of label l (see :func:`gandalf_xmc.data.stats.frequency_bins`).
    """
    prep = prepare(predictions, truth, k, filter_pairs)
    n_bins = int(label_bins.max()) + 1 if n_bins is None else n_bins
    correct = prep.top[prep.hits]
    if inv_propensity is None:
        counts = np.bincount(label_bins[correct], minlength=n_bins).astype(np.float64)
        return 100.0 * counts / (k * prep.truth.shape[0])
    w = np.asarray(inv_propensity, dtype=np.float64)
    gained = np.bincount(label_bins[correct], weights=w[correct], minlength=n_bins)
    ideal_width = int(min(k, np.diff(prep.truth.indptr).max(initial=1)))
    return 100.0 * gained / _ideal_weights(prep.truth, w, ideal_width).sum()


def bootstrap_intervals(
    predictions: list[sp.spmatrix],
    truth: sp.spmatrix,
    inv_propensity: np.ndarray | None,
    ks: tuple[int, ...] = (1, 3, 5),
    filter_pairs: np.ndarray | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.9,
) -> list[dict[str, list[float]]]:
    """Percentile intervals of P@k (and PSP@k with ``inv_propensity``) for each prediction matrix,
    over ``n_boot`` resamples of the test points, in percent; the resamples are shared by every
    matrix (paired), so the entries after the first also hold ``"<metric> - first"``: the interval
    of the difference from the first matrix. PSP@k is recomputed as a ratio on each resample, as
    :func:`evaluate` computes it."""
    kmax = max(ks)
    per_file = []
    for P in predictions:
        prep = prepare(P, truth, kmax, filter_pairs)
        hits = prep.hits.astype(np.float64)
        parts = {f"P@{k}": (hits[:, :k].sum(axis=1) / k, None) for k in ks}
        if inv_propensity is not None:
            w = np.asarray(inv_propensity, dtype=np.float64)
            w_hits = np.where(prep.hits, w[np.maximum(prep.top, 0)], 0.0)
            ideal = _ideal_weights(prep.truth, w, int(min(kmax, np.diff(prep.truth.indptr).max(initial=1))))
            parts.update({f"PSP@{k}": (w_hits[:, :k].sum(axis=1) / k, ideal[:, :k].sum(axis=1) / k) for k in ks})
        per_file.append(parts)
    n = next(iter(per_file[0].values()))[0].size
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, n, n) for _ in range(n_boot)]

    def values(parts: dict) -> dict[str, np.ndarray]:
        return {
            m: np.array([100.0 * (num[i].sum() / den[i].sum() if den is not None else num[i].mean()) for i in draws])
            for m, (num, den) in parts.items()
        }

    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    sampled = [values(parts) for parts in per_file]
    out = []
    for f, vals in enumerate(sampled):
        row = {m: [float(np.percentile(v, lo)), float(np.percentile(v, hi))] for m, v in vals.items()}
        if f:
            row.update(
                {
                    f"{m} - first": [float(np.percentile(v - sampled[0][m], lo)), float(np.percentile(v - sampled[0][m], hi))]
                    for m, v in vals.items()
                }
            )
        out.append(row)
    return out
