"""A hierarchical balanced label tree: spherical 2-means bisection of sparse label vectors.

Every node's labels are a contiguous run of one permutation of the labels (``order``), and each
bisection puts the first ``ceil(n / 2)`` of a run on the left, so the node boundaries at every
depth follow from L alone and only the permutation is learnt. A tree of branching ``2**b`` keeps
every ``b``-th depth counted up from the leaves.

Memory: the label vectors (CSR), the permutation, and per worker thread two dense centroids, their
difference, a map and a list of ``n_features`` entries (about 28 bytes a feature) plus a copy of
the run being split (at the top depth, of all the label vectors).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from ..sparse_ops import grown, row_top_k, scatter_add


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

    def save(self, directory: Path) -> None:
        """``tree_order.npy`` and ``tree_bounds.npz`` (one array a level) in ``directory``; a saved
        model's reader checks and reads them (``models.linear_check.read_saved``)."""
        np.save(directory / "tree_order.npy", self.order)
        np.savez(directory / "tree_bounds.npz", *self.bounds)


# Entries of all label vectors together, at most: when the products could hold more, each label
# keeps only its largest features (at 1.3M labels, 153 a label)
LABEL_VECTOR_ENTRIES = 200_000_000
# Partial sums of one block of labels (the unit of work handed to a thread)
PARTIAL_SUMS_PER_BLOCK = 5_000_000


def label_vectors(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    Z: sp.csr_matrix | None,
    text_weight: float = 1.0,
    max_entries: int = LABEL_VECTOR_ENTRIES,
    partial_sums_per_block: int = PARTIAL_SUMS_PER_BLOCK,
    threads: int | None = None,
) -> sp.csr_matrix:
    """PIFA (the l2-normalised, target-weighted sum of each label's training rows) plus
    ``text_weight`` times the label text's own l2-normalised features, l2-normalised: a label
    without training positives is placed by its text alone.

    Each label's row is summed into a dense accumulator of ``n_features`` (one a worker thread),
    so memory beyond the inputs is the result plus about 13 bytes a feature a thread. Labels are
    handed to ``threads`` workers in blocks whose rows' lengths sum to about
    ``partial_sums_per_block``. The vectors are exact when they cannot hold more than
    ``max_entries`` entries (the partial sums and the label texts' entries bound them); otherwise
    each label keeps its ``max_entries // L`` largest features (ties: lower feature id), then
    l2-normalised again, so the result holds at most ``max_entries``.

    Args:
        X: ``N x F`` features of the training points.
        Y: ``N x L`` targets (soft targets weigh their rows).
        Z: ``L x F`` features of the label texts, or None.
        threads: worker threads (default: numba's thread count); the result does not depend on it.
    Returns:
        ``L x F`` float32 CSR, rows of unit norm (or zero), indices sorted.
    """
    X = sp.csr_matrix(X, dtype=np.float32)
    YT = sp.csr_matrix(Y, dtype=np.float32).T.tocsr()
    n_labels, n_features = YT.shape[0], X.shape[1]
    use_text = Z is not None and text_weight > 0
    Zn = sp.csr_matrix(Z, dtype=np.float32) if use_text else sp.csr_matrix((n_labels, n_features), dtype=np.float32)
    x_lengths = np.diff(X.indptr).astype(np.float64)
    partial_sums = np.bincount(
        np.repeat(np.arange(n_labels), np.diff(YT.indptr)), weights=x_lengths[YT.indices], minlength=n_labels
    )  # per label: its rows' lengths, summed
    bound = partial_sums.sum() + (Zn.nnz if use_text else 0)
    keep = max(1, max_entries // max(n_labels, 1)) if bound > max_entries else -1
    blocks = label_blocks(partial_sums + np.diff(Zn.indptr), partial_sums_per_block)
    threads = max(1, min(threads or numba.get_num_threads(), len(blocks)))
    yt = (YT.indptr.astype(np.int64), YT.indices, YT.data)  # int32 ids kept: Y is the largest input at scale
    x = (X.indptr.astype(np.int64), X.indices, X.data)
    z = (Zn.indptr.astype(np.int64), Zn.indices, Zn.data)
    scratch = [
        (np.zeros(n_features, np.float32), np.zeros(n_features, np.bool_), np.empty(n_features, np.int64)) for _ in range(threads)
    ]
    free = list(range(threads))

    def work(block):
        slot = free.pop()  # list.pop is atomic: each running task holds its own accumulator
        try:
            return _label_vector_rows(block[0], block[1], *yt, *x, *z, use_text, np.float32(text_weight), keep, *scratch[slot])
        finally:
            free.append(slot)

    if threads == 1:
        parts = [work(b) for b in blocks]
    else:
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(work, blocks))
    counts = np.concatenate([np.diff(p[0]) for p in parts]) if parts else np.zeros(0, np.int64)
    indptr = np.zeros(n_labels + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int32)
    data = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(n_labels, n_features))


