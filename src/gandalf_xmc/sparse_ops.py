"""Small sparse-matrix kernels shared by the models (numba; rows need not have sorted indices)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np
import scipy.sparse as sp

from .row_ops import top_k_of_row

SERIAL_BELOW = 256  # rows: smaller inputs (single queries) run on the calling thread only


@contextmanager
def threads_for(n_rows: int) -> Iterator[None]:
    """Run numba parallel kernels on one thread for small inputs: waking the pool costs more than
    the work, and a busy core would stall a single query until it is free."""
    if n_rows >= SERIAL_BELOW:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


@numba.njit(cache=True, nogil=True)
def grown(a: np.ndarray, n: int) -> np.ndarray:
    """A copy of ``a`` in a new array of at least ``n`` entries (twice ``a``'s size if that is more):
    output buffers of numba kernels that cannot know their size in advance."""
    out = np.empty(max(2 * a.size, n), dtype=a.dtype)
    out[: a.size] = a
    return out


@numba.njit(cache=True, nogil=True)
def row_top_k(cols: np.ndarray, vals: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest values (ties: lower column id) in one row, in O(row length)."""
    n = vals.size
    if n <= k:
        return np.arange(n)
    threshold = np.partition(-vals, k - 1)[k - 1] * -1.0  # the k-th largest value
    out = np.empty(k, dtype=np.int64)
    m = 0
    for j in range(n):
        if vals[j] > threshold:
            out[m] = j
            m += 1
    need = k - m
    if need > 0:
        ties = np.where(vals == threshold)[0]
        order = np.argsort(cols[ties], kind="mergesort")
        for t in range(need):
            out[m] = ties[order[t]]
            m += 1
    return out


@numba.njit(parallel=True, cache=True)
def _top_k_mask(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, k: int) -> np.ndarray:
    keep = np.zeros(data.size, dtype=np.bool_)
    for i in numba.prange(indptr.size - 1):
        lo, hi = indptr[i], indptr[i + 1]
        for j in row_top_k(indices[lo:hi], data[lo:hi], k):
            keep[lo + j] = True
    return keep


def top_k_per_row(S: sp.spmatrix, k: int, distinct: bool = False) -> sp.csr_matrix:
    """The ``k`` largest entries of each row of ``S`` (ties: lower column id) as float32 CSR.

    ``distinct=True`` promises no repeated column within a row (true of scipy's sparse products),
    which skips merging duplicates: that sorts every row, the larger part of the cost on products.
    """
    S = S if sp.isspmatrix_csr(S) and S.dtype == np.float32 else sp.csr_matrix(S, dtype=np.float32)
    if not distinct and not S.has_canonical_format:  # summed on a copy: the caller's matrix stays as it is
        S = S.copy()
        S.sum_duplicates()
    if S.shape[0] == 1:  # a single query: the same entries, without the batch path's bookkeeping
        return _top_k_of_one_row(S, int(k))
    with threads_for(S.shape[0]):
        keep = _top_k_mask(S.indptr.astype(np.int64), S.indices, S.data, int(k))
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    indptr = np.zeros(S.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=S.shape[0]), out=indptr[1:])
    out = sp.csr_matrix((S.data[keep], S.indices[keep], indptr), shape=S.shape)
    out.sort_indices()
    return out


