"""A tree level's targets: each training row's target of each node, the largest of the row's
targets among the node's labels (a positive of any label under a node is a positive of the node)."""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp


def node_targets(Y: sp.csr_matrix, node_of_label: np.ndarray, n_nodes: int) -> sp.csr_matrix:
    """``N x K`` targets of tree nodes: a node's target is the largest target among its labels
    (built row by row: memory is the result, where sorting all entries at once cost five times it)."""
    Y = sp.csr_matrix(Y, dtype=np.float32)
    indptr, indices, data = _node_rows(Y.indptr.astype(np.int64), Y.indices, Y.data, np.asarray(node_of_label, dtype=np.int32))
    T = sp.csr_matrix((data, indices, indptr), shape=(Y.shape[0], n_nodes))
    T.has_sorted_indices = True
    T.eliminate_zeros()
    return T


# rows with at most this many labels are sorted by insertion in a small buffer, without the two
# arrays an argsort of the row allocates (3.5M rows a level at 1.3M labels; docs/decisions.md, "The linear model (XR-Linear)")
SHORT_ROW = 256


@numba.njit(cache=True)
def _node_rows(indptr, indices, data, node_of_label):
    n, size = indptr.size - 1, indices.size
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    out_idx = np.empty(size, dtype=np.int32)
    out_val = np.empty(size, dtype=np.float32)
    keys = np.empty(SHORT_ROW, dtype=np.int32)
    values = np.empty(SHORT_ROW, dtype=np.float32)
    at = 0
    for r in range(n):
        lo, hi = indptr[r], indptr[r + 1]
        if hi - lo <= SHORT_ROW:  # a row's nodes ascending; a node's labels merged to their largest target
            m = 0
            for e in range(lo, hi):
                node, v = node_of_label[indices[e]], data[e]
                j = m
                while j > 0 and keys[j - 1] > node:
                    j -= 1
                if j > 0 and keys[j - 1] == node:
                    values[j - 1] = max(values[j - 1], v)
                    continue
                for s in range(m, j, -1):
                    keys[s], values[s] = keys[s - 1], values[s - 1]
                keys[j], values[j] = node, v
                m += 1
            out_idx[at : at + m] = keys[:m]
            out_val[at : at + m] = values[:m]
            at += m
        else:
            nodes = node_of_label[indices[lo:hi]]
            previous = -1
            for j in np.argsort(nodes, kind="mergesort"):
                if nodes[j] != previous:
                    out_idx[at] = nodes[j]
                    out_val[at] = data[lo + j]
                    previous = nodes[j]
                    at += 1
                elif data[lo + j] > out_val[at - 1]:
                    out_val[at - 1] = data[lo + j]
        out_ptr[r + 1] = at
    if at == size:  # the labels' own level: nothing merged, no copy
        return out_ptr, out_idx, out_val
    return out_ptr, out_idx[:at].copy(), out_val[:at].copy()
