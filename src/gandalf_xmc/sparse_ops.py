"""Small sparse-matrix kernels shared by the models (numba; rows need not have sorted indices)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np
import scipy.sparse as sp

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
def _row_top_k(cols: np.ndarray, vals: np.ndarray, k: int) -> np.ndarray:
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
        for j in _row_top_k(indices[lo:hi], data[lo:hi], k):
            keep[lo + j] = True
    return keep


def top_k_per_row(S: sp.spmatrix, k: int, distinct: bool = False) -> sp.csr_matrix:
    """The ``k`` largest entries of each row of ``S`` (ties: lower column id) as float32 CSR.

    ``distinct=True`` promises no repeated column within a row (true of scipy's sparse products),
    which skips merging duplicates: that sorts every row, the larger part of the cost on products.
    """
    S = sp.csr_matrix(S, dtype=np.float32)
    if not distinct:
        S.sum_duplicates()
    with threads_for(S.shape[0]):
        keep = _top_k_mask(S.indptr.astype(np.int64), S.indices, S.data, int(k))
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    indptr = np.zeros(S.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=S.shape[0]), out=indptr[1:])
    out = sp.csr_matrix((S.data[keep], S.indices[keep], indptr), shape=S.shape)
    out.sort_indices()
    return out


@numba.njit(cache=True, nogil=True)
def _add_once(label, mark, row_out, m):
    """Append ``label`` to ``row_out[:m]`` unless already marked; returns the new length."""
    if mark[label]:
        return m
    mark[label] = True
    row_out[m] = label
    return m + 1


@numba.njit(parallel=True, cache=True)
def _union_kernel(n_rows, n_labels, v_ptr, v_idx, v_val, t_ptr, t_idx, t_val, e_ptr, e_idx, k_votes, k_text, width,
                  chunk):
    counts = np.zeros(n_rows, dtype=np.int64)
    out_cols = np.full((n_rows, width), -1, dtype=np.int64)
    out_feat = np.zeros((n_rows, width, 2), dtype=np.float32)
    n_chunks = (n_rows + chunk - 1) // chunk
    for c in numba.prange(n_chunks):
        vote_of = np.zeros(n_labels, dtype=np.float32)
        text_of = np.zeros(n_labels, dtype=np.float32)
        mark = np.zeros(n_labels, dtype=np.bool_)
        for i in range(c * chunk, min(n_rows, (c + 1) * chunk)):
            lo, hi = v_ptr[i], v_ptr[i + 1]
            for j in range(lo, hi):
                vote_of[v_idx[j]] = v_val[j]
            tlo, thi = t_ptr[i], t_ptr[i + 1]
            for j in range(tlo, thi):
                text_of[t_idx[j]] = t_val[j]
            row_out = out_cols[i]
            m = 0
            for j in _row_top_k(v_idx[lo:hi], v_val[lo:hi], k_votes):
                m = _add_once(v_idx[lo + j], mark, row_out, m)
            for j in _row_top_k(t_idx[tlo:thi], t_val[tlo:thi], k_text):
                m = _add_once(t_idx[tlo + j], mark, row_out, m)
            for j in range(e_ptr[i], e_ptr[i + 1]):
                m = _add_once(e_idx[j], mark, row_out, m)
            row = np.sort(out_cols[i, :m])
            for j in range(m):
                lab = row[j]
                out_cols[i, j] = lab
                out_feat[i, j, 0] = vote_of[lab]
                out_feat[i, j, 1] = text_of[lab]
                mark[lab] = False
            counts[i] = m
            for j in range(lo, hi):
                vote_of[v_idx[j]] = 0.0
            for j in range(tlo, thi):
                text_of[t_idx[j]] = 0.0
    return counts, out_cols, out_feat


def union_of_top_k(votes: sp.csr_matrix, text: sp.csr_matrix, k_votes: int, k_text: int,
                   extra: sp.csr_matrix | None = None, distinct: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the union of the top ``k_votes`` of ``votes``, the top ``k_text`` of ``text`` and the
    entries of ``extra``, as (indptr, ascending columns, features) with features = (votes value,
    text value) at each column (0 where absent). ``distinct``: as in :func:`top_k_per_row`."""
    n, n_labels = votes.shape
    votes, text = sp.csr_matrix(votes, dtype=np.float32), sp.csr_matrix(text, dtype=np.float32)
    if not distinct:
        votes.sum_duplicates()
        text.sum_duplicates()
    extra = sp.csr_matrix((n, n_labels), dtype=np.float32) if extra is None else sp.csr_matrix(extra)
    width = k_votes + k_text + int(np.diff(extra.indptr).max(initial=0))
    with threads_for(n):
        counts, cols, feats = _union_kernel(n, n_labels, votes.indptr.astype(np.int64), votes.indices, votes.data,
                                            text.indptr.astype(np.int64), text.indices, text.data,
                                            extra.indptr.astype(np.int64), extra.indices, k_votes, k_text, width, 256)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    keep = np.arange(width)[None, :] < counts[:, None]
    return indptr, cols[keep], feats[keep]


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
