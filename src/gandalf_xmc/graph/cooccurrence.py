"""Label co-occurrence graph and its conditional normalisation (Gandalf paper, eq. 6).

``G = Y^T diag(w) Y`` is never materialised. A sparse kernel (numba, parallel over lanes of
label rows) walks, for each label j, the training points of j and the labels of those points,
accumulating row j of G in a dense per-thread accumulator, and writes the entries that survive the
threshold. Each row is computed once: a cheap upper bound on its kept entries (``_row_bounds``)
gives it a slot in a buffer, and rows are processed in waves whose slots fit a fixed budget. Peak
memory is the output plus one wave's buffer and an accumulator of L floats per thread, instead of
the whole un-thresholded ``Y^T Y``.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from ..sparse_ops import scatter_add

# How a row entry is normalised (kernel argument ``mode``).
_CONDITIONAL = 0  # G_ji / (G_jj + alpha): P[label i | label j]
_SYMMETRIC = 1  # 0.5 * (G_ji / G_jj + G_ji / G_ii): GLaS's symmetrised conditionals


@numba.njit(cache=True, nogil=True)
def _row_entries(j, y_indptr, y_indices, y_data, c_indptr, c_points, c_data, weights, acc, mark, touched):
    """Accumulate row j of G into ``acc``; the labels touched are listed in ``touched``.

    Returns how many were touched; the caller resets ``acc`` and ``mark`` for them.
    """
    n_touched = 0
    for p in range(c_indptr[j], c_indptr[j + 1]):
        s = c_points[p]
        n_touched = scatter_add(y_indptr, y_indices, y_data, s, weights[s] * c_data[p], acc, mark, touched, n_touched)
    return n_touched


@numba.njit(cache=True, nogil=True)
def _normalise(j, i, g, diag, mode, alpha):
    if mode == _CONDITIONAL:
        return g / (diag[j] + alpha)
    return 0.5 * (g / diag[j] + g / diag[i])


@numba.njit(cache=True, nogil=True)
def _one_row(
    j,
    lo,
    y_indptr,
    y_indices,
    y_data,
    c_indptr,
    c_points,
    c_data,
    weights,
    diag,
    mode,
    alpha,
    delta,
    top_k,
    self_value,
    acc,
    mark,
    touched,
    cand_i,
    cand_v,
    slot_start,
    slot_indices,
    slot_data,
    counts,
):
    """Row j of the graph into its slot (see :func:`_wave_pass`)."""
    n_c = 0
    if diag[j] > 0:
        n_t = _row_entries(j, y_indptr, y_indices, y_data, c_indptr, c_points, c_data, weights, acc, mark, touched)
        for t in range(n_t):
            i = touched[t]
            if i != j:
                v = _normalise(j, i, acc[i], diag, mode, alpha)
                if v > delta:
                    cand_i[n_c] = i
                    cand_v[n_c] = v
                    n_c += 1
            acc[i] = 0.0
            mark[i] = False
    width = n_c if top_k < 0 or n_c <= top_k else top_k
    r = j - lo
    start = slot_start[r]
    if width + 1 > slot_start[r + 1] - start:
        counts[r] = -1
        return
    if width < n_c:
        # keep the top ``width`` by value; ties go to the lower label id
        order = np.argsort(cand_i[:n_c], kind="mergesort")
        ci = cand_i[:n_c][order]
        cv = cand_v[:n_c][order]
        best = np.argsort(-cv, kind="mergesort")[:width]
        for t in range(width):
            cand_i[t] = ci[best[t]]
            cand_v[t] = cv[best[t]]
    cand_i[width] = j
    cand_v[width] = self_value
    order = np.argsort(cand_i[: width + 1])
    for t in range(width + 1):
        slot_indices[start + t] = cand_i[order[t]]
        slot_data[start + t] = cand_v[order[t]]
    counts[r] = width + 1


@numba.njit(parallel=True, cache=True)
def _wave_pass(
    n_lanes,
    chunk_bounds,
    lo,
    y_indptr,
    y_indices,
    y_data,
    c_indptr,
    c_points,
    c_data,
    weights,
    diag,
    mode,
    alpha,
    delta,
    top_k,
    self_value,
    slot_start,
    slot_indices,
    slot_data,
    counts,
):
    """Rows ``chunk_bounds[0] .. chunk_bounds[-1]`` of the graph (a wave). Lane t (one per thread,
    with its own accumulator of L floats) takes chunks t, t + n_lanes, ... of rows. Row j is written
    sorted, self entry included, into its slot ``slot_start[j - lo] .. slot_start[j - lo + 1]`` of
    the wave's buffer and ``counts[j - lo]`` says how many entries it has; -1 means the slot was too
    small (a wrong bound: the caller raises)."""
    n_labels = diag.size
    n_chunks = chunk_bounds.size - 1
    for lane in numba.prange(n_lanes):
        acc = np.zeros(n_labels, dtype=np.float64)
        mark = np.zeros(n_labels, dtype=np.bool_)
        touched = np.empty(n_labels, dtype=np.int32)
        cand_i = np.empty(n_labels, dtype=np.int32)
        cand_v = np.empty(n_labels, dtype=np.float64)
        for c in range(lane, n_chunks, n_lanes):
            for j in range(chunk_bounds[c], chunk_bounds[c + 1]):
                _one_row(
                    j,
                    lo,
                    y_indptr,
                    y_indices,
                    y_data,
                    c_indptr,
                    c_points,
                    c_data,
                    weights,
                    diag,
                    mode,
                    alpha,
                    delta,
                    top_k,
                    self_value,
                    acc,
                    mark,
                    touched,
                    cand_i,
                    cand_v,
                    slot_start,
                    slot_indices,
                    slot_data,
                    counts,
                )


@numba.njit(cache=True)
def _compact(slot_start, counts, slot_indices, slot_data, indices, data):
    """Copy each row's entries from its slot to consecutive positions of ``indices``/``data``."""
    pos = 0
    for r in range(counts.size):
        s = slot_start[r]
        for t in range(counts[r]):
            indices[pos] = slot_indices[s + t]
            data[pos] = slot_data[s + t]
            pos += 1


