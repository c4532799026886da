"""Beam search down a label tree of sparse linear classifiers (the prediction of XR-Linear).

A node's margin is ``z = w . x``; its level score is ``exp(-max(0, 1 - z)^3)`` (PECOS's
``l3-hinge``), and a path's score is the product of the level scores along it. At each level the
``beam`` best nodes keep their children as candidates; the last level's candidates are labels.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.sparse as sp

from ..sparse_ops import threads_for


@numba.njit(cache=True, nogil=True)
def _margin(q_idx, q_val, q_dense, w_indptr, w_indices, w_data, node):
    """``w_node . q`` for a query with ascending feature ids. A row shorter than about 32 binary
    searches' worth is scanned against the query's dense copy ``q_dense`` (one sequential pass);
    in a longer one each query feature is found by binary search."""
    lo, hi = w_indptr[node], w_indptr[node + 1]
    z = 0.0
    if hi - lo <= 32 * q_idx.size:
        for pos in range(lo, hi):
            z += w_data[pos] * q_dense[w_indices[pos]]
        return z
    for t in range(q_idx.size):
        if lo >= hi:
            break
        f = q_idx[t]
        a, b = lo, hi  # the first position whose feature is >= f
        while a < b:
            mid = (a + b) >> 1
            if w_indices[mid] < f:
                a = mid + 1
            else:
                b = mid
        if a < hi and w_indices[a] == f:
            z += w_data[a] * q_val[t]
            a += 1
        lo = a
    return z


@numba.njit(cache=True, nogil=True)
def _level_score(z):
    h = 1.0 - z
    return math.exp(-h * h * h) if h > 0 else 1.0


@numba.njit(cache=True, nogil=True)
def _one_query(q_idx, q_val, q_dense, level_ptrs, level_idx, level_val, level_offsets, child_ptrs, child_offsets, n_top, beam,
               k, out_pos, out_score):
    n_levels = level_offsets.size - 1
    # level 0: every top node is a candidate, with parent score 1
    cand = np.arange(n_top)
    cand_parent_score = np.ones(n_top)
    for t in range(n_levels):
        ptr = level_ptrs[level_offsets[t]:level_offsets[t + 1]]
        scores = np.empty(cand.size)
        for c in range(cand.size):
            z = _margin(q_idx, q_val, q_dense, ptr, level_idx, level_val, cand[c])
            scores[c] = cand_parent_score[c] * _level_score(z)
        keep = k if t == n_levels - 1 else beam
        if cand.size > keep:
            best = np.argsort(-scores, kind="mergesort")[:keep]
        else:
            best = np.argsort(-scores, kind="mergesort")
        if t == n_levels - 1:
            for r in range(best.size):
                out_pos[r] = cand[best[r]]
                out_score[r] = scores[best[r]]
            return
        cptr = child_ptrs[child_offsets[t]:child_offsets[t + 1]]
        total = 0
        for r in range(best.size):
            node = cand[best[r]]
            total += cptr[node + 1] - cptr[node]
        nxt = np.empty(total, dtype=np.int64)
        nxt_score = np.empty(total)
        at = 0
        for r in range(best.size):
            node = cand[best[r]]
            for child in range(cptr[node], cptr[node + 1]):
                nxt[at] = child
                nxt_score[at] = scores[best[r]]
                at += 1
        cand, cand_parent_score = nxt, nxt_score


@numba.njit(cache=True, parallel=True)
def _search(q_indptr, q_indices, q_data, n_features, n_chunks, level_ptrs, level_idx, level_val, level_offsets,
            child_ptrs, child_offsets, n_top, beam, k):
    n = q_indptr.size - 1
    out_pos = np.full((n, k), -1, dtype=np.int64)
    out_score = np.zeros((n, k), dtype=np.float32)
    for c in numba.prange(n_chunks):
        q_dense = np.zeros(n_features, dtype=np.float32)  # one per chunk of queries, cleared after each
        for i in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            lo, hi = q_indptr[i], q_indptr[i + 1]
            for t in range(lo, hi):
                q_dense[q_indices[t]] = q_data[t]
            _one_query(q_indices[lo:hi], q_data[lo:hi], q_dense, level_ptrs, level_idx, level_val, level_offsets,
                       child_ptrs, child_offsets, n_top, beam, k, out_pos[i], out_score[i])
            for t in range(lo, hi):
                q_dense[q_indices[t]] = 0.0
    return out_pos, out_score


class TreeWeights:
    """The classifiers of every level (level 0 = top nodes, last = the labels, in tree order) and
    each non-final level's child offsets, packed into flat arrays for the search kernel."""

    def __init__(self, levels: list[sp.csr_matrix], children: list[np.ndarray]):
        if len(children) != len(levels) - 1:
            raise ValueError("one children array per level but the last")
        self.levels = [sp.csr_matrix(W, dtype=np.float32) for W in levels]
        for W in self.levels:
            W.sort_indices()
        self.children = [np.asarray(c, dtype=np.int64) for c in children]
        self.level_offsets = np.cumsum([0] + [W.shape[0] + 1 for W in self.levels]).astype(np.int64)
        # each level's row pointers, shifted into one flat array of weights
        starts = np.cumsum([0] + [W.nnz for W in self.levels])
        self.level_ptrs = np.concatenate([W.indptr.astype(np.int64) + s for W, s in zip(self.levels, starts)])
        self.level_idx = np.concatenate([W.indices.astype(np.int32) for W in self.levels]) if self.levels else \
            np.zeros(0, np.int32)
        self.level_val = np.concatenate([W.data for W in self.levels]) if self.levels else np.zeros(0, np.float32)
        self.child_offsets = np.cumsum([0] + [c.size for c in self.children]).astype(np.int64)
        self.child_ptrs = np.concatenate(self.children) if self.children else np.zeros(0, np.int64)

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
            n_chunks = min(Q.shape[0], 4 * numba.get_num_threads())
            return _search(Q.indptr.astype(np.int64), Q.indices.astype(np.int32), Q.data, Q.shape[1], n_chunks,
                           self.level_ptrs,
                           self.level_idx, self.level_val, self.level_offsets, self.child_ptrs, self.child_offsets,
                           self.levels[0].shape[0], int(beam), k)
