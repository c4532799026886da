"""ECLARE's label correlation graph: random walks with restart over the label-point graph.

Recipe (ECLARE, Mittal et al. WWW'21; where the paper is silent, docs/decisions.md, "Where the papers are silent"):

1. labels with more than ``head_threshold`` training points are left out of the walks: they are
   neither walked from nor visited;
2. each remaining label with training points starts a walk of ``walk_length`` steps; before each
   step the walker jumps back to its seed with probability ``restart_prob``; a step goes from the
   current label to one of its training points chosen uniformly, then to one of that point's
   (non-head) labels chosen uniformly; the label reached is counted as a visit;
3. a row keeps its ``top_k`` most visited other labels plus a non-zero self-loop;
4. head labels and labels without training points get only the self-loop.

For Gandalf, each row is then divided by its diagonal (self = 1), values above 1 are clipped to
1 (a neighbour can be reached more often than the seed via multi-hop walks) and entries not
strictly above ``delta`` are dropped.

All walks of a block of seeds move in lock-step with numpy, so the cost is ``walk_length``
vectorised steps per block; blocks run in label order from one seeded generator, so the result
depends only on the seed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def random_walk_counts(
    Y: sp.spmatrix,
    *,
    walk_length: int = 400,
    restart_prob: float = 0.8,
    head_threshold: int = 500,
    seed: int = 0,
    block_size: int = 8192,
) -> sp.csr_matrix:
    """Visit counts of the random walks with restart (``L x L``, before top-k and normalisation)."""
    Y = sp.csr_matrix(Y)
    Y.sum_duplicates()
    binary = Y.copy()
    binary.data = (binary.data > 0).astype(np.float32)
    binary.eliminate_zeros()
    n_labels = binary.shape[1]
    freq = np.bincount(binary.indices, minlength=n_labels)
    head = freq > head_threshold
    # drop head labels from the graph entirely
    keep_cols = sp.diags((~head).astype(np.float32))
    graph = (binary @ keep_cols).tocsr()
    graph.eliminate_zeros()
    point_deg = np.diff(graph.indptr)
    csc = graph.tocsc()
    label_deg = np.diff(csc.indptr)
    seeds_all = np.flatnonzero(label_deg > 0)
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for start in range(0, seeds_all.size, block_size):
        seeds = seeds_all[start : start + block_size]
        current = seeds.copy()
        codes = np.empty((walk_length, seeds.size), dtype=np.int64)
        local = np.arange(seeds.size, dtype=np.int64)
        for step in range(walk_length):
            restart = rng.random(seeds.size) < restart_prob
            current = np.where(restart, seeds, current)
            # label -> random training point of it -> random label of that point
            offs = (rng.random(seeds.size) * label_deg[current]).astype(np.int64)
            points = csc.indices[csc.indptr[current] + offs]
            offs = (rng.random(seeds.size) * point_deg[points]).astype(np.int64)
            current = graph.indices[graph.indptr[points] + offs]
            codes[step] = local * n_labels + current
        uniq, counts = np.unique(codes, return_counts=True)
        rows.append(seeds[uniq // n_labels])
        cols.append(uniq % n_labels)
        vals.append(counts.astype(np.float32))
    if rows:
        r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    else:
        r = c = np.zeros(0, dtype=np.int64)
        v = np.zeros(0, dtype=np.float32)
    return sp.csr_matrix((v, (r, c)), shape=(n_labels, n_labels))


def _top_k_rows_with_self(M: sp.csr_matrix, top_k: int) -> sp.csr_matrix:
    """Keep each row's ``top_k`` largest off-diagonal entries (ties to the lower id) and its diagonal."""
    M = sp.csr_matrix(M)
    M.sort_indices()
    n = M.shape[0]
    rows, cols, vals = [], [], []
    for j in range(n):
        lo, hi = M.indptr[j], M.indptr[j + 1]
        idx, val = M.indices[lo:hi], M.data[lo:hi]
        off = idx != j
        oi, ov = idx[off], val[off]
        if oi.size > top_k:
            order = np.argsort(-ov, kind="stable")[:top_k]  # stable on sorted ids: ties to lower id
            oi, ov = oi[order], ov[order]
        diag = val[~off]
        rows.append(np.full(oi.size + 1, j))
        cols.append(np.concatenate([oi, [j]]))
        # a walk that never came back to its seed still gets a self-loop, as strong as its best neighbour
        self_loop = diag[0] if diag.size and diag[0] > 0 else (ov.max() if ov.size else 1.0)
        vals.append(np.concatenate([ov, [self_loop]]))
    out = sp.csr_matrix((np.concatenate(vals).astype(np.float32), (np.concatenate(rows), np.concatenate(cols))), shape=M.shape)
    out.sort_indices()
    return out


def random_walk_graph(
    Y: sp.spmatrix,
    *,
    delta: float = 0.1,
    walk_length: int = 400,
    restart_prob: float = 0.8,
    neighbours: int = 10,
    head_threshold: int = 500,
    seed: int = 0,
) -> sp.csr_matrix:
    """Gandalf soft targets from ECLARE's random-walk label graph (row j = label j's label point)."""
    counts = random_walk_counts(Y, walk_length=walk_length, restart_prob=restart_prob, head_threshold=head_threshold, seed=seed)
    graph = _top_k_rows_with_self(counts, neighbours)
    diag = graph.diagonal()
    scaled = sp.diags(1.0 / diag) @ graph
    scaled = sp.csr_matrix(scaled)
    np.minimum(scaled.data, 1.0, out=scaled.data)
    rows = np.repeat(np.arange(scaled.shape[0]), np.diff(scaled.indptr))
    keep = (scaled.data > delta) | (rows == scaled.indices)
    scaled.data[~keep] = 0
    scaled.eliminate_zeros()
    scaled.setdiag(1.0)
    scaled.sort_indices()
    return sp.csr_matrix(scaled, dtype=np.float32)