def _top_k_of_one_row(S: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """:func:`top_k_per_row` of a one-row ``S`` (duplicates summed): the entries
    :func:`.row_ops.top_k_of_row` keeps (``row_top_k``'s), in column order."""
    return one_row(*top_k_of_row(S.indices[S.indptr[0] : S.indptr[1]], S.data[S.indptr[0] : S.indptr[1]], k), S.shape[1])


def csr_arrays(M: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A CSR matrix's ``(indptr, indices, data, number of columns)``: a single query's products' operand."""
    return M.indptr, M.indices, M.data, M.shape[1]


def one_row(cols: np.ndarray, vals: np.ndarray, n_columns: int) -> sp.csr_matrix:
    """A ``1 x n_columns`` float32 CSR of one row's ``cols`` (distinct, ascending) and ``vals``."""
    out = sp.csr_matrix(
        (np.asarray(vals, dtype=np.float32), np.asarray(cols, dtype=np.int32), np.array([0, len(cols)], dtype=np.int32)),
        shape=(1, n_columns),
    )
    out.has_sorted_indices = True
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def scatter_add(indptr, indices, data, row, weight, acc, mark, touched, n_touched):
    """``acc += weight * row`` for row ``row`` of a CSR matrix's arrays, each column met for the
    first time marked in ``mark`` and listed in ``touched`` after the ``n_touched`` listed already;
    returns the new count (the sparse accumulator of a row-by-row sparse product)."""
    for q in range(indptr[row], indptr[row + 1]):
        j = indices[q]
        if not mark[j]:
            mark[j] = True
            touched[n_touched] = j
            n_touched += 1
        acc[j] += weight * data[q]
    return n_touched


@numba.njit(cache=True, nogil=True)
def row_times_compiled(q_idx, q_val, indptr, indices, data, n_columns):
    """One sparse row (ids ``q_idx``, float32 values ``q_val``) times a float32 CSR matrix of
    ``n_columns`` columns, summed as scipy's product sums it (float32, in the row's order, zero sums
    left out): ``(columns, sums)``, the columns in order of first touch. The compiled twin of
    :func:`.row_ops.row_times`, for a server's single queries."""
    total = 0
    for t in range(q_idx.size):
        total += indptr[q_idx[t] + 1] - indptr[q_idx[t]]
    sums = np.zeros(n_columns, dtype=np.float32)
    mark = np.zeros(n_columns, dtype=np.bool_)
    touched = np.empty(total, dtype=np.int64)
    m = 0
    for t in range(q_idx.size):
        m = scatter_add(indptr, indices, data, q_idx[t], q_val[t], sums, mark, touched, m)
    out_cols = np.empty(m, dtype=np.int64)
    out_sums = np.empty(m, dtype=np.float32)
    n = 0
    for i in range(m):
        if sums[touched[i]] != 0:
            out_cols[n] = touched[i]
            out_sums[n] = sums[touched[i]]
            n += 1
    return out_cols[:n], out_sums[:n]


def row_normalised(M: sp.spmatrix) -> sp.csr_matrix:
    """``M`` (float32 CSR, a copy) with every non-zero row scaled to unit l2 norm, computed as
    scikit-learn's ``normalize`` does (float32 squares summed in float64 in stored order): the same bytes."""
    M = sp.csr_matrix(M, dtype=np.float32, copy=True)
    _normalise_rows(M.indptr.astype(np.int64, copy=False), M.data)
    return M


@numba.njit(cache=True, nogil=True)
def _normalise_rows(indptr, data):
    for i in range(indptr.size - 1):
        total = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            total += np.float32(data[p] * data[p])
        if total > 0.0:
            norm = np.sqrt(total)
            for p in range(indptr[i], indptr[i + 1]):
                data[p] = np.float32(data[p] / norm)


def unique_int(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array. ``np.unique`` in numpy 2.4 hashes integer
    arrays, about 80x slower than sorting here (1M int64 keys: 0.53 s against 0.006 s)."""
    a = np.sort(np.asarray(values).ravel())
    if a.size == 0:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def neighbour_vote(
    sims: sp.csr_matrix, targets: sp.csr_matrix, k: int, power: float, divisor: str | float | None
) -> sp.csr_matrix:
    """Each row's top ``k`` labels by its neighbours' vote: ``sims`` (queries x points, each
    query's nearest points and their cosines) clipped at 0 and raised to ``power``, times the
    points' ``targets``. ``divisor``: ``"share"`` divides each row by its weights' sum (the share of
    the weight that carries a label), a number divides every row by it, None leaves the sums.
    ``sims`` is changed in place (the caller's scratch product)."""
    sims.data = np.power(np.maximum(sims.data, 0.0), power, dtype=np.float32)
    scores = top_k_per_row(sims @ targets, k, distinct=True)
    if divisor is None:
        return scores
    if divisor == "share":
        total = np.asarray(sims.sum(axis=1)).ravel()
        inverse = (1.0 / np.where(total > 0, total, 1.0)).astype(np.float32)
    else:
        inverse = np.full(sims.shape[0], 1.0 / float(divisor), dtype=np.float32)
    scores.data = scores.data * np.repeat(inverse, np.diff(scores.indptr))  # each row scaled in place
    return scores


def text_scores(queries: np.ndarray, label_vectors: np.ndarray, k: int) -> sp.csr_matrix:
    """Each query's top ``k`` cosines (clipped at 0) to the label vectors, as a CSR (rows of
    ``queries`` and ``label_vectors`` are unit-length embeddings), a block of queries at a time."""
    n, L = queries.shape[0], label_vectors.shape[0]
    k = min(k, L)
    step = max(1, (1 << 24) // max(L, 1))  # about 64 MB of scores a block
    blocks = []
    for start in range(0, n, step):
        S = np.maximum(queries[start : start + step] @ label_vectors.T, 0.0)
        top = np.argpartition(-S, k - 1, axis=1)[:, :k]
        rows = np.repeat(np.arange(S.shape[0]), k)
        blocks.append(sp.csr_matrix((S[np.arange(S.shape[0])[:, None], top].ravel(), (rows, top.ravel())), shape=S.shape))
    if not blocks:
        return sp.csr_matrix((0, L), dtype=np.float32)
    out = sp.vstack(blocks, format="csr", dtype=np.float32)
    out.eliminate_zeros()
    return out
