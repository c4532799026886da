"""Beam search down a label tree of sparse linear classifiers (the prediction of XR-Linear).

A node's margin is ``z = w . x``; its level score is ``exp(-max(0, 1 - z)^3)`` (PECOS's
``l3-hinge``), or ``1 / (1 + exp(-z))`` for classifiers trained with the logistic loss (whose
margins are log-odds), and a path's score is the product of the level scores along it. At each level the
``beam`` best nodes keep their children as candidates; the last level's candidates are labels.

The weights are searched in chunks, one a parent (the root's chunk holds the top level): a
chunk lists its children's weights by feature (:mod:`.level_chunks`), so a parent's children are
all scored by looking up the query's few features in it, whatever the length of the children's
weight rows (PECOS's chunked layout; a label point's model has long leaf rows, and scanning them
cost the p99). The search goes one level at a time, each level in memory or mapped from files.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError
from ..sparse_ops import threads_for
from .layout_format import CHUNK_FILES, has_chunks
from .level_chunks import lay_out, map_chunks
from .level_store import LaidOutLevel, finite_problem, mappings, open_level, write_level


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


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_end(a, feat_end, end_mark, stride):
    """Where pair ``a``'s entries end (:mod:`.level_chunks`: its low 16 bits, the rest from the
    mark before it); -1 where the mark is missing (a damaged file)."""
    j = a // stride
    if j >= end_mark.size:
        return -1
    mark = end_mark[j]
    return mark + ((np.int64(feat_end[a]) - mark) & 0xFFFF)


@numba.njit(cache=True, nogil=True)
def _chunk_margins(q_idx, q_val, feat_lo, entry_lo, feat, feat_end, end_mark, stride, child, value, half, table, p, z):
    """``z[c] += w_c . q`` for the ``z.size`` children of parent ``p`` (:mod:`.level_chunks`'s
    layout; the weights are ``value``, or where that is empty ``table`` at the float16 bits
    ``half``); False if an entry's bounds or child fall outside the chunk (a damaged file: the
    arrays are mapped, too large to check when loading, and numba does not check indices)."""
    blocks = (feat_lo.size - 1) // (entry_lo.size - 1)
    first = feat_lo[p * blocks]
    base, base_hi = entry_lo[p], entry_lo[p + 1]
    halves = value.size == 0
    block, lo, hi = -1, 0, 0
    for t in range(q_idx.size):
        f = q_idx[t]
        b = f >> 16
        if b >= blocks:
            break  # the query's features ascend: none further is in the layout
        if b != block:
            block, lo, hi = b, feat_lo[p * blocks + b], feat_lo[p * blocks + b + 1]
        low = f & 0xFFFF
        a = _first_at_least(feat, lo, hi, low)
        if a < hi and feat[a] == low:
            start = base if a == first else _pair_end(a - 1, feat_end, end_mark, stride)
            stop = _pair_end(a, feat_end, end_mark, stride)
            if start < base or start > stop or stop > base_hi:
                return False
            v = np.float64(q_val[t])
            for e in range(start, stop):
                c = child[e]
                if c >= z.size:
                    return False
                z[c] += (table[half[e]] if halves else value[e]) * v
            a += 1
        lo = a
    return True


@numba.njit(cache=True, nogil=True)
def _level_score(z, sigmoid):
    if sigmoid:
        return 1.0 / (1.0 + math.exp(-z)) if z > -700.0 else 0.0
    h = 1.0 - z
    return math.exp(-h * h * h) if h > 0 else 1.0


@numba.njit(cache=True, nogil=True)
def _expand_in_chunks(
    q_idx,
    q_val,
    parents,
    parent_scores,
    child_ptr,
    feat_lo,
    entry_lo,
    feat,
    feat_end,
    end_mark,
    stride,
    child,
    value,
    half,
    table,
    sigmoid,
    out_nodes,
    out_scores,
):
    """One query's step down a level in its chunk layout: its kept ``parents`` (-1: none) expand
    to their children, scored, and the best fill ``out_nodes`` / ``out_scores`` (ties: the tree's
    order). False if an entry was damaged."""
    total = 0
    for r in range(parents.size):
        p = parents[r]
        if p >= 0:
            total += child_ptr[p + 1] - child_ptr[p]
    cand = np.empty(total, dtype=np.int64)
    scores = np.empty(total)
    at = 0
    intact = True
    for r in range(parents.size):
        p = parents[r]
        if p < 0:
            continue
        lo, hi = child_ptr[p], child_ptr[p + 1]
        z = np.zeros(hi - lo)
        intact &= _chunk_margins(
            q_idx, q_val, feat_lo, entry_lo, feat, feat_end, end_mark, stride, child, value, half, table, p, z
        )
        for j in range(hi - lo):
            cand[at] = lo + j
            scores[at] = parent_scores[r] * _level_score(z[j], sigmoid)
            at += 1
    best = np.argsort(-scores, kind="mergesort")[: out_nodes.size]
    for r in range(best.size):
        out_nodes[r] = cand[best[r]]
        out_scores[r] = scores[best[r]]
    return intact


@numba.njit(cache=True, parallel=True)
def _chunks_level(
    q_indptr,
    q_indices,
    q_data,
    parents,
    parent_scores,
    child_ptr,
    feat_lo,
    entry_lo,
    feat,
    feat_end,
    end_mark,
    stride,
    child,
    value,
    half,
    table,
    sigmoid,
    keep,
):
    """One level of the search in a level's chunk layout for every query (rows of ``parents``):
    the kept nodes, their path scores and the number of queries that met a damaged entry."""
    n = q_indptr.size - 1
    out_nodes = np.full((n, keep), -1, dtype=np.int64)
    out_scores = np.zeros((n, keep))
    damaged = np.zeros(n, dtype=np.int64)
    for i in numba.prange(n):
        lo, hi = q_indptr[i], q_indptr[i + 1]
        if not _expand_in_chunks(
            q_indices[lo:hi],
            q_data[lo:hi],
            parents[i],
            parent_scores[i],
            child_ptr,
            feat_lo,
            entry_lo,
            feat,
            feat_end,
            end_mark,
            stride,
            child,
            value,
            half,
            table,
            sigmoid,
            out_nodes[i],
            out_scores[i],
        ):
            damaged[i] = 1
    return out_nodes, out_scores, damaged.sum()


@numba.njit(cache=True, nogil=True)
def _chunks_level_one(
    q_idx,
    q_val,
    parents,
    parent_scores,
    child_ptr,
    feat_lo,
    entry_lo,
    feat,
    feat_end,
    end_mark,
    stride,
    child,
    value,
    half,
    table,
    sigmoid,
    keep,
):
    """:func:`_chunks_level` for a single query, without the thread pool's launch."""
    out_nodes = np.full((1, keep), -1, dtype=np.int64)
    out_scores = np.zeros((1, keep))
    intact = _expand_in_chunks(
        q_idx,
        q_val,
        parents[0],
        parent_scores[0],
        child_ptr,
        feat_lo,
        entry_lo,
        feat,
        feat_end,
        end_mark,
        stride,
        child,
        value,
        half,
        table,
        sigmoid,
        out_nodes[0],
        out_scores[0],
    )
    return out_nodes, out_scores, 0 if intact else 1


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
def _rows_level(q_indptr, q_indices, q_data, parents, parent_scores, child_ptr, indptr, indices, data, sigmoid, keep):
    """One level of the search on a level's CSR rows: each query's kept ``parents`` (-1: none)
    expand to their children, scored and cut to the ``keep`` best (the chunk kernel's order)."""
    n = q_indptr.size - 1
    out_nodes = np.full((n, keep), -1, dtype=np.int64)
    out_scores = np.zeros((n, keep))
    for i in numba.prange(n):
        q_idx, q_val = q_indices[q_indptr[i] : q_indptr[i + 1]], q_data[q_indptr[i] : q_indptr[i + 1]]
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
                margin = _row_margin(q_idx, q_val, indptr, indices, data, c)
                scores[at] = parent_scores[i, r] * _level_score(margin, sigmoid)
                at += 1
        best = np.argsort(-scores, kind="mergesort")[:keep]
        for r in range(best.size):
            out_nodes[i, r] = cand[best[r]]
            out_scores[i, r] = scores[best[r]]
    return out_nodes, out_scores


