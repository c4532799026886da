"""Label co-occurrence graph and its conditional normalisation (Gandalf paper, eq. 6).

``G = Y^T diag(w) Y`` is never materialised. A two-pass sparse kernel (numba, parallel over
chunks of label rows) walks, for each label j, the training points of j and the labels of those
points, accumulating row j of G in a dense per-chunk accumulator; the first pass counts the
entries that survive the threshold, the second writes them. Peak memory is the output plus one
accumulator of L floats per chunk in flight, instead of the whole un-thresholded ``Y^T Y``.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

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
        wsj = weights[s] * c_data[p]
        for q in range(y_indptr[s], y_indptr[s + 1]):
            i = y_indices[q]
            if not mark[i]:
                mark[i] = True
                touched[n_touched] = i
                n_touched += 1
            acc[i] += wsj * y_data[q]
    return n_touched


@numba.njit(cache=True, nogil=True)
def _normalise(j, i, g, diag, mode, alpha):
    if mode == _CONDITIONAL:
        return g / (diag[j] + alpha)
    return 0.5 * (g / diag[j] + g / diag[i])


@numba.njit(parallel=True, cache=True)
def _count_pass(n_labels, chunk_bounds, y_indptr, y_indices, y_data, c_indptr, c_points, c_data,
                weights, diag, mode, alpha, delta, top_k, counts):
    n_chunks = chunk_bounds.size - 1
    for c in numba.prange(n_chunks):
        acc = np.zeros(n_labels, dtype=np.float64)
        mark = np.zeros(n_labels, dtype=np.bool_)
        touched = np.empty(n_labels, dtype=np.int32)
        for j in range(chunk_bounds[c], chunk_bounds[c + 1]):
            kept = 0
            if diag[j] > 0:
                n_t = _row_entries(j, y_indptr, y_indices, y_data, c_indptr, c_points, c_data,
                                   weights, acc, mark, touched)
                for t in range(n_t):
                    i = touched[t]
                    if i != j and _normalise(j, i, acc[i], diag, mode, alpha) > delta:
                        kept += 1
                    acc[i] = 0.0
                    mark[i] = False
            if top_k >= 0 and kept > top_k:
                kept = top_k
            counts[j] = kept + 1  # + self


@numba.njit(parallel=True, cache=True)
def _fill_pass(n_labels, chunk_bounds, y_indptr, y_indices, y_data, c_indptr, c_points, c_data,
               weights, diag, mode, alpha, delta, top_k, self_value, out_indptr, out_indices, out_data):
    n_chunks = chunk_bounds.size - 1
    for c in numba.prange(n_chunks):
        acc = np.zeros(n_labels, dtype=np.float64)
        mark = np.zeros(n_labels, dtype=np.bool_)
        touched = np.empty(n_labels, dtype=np.int32)
        cand_i = np.empty(n_labels, dtype=np.int32)
        cand_v = np.empty(n_labels, dtype=np.float64)
        for j in range(chunk_bounds[c], chunk_bounds[c + 1]):
            n_c = 0
            if diag[j] > 0:
                n_t = _row_entries(j, y_indptr, y_indices, y_data, c_indptr, c_points, c_data,
                                   weights, acc, mark, touched)
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
            start = out_indptr[j]
            width = out_indptr[j + 1] - start - 1
            if n_c > width:
                # keep the top ``width`` by value; ties go to the lower label id
                order = np.argsort(cand_i[:n_c], kind="mergesort")
                ci = cand_i[:n_c][order]
                cv = cand_v[:n_c][order]
                order2 = np.argsort(-cv, kind="mergesort")[:width]
                sel_i = ci[order2]
                sel_v = cv[order2]
            else:
                sel_i = cand_i[:n_c].copy()
                sel_v = cand_v[:n_c].copy()
            # self entry, then sort the row by label id
            row_i = np.empty(sel_i.size + 1, dtype=np.int32)
            row_v = np.empty(sel_i.size + 1, dtype=np.float64)
            row_i[:-1] = sel_i
            row_v[:-1] = sel_v
            row_i[-1] = j
            row_v[-1] = self_value
            order = np.argsort(row_i)
            for t in range(row_i.size):
                out_indices[start + t] = row_i[order[t]]
                out_data[start + t] = row_v[order[t]]


def _chunk_bounds(n_labels: int, work: np.ndarray, n_chunks: int) -> np.ndarray:
    """Split label rows into chunks of roughly equal work (so threads stay balanced)."""
    cum = np.concatenate([[0], np.cumsum(work, dtype=np.float64)])
    targets = np.linspace(0, cum[-1], n_chunks + 1)
    bounds = np.searchsorted(cum, targets, side="left")
    bounds[0], bounds[-1] = 0, n_labels
    return np.unique(bounds).astype(np.int64)


def prepare_labels(Y: sp.spmatrix, point_weights: np.ndarray | None
                   ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """Canonical float CSR labels, per-point weights (default 1), ``diag`` = G_jj and ``work`` =
    each row of G's co-occurrence pairs (+1), which balances chunks of label rows."""
    Y = sp.csr_matrix(Y)
    if Y.dtype not in (np.float32, np.float64):
        Y = Y.astype(np.float32)
    Y.sum_duplicates()
    n_points, n_labels = Y.shape
    w = np.ones(n_points) if point_weights is None else np.asarray(point_weights, dtype=np.float64)
    if w.shape != (n_points,):
        raise ValueError(f"point_weights must have one weight per training point ({n_points})")
    rows = np.repeat(np.arange(n_points), np.diff(Y.indptr))
    diag = np.bincount(Y.indices, weights=w[rows] * Y.data.astype(np.float64) ** 2, minlength=n_labels)
    row_nnz = np.diff(Y.indptr).astype(np.float64)
    work = np.bincount(Y.indices, weights=row_nnz[rows], minlength=n_labels) + 1.0
    return Y, w, diag, work


