"""The co-occurrence graph on Dask (``dask.distributed``): partitioned by rows of Y.

Map: for each partition p of training points and each block of label rows, a task computes p's
share of ``G[block] = Y_p[:, block]^T diag(w_p) Y_p`` (float64). Reduce: the shares of a label block
are summed and the block's rows are normalised, thresholded and capped exactly as
:func:`gandalf_xmc.graph.cooccurrence.conditional_graph` does, so that a worker holds one block of
the un-thresholded G at a time, never all of it. The driver stacks the thresholded blocks.

For binary targets (the field's training labels) every partial sum is an exact integer in
float64, so the result is identical, bit for bit, to the single-machine kernel. With fractional
point weights (``inverse-size``) the sums are added in another order and may differ in the last
float64 bits, which can only matter for a value within rounding of ``delta`` or of a top-k tie.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp


def _partial_block(columns: sp.csc_matrix, weighted_rows: sp.csr_matrix, lo: int, hi: int) -> sp.csr_matrix:
    """One partition's share of rows ``lo:hi`` of G: ``Y_p[:, lo:hi]^T diag(w_p) Y_p`` (float64)."""
    return sp.csr_matrix(columns[:, lo:hi].T @ weighted_rows)


def _sum(parts: list) -> object:
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def finalize_rows(
    G: sp.csr_matrix,
    first: int,
    diag: np.ndarray,
    *,
    delta: float,
    top_k: int | None,
    shrinkage: float,
    symmetric: bool,
    self_value: float,
) -> sp.csr_matrix:
    """Rows ``first .. first + G.shape[0]`` of the soft-target graph from their co-occurrence
    counts ``G`` (float64): the same normalisation, threshold, cap and self entry as the kernel."""
    G = sp.csr_matrix(G, dtype=np.float64)
    G.sum_duplicates()
    n = G.shape[0]
    rows = np.repeat(np.arange(n), np.diff(G.indptr))
    j, i, g = rows + first, G.indices.astype(np.int64), G.data
    if symmetric:
        v = 0.5 * (g / diag[j] + g / diag[i])
    else:
        v = g / (diag[j] + shrinkage)
    keep = (i != j) & (diag[j] > 0) & (v > delta)
    rows, i, v = rows[keep], i[keep], v[keep]
    if top_k is not None:
        order = np.lexsort((i, -v, rows))  # by row, largest first, ties to the lower label id
        rows, i, v = rows[order], i[order], v[order]
        starts = np.searchsorted(rows, np.arange(n))
        rank = np.arange(rows.size) - starts[rows]
        keep = rank < top_k
        rows, i, v = rows[keep], i[keep], v[keep]
    rows = np.concatenate([rows, np.arange(n)])
    i = np.concatenate([i, np.arange(first, first + n)])
    v = np.concatenate([v, np.full(n, self_value)])
    order = np.lexsort((i, rows))
    rows, i, v = rows[order], i[order], v[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return sp.csr_matrix((v.astype(np.float32), i.astype(np.int32), indptr), shape=(n, G.shape[1]))


def dask_conditional_graph(
    Y: sp.spmatrix,
    client,
    *,
    n_partitions: int | None = None,
    n_blocks: int | None = None,
    delta: float = 0.1,
    top_k: int | None = None,
    shrinkage: float = 0.0,
    point_weights: np.ndarray | None = None,
    symmetric: bool = False,
    self_value: float = 1.0,
    pairs_per_block: float = 2e7,
) -> sp.csr_matrix:
    """:func:`~gandalf_xmc.graph.cooccurrence.conditional_graph` on a Dask cluster.

    ``Y`` is cut into ``n_partitions`` row partitions (default: 2 per worker thread) scattered to
    the workers, and G into ``n_blocks`` blocks of label rows, balanced by work. By default there are
    enough blocks that one block's co-occurrence pairs (an upper bound, ``sum_s |y_s|^2`` over its
    labels) stay under ``pairs_per_block``: a task holds one partition's share of one block, a
    reduce holds one block, so worker memory stays bounded as L grows. ``client`` is a
    ``distributed.Client``.
    """
    from dask import delayed

    from .cooccurrence import _chunk_bounds, prepare_labels

    Y, w, sums = prepare_labels(Y, point_weights)
    diag, work = sums.diag, sums.work
    n_points, n_labels = Y.shape
    threads = max(1, sum(client.nthreads().values()))
    n_partitions = max(1, min(n_points, n_partitions or 2 * threads))
    if n_blocks is None:
        n_blocks = max(n_partitions, int(np.ceil(work.sum() / pairs_per_block)))
    label_bounds = _chunk_bounds(n_labels, work, max(1, min(n_labels, n_blocks)))
    row_bounds = np.linspace(0, n_points, n_partitions + 1).astype(np.int64)
    spans = list(zip(row_bounds[:-1], row_bounds[1:]))
    Yw = sp.csr_matrix(sp.diags(w) @ sp.csr_matrix(Y, dtype=np.float64))
    # hash=False: fresh keys each call. With content keys, a second call on the same data could
    # reuse keys that the first call's futures are releasing ("lost dependencies", dask/distributed#4612)
    columns = client.scatter([sp.csc_matrix(Y[a:b], dtype=np.float64) for a, b in spans], hash=False)
    weighted = client.scatter([Yw[a:b] for a, b in spans], hash=False)
    del Yw
    diag_future = client.scatter(diag, broadcast=True, hash=False)
    blocks = []
    for lo, hi in zip(label_bounds[:-1], label_bounds[1:]):
        shares = [delayed(_partial_block)(c, r, int(lo), int(hi)) for c, r in zip(columns, weighted)]
        blocks.append(
            delayed(finalize_rows)(
                delayed(_sum)(shares),
                int(lo),
                diag_future,
                delta=delta,
                top_k=top_k,
                shrinkage=shrinkage,
                symmetric=symmetric,
                self_value=self_value,
            )
        )
    out = client.compute(blocks, sync=True)
    return sp.csr_matrix(sp.vstack(out, format="csr"), dtype=np.float32)


@contextmanager
def dask_client(address: str) -> Iterator[object]:
    """A ``distributed.Client`` for ``address``: ``local:N`` starts a ``LocalCluster`` of N worker
    processes (one thread each) for as long as the block runs; anything else is a scheduler address
    (``tcp://host:8786``) of a running cluster."""
    from distributed import Client, LocalCluster

    if address.startswith("local"):
        n = int(address.split(":", 1)[1]) if ":" in address else 2
        with (
            LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            yield client
    else:
        with Client(address) as client:
            yield client
