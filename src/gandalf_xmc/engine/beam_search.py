"""Beam search down a label tree of sparse linear classifiers (the prediction of XR-Linear).

A node's margin is ``z = w . x``; its level score is ``exp(-max(0, 1 - z)^3)`` (PECOS's
``l3-hinge``), and a path's score is the product of the level scores along it. At each level the
``beam`` best nodes keep their children as candidates; the last level's candidates are labels.

The weights are searched in chunks, one a parent (the root's chunk holds the top level): a
chunk lists its children's weights by feature, so a parent's children are all scored by looking
up the query's few features in it, whatever the length of the children's weight rows (PECOS's
chunked layout; a label point's model has long leaf rows, and scanning them cost the p99).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.sparse as sp

from ..sparse_ops import threads_for


@numba.njit(cache=True, nogil=True, inline="always")
def _first_at_least(ascending, lo, hi, f):
    """The first position in ``ascending[lo:hi]`` whose value is >= ``f`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if ascending[mid] < f:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _chunk_margins(q_idx, q_val, feat, feat_start, child, value, f_lo, f_hi, z):
    """``z[c] += w_c . q`` for the children of one chunk, whose features ``feat[f_lo:f_hi]``
    ascend; feature ``feat[a]``'s weights are ``(child, value)[feat_start[a]:feat_start[a + 1]]``."""
    lo = f_lo
    for t in range(q_idx.size):
        if lo >= f_hi:
            break
        f = q_idx[t]
        a = _first_at_least(feat, lo, f_hi, f)
        if a < f_hi and feat[a] == f:
            v = np.float64(q_val[t])
            for e in range(feat_start[a], feat_start[a + 1]):
                z[child[e]] += value[e] * v
            a += 1
        lo = a


@numba.njit(cache=True, nogil=True)
def _level_score(z):
    h = 1.0 - z
    return math.exp(-h * h * h) if h > 0 else 1.0


@numba.njit(cache=True, nogil=True)
def _one_query(q_idx, q_val, chunk_offsets, chunk_child_lo, chunk_child_hi, chunk_feat_lo, feat, feat_start, child,
               value, beam, k, out_pos, out_score):
    n_levels = chunk_offsets.size - 1
    parents = np.zeros(1, dtype=np.int64)  # the root
    parent_score = np.ones(1)
    for t in range(n_levels):
        total = 0
        for r in range(parents.size):
            c = chunk_offsets[t] + parents[r]
            total += chunk_child_hi[c] - chunk_child_lo[c]
        cand = np.empty(total, dtype=np.int64)
        scores = np.empty(total)
        at = 0
        for r in range(parents.size):
            c = chunk_offsets[t] + parents[r]
            lo, n = chunk_child_lo[c], chunk_child_hi[c] - chunk_child_lo[c]
            z = np.zeros(n)
            _chunk_margins(q_idx, q_val, feat, feat_start, child, value, chunk_feat_lo[c], chunk_feat_lo[c + 1], z)
            for j in range(n):
                cand[at] = lo + j
                scores[at] = parent_score[r] * _level_score(z[j])
                at += 1
        keep = k if t == n_levels - 1 else beam
        best = np.argsort(-scores, kind="mergesort")[:keep]
        if t == n_levels - 1:
            for r in range(best.size):
                out_pos[r] = cand[best[r]]
                out_score[r] = scores[best[r]]
            return
        parents = cand[best]
        parent_score = scores[best]


@numba.njit(cache=True, parallel=True)
def _search(q_indptr, q_indices, q_data, chunk_offsets, chunk_child_lo, chunk_child_hi, chunk_feat_lo, feat, feat_start,
            child, value, beam, k):
    n = q_indptr.size - 1
    out_pos = np.full((n, k), -1, dtype=np.int64)
    out_score = np.zeros((n, k), dtype=np.float32)
    for i in numba.prange(n):
        lo, hi = q_indptr[i], q_indptr[i + 1]
        _one_query(q_indices[lo:hi], q_data[lo:hi], chunk_offsets, chunk_child_lo, chunk_child_hi, chunk_feat_lo, feat,
                   feat_start, child, value, beam, k, out_pos[i], out_score[i])
    return out_pos, out_score


@numba.njit(cache=True, nogil=True)
def _row_margin(q_idx, q_val, indptr, indices, data, node):
    """``w_node . q`` by looking up the query's ascending features in the node's CSR row."""
    lo, hi = indptr[node], indptr[node + 1]
    z = 0.0
    for t in range(q_idx.size):
        if lo >= hi:
            break
        f = q_idx[t]
        a = _first_at_least(indices, lo, hi, f)
        if a < hi and indices[a] == f:
            z += data[a] * np.float64(q_val[t])
            a += 1
        lo = a
    return z


@numba.njit(cache=True, parallel=True)
def _rows_level(q_indptr, q_indices, q_data, parents, parent_scores, child_ptr, indptr, indices, data, keep):
    """One level of the search on a level's CSR rows: each query's kept ``parents`` (-1: none)
    expand to their children, scored and cut to the ``keep`` best (the chunk kernel's order)."""
    n = q_indptr.size - 1
    out_nodes = np.full((n, keep), -1, dtype=np.int64)
    out_scores = np.zeros((n, keep))
    for i in numba.prange(n):
        q_idx, q_val = q_indices[q_indptr[i]:q_indptr[i + 1]], q_data[q_indptr[i]:q_indptr[i + 1]]
        total = 0
        for r in range(parents.shape[1]):
            p = parents[i, r]
            if p >= 0:
                total += child_ptr[p + 1] - child_ptr[p]
        cand = np.empty(total, dtype=np.int64)
        scores = np.empty(total)
        at = 0
        for r in range(parents.shape[1]):
            p = parents[i, r]
            if p < 0:
                continue
            for c in range(child_ptr[p], child_ptr[p + 1]):
                cand[at] = c
                scores[at] = parent_scores[i, r] * _level_score(_row_margin(q_idx, q_val, indptr, indices, data, c))
                at += 1
        best = np.argsort(-scores, kind="mergesort")[:keep]
        for r in range(best.size):
            out_nodes[i, r] = cand[best[r]]
            out_scores[i, r] = scores[best[r]]
    return out_nodes, out_scores


@numba.njit(cache=True)
def _chunk_layout(col_ptr, col_rows, col_data, chunk_of_row, row_lo, n_chunks):
    """Entries of a CSC matrix (rows ascending in each column) regrouped chunk by chunk, keeping
    the (feature, row) order within a chunk (a counting sort by chunk): returns (chunk start in the
    feature list, features, start of each feature's entries, entry's row within its chunk, value)."""
    nnz = col_rows.size
    chunk_start = np.zeros(n_chunks + 1, dtype=np.int64)
    for e in range(nnz):
        chunk_start[chunk_of_row[col_rows[e]] + 1] += 1
    for c in range(n_chunks):
        chunk_start[c + 1] += chunk_start[c]
    at = chunk_start[:-1].copy()
    entry_feat = np.empty(nnz, dtype=np.int32)
    child = np.empty(nnz, dtype=np.int32)
    value = np.empty(nnz, dtype=np.float32)
    for f in range(col_ptr.size - 1):
        for e in range(col_ptr[f], col_ptr[f + 1]):
            r = col_rows[e]
            c = chunk_of_row[r]
            p = at[c]
            at[c] += 1
            entry_feat[p] = f
            child[p] = r - row_lo[c]
            value[p] = col_data[e]
    chunk_feat_lo = np.zeros(n_chunks + 1, dtype=np.int64)
    feat = np.empty(nnz, dtype=np.int32)
    feat_start = np.empty(nnz + 1, dtype=np.int64)
    n_feat = 0
    for c in range(n_chunks):
        for p in range(chunk_start[c], chunk_start[c + 1]):
            if p == chunk_start[c] or entry_feat[p] != entry_feat[p - 1]:
                feat[n_feat] = entry_feat[p]
                feat_start[n_feat] = p
                n_feat += 1
        chunk_feat_lo[c + 1] = n_feat
    feat_start[n_feat] = nnz
    return chunk_feat_lo, feat[:n_feat].copy(), feat_start[:n_feat + 1].copy(), child, value


# Entries above which the weights are searched in their CSR rows (mapped from disk at scale)
# instead of being laid out again in chunks: the chunk layout costs 20 bytes an entry in memory
CHUNK_LAYOUT_ENTRIES = 100_000_000


class TreeWeights:
    """The classifiers of every level (level 0 = top nodes, last = the labels, in tree order) and
    each non-final level's child offsets, laid out in chunks (one a parent) for the search kernel;
    beyond ``chunk_entries`` weights in all, searched in the levels' own CSR rows instead (each
    node's features looked up by bisection; the same results, without a second copy)."""

    def __init__(self, levels: list[sp.csr_matrix], children: list[np.ndarray],
                 chunk_entries: int = CHUNK_LAYOUT_ENTRIES):
        if len(children) != len(levels) - 1:
            raise ValueError("one children array per level but the last")
        self.levels = [_float32_csr(W) for W in levels]
        # chunk (t, p): level t's children of parent p (the root's at level 0), rows [lo, hi) of level t
        self.bounds = [np.array([0, self.levels[0].shape[0]], dtype=np.int64)] + \
            [np.asarray(c, dtype=np.int64) for c in children]
        self.chunked = sum(W.nnz for W in self.levels) <= chunk_entries
        if self.chunked:
            self._lay_out_chunks()

    def _lay_out_chunks(self) -> None:
        bounds = self.bounds
        self.chunk_offsets = np.cumsum([0] + [b.size - 1 for b in bounds]).astype(np.int64)
        self.chunk_child_lo = np.concatenate([b[:-1] for b in bounds]).astype(np.int64)
        self.chunk_child_hi = np.concatenate([b[1:] for b in bounds]).astype(np.int64)
        feat_lo, feats, starts, childs, values = [], [], [], [], []
        n_feat, n_entries = 0, 0
        for W, b in zip(self.levels, bounds):
            Wc = W.tocsc()  # entries by feature, rows ascending within one
            chunk_of_row = np.repeat(np.arange(b.size - 1), np.diff(b))
            lo, f, s, c, v = _chunk_layout(Wc.indptr.astype(np.int64), Wc.indices, Wc.data, chunk_of_row, b[:-1],
                                           b.size - 1)
            feat_lo.append(lo[:-1] + n_feat)
            feats.append(f)
            starts.append(s[:-1] + n_entries)
            childs.append(c)
            values.append(v)
            n_feat += f.size
            n_entries += c.size
        self.chunk_feat_lo = np.concatenate(feat_lo + [np.array([n_feat], dtype=np.int64)])
        self.feat = np.concatenate(feats)
        self.feat_start = np.concatenate(starts + [np.array([n_entries], dtype=np.int64)])
        self.child = np.concatenate(childs)
        self.value = np.concatenate(values)

    @property
    def n_positions(self) -> int:
        return self.levels[-1].shape[0]

    def search(self, Q: sp.csr_matrix, beam: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, scores)``, each ``n x k``: the last level's best rows for each query row
        of ``Q`` (same features as the weights), best first; -1 / 0 pad short rows."""
        if not (sp.isspmatrix_csr(Q) and Q.dtype == np.float32):  # a single query: skip needless copies
            Q = sp.csr_matrix(Q, dtype=np.float32)
        Q.sort_indices()
        k = int(min(k, self.n_positions))
        with threads_for(Q.shape[0]):
            q = (Q.indptr.astype(np.int64), Q.indices.astype(np.int32), Q.data)
            if self.chunked:
                return _search(*q, self.chunk_offsets, self.chunk_child_lo, self.chunk_child_hi, self.chunk_feat_lo,
                               self.feat, self.feat_start, self.child, self.value, int(beam), k)
            parents = np.zeros((Q.shape[0], 1), dtype=np.int64)  # the root
            scores = np.ones((Q.shape[0], 1))
            for t, (W, child_ptr) in enumerate(zip(self.levels, self.bounds)):
                keep = k if t == len(self.levels) - 1 else int(beam)
                parents, scores = _rows_level(*q, parents, scores, child_ptr, W.indptr, W.indices, W.data, keep)
            return parents, scores.astype(np.float32)


def _float32_csr(W: sp.spmatrix) -> sp.csr_matrix:
    """``W`` as float32 CSR with sorted indices, without copying one that already is (a level
    mapped from disk stays mapped)."""
    if not (sp.isspmatrix_csr(W) and W.dtype == np.float32):
        W = sp.csr_matrix(W, dtype=np.float32)
    if not W.has_sorted_indices:
        W = W.copy()
        W.sort_indices()
    return W