def _chunk_bounds(n_labels: int, work: np.ndarray, n_chunks: int) -> np.ndarray:
    """Split label rows into chunks of roughly equal work (so threads stay balanced)."""
    cum = np.concatenate([[0], np.cumsum(work, dtype=np.float64)])
    targets = np.linspace(0, cum[-1], n_chunks + 1)
    bounds = np.searchsorted(cum, targets, side="left")
    bounds[0], bounds[-1] = 0, n_labels
    return np.unique(bounds).astype(np.int64)


@numba.njit(cache=True)
def _label_sums(indptr, indices, data, w, n_labels):
    """Per label j, in one pass over Y (no temporaries of Y's size): ``G_jj = sum_p w_p y_pj^2``,
    ``work_j`` = 1 + the co-occurrence pairs of row j of G (balances lanes of rows), ``n_j`` = its
    points, and ``mass_j = sum_p w_p y_pj (r_p - y_pj)`` = the sum of row j of G off the diagonal
    (``r_p`` = the sum of point p's targets)."""
    diag = np.zeros(n_labels)
    work = np.ones(n_labels)
    count = np.zeros(n_labels)
    mass = np.zeros(n_labels)
    for p in range(indptr.size - 1):
        size = indptr[p + 1] - indptr[p]
        r = 0.0
        for q in range(indptr[p], indptr[p + 1]):
            r += data[q]
        for q in range(indptr[p], indptr[p + 1]):
            j = indices[q]
            y = np.float64(data[q])
            diag[j] += w[p] * y * y
            work[j] += size
            count[j] += 1.0
            mass[j] += w[p] * y * (r - y)
    return diag, work, count, mass


class LabelSums(NamedTuple):
    """Per-label sums over Y (see :func:`_label_sums`)."""

    diag: np.ndarray  # G_jj
    work: np.ndarray  # 1 + co-occurrence pairs of row j of G
    n_points: np.ndarray  # points of label j
    mass: np.ndarray  # sum of row j of G off the diagonal


def _row_bounds(sums: LabelSums, mode: int, delta: float, shrinkage: float, top_k: int) -> np.ndarray:
    """An upper bound on each row's entries (self included), so that rows are computed once.

    Row j has at most ``sum_{p in j} (|p| - 1)`` co-labels (and L - 1). In conditional mode with
    ``delta > 0`` a kept co-label i has ``G_ji > delta (G_jj + alpha)`` while the co-labels sum to
    ``T_j = sum_{p in j} w_p y_pj (r_p - y_pj)`` (``r_p`` = the sum of point p's targets), so
    fewer than ``T_j / (delta (G_jj + alpha))`` are kept: at delta 0.1 a few times the labels a
    point, not the thousands of co-labels a head label has.
    """
    diag = sums.diag
    bound = np.minimum(sums.work - 1.0 - sums.n_points, diag.size - 1.0)
    if mode == _CONDITIONAL and delta > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            by_mass = np.floor(sums.mass * (1.0 + 1e-6) / (delta * (diag + shrinkage))) + 1.0
        bound = np.minimum(bound, np.where(diag > 0, by_mass, 0.0))
    if top_k >= 0:
        bound = np.minimum(bound, top_k)
    bound = np.where(diag > 0, np.maximum(bound, 0.0), 0.0)
    return bound.astype(np.int64) + 1


