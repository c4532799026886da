"""One-vs-rest L2-regularised squared-hinge classifiers of a tree level, by dual coordinate
descent (LIBLINEAR's L2R_L2LOSS_SVC_DUAL), each trained only on its parent's active instances.

A soft target ``t`` of instance i makes it a positive of cost ``Cp C t w_i`` and a negative of
cost ``C (1 - t) w_i`` (``w_i`` its instance weight, ``Cp`` the positive cost factor), so the
minimiser of the two squared hinges puts its margin at ``(Cp t - (1 - t)) / (Cp t + 1 - t)``
(``2 t - 1`` for ``Cp = 1``): soft targets are learnt, not rounded. Weights at or below
``threshold`` in absolute value are dropped, so every classifier is a sparse vector.

Work is split by node over threads (numba releases the GIL); each node's coordinate order is
seeded by ``(seed, level, node)``, so the result does not depend on the thread count.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class SolverConfig:
    """``C``: cost of the loss against the L2 penalty; ``eps``: stop when the projected
    gradient's spread is below it; ``max_iter``: passes over a node's instances; ``threshold``:
    weights at or below it (in absolute value) are pruned; ``positive_cost``: factor on the cost of
    a positive entry (PECOS's ``Cp / Cn``: a label's few positives against its many negatives);
    ``min_parent_target``: an instance is a negative of a parent's children only where its target
    of the parent reaches it (a child's own positives always train it), so a label point is not a
    negative throughout the clusters of its weak co-labels (hard targets are 1: no effect on them)."""

    C: float = 1.0
    eps: float = 0.1
    max_iter: int = 20
    threshold: float = 0.1
    min_parent_target: float = 0.5
    positive_cost: float = 2.0


@numba.njit(cache=True, nogil=True)
def _grow(a, n):
    out = np.empty(max(2 * a.size, n), dtype=a.dtype)
    out[:a.size] = a
    return out


@numba.njit(cache=True, nogil=True)
def _dual_cd(e_row, e_y, e_diag, alpha, n_e, w, x_indptr, x_indices, x_data, x_sqnorm, eps, max_iter, seed):
    """LIBLINEAR's dual coordinate descent for the L2-loss SVM with its shrinking: an entry at
    alpha = 0 whose gradient exceeds the last pass's largest projected gradient leaves the active
    set; when the active set has converged, every entry is checked once more."""
    index = np.arange(n_e)
    active = n_e
    pg_max_old = np.inf
    # the coordinate order's random draws: a 64-bit LCG inline (numba's np.random costs a fifth of the time)
    state = np.uint64(seed) * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
    it = 0
    while it < max_iter:
        pg_max, pg_min = -np.inf, np.inf
        for s in range(active):
            state = state * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
            j = s + np.int64((state >> np.uint64(33)) % np.uint64(active - s))
            index[s], index[j] = index[j], index[s]
        s = 0
        while s < active:
            e = index[s]
            r = e_row[e]
            dot = 0.0
            for pp in range(x_indptr[r], x_indptr[r + 1]):
                dot += w[x_indices[pp]] * x_data[pp]
            g = e_y[e] * dot - 1.0 + e_diag[e] * alpha[e]
            pg = 0.0
            if alpha[e] == 0.0:
                if g > pg_max_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if g < 0.0:
                    pg = g
            else:
                pg = g
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if abs(pg) > 1e-12:
                old = alpha[e]
                alpha[e] = max(old - g / (x_sqnorm[r] + e_diag[e]), 0.0)
                step = np.float32((alpha[e] - old) * e_y[e])
                if step != 0.0:
                    for pp in range(x_indptr[r], x_indptr[r + 1]):
                        w[x_indices[pp]] += step * x_data[pp]
            s += 1
        it += 1
        if pg_max - pg_min <= eps:
            if active == n_e:
                break
            active = n_e
            pg_max_old = np.inf
            continue
        pg_max_old = pg_max if pg_max > 0 else np.inf


@numba.njit(cache=True, nogil=True)
def _local_rows(rows, x_indptr, x_indices, x_data, loc, feats):
    """The rows ``rows`` of X as a small CSR over local feature ids 0..F-1, given to the parent's
    features in ascending global order (so the weights stay cache-sized while its children are
    trained). Returns (indptr, indices, data, squared norms, global id of each local feature)."""
    n_f = 0
    for r in rows:
        for pp in range(x_indptr[r], x_indptr[r + 1]):
            j = x_indices[pp]
            if loc[j] < 0:
                loc[j] = 0
                feats[n_f] = j
                n_f += 1
    fs = np.sort(feats[:n_f])
    for i in range(n_f):
        loc[fs[i]] = i
    indptr = np.zeros(rows.size + 1, dtype=np.int64)
    for a in range(rows.size):
        indptr[a + 1] = indptr[a] + x_indptr[rows[a] + 1] - x_indptr[rows[a]]
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.empty(indptr[-1], dtype=np.float32)
    sqnorm = np.zeros(rows.size, dtype=np.float64)
    for a in range(rows.size):
        r = rows[a]
        at = indptr[a]
        for pp in range(x_indptr[r], x_indptr[r + 1]):
            indices[at] = loc[x_indices[pp]]
            data[at] = x_data[pp]
            sqnorm[a] += np.float64(x_data[pp]) * np.float64(x_data[pp])
            at += 1
    for i in range(n_f):
        loc[fs[i]] = -1
    return indptr, indices, data, sqnorm, fs


@numba.njit(cache=True, nogil=True)
def _train_nodes(nodes, parent_of, act_ptr, act_idx, act_val, min_parent_target, t_ptr, t_idx, t_val, x_indptr,
                 x_indices, x_data, inst_weight, n_features, C, positive_cost, eps, max_iter, threshold, seed):
    """Classifiers of ``nodes``: returns (node, feature, weight) triples, node by node, features ascending."""
    loc = np.full(n_features, -1, dtype=np.int64)
    feats = np.empty(n_features, dtype=np.int64)
    w = np.zeros(n_features, dtype=np.float32)  # float32: a node's weights stay in the L1 cache (dots sum in float64)
    out_node = np.empty(1024, dtype=np.int64)
    out_feat = np.empty(1024, dtype=np.int32)
    out_val = np.empty(1024, dtype=np.float32)
    n_out = 0
    l_indptr = np.zeros(1, dtype=np.int64)
    l_indices = np.empty(0, dtype=np.int32)
    l_data = np.empty(0, dtype=np.float32)
    l_sqnorm = np.empty(0, dtype=np.float64)
    fs = np.empty(0, dtype=np.int64)
    last_parent = -1
    for k in nodes:
        p = parent_of[k]
        a_lo, a_hi = act_ptr[p], act_ptr[p + 1]
        m = a_hi - a_lo
        if m == 0:
            continue
        if p != last_parent:  # siblings share their parent's instances: compact them once
            l_indptr, l_indices, l_data, l_sqnorm, fs = _local_rows(act_idx[a_lo:a_hi], x_indptr, x_indices, x_data,
                                                                     loc, feats)
            last_parent = p
        # targets of the active instances (both lists ascending)
        tgt = np.zeros(m, dtype=np.float64)
        q = t_ptr[k]
        for a in range(m):
            i = act_idx[a_lo + a]
            while q < t_ptr[k + 1] and t_idx[q] < i:
                q += 1
            if q < t_ptr[k + 1] and t_idx[q] == i:
                tgt[a] = t_val[q]
        # a soft target is a positive and a negative entry, each with its share of the cost
        n_e = 0
        e_row = np.empty(2 * m, dtype=np.int64)
        e_y = np.empty(2 * m, dtype=np.float64)
        e_diag = np.empty(2 * m, dtype=np.float64)
        for a in range(m):
            if tgt[a] <= 0.0 and act_val[a_lo + a] < min_parent_target:
                continue
            cw = C * inst_weight[act_idx[a_lo + a]]
            for y, c in ((1.0, positive_cost * cw * tgt[a]), (-1.0, cw * (1.0 - tgt[a]))):
                if c > 0:
                    e_row[n_e] = a
                    e_y[n_e] = y
                    e_diag[n_e] = 0.5 / c
                    n_e += 1
        alpha = np.zeros(n_e, dtype=np.float64)
        _dual_cd(e_row, e_y, e_diag, alpha, n_e, w, l_indptr, l_indices, l_data, l_sqnorm, eps, max_iter, seed + k)
        # read, prune and reset the weights (local ids ascend with the global ones)
        for i in range(fs.size):
            v = w[i]
            if abs(v) > threshold:
                if n_out == out_node.size:
                    out_node = _grow(out_node, n_out + 1)
                    out_feat = _grow(out_feat, n_out + 1)
                    out_val = _grow(out_val, n_out + 1)
                out_node[n_out] = k
                out_feat[n_out] = fs[i]
                out_val[n_out] = v
                n_out += 1
            w[i] = 0.0
    return out_node[:n_out], out_feat[:n_out], out_val[:n_out]


def _csc_lists(M: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    C = sp.csc_matrix(M)
    C.sort_indices()
    return C.indptr.astype(np.int64), C.indices.astype(np.int64), C.data.astype(np.float64)


def train_level(X: sp.csr_matrix, targets: sp.csr_matrix, active: sp.csr_matrix, parent_of: np.ndarray,
                instance_weights: np.ndarray, config: SolverConfig, seed: int = 0, threads: int = 1
                ) -> sp.csr_matrix:
    """The classifiers of one level as a ``K x D`` CSR matrix (row k = node k's weights).

    Args:
        X: ``N x D`` instance features (a bias column included, if wanted).
        targets: ``N x K`` (soft) targets of the level's nodes.
        active: ``N x P``: each instance's target of each parent (its largest target among the
            parent's labels); an instance trains a parent's children where this is at least
            ``config.min_parent_target`` (and the children it is a positive of wherever it is stored).
        parent_of: the parent (column of ``active``) of each of the K nodes.
        instance_weights: ``N`` loss weights.
    """
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    n_nodes = targets.shape[1]
    act_ptr, act_idx, act_val = _csc_lists(active)
    t_ptr, t_idx, t_val = _csc_lists(targets)
    # X's own int32 ids and float32 values: an int64/float64 copy would cost 12 bytes an entry
    xi, xx, xd = X.indptr.astype(np.int64, copy=False), X.indices, X.data
    weights = np.asarray(instance_weights, dtype=np.float64)
    parent_of = np.asarray(parent_of, dtype=np.int64)
    # balance threads by the work of a node, about its parent's active instances
    cost = np.diff(act_ptr)[parent_of].astype(np.float64) + 1.0
    order = np.argsort(-cost, kind="stable")
    lanes = [order[i::threads] for i in range(threads)] if threads > 1 else [order]
    lanes = [np.sort(lane) for lane in lanes if lane.size]

    def work(nodes):
        return _train_nodes(nodes, parent_of, act_ptr, act_idx, act_val, config.min_parent_target, t_ptr, t_idx, t_val,
                            xi, xx, xd, weights, X.shape[1], config.C, config.positive_cost, config.eps,
                            config.max_iter, config.threshold, seed)

    if len(lanes) <= 1:
        parts = [work(lane) for lane in lanes]
    else:
        with ThreadPoolExecutor(len(lanes)) as pool:
            parts = list(pool.map(work, lanes))
    node = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    feat = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int32)
    val = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.float32)
    W = sp.csr_matrix((val, (node, feat)), shape=(n_nodes, X.shape[1]), dtype=np.float32)
    W.sort_indices()
    return W