@numba.njit(cache=True, nogil=True)
def _unit(acc, touched, n_t, split):
    """Scale ``acc`` over its ``n_t`` touched entries to unit l2 norm, the float32 squares summed in
    float64 in the order scipy's product and sum list them (``touched[n_t-1:split-1:-1]`` then
    ``touched[:split]``), so the vectors are the same bytes as scipy's ``Y.T @ X`` normalised."""
    total = 0.0
    for t in range(n_t - 1, split - 1, -1):
        v = acc[touched[t]]
        total += np.float32(v * v)
    for t in range(split):
        v = acc[touched[t]]
        total += np.float32(v * v)
    if total > 0.0:
        norm = np.sqrt(total)
        for t in range(n_t):
            acc[touched[t]] = np.float32(acc[touched[t]] / norm)


@numba.njit(cache=True, nogil=True)
def _label_vector_rows(
    lo,
    hi,
    yt_indptr,
    yt_indices,
    yt_data,
    x_indptr,
    x_indices,
    x_data,
    z_indptr,
    z_indices,
    z_data,
    use_text,
    text_weight,
    keep,
    acc,
    mark,
    touched,
):
    """Rows ``lo:hi`` of the label vectors as (indptr, indices, data); ``acc`` and ``mark`` are all
    zero on entry and left so."""
    indptr = np.zeros(hi - lo + 1, dtype=np.int64)
    out_idx = np.empty(1024, dtype=np.int32)
    out_val = np.empty(1024, dtype=np.float32)
    n_out = 0
    for lab in range(lo, hi):
        n_t = 0
        for p in range(yt_indptr[lab], yt_indptr[lab + 1]):
            n_t = scatter_add(x_indptr, x_indices, x_data, yt_indices[p], yt_data[p], acc, mark, touched, n_t)
        _unit(acc, touched, n_t, 0)
        z_lo, z_hi = z_indptr[lab], z_indptr[lab + 1]
        if use_text:
            n_pifa = n_t
            z_total = 0.0  # the text's row, itself of unit length first
            for q in range(z_lo, z_hi):
                z_total += np.float32(z_data[q] * z_data[q])
            z_norm = np.sqrt(z_total) if z_total > 0.0 else 1.0
            for q in range(z_lo, z_hi):
                j = z_indices[q]
                if not mark[j]:
                    mark[j] = True
                    touched[n_t] = j
                    n_t += 1
                acc[j] += text_weight * np.float32(z_data[q] / z_norm)
            _unit(acc, touched, n_t, n_pifa)
        cols = np.sort(touched[:n_t])
        vals = np.empty(n_t, dtype=np.float32)
        for t in range(n_t):
            vals[t] = acc[cols[t]]
            acc[cols[t]] = 0.0
            mark[cols[t]] = False
        if keep >= 0 and n_t > keep:
            chosen = np.sort(row_top_k(cols, vals, keep))
            cols, vals = cols[chosen], vals[chosen]
            n_t = keep
            total = 0.0
            for t in range(n_t):
                total += np.float32(vals[t] * vals[t])
            if total > 0.0:
                norm = np.sqrt(total)
                for t in range(n_t):
                    vals[t] = np.float32(vals[t] / norm)
        if n_out + n_t > out_idx.size:
            out_idx = grown(out_idx, n_out + n_t)
            out_val = grown(out_val, n_out + n_t)
        for t in range(n_t):
            out_idx[n_out + t] = cols[t]
            out_val[n_out + t] = vals[t]
        n_out += n_t
        indptr[lab - lo + 1] = n_out
    return indptr, out_idx[:n_out].copy(), out_val[:n_out].copy()


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
def _inverse_norm(c, n):
    """1 / the l2 norm of ``c[:n]`` (squares summed in order), 1 if zero."""
    s = 0.0
    for t in range(n):
        s += c[t] * c[t]
    return 1.0 / math.sqrt(s) if s > 0 else 1.0