def _waves(slots: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive row ranges whose summed slots stay within ``budget`` (at least one row each)."""
    cum = np.cumsum(slots)
    waves, lo = [], 0
    while lo < slots.size:
        base = cum[lo - 1] if lo else 0
        hi = max(int(np.searchsorted(cum, base + budget, side="right")), lo + 1)
        waves.append((lo, hi))
        lo = hi
    return waves


def prepare_labels(Y: sp.spmatrix, point_weights: np.ndarray | None) -> tuple[sp.csr_matrix, np.ndarray, LabelSums]:
    """Canonical float CSR labels, per-point weights (default 1) and the per-label sums (``diag``
    = G_jj; ``work`` = each row of G's co-occurrence pairs + 1, which balances chunks of rows)."""
    Y = sp.csr_matrix(Y)
    if Y.dtype not in (np.float32, np.float64):
        Y = Y.astype(np.float32)
    Y.sum_duplicates()
    n_points, n_labels = Y.shape
    w = np.ones(n_points) if point_weights is None else np.asarray(point_weights, dtype=np.float64)
    if w.shape != (n_points,):
        raise ValueError(f"point_weights must have one weight per training point ({n_points})")
    return Y, w, LabelSums(*_label_sums(Y.indptr, Y.indices, Y.data, w, n_labels))


def conditional_graph(
    Y: sp.spmatrix,
    *,
    delta: float = 0.1,
    top_k: int | None = None,
    shrinkage: float = 0.0,
    point_weights: np.ndarray | None = None,
    symmetric: bool = False,
    self_value: float = 1.0,
    wave_entries: int = 1 << 23,
) -> sp.csr_matrix:
    """Row j = soft targets of label j's label point, from label co-occurrence.

    With ``G = Y^T diag(w) Y`` (``w`` = ``point_weights``, default 1):

    * ``symmetric=False`` (Gandalf, eq. 6): ``y_j[i] = G_ji / (G_jj + shrinkage)``, kept if it is
      strictly greater than ``delta``;
    * ``symmetric=True`` (GLaS's S): ``0.5 (G_ji / G_jj + G_ji / G_ii)``, kept if > ``delta``.

    The self entry ``y_j[j]`` is always ``self_value``; a label without training positives gets
    the self entry only. ``top_k`` caps the other entries a row (largest first, ties to the
    lower id). ``wave_entries`` bounds the rows computed at a time by the sum of their entry bounds
    (see :func:`_row_bounds`). Returns an ``L x L`` float32 CSR matrix with sorted indices.
    """
    Y, w, sums = prepare_labels(Y, point_weights)
    n_labels, diag, work = Y.shape[1], sums.diag, sums.work
    C = Y.tocsc()
    C.sort_indices()
    mode = _SYMMETRIC if symmetric else _CONDITIONAL
    k = -1 if top_k is None else int(top_k)
    slots = _row_bounds(sums, mode, float(delta), float(shrinkage), k)
    arrays = (
        Y.indptr.astype(np.int64),
        Y.indices.astype(np.int32, copy=False),
        Y.data,
        C.indptr.astype(np.int64),
        C.indices.astype(np.int32, copy=False),
        C.data,
        w,
        diag,
        mode,
        float(shrinkage),
        float(delta),
        k,
        float(self_value),
    )
    n_threads = numba.get_num_threads()
    counts = np.zeros(n_labels, dtype=np.int64)
    pieces = []
    for lo, hi in _waves(slots, max(int(wave_entries), 1)):
        slot_start = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(slots[lo:hi], out=slot_start[1:])
        slot_indices = np.empty(slot_start[-1], dtype=np.int32)
        slot_data = np.empty(slot_start[-1], dtype=np.float32)
        chunks = lo + _chunk_bounds(hi - lo, work[lo:hi], max(1, min(hi - lo, 16 * n_threads)))
        _wave_pass(n_threads, chunks, lo, *arrays, slot_start, slot_indices, slot_data, counts[lo:hi])
        if (counts[lo:hi] < 0).any():
            raise RuntimeError("label graph: a row had more entries than its bound (please report this)")
        n = int(counts[lo:hi].sum())
        indices, data = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.float32)
        _compact(slot_start, counts[lo:hi], slot_indices, slot_data, indices, data)
        pieces.append((indices, data))
        del slot_indices, slot_data
    del C
    indptr = np.zeros(n_labels + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices, data = np.empty(indptr[-1], dtype=np.int32), np.empty(indptr[-1], dtype=np.float32)
    pos = 0
    while pieces:  # free each wave's piece once copied, so the output is not held twice
        piece_indices, piece_data = pieces.pop(0)
        indices[pos : pos + piece_indices.size] = piece_indices
        data[pos : pos + piece_data.size] = piece_data
        pos += piece_indices.size
        del piece_indices, piece_data
    return sp.csr_matrix((data, indices, indptr), shape=(n_labels, n_labels))