# Weights of a level above which it is searched in its CSR rows when it has no layout in files:
# laid out in memory, a level holds 6 to 11 bytes a weight (about 24 while it is built)
CHUNK_LAYOUT_ENTRIES = 100_000_000


class TreeWeights:
    """The classifiers of every level (level 0 = top nodes, last = the labels, in tree order), each
    non-final level's child offsets, and each level's layout for the search (:mod:`.level_chunks`):
    mapped from the level's directory where one was written (``chunk_dirs``; a
    :class:`.LaidOutLevel` has no other copy of its weights), else laid out in memory; a level of
    more than ``chunk_entries`` weights without one is searched in its CSR rows (each node's
    features looked up by bisection: the same results, slower). ``sigmoid``: nodes are scored by
    the sigmoid of their margins (classifiers of the logistic loss), not l3-hinge."""

    def __init__(
        self,
        levels: list[sp.csr_matrix | LaidOutLevel],
        children: list[np.ndarray],
        chunk_entries: int = CHUNK_LAYOUT_ENTRIES,
        chunk_dirs: list[Path | None] | None = None,
        sigmoid: bool = False,
    ):
        self.sigmoid = bool(sigmoid)
        if len(children) != len(levels) - 1:
            raise ValueError("one children array per level but the last")
        self.levels = [W if isinstance(W, LaidOutLevel) else _float32_csr(W) for W in levels]
        # level t's parent p has the rows [lo, hi) of level t as children (level 0: the root's)
        self.bounds = [np.array([0, self.levels[0].shape[0]], dtype=np.int64)] + [np.asarray(c, dtype=np.int64) for c in children]
        dirs = chunk_dirs or [None] * len(self.levels)
        self.chunks = [_level_chunks(W, b, d, chunk_entries) for W, b, d in zip(self.levels, self.bounds, dirs)]

    @property
    def n_positions(self) -> int:
        return self.levels[-1].shape[0]

    def search(self, Q: sp.csr_matrix, beam: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, scores)``, each ``n x k``: the last level's best rows for each query row
        of ``Q`` (same features as the weights), best first; -1 / 0 pad short rows."""
        if not (sp.isspmatrix_csr(Q) and Q.dtype == np.float32):  # a single query: skip needless copies
            Q = sp.csr_matrix(Q, dtype=np.float32)
        Q.sort_indices()
        if Q.shape[0] == 1:  # a single query (a server's request)
            positions, scores = self.search_one(Q.indices.astype(np.int32), Q.data, beam, k)
            return positions[None, :], scores[None, :]
        k = int(min(k, self.n_positions))
        with threads_for(Q.shape[0]):
            q = (Q.indptr.astype(np.int64), Q.indices.astype(np.int32), Q.data)
            parents = np.zeros((Q.shape[0], 1), dtype=np.int64)  # the root
            scores = np.ones((Q.shape[0], 1))
            for t, (W, child_ptr, chunks) in enumerate(zip(self.levels, self.bounds, self.chunks)):
                keep = k if t == len(self.levels) - 1 else int(beam)
                if chunks is None:
                    parents, scores = _rows_level(*q, parents, scores, child_ptr, *_csr_arrays(W), self.sigmoid, keep)
                    continue
                parents, scores, damaged = _chunks_level(  # type: ignore[call-arg]  # numba's stubs
                    *q, parents, scores, child_ptr, *chunks.search_arrays, self.sigmoid, keep
                )
                if damaged:
                    raise DataFormatError(chunks.name, None, "the search layout is damaged (an entry out of its bounds)")
            return parents, scores.astype(np.float32)

    def search_one(self, q_idx: np.ndarray, q_val: np.ndarray, beam: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` of one query given as its ascending feature ids (int32) and float32
        values, without a matrix: ``(positions, scores)``, each of ``k`` entries."""
        k = int(min(k, self.n_positions))
        parents = np.zeros((1, 1), dtype=np.int64)  # the root
        scores = np.ones((1, 1))
        for t, (W, child_ptr, chunks) in enumerate(zip(self.levels, self.bounds, self.chunks)):
            keep = k if t == len(self.levels) - 1 else int(beam)
            if chunks is None:
                q_ptr = np.array([0, q_idx.size], dtype=np.int64)
                with threads_for(1):
                    level = _csr_arrays(W)
                    parents, scores = _rows_level(q_ptr, q_idx, q_val, parents, scores, child_ptr, *level, self.sigmoid, keep)
                continue
            parents, scores, damaged = _chunks_level_one(  # type: ignore[call-arg]  # numba's stubs
                q_idx, q_val, parents, scores, child_ptr, *chunks.search_arrays, self.sigmoid, keep
            )
            if damaged:
                raise DataFormatError(chunks.name, None, "the search layout is damaged (an entry out of its bounds)")
        return parents[0], scores[0].astype(np.float32)

    def save(self, directory: Path, sources: list[Path | None] | None = None) -> None:
        """Write level ``t`` to ``directory / weights_level{t}`` (``.npy`` arrays and, for a large
        level, its search layout); a level already in files at ``sources[t]`` is linked from there."""
        for t, W in enumerate(self.levels):
            write_level(W, directory / f"weights_level{t}", sources[t] if sources else None)

    def map_saved(self, directory: Path, levels: list[int], n_columns: int) -> None:
        """Read ``levels`` mapped from the files :meth:`save` wrote, instead of the files they were
        mapped from (a training directory about to go)."""
        for t in levels:
            self.levels[t] = open_level(directory / f"weights_level{t}", n_columns)
            self.chunks[t] = _level_chunks(self.levels[t], self.bounds[t], directory / f"weights_level{t}", 0)

    def mapped_arrays(self) -> list[np.ndarray]:
        """The arrays the search reads that may be mapped from files (for a server's warm-up)."""
        return [
            a for W, chunks in zip(self.levels, self.chunks) for a in (chunks.arrays if chunks is not None else _csr_arrays(W))
        ]

    def hold_in_memory(self) -> int:
        """Copy every array the search reads out of its file mapping into this process's own
        memory, so that nothing done to the files later (a copy over them truncates them in
        place, and a mapped page past a file's new end is SIGBUS) reaches the search; returns the
        bytes copied. A level searched through its layout keeps its CSR mapped but never reads it."""
        copied = 0

        def own(array: np.ndarray) -> np.ndarray:
            nonlocal copied
            if not mappings([array]):
                return array
            copied += array.nbytes
            return np.array(array)

        for t, (W, chunks) in enumerate(zip(self.levels, self.chunks)):
            if chunks is not None:
                self.chunks[t] = dataclasses.replace(chunks, **{name: own(getattr(chunks, name)) for name in CHUNK_FILES})
                values, where = self.chunks[t].value, chunks.name
            else:
                assert isinstance(W, sp.csr_matrix)  # a level without a layout has its CSR
                owned = sp.csr_matrix((own(W.data), own(W.indices), own(W.indptr)), shape=W.shape, copy=False)
                owned.has_sorted_indices = True
                self.levels[t] = owned
                values, where = owned.data, f"level {t}"
            # levels too large to check when loaded (level_store.check_level) are checked here, read anyway
            if finite_problem(values, check_entries=values.size):
                raise DataFormatError(where, None, "damaged model: a weight is not a finite number")
        return copied

    def mapped_files(self) -> list[str]:
        """The files the search still reads through a mapping."""
        return sorted({str(m.filename) for m in mappings(self.mapped_arrays())})