def conditional_graph(Y: sp.spmatrix, *, delta: float = 0.1, top_k: int | None = None, shrinkage: float = 0.0,
                      point_weights: np.ndarray | None = None, symmetric: bool = False,
                      self_value: float = 1.0) -> sp.csr_matrix:
    """Row j = soft targets of label j's extra point, from label co-occurrence.

    With ``G = Y^T diag(w) Y`` (``w`` = ``point_weights``, default 1):

    * ``symmetric=False`` (Gandalf, eq. 6): ``y_j[i] = G_ji / (G_jj + shrinkage)``, kept if it is
      strictly greater than ``delta``;
    * ``symmetric=True`` (GLaS's S): ``0.5 (G_ji / G_jj + G_ji / G_ii)``, kept if > ``delta``.

    The self entry ``y_j[j]`` is always ``self_value``; a label without training positives gets
    the self entry only. ``top_k`` caps the other entries a row (largest first, ties to the
    lower id). Returns an ``L x L`` float32 CSR matrix with sorted indices.
    """
    Y, w, diag, work = prepare_labels(Y, point_weights)
    n_labels = Y.shape[1]
    C = Y.tocsc()
    C.sort_indices()
    n_chunks = max(1, min(n_labels, 16 * numba.get_num_threads()))
    bounds = _chunk_bounds(n_labels, work, n_chunks)
    mode = _SYMMETRIC if symmetric else _CONDITIONAL
    k = -1 if top_k is None else int(top_k)
    args = (n_labels, bounds, Y.indptr.astype(np.int64), Y.indices.astype(np.int32, copy=False), Y.data,
            C.indptr.astype(np.int64), C.indices.astype(np.int32, copy=False), C.data, w, diag, mode,
            float(shrinkage), float(delta), k)
    counts = np.zeros(n_labels, dtype=np.int64)
    _count_pass(*args, counts)
    indptr = np.zeros(n_labels + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.empty(indptr[-1], dtype=np.float32)
    _fill_pass(*args, float(self_value), indptr, indices, data)
    return sp.csr_matrix((data, indices, indptr), shape=(n_labels, n_labels))
