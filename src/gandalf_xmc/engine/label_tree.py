"""A hierarchical balanced label tree: spherical 2-means bisection of sparse label vectors.

Every node's labels are a contiguous run of one permutation of the labels (``order``), and each
bisection puts the first ``ceil(n / 2)`` of a run on the left, so the node boundaries at every
depth follow from L alone and only the permutation is learnt. A tree of branching ``2**b`` keeps
every ``b``-th depth counted up from the leaves.

Memory: the label vectors (CSR), the permutation, and per worker thread two dense centroids and
a mark of ``n_features`` entries (about 17 bytes a feature).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from ..sparse_ops import row_normalised, top_k_per_row


@dataclass
class LabelTree:
    """``order[p]`` is the label at position p; ``bounds[t]`` (``K_t + 1`` positions) cuts the
    positions into the ``K_t`` nodes of level t, level 0 being the top; the last level's nodes
    are the leaf clusters. ``children(t)`` gives each level-t node's range of level-(t+1) nodes
    (the labels, after the last level)."""

    order: np.ndarray
    bounds: list[np.ndarray]

    @property
    def n_labels(self) -> int:
        return int(self.order.size)

    def node_of_label(self, level: int) -> np.ndarray:
        """The level-``level`` node of every label (indexed by label id)."""
        node_at_position = np.repeat(np.arange(self.bounds[level].size - 1), np.diff(self.bounds[level]))
        out = np.empty(self.n_labels, dtype=np.int64)
        out[self.order] = node_at_position
        return out

    def children(self, level: int) -> np.ndarray:
        """``K_level + 1`` offsets: node k's children are ``[c[k], c[k + 1])`` at the next level
        (positions in ``order`` below the last level)."""
        below = self.bounds[level + 1] if level + 1 < len(self.bounds) else np.arange(self.n_labels + 1)
        return np.searchsorted(below, self.bounds[level]).astype(np.int64)


# Entries of all label vectors together, at most: when the products could hold more, each label
# keeps only its largest features (at 1.3M labels, 153 a label)
LABEL_VECTOR_ENTRIES = 200_000_000
# Partial sums of one block's product Y_b^T X, at most (about 12 bytes each while it is summed)
PARTIAL_SUMS_PER_BLOCK = 50_000_000


def label_vectors(X: sp.csr_matrix, Y: sp.csr_matrix, Z: sp.csr_matrix | None, text_weight: float = 1.0,
                  max_entries: int = LABEL_VECTOR_ENTRIES, partial_sums_per_block: int = PARTIAL_SUMS_PER_BLOCK
                  ) -> sp.csr_matrix:
    """PIFA (the l2-normalised, target-weighted sum of each label's training rows) plus
    ``text_weight`` times the label text's own l2-normalised features, l2-normalised: a label
    without training positives is placed by its text alone.

    Built in blocks of labels, each block's product ``Y_b^T X`` summing at most about
    ``partial_sums_per_block`` products (one label larger than that is a block of its own), so
    memory beyond the inputs is one block's product plus the result. The vectors are exact when
    they cannot hold more than ``max_entries`` entries (the partial sums and the label texts'
    entries bound them); otherwise each label keeps its ``max_entries // L`` largest features (then
    l2-normalised again), so the result holds at most ``max_entries``.

    Args:
        X: ``N x F`` features of the training points.
        Y: ``N x L`` targets (soft targets weigh their rows).
        Z: ``L x F`` features of the label texts, or None.
    Returns:
        ``L x F`` float32 CSR, rows of unit norm (or zero), indices sorted.
    """
    X = sp.csr_matrix(X, dtype=np.float32)
    YT = sp.csr_matrix(Y, dtype=np.float32).T.tocsr()
    n_labels = YT.shape[0]
    Zn = row_normalised(Z) if Z is not None and text_weight > 0 else None
    pattern = sp.csr_matrix((np.ones(YT.nnz), YT.indices, YT.indptr), shape=YT.shape)
    partial_sums = pattern @ np.diff(X.indptr).astype(np.float64)  # per label: its rows' lengths, summed
    bound = partial_sums.sum() + (Zn.nnz if Zn is not None else 0)
    keep = max(1, max_entries // max(n_labels, 1)) if bound > max_entries else None
    parts = []
    for lo, hi in label_blocks(partial_sums, partial_sums_per_block):
        R = row_normalised(YT[lo:hi] @ X)
        if Zn is not None:
            R = row_normalised(R + np.float32(text_weight) * Zn[lo:hi])
        if keep is not None and np.diff(R.indptr).max(initial=0) > keep:
            R = row_normalised(top_k_per_row(R, keep, distinct=True))
        parts.append(R)
    R = sp.vstack(parts, format="csr", dtype=np.float32) if parts else sp.csr_matrix((0, X.shape[1]), dtype=np.float32)
    R.sort_indices()
    return R


def label_blocks(cost: np.ndarray, per_block: float) -> list[tuple[int, int]]:
    """Consecutive ``(lo, hi)`` ranges covering ``len(cost)`` items, each costing at most
    ``per_block`` in total unless a single item costs more."""
    bounds, lo, total = [], 0, 0.0
    for i, c in enumerate(np.asarray(cost, dtype=np.float64).tolist()):
        if i > lo and total + c > per_block:
            bounds.append((lo, i))
            lo, total = i, 0.0
        total += c
    if lo < len(cost):
        bounds.append((lo, len(cost)))
    return bounds


@numba.njit(cache=True, nogil=True)
def _normalise_touched(c, touched, n_touched):
    s = 0.0
    for t in range(n_touched):
        s += c[touched[t]] * c[touched[t]]
    if s > 0:
        inv = 1.0 / math.sqrt(s)
        for t in range(n_touched):
            c[touched[t]] *= inv


@numba.njit(cache=True, nogil=True)
def _add_rows(members, side, want, r_indptr, r_indices, r_data, c):
    for q in range(members.size):
        if side[q] == want:
            m = members[q]
            for p in range(r_indptr[m], r_indptr[m + 1]):
                c[r_indices[p]] += r_data[p]


@numba.njit(cache=True, nogil=True)
def _bisect(seg_lo, seg_hi, seeds, order, r_indptr, r_indices, r_data, n_features, iterations):
    """Split each run ``order[lo:hi]`` in place: the ``ceil(n / 2)`` labels closest to the first
    of two spherical centroids (relative to the second) first, the rest after."""
    c0 = np.zeros(n_features, dtype=np.float32)
    c1 = np.zeros(n_features, dtype=np.float32)
    mark = np.zeros(n_features, dtype=np.bool_)
    touched = np.empty(n_features, dtype=np.int64)
    for s in range(seg_lo.size):
        lo, hi = seg_lo[s], seg_hi[s]
        n = hi - lo
        if n < 2:
            continue
        members = order[lo:hi].copy()
        n_t = 0
        for q in range(n):
            m = members[q]
            for p in range(r_indptr[m], r_indptr[m + 1]):
                j = r_indices[p]
                if not mark[j]:
                    mark[j] = True
                    touched[n_t] = j
                    n_t += 1
        np.random.seed(seeds[s])
        a = np.random.randint(n)
        b = np.random.randint(n - 1)
        if b >= a:
            b += 1
        side = np.zeros(n, dtype=np.int8)  # 1: first centroid's half
        side[a] = 1
        side[b] = 2
        _add_rows(members, side, 1, r_indptr, r_indices, r_data, c0)
        _add_rows(members, side, 2, r_indptr, r_indices, r_data, c1)
        half = (n + 1) // 2
        diff = np.empty(n, dtype=np.float64)
        ranking = np.arange(n)
        for _ in range(iterations):
            _normalise_touched(c0, touched, n_t)
            _normalise_touched(c1, touched, n_t)
            for q in range(n):
                m = members[q]
                d = 0.0
                for p in range(r_indptr[m], r_indptr[m + 1]):
                    j = r_indices[p]
                    d += r_data[p] * (c0[j] - c1[j])
                diff[q] = d
            ranking = np.argsort(-diff, kind="mergesort")  # ties keep the run's order
            changed = False
            for r in range(n):
                new_side = 1 if r < half else 0
                if side[ranking[r]] != new_side:
                    changed = True
                    side[ranking[r]] = new_side
            if not changed:
                break
            for t in range(n_t):
                c0[touched[t]] = 0.0
                c1[touched[t]] = 0.0
            _add_rows(members, side, 1, r_indptr, r_indices, r_data, c0)
            _add_rows(members, side, 0, r_indptr, r_indices, r_data, c1)
        order[lo:hi] = members[ranking]
        for t in range(n_t):
            j = touched[t]
            c0[j] = 0.0
            c1[j] = 0.0
            mark[j] = False


def _halve(bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[:-1], bounds[1:]
    mid = lo + (hi - lo + 1) // 2
    out = np.empty(2 * lo.size + 1, dtype=np.int64)
    out[0:-1:2], out[1:-1:2], out[-1] = lo, mid, bounds[-1]
    return out


def build_tree(R: sp.csr_matrix, branching: int = 16, leaf_size: int = 100, seed: int = 0, iterations: int = 8,
               threads: int | None = None) -> LabelTree:
    """Balanced tree of the rows of ``R`` (label vectors): bisect every run until no leaf holds
    more than ``leaf_size`` labels, then keep every ``log2(branching)``-th depth from the leaves.

    Runs of one depth are split on ``threads`` worker threads (default: numba's thread count);
    each run's random start is seeded by ``(seed, depth, run)``, so the tree does not depend on
    the thread count.
    """
    if branching < 2 or branching & (branching - 1):
        raise ValueError(f"branching must be a power of two >= 2, got {branching}")
    if leaf_size < 1:
        raise ValueError("leaf_size must be >= 1")
    R = sp.csr_matrix(R, dtype=np.float32)
    R.sort_indices()
    n = R.shape[0]
    order = np.arange(n, dtype=np.int64)
    depth_bounds = [np.array([0, n], dtype=np.int64)]
    threads = threads or numba.get_num_threads()
    indptr, indices, data = R.indptr.astype(np.int64), R.indices.astype(np.int64), R.data
    while np.diff(depth_bounds[-1]).max(initial=0) > leaf_size:
        b = depth_bounds[-1]
        depth = len(depth_bounds) - 1
        seeds = np.random.SeedSequence([seed, depth]).generate_state(b.size - 1, dtype=np.uint32).astype(np.int64)
        seeds %= 2**31 - 1
        chunks = np.array_split(np.arange(b.size - 1), min(threads, b.size - 1))

        def work(ids, b=b, seeds=seeds):
            _bisect(b[:-1][ids], b[1:][ids], seeds[ids], order, indptr, indices, data, R.shape[1], iterations)

        if len(chunks) == 1:
            work(chunks[0])
        else:
            with ThreadPoolExecutor(len(chunks)) as pool:
                list(pool.map(work, chunks))
        depth_bounds.append(_halve(b))
    step = int(round(math.log2(branching)))
    leaf_depth = len(depth_bounds) - 1
    kept = list(range(leaf_depth, 0, -step))[::-1] or [0]
    return LabelTree(order, [depth_bounds[d] for d in kept])