@numba.njit(cache=True, nogil=True)
def _bisect(seg_lo, seg_hi, seeds, order, r_indptr, r_indices, r_data, n_features, iterations):
    """Split each run ``order[lo:hi]`` in place: the ``ceil(n / 2)`` labels closest to the first
    of two spherical centroids (relative to the second) first, the rest after.

    A run's rows are first copied out in its order, over local feature ids given in order of first
    use, so the passes below read memory in sequence and the centroids are as long as the run's
    features (cache-sized below the top depths); sums are taken in the same order as over the
    global ids, so the tree is the same."""
    local = np.full(n_features, -1, dtype=np.int64)
    touched = np.empty(n_features, dtype=np.int64)
    c0 = np.zeros(n_features, dtype=np.float32)
    c1 = np.zeros(n_features, dtype=np.float32)
    gap = np.zeros(n_features, dtype=np.float32)
    for s in range(seg_lo.size):
        lo, hi = seg_lo[s], seg_hi[s]
        n = hi - lo
        if n < 2:
            continue
        members = order[lo:hi].copy()
        m_indptr = np.zeros(n + 1, dtype=np.int64)
        for q in range(n):
            m_indptr[q + 1] = m_indptr[q] + r_indptr[members[q] + 1] - r_indptr[members[q]]
        m_indices = np.empty(m_indptr[n], dtype=np.int32)
        m_data = np.empty(m_indptr[n], dtype=np.float32)
        n_t = 0
        for q in range(n):
            at = m_indptr[q]
            for p in range(r_indptr[members[q]], r_indptr[members[q] + 1]):
                j = r_indices[p]
                if local[j] < 0:
                    local[j] = n_t
                    touched[n_t] = j
                    n_t += 1
                m_indices[at] = local[j]
                m_data[at] = r_data[p]
                at += 1
        for t in range(n_t):
            local[touched[t]] = -1
        np.random.seed(seeds[s])
        a = np.random.randint(n)
        b = np.random.randint(n - 1)
        if b >= a:
            b += 1
        side = np.zeros(n, dtype=np.int8)  # 1: first centroid's half
        side[a] = 1
        side[b] = 2  # neither half yet: the first pass sets every side
        c0[:n_t] = 0.0
        c1[:n_t] = 0.0
        for p in range(m_indptr[a], m_indptr[a + 1]):
            c0[m_indices[p]] += m_data[p]
        for p in range(m_indptr[b], m_indptr[b + 1]):
            c1[m_indices[p]] += m_data[p]
        half = (n + 1) // 2
        diff = np.empty(n, dtype=np.float64)
        ranking = np.arange(n)
        for _ in range(iterations):
            inv0 = _inverse_norm(c0, n_t)
            inv1 = _inverse_norm(c1, n_t)
            for t in range(n_t):  # the normalised centroids' difference; the centroids are rebuilt below
                gap[t] = np.float32(c0[t] * inv0) - np.float32(c1[t] * inv1)
                c0[t] = 0.0
                c1[t] = 0.0
            for q in range(n):
                d = 0.0
                for p in range(m_indptr[q], m_indptr[q + 1]):
                    d += m_data[p] * gap[m_indices[p]]
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
            for q in range(n):
                c = c0 if side[q] == 1 else c1
                for p in range(m_indptr[q], m_indptr[q + 1]):
                    c[m_indices[p]] += m_data[p]
        order[lo:hi] = members[ranking]


def _halve(bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[:-1], bounds[1:]
    mid = lo + (hi - lo + 1) // 2
    out = np.empty(2 * lo.size + 1, dtype=np.int64)
    out[0:-1:2], out[1:-1:2], out[-1] = lo, mid, bounds[-1]
    return out


def build_tree(
    R: sp.csr_matrix, branching: int = 16, leaf_size: int = 100, seed: int = 0, iterations: int = 8, threads: int | None = None
) -> LabelTree:
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
    indptr, indices, data = R.indptr.astype(np.int64), R.indices, R.data  # int32 ids: a third less to read
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
