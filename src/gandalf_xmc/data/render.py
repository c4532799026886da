"""Fast text rendering of sparse rows (``i:v i:v``, ``i,i``, ``v,v``) for the writers.

Formatting hundreds of millions of entries one f-string at a time dominates writing large
outputs, so a numba kernel writes the ASCII bytes of a block of rows into one buffer. Values are
formatted once per distinct value (``%.6g``) and copied from a lookup table.
"""

from __future__ import annotations

from typing import Iterator

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


class RowRenderer:
    """Render blocks of rows of one CSR matrix; the value table is built once for the matrix."""

    def __init__(self, M: sp.spmatrix):
        self.M = sp.csr_matrix(M)
        values, self.value_ids = np.unique(self.M.data, return_inverse=True)
        strings = [f"{v:.6g}".encode() for v in values.tolist()]
        self.table = np.frombuffer(b"".join(strings), dtype=np.uint8) if strings else np.zeros(0, np.uint8)
        self.table_offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in strings], out=self.table_offsets[1:])
        self.max_value_len = max((len(s) for s in strings), default=1)

    def block(self, start: int, stop: int, mode: int) -> tuple[bytes, np.ndarray]:
        """Rows ``start..stop-1`` as one bytes object and the end offset of each row in it."""
        M = self.M
        lo, hi = M.indptr[start], M.indptr[stop]
        indptr = (M.indptr[start:stop + 1] - lo).astype(np.int64)
        n = int(hi - lo)
        width = (_MAX_DIGITS if mode != VALUES else 0) + (self.max_value_len if mode != INDICES else 0) + 2
        buf = np.empty(max(n * width, 1), dtype=np.uint8)
        ends = np.empty(stop - start, dtype=np.int64)
        sep = ord(" ") if mode == PAIRS else ord(",")
        used = _render(indptr, M.indices[lo:hi].astype(np.int64), self.value_ids[lo:hi].astype(np.int64),
                       self.table, self.table_offsets, mode, sep, buf, ends)
        return buf[:used].tobytes(), ends


def sparse_text_chunks(M: sp.spmatrix, block_rows: int = 100_000) -> Iterator[bytes]:
    """The sparse matrix text format (header, then ``i:v`` rows), as chunks of bytes."""
    renderer = RowRenderer(M)
    n = renderer.M.shape[0]
    yield f"{n} {renderer.M.shape[1]}\n".encode()
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        text, ends = renderer.block(start, stop, PAIRS)
        begins = np.concatenate([[0], ends[:-1]])
        yield b"".join(text[b:e] + b"\n" for b, e in zip(begins.tolist(), ends.tolist()))
