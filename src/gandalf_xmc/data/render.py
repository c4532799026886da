"""Fast text rendering of sparse rows (``i:v i:v``, ``i,i``, ``v,v``) for the writers.

Formatting hundreds of millions of entries one f-string at a time dominates writing large
outputs, so a numba kernel writes the ASCII bytes of a block of rows into one buffer. Values are
formatted once per distinct value (``%.6g``) and copied from a lookup table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numba
import numpy as np
import scipy.sparse as sp

PAIRS, INDICES, VALUES = 0, 1, 2  # what a row is rendered as
_MAX_DIGITS = 20


@numba.njit(cache=True, nogil=True)
def _write_int(buf, pos, x):
    if x == 0:
        buf[pos] = 48
        return pos + 1
    if x < 0:
        buf[pos] = 45
        pos += 1
        x = -x
    start = pos
    while x > 0:
        buf[pos] = 48 + x % 10
        x //= 10
        pos += 1
    i, j = start, pos - 1
    while i < j:
        buf[i], buf[j] = buf[j], buf[i]
        i += 1
        j -= 1
    return pos


@numba.njit(cache=True, nogil=True)
def _render(indptr, indices, value_ids, table, table_offsets, mode, sep, buf, row_ends):
    pos = 0
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            if p > indptr[r]:
                buf[pos] = sep
                pos += 1
            if mode != VALUES:
                pos = _write_int(buf, pos, indices[p])
            if mode == PAIRS:
                buf[pos] = 58  # ':'
                pos += 1
            if mode != INDICES:
                v = value_ids[p]
                for t in range(table_offsets[v], table_offsets[v + 1]):
                    buf[pos] = table[t]
                    pos += 1
        row_ends[r] = pos
    return pos


def render_rows(M: sp.csr_matrix, start: int, stop: int, mode: int) -> tuple[bytes, np.ndarray]:
    """Rows ``start..stop-1`` of ``M`` as one bytes object and the end offset of each row in it.

    The table of formatted values is built per block, so memory stays proportional to the block.
    """
    lo, hi = M.indptr[start], M.indptr[stop]
    indptr = (M.indptr[start:stop + 1] - lo).astype(np.int64)
    values, value_ids = np.unique(M.data[lo:hi], return_inverse=True)
    strings = [f"{v:.6g}".encode() for v in values.tolist()]
    table = np.frombuffer(b"".join(strings), dtype=np.uint8) if strings else np.zeros(0, np.uint8)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in strings], out=offsets[1:])
    max_len = max((len(x) for x in strings), default=1)
    width = (_MAX_DIGITS if mode != VALUES else 0) + (max_len if mode != INDICES else 0) + 2
    buf = np.empty(max(int(hi - lo) * width, 1), dtype=np.uint8)
    ends = np.empty(stop - start, dtype=np.int64)
    sep = ord(" ") if mode == PAIRS else ord(",")
    used = _render(indptr, M.indices[lo:hi].astype(np.int64), value_ids.astype(np.int64), table, offsets, mode, sep, buf, ends)
    return buf[:used].tobytes(), ends


def split_rows(text: bytes, ends: np.ndarray) -> list[bytes]:
    """Cut the output of :func:`render_rows` into one bytes object a row."""
    begins = np.concatenate([[0], ends[:-1]]).tolist()
    return [text[b:e] for b, e in zip(begins, ends.tolist())]


def sparse_text_chunks(*parts: sp.spmatrix, block_rows: int = 100_000) -> Iterator[bytes]:
    """The sparse matrix text format of the row-wise concatenation of ``parts``, as byte chunks.

    Several parts are written under one header without stacking them in memory.
    """
    mats = [sp.csr_matrix(M) for M in parts]
    n_cols = {M.shape[1] for M in mats}
    if len(n_cols) != 1:
        raise ValueError("all parts must have the same number of columns")
    yield f"{sum(M.shape[0] for M in mats)} {n_cols.pop()}\n".encode()
    for M in mats:
        for start in range(0, M.shape[0], block_rows):
            stop = min(M.shape[0], start + block_rows)
            yield b"".join(row + b"\n" for row in split_rows(*render_rows(M, start, stop, PAIRS)))


def streamed_sparse_text_chunks(n_rows: int, n_cols: int, blocks: Iterable[sp.spmatrix]) -> Iterator[bytes]:
    """The sparse matrix text format of row blocks produced one at a time (e.g. predictions of
    successive batches), under a header announcing ``n_rows x n_cols``; only one block is in
    memory at a time. Raises ValueError if the blocks do not add up to ``n_rows``."""
    yield f"{n_rows} {n_cols}\n".encode()
    seen = 0
    for block in blocks:
        M = sp.csr_matrix(block)
        if M.shape[1] != n_cols:
            raise ValueError(f"a block has {M.shape[1]} columns, expected {n_cols}")
        seen += M.shape[0]
        if M.shape[0]:
            yield b"".join(row + b"\n" for row in split_rows(*render_rows(M, 0, M.shape[0], PAIRS)))
    if seen != n_rows:
        raise ValueError(f"blocks gave {seen} rows, expected {n_rows}")