def _level_chunks(W: sp.csr_matrix | LaidOutLevel, child_ptr: np.ndarray, directory: Path | None, chunk_entries: int):
    """A level's layout: mapped from ``directory`` where one was written there, else laid out in
    memory up to ``chunk_entries`` weights, else None (searched in its CSR rows)."""
    if has_chunks(directory):
        assert directory is not None
        chunks = map_chunks(directory, child_ptr, W.shape[1])
        if chunks.child.size != W.nnz:
            raise ValueError(f"{directory.name}: the search layout holds {chunks.child.size:,} weights, the level {W.nnz:,}")
        return chunks
    if isinstance(W, LaidOutLevel):
        raise ValueError(f"{directory.name if directory else 'a level'}: neither weights nor a search layout")
    return lay_out(W, child_ptr) if W.nnz <= chunk_entries else None


def _csr_arrays(W: sp.csr_matrix | LaidOutLevel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A level's CSR arrays: a level searched without a layout always has its CSR."""
    assert isinstance(W, sp.csr_matrix)
    return W.indptr, W.indices, W.data


def _float32_csr(W: sp.spmatrix) -> sp.csr_matrix:
    """``W`` as float32 CSR with sorted indices, without copying one that already is (a level
    mapped from disk stays mapped)."""
    if not (sp.isspmatrix_csr(W) and W.dtype == np.float32):
        W = sp.csr_matrix(W, dtype=np.float32)
    if not W.has_sorted_indices:
        W = W.copy()
        W.sort_indices()
    return W
