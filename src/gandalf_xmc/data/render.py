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
def _render(indptr, indices, value_ids, table, table_offsets, mode, sep, newline, buf, row_ends):
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
        if newline:
            buf[pos] = 10
            pos += 1
        row_ends[r] = pos
    return pos


@numba.njit(cache=True, nogil=True)
def _hash_ids(data_bits, value_bits):
    """Index in ``value_bits`` of each of ``data_bits`` (open addressing on the bit patterns), or
    -1 where the pattern is not there."""
    size = 1
    while size < 2 * value_bits.size:
        size *= 2
    shift = 64 - max(1, int(np.log2(size)))
    keys = np.zeros(size, dtype=np.uint64)
    slots = np.full(size, -1, dtype=np.int64)
    for v in range(value_bits.size):
        key = np.uint64(value_bits[v])
        h = (key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(shift)
        while slots[h] >= 0:
            h = (h + np.uint64(1)) & np.uint64(size - 1)
        keys[h] = key
        slots[h] = v
    out = np.empty(data_bits.size, dtype=np.int64)
    for p in range(data_bits.size):
        key = np.uint64(data_bits[p])
        h = (key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(shift)
        while slots[h] >= 0 and keys[h] != key:
            h = (h + np.uint64(1)) & np.uint64(size - 1)
        out[p] = slots[h]
    return out


def _value_ids(data: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each entry of ``data``, its index in ``values`` (``np.unique(data)``)."""
    uint = np.uint32 if data.dtype.itemsize == 4 else np.uint64
    data = np.ascontiguousarray(data)
    ids = _hash_ids(data.view(uint), np.ascontiguousarray(values, dtype=data.dtype).view(uint))
    missing = ids < 0  # another bit pattern of an equal value (-0.0, NaN payloads)
    if missing.any():
        ids[missing] = np.searchsorted(values, data[missing])
    return ids


def render_rows(M: sp.csr_matrix, start: int, stop: int, mode: int, newline: bool = False) -> tuple[bytes, np.ndarray]:
    """Rows ``start..stop-1`` of ``M`` as one bytes object and the end offset of each row in it
    (each row followed by a newline if ``newline``).

    The table of formatted values is built per block, so memory stays proportional to the block.
    """
    lo, hi = M.indptr[start], M.indptr[stop]
    indptr = (M.indptr[start : stop + 1] - lo).astype(np.int64)
    data = M.data[lo:hi]
    if mode == INDICES:  # no values to format
        values, value_ids = np.zeros(0), np.zeros(hi - lo, dtype=np.int64)
    else:
        # np.unique(return_inverse=True) argsorts every entry and np.searchsorted branches
        # through a binary search per entry: both are several times slower than a hash lookup on
        # soft targets (tens of millions of entries, a few thousand distinct values)
        values = np.unique(data)
        value_ids = _value_ids(data, values)
    strings = [f"{v:.6g}".encode() for v in values.tolist()]
    table = np.frombuffer(b"".join(strings), dtype=np.uint8) if strings else np.zeros(0, np.uint8)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in strings], out=offsets[1:])
    max_len = max((len(x) for x in strings), default=1)
    width = (_MAX_DIGITS if mode != VALUES else 0) + (max_len if mode != INDICES else 0) + 2
    buf = np.empty(max(int(hi - lo) * width + (stop - start), 1), dtype=np.uint8)
    ends = np.empty(stop - start, dtype=np.int64)
    sep = ord(" ") if mode == PAIRS else ord(",")
    used = _render(
        indptr,
        M.indices[lo:hi].astype(np.int64),
        value_ids.astype(np.int64, copy=False),
        table,
        offsets,
        mode,
        sep,
        newline,
        buf,
        ends,
    )
    return buf[:used].tobytes(), ends


def split_rows(text: bytes, ends: np.ndarray) -> list[bytes]:
    """Cut the output of :func:`render_rows` into one bytes object a row."""
    begins = np.concatenate([[0], ends[:-1]]).tolist()
    return [text[b:e] for b, e in zip(begins, ends.tolist())]


def row_blocks(M: sp.csr_matrix, max_rows: int, max_entries: int = 1 << 20) -> Iterator[tuple[int, int]]:
    """Consecutive ``(start, stop)`` row ranges of at most ``max_rows`` rows and, beyond their
    first row, ``max_entries`` entries, so that a rendered block's buffer stays small whatever the
    rows' lengths."""
    start = 0
    while start < M.shape[0]:
        by_entries = int(np.searchsorted(M.indptr, M.indptr[start] + max_entries, side="right")) - 1
        stop = min(M.shape[0], start + max_rows, max(by_entries, start + 1))
        yield start, stop
        start = stop


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
        for start, stop in row_blocks(M, block_rows):
            yield render_rows(M, start, stop, PAIRS, newline=True)[0]


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
            yield render_rows(M, 0, M.shape[0], PAIRS, newline=True)[0]
    if seen != n_rows:
        raise ValueError(f"blocks gave {seen} rows, expected {n_rows}")
