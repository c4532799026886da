"""One sparse row held as two arrays (column ids, values), for a single query: its top k and its
product with a CSR matrix's arrays. Numpy only: the numpy-only readers answer with it, and the
full models' single-query paths give the same numbers (tested against scipy)."""

from __future__ import annotations

import numpy as np


def top_k_of_row(cols: np.ndarray, vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest entries of one row given as distinct ``cols`` and their ``vals`` (ties:
    lower column), in column order: ``top_k_per_row``'s row without a matrix."""
    if vals.size > k:
        threshold = -np.partition(-vals, k - 1)[k - 1]  # the k-th largest value
        above = np.flatnonzero(vals > threshold)
        ties = np.flatnonzero(vals == threshold)
        ties = ties[np.argsort(cols[ties], kind="stable")][: k - above.size]
        kept = np.concatenate([above, ties])
    else:
        kept = np.arange(vals.size)
    order = kept[np.argsort(cols[kept], kind="stable")]
    return cols[order], vals[order]


def row_times(
    q_idx: np.ndarray, q_val: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_columns: int
) -> tuple[np.ndarray, np.ndarray]:
    """One sparse row (ids ``q_idx``, float32 values ``q_val``) times a float32 CSR matrix's
    arrays of ``n_columns`` columns, summed as scipy's product sums it (float32, in the row's
    order; ``np.add.at`` adds in the order given), zero sums left out: ``(columns ascending, sums)``."""
    lo, hi = indptr[q_idx], indptr[np.asarray(q_idx) + 1]
    lengths = (hi - lo).astype(np.int64)
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    # every entry of the rows named by the query, in the query's order, each times its row's value
    at = np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
    products = np.repeat(np.asarray(q_val, dtype=np.float32), lengths) * data[at]
    sums = np.zeros(n_columns, dtype=np.float32)
    np.add.at(sums, indices[at], products)
    cols = np.flatnonzero(sums)
    return cols, sums[cols]
