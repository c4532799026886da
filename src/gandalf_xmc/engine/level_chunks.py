"""A tree level's weights laid out for the beam search: parent by parent, then feature by feature.

The search scores all the children of a kept parent at once: for each of the query's few features
it finds that feature among the children's weights and adds its weights to their margins. So a
level is held chunk by chunk, a chunk being one parent's children with their rows transposed: the
chunk's distinct features ascend, and each feature lists its entries (child within the parent,
weight). A query feature costs one bisection in its chunk's feature list, whatever the length of
the children's rows (PECOS's chunked layout), where a row-by-row search reads every child's row.

Arrays of one level (``P`` parents, the root being the top level's one parent; feature ids are
cut into ``B`` blocks of 65,536, block ``b`` holding the ids ``f`` with ``f >> 16 == b``, so that a
(parent, feature) pair costs 4 bytes, not 8):

- ``feat_lo`` (int64, ``P * B + 1``): chunk p's features of block b are
  ``feat[feat_lo[p * B + b]:feat_lo[p * B + b + 1]]`` (so the chunk's pairs are
  ``feat_lo[p * B]:feat_lo[(p + 1) * B]``);
- ``entry_lo`` (int64, ``P + 1``): chunk p's entries are ``[entry_lo[p], entry_lo[p + 1])``;
- ``feat`` (uint16): a pair's feature id less its block (``f & 0xFFFF``), ascending within a
  (chunk, block);
- ``feat_end`` (uint16) and ``end_mark`` (int64): pair a's entries end at entry ``end(a)``
  (counted over the level), whose low 16 bits are ``feat_end[a]``; the rest comes from
  ``end_mark[a // K]``, the exact end of pair ``K * (a // K)``: ``end(a) = m + ((feat_end[a] - m)
  & 0xFFFF)``. A pair holds at most F entries (F: the level's largest family), so with ``K =
  max(1, 65535 // F)`` no run of K pairs spans 65,536 entries. A chunk's first pair starts at
  its first entry, every other one where the pair before it ends;
- ``child`` (uint8, uint16 or uint32: the smallest that holds the level's largest family): the
  entry's child, counted from its parent's first;
- ``value`` (float32; float16 in files, see below): the weight.

Bytes: about 4 a (parent, feature) pair and 5 to 8 a weight in memory, less than the CSR's 8 a
weight.

Levels trained to files get their layout as files too (:func:`write_chunks`, streamed a group of
parents at a time: memory is bounded by ``group_entries``, not by the level), mapped read-only by
:func:`map_chunks`, and the layout is then the level's only copy of its weights (the CSR files are
dropped, :func:`to_csr` rebuilds them): there the weights are float16 (3 to 4 bytes a weight),
since the pruning threshold keeps them within its range and the search sums them in float64;
a level with a weight beyond float16's range keeps float32. Smaller levels are laid out in
memory (:func:`lay_out`) from their CSR, which stays the saved format of small models. A mapped
layout's per-entry arrays are too large to check when loading, so the search kernel checks every
index it follows (:mod:`.beam_search`): a damaged file is an error, never a read or write outside
an array.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from .layout_format import (
    BLOCK_BITS,
    CHILD_DTYPES,
    CHUNK_FILES,
    DTYPES,
    map_layout,
    mark_stride,
    n_blocks,
)
from .level_store import release_pages

# every float16 bit pattern's value: numba has no float16, so the search reads a weight's bits
# (uint16) and looks its value up here (256 KB)
HALF_VALUES = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
_NO_HALVES = np.empty(0, dtype=np.uint16)
_NO_VALUES = np.empty(0, dtype=np.float32)
# weights transposed at once by a thread when writing a level's layout to files (about 30 bytes
# each, twice: one group being written while the next is laid out)
GROUP_ENTRIES = 1 << 23


@dataclass(frozen=True)
class LevelChunks:
    """One level's weights by parent and feature (see the module's docstring); ``name`` says
    where they come from in error messages (the directory of a mapped layout)."""

    feat_lo: np.ndarray
    entry_lo: np.ndarray
    feat: np.ndarray
    feat_end: np.ndarray
    end_mark: np.ndarray
    child: np.ndarray
    value: np.ndarray
    stride: int  # K of the module's docstring
    name: str = "in memory"

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, name) for name in CHUNK_FILES)

    @property
    def search_arrays(self) -> tuple:
        """What the search kernels read: the pointers, features, children, then the weights as
        ``(float32 values, float16 bits, HALF_VALUES)``, one of the first two empty."""
        if self.value.dtype == np.float16:
            weights = (_NO_VALUES, self.value.view(np.uint16), HALF_VALUES)
        else:
            weights = (self.value, _NO_HALVES, HALF_VALUES)
        return (self.feat_lo, self.entry_lo, self.feat, self.feat_end, self.end_mark, self.stride, self.child, *weights)


def child_dtype(child_ptr: np.ndarray) -> np.dtype:
    """The smallest unsigned type that numbers the children of the largest family."""
    largest = int(np.diff(child_ptr).max(initial=0))
    for dtype in CHILD_DTYPES:
        if largest <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"a parent with {largest:,} children")


@numba.njit(cache=True, nogil=True)
def _lay_out_rows(
    row_ptr,
    indices,
    data,
    chunk_ptr,
    chunk_of_row,
    col_ptr,
    col_row,
    col_value,
    at,
    feat_lo,
    entry_lo,
    feat,
    feat_end,
    child,
    value,
):
    """The layout of a group of consecutive chunks (parents) from its rows: ``row_ptr`` (from 0),
    ``indices`` and ``data`` are the rows' CSR arrays, chunk c's rows are ``chunk_ptr[c]:chunk_ptr[c + 1]``
    (``chunk_of_row`` the same, row by row).
    The rows are first transposed by a counting sort on feature (rows ascend within a feature),
    then the entries counting-sorted by chunk, keeping (feature, row) order within a chunk.
    ``col_ptr`` (features + 1, zeros), ``col_row``, ``col_value`` and ``at`` (chunks) are work
    buffers; the outputs are written from their start (pointers from the group's start).
    Returns the number of (chunk, feature) pairs."""
    n_rows, n_chunks, nnz = row_ptr.size - 1, chunk_ptr.size - 1, indices.size
    n_columns = col_ptr.size - 1
    for e in range(nnz):
        col_ptr[indices[e] + 1] += 1
    for f in range(n_columns):
        col_ptr[f + 1] += col_ptr[f]
    for r in range(n_rows):
        for e in range(row_ptr[r], row_ptr[r + 1]):
            f = indices[e]
            p = col_ptr[f]
            col_ptr[f] = p + 1
            col_row[p] = r
            col_value[p] = data[e]
    for f in range(n_columns, 0, -1):  # the placing moved each start to the next one's: back
        col_ptr[f] = col_ptr[f - 1]
    col_ptr[0] = 0
    for c in range(n_chunks + 1):
        entry_lo[c] = row_ptr[chunk_ptr[c]]
    for c in range(n_chunks):
        at[c] = entry_lo[c]
    for f in range(n_columns):
        for p in range(col_ptr[f], col_ptr[f + 1]):
            r = col_row[p]
            chunk = chunk_of_row[r]
            q = at[chunk]
            at[chunk] = q + 1
            feat[q] = f  # the entry's feature for now: compressed to distinct ones below
            child[q] = r - chunk_ptr[chunk]
            value[q] = col_value[p]
        col_ptr[f] = 0  # zeros again for the next group
    col_ptr[n_columns] = 0
    n_feat = 0
    for c in range(n_chunks):
        feat_lo[c] = n_feat
        for q in range(entry_lo[c], entry_lo[c + 1]):
            if q == entry_lo[c] or feat[q] != feat[q - 1]:
                feat[n_feat] = feat[q]  # n_feat <= q: this reads the entry before it is overwritten
                n_feat += 1
            feat_end[n_feat - 1] = q + 1 - entry_lo[c]
    feat_lo[n_chunks] = n_feat
    return n_feat


@numba.njit(cache=True, nogil=True)
def _compact_pairs(
    feat_lo, entry_lo, feat, feat_end, blocks, stride, first_pair, first_entry, block_counts, feat16, end16, marks
):
    """A group's pairs as :func:`_lay_out_rows` gives them (full feature ids, ends counted from
    their chunk's first entry) in the module's encoding: ``block_counts[c * blocks + b]`` pairs of
    chunk c in block b, each pair's low 16 bits of its id and of its end over the level (the group
    starts at pair ``first_pair`` and entry ``first_entry``), and the exact end of every pair whose
    number is a multiple of ``stride``, in ``marks``; returns how many marks."""
    n_chunks = feat_lo.size - 1
    block_counts[: n_chunks * blocks] = 0
    n_marks = 0
    for c in range(n_chunks):
        base = first_entry + entry_lo[c]
        for a in range(feat_lo[c], feat_lo[c + 1]):
            f = feat[a]
            block_counts[c * blocks + (f >> 16)] += 1
            feat16[a] = f & 0xFFFF
            end = base + feat_end[a]
            end16[a] = end & 0xFFFF
            if (first_pair + a) % stride == 0:
                marks[n_marks] = end
                n_marks += 1
    return n_marks


class _Compactor:
    """The module's encoding of successive groups' pairs (one at a time, in the level's order)."""

    def __init__(self, most_pairs: int, most_parents: int, blocks: int, stride: int, n_parents: int):
        self.blocks, self.stride = blocks, stride
        self.block_counts = np.zeros(most_parents * blocks, dtype=np.int64)
        self.feat = np.empty(most_pairs, dtype=np.uint16)
        self.feat_end = np.empty(most_pairs, dtype=np.uint16)
        self.marks = np.empty(most_pairs // stride + 1, dtype=np.int64)
        self.feat_lo = np.zeros(n_parents * blocks + 1, dtype=np.int64)  # the level's, filled group by group
        self.pairs = 0

    def add(self, p: int, q: int, g_feat_lo, g_entry_lo, feat, feat_end, first_entry: int):
        """Parents ``p:q``'s pairs (their layout from :meth:`_GroupBuffers.lay_out`, entries from
        ``first_entry``): ``(feat, feat_end, marks)`` views valid until the next call."""
        n_marks = _compact_pairs(
            g_feat_lo,
            g_entry_lo,
            feat,
            feat_end,
            self.blocks,
            self.stride,
            self.pairs,
            first_entry,
            self.block_counts,
            self.feat,
            self.feat_end,
            self.marks,
        )
        counts = self.block_counts[: (q - p) * self.blocks]
        self.feat_lo[p * self.blocks + 1 : q * self.blocks + 1] = np.cumsum(counts) + self.pairs
        self.pairs += feat.size
        return self.feat[: feat.size], self.feat_end[: feat.size], self.marks[:n_marks]


class _GroupBuffers:
    """Work and output arrays for groups of up to ``size`` weights, allocated once."""

    def __init__(self, size: int, n_columns: int, n_chunks: int, dtype: np.dtype):
        self.col_ptr = np.zeros(n_columns + 1, dtype=np.int32)  # a group holds fewer than 2**31 weights
        self.col_row = np.empty(size, dtype=np.int32)
        self.col_value = np.empty(size, dtype=np.float32)
        self.at = np.empty(n_chunks, dtype=np.int64)
        self.feat_lo = np.empty(n_chunks + 1, dtype=np.int64)
        self.entry_lo = np.empty(n_chunks + 1, dtype=np.int64)
        self.feat = np.empty(size, dtype=np.int32)
        self.feat_end = np.empty(size, dtype=np.int32)
        self.child = np.empty(size, dtype=dtype)
        self.value = np.empty(size, dtype=np.float32)

    def lay_out(self, W: sp.csr_matrix, child_ptr: np.ndarray, p: int, q: int):
        """Parents ``p:q``'s layout: (feat_lo, entry_lo) from the group's start, then (feat,
        feat_end, child, value), views of the buffers valid until the next call."""
        indptr = np.asarray(W.indptr)
        r_lo, r_hi = int(child_ptr[p]), int(child_ptr[q])
        a, b = int(indptr[r_lo]), int(indptr[r_hi])
        n_chunks = q - p
        chunk_ptr = (child_ptr[p : q + 1] - r_lo).astype(np.int64)
        n_feat = _lay_out_rows(
            (indptr[r_lo : r_hi + 1] - a).astype(np.int64),
            W.indices[a:b],
            W.data[a:b],
            chunk_ptr,
            np.repeat(np.arange(n_chunks, dtype=np.int64), np.diff(chunk_ptr)),
            self.col_ptr,
            self.col_row,
            self.col_value,
            self.at,
            self.feat_lo,
            self.entry_lo,
            self.feat,
            self.feat_end,
            self.child,
            self.value,
        )
        n = b - a
        return (
            self.feat_lo[: n_chunks + 1],
            self.entry_lo[: n_chunks + 1],
            self.feat[:n_feat],
            self.feat_end[:n_feat],
            self.child[:n],
            self.value[:n],
        )


def _groups(W: sp.csr_matrix, child_ptr: np.ndarray, group_entries: int) -> tuple[list[tuple[int, int]], int, int]:
    """Consecutive runs of parents ``(first, last + 1)`` whose weights total at most
    ``group_entries`` (or one parent that alone has more), and the most weights and parents of any."""
    starts = np.asarray(W.indptr)[child_ptr]  # each parent's first entry, and the level's end
    groups, p, n_parents = [], 0, child_ptr.size - 1
    while p < n_parents:
        q = int(np.searchsorted(starts, starts[p] + group_entries, side="right")) - 1
        q = min(max(q, p + 1), n_parents)
        groups.append((p, q))
        p = q
    return (groups, max((int(starts[q] - starts[p]) for p, q in groups), default=0), max((q - p for p, q in groups), default=0))


def _checked_level(W: sp.csr_matrix, child_ptr: np.ndarray) -> np.ndarray:
    child_ptr = np.asarray(child_ptr, dtype=np.int64)
    if child_ptr.size < 2 or child_ptr[0] != 0 or child_ptr[-1] != W.shape[0] or np.any(np.diff(child_ptr) < 0):
        raise ValueError("the parents' child offsets do not cover the level's rows")
    indptr = np.asarray(W.indptr)
    if np.max(indptr[child_ptr[1:]] - indptr[child_ptr[:-1]]) > np.iinfo(np.int32).max:
        raise ValueError("a parent's children have more weights than a chunk can count (2**31)")
    return child_ptr


def lay_out(W: sp.csr_matrix, child_ptr: np.ndarray) -> LevelChunks:
    """``W``'s layout in memory; parent p's children are rows ``child_ptr[p]:child_ptr[p + 1]``."""
    child_ptr = _checked_level(W, child_ptr)
    n_parents = child_ptr.size - 1
    buffers = _GroupBuffers(W.nnz, W.shape[1], n_parents, child_dtype(child_ptr))
    g_feat_lo, entry_lo, feat, feat_end, child, value = buffers.lay_out(W, child_ptr, 0, n_parents)
    stride = mark_stride(child_ptr)
    compactor = _Compactor(feat.size, n_parents, n_blocks(W.shape[1]), stride, n_parents)
    feat16, end16, marks = compactor.add(0, n_parents, g_feat_lo, entry_lo, feat, feat_end, 0)
    # the compactor's arrays are returned as they are, not copied
    return LevelChunks(compactor.feat_lo, entry_lo.copy(), feat16, end16, marks, child, value, stride)


class _NpyStream:
    """A one-dimensional ``.npy`` file written piece by piece under a temporary name, its header
    (which holds the length) written last, and renamed when complete: a file under the final name
    is whole."""

    HEADER_BYTES = 128  # numpy's 1.0 header of any one-dimensional array, padded to 64 bytes

    def __init__(self, path: Path, dtype):
        self.path, self.part = path, path.with_name(path.name + ".part")
        self.dtype = np.dtype(dtype)
        self.count = 0
        self.file = open(self.part, "wb")
        self.file.write(bytes(self.HEADER_BYTES))

    def append(self, array: np.ndarray) -> None:
        np.ascontiguousarray(array, dtype=self.dtype).tofile(self.file)
        self.count += array.size

    def close(self) -> None:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.count,)}
        )
        if len(header.getvalue()) != self.HEADER_BYTES:
            raise RuntimeError(f"an unexpected .npy header of {len(header.getvalue())} bytes")
        self.file.seek(0)
        self.file.write(header.getvalue())
        self.file.close()
        os.replace(self.part, self.path)

    def abandon(self) -> None:
        self.file.close()
        self.part.unlink(missing_ok=True)  # gone already if the stream was closed whole


class _BeyondHalf(Exception):
    """A group holds a weight that float16 cannot."""


def write_chunks(
    W: sp.csr_matrix, child_ptr: np.ndarray, directory: Path, threads: int = 1, group_entries: int = GROUP_ENTRIES
) -> None:
    """``W``'s layout as ``directory/chunk_{name}.npy``, its weights as float16 where every one
    fits (see the module's docstring), built ``group_entries`` weights at a time on each of
    ``threads`` threads (``W`` may be mapped from files larger than memory; memory is about 30
    bytes a weight of ``2 * threads`` groups, whatever the level's size: the threads lay out the
    next groups while the main thread writes the last ones)."""
    try:
        _write_chunks(W, child_ptr, directory, threads, group_entries, np.float16)
    except _BeyondHalf:  # rare: the level is written again, in float32
        _write_chunks(W, child_ptr, directory, threads, group_entries, np.float32)


def _write_chunks(W, child_ptr, directory: Path, threads: int, group_entries: int, value_dtype) -> None:
    child_ptr = _checked_level(W, child_ptr)
    dtype = child_dtype(child_ptr)
    n_parents = child_ptr.size - 1
    entry_lo = np.zeros(n_parents + 1, dtype=np.int64)
    groups, most_weights, most_parents = _groups(W, child_ptr, group_entries)
    stride = mark_stride(child_ptr)
    compactor = _Compactor(most_weights, most_parents, n_blocks(W.shape[1]), stride, n_parents)  # pairs <= weights
    lanes = max(1, min(int(threads), len(groups)))
    # two sets of buffers: the threads lay out the next batch while this one is written
    buffers = [[_GroupBuffers(most_weights, W.shape[1], most_parents, dtype) for _ in range(lanes)] for _ in range(2)]
    batches = [groups[first : first + lanes] for first in range(0, len(groups), lanes)]  # one group a thread
    streams = {
        name: _NpyStream(directory / f"chunk_{name}.npy", {**DTYPES, "child": dtype, "value": value_dtype}[name])
        for name in ("feat", "feat_end", "end_mark", "child", "value")
    }
    try:
        with ThreadPoolExecutor(lanes) as pool:

            def submit(b):
                return [pool.submit(buffers[b % 2][j].lay_out, W, child_ptr, p, q) for j, (p, q) in enumerate(batches[b])]

            pending = submit(0) if batches else []
            for b, batch in enumerate(batches):  # written in order
                laid_out, pending = pending, submit(b + 1) if b + 1 < len(batches) else []
                for (p, q), future in zip(batch, laid_out):
                    g_feat_lo, g_entry_lo, feat, feat_end, child, value = future.result()
                    if value_dtype == np.float16 and not fits_half(value):
                        raise _BeyondHalf
                    entry_lo[p + 1 : q + 1] = g_entry_lo[1:] + entry_lo[p]
                    feat16, end16, marks = compactor.add(p, q, g_feat_lo, g_entry_lo, feat, feat_end, int(entry_lo[p]))
                    for name, array in (
                        ("feat", feat16),
                        ("feat_end", end16),
                        ("end_mark", marks),
                        ("child", child),
                        ("value", value),
                    ):
                        streams[name].append(array)
                release_pages((W.indices, W.data))  # the groups' mapped pages: not this process's memory
        for name, array in (("entry_lo", entry_lo), ("feat_lo", compactor.feat_lo)):
            streams[name] = _NpyStream(directory / f"chunk_{name}.npy", DTYPES[name])
            streams[name].append(array)
        for stream in streams.values():  # the pointers last: a directory with every file holds a whole layout
            stream.close()
    except BaseException:
        for stream in streams.values():
            stream.abandon()
        raise


def fits_half(values: np.ndarray) -> bool:
    """Whether every one of ``values`` (a group's, in memory) is finite and within float16's range."""
    return bool(np.all(np.abs(values) <= np.finfo(np.float16).max))  # False for NaN too


def to_csr(chunks: LevelChunks, child_ptr: np.ndarray, n_columns: int) -> sp.csr_matrix:
    """The level's CSR (float32, rows in tree order) rebuilt from its layout, for what reads a
    level row by row (exports, checks); it is held in memory."""
    child_ptr = np.asarray(child_ptr, dtype=np.int64)
    feat_lo, entry_lo = np.asarray(chunks.feat_lo), np.asarray(chunks.entry_lo)
    n_parents = entry_lo.size - 1
    blocks = (feat_lo.size - 1) // n_parents
    cell = np.repeat(np.arange(n_parents * blocks), np.diff(feat_lo))  # each pair's (chunk, block)
    features = (cell % blocks << BLOCK_BITS) + np.asarray(chunks.feat, dtype=np.int64)
    marks = np.asarray(chunks.end_mark)[np.arange(features.size) // chunks.stride]
    ends = marks + ((np.asarray(chunks.feat_end, dtype=np.int64) - marks) & 0xFFFF)
    starts = np.concatenate([[0], ends[:-1]])  # the level's entries are contiguous, chunk after chunk
    columns = np.repeat(features, ends - starts)
    rows = np.repeat(child_ptr[:-1], np.diff(entry_lo)) + np.asarray(chunks.child, dtype=np.int64)
    W = sp.csr_matrix((np.asarray(chunks.value, dtype=np.float32), (rows, columns)), shape=(int(child_ptr[-1]), n_columns))
    W.sort_indices()
    return W


def map_chunks(directory: Path, child_ptr: np.ndarray, n_columns: int) -> LevelChunks:
    """The layout :func:`write_chunks` wrote to ``directory``, mapped read-only. Raises
    ValueError when the files disagree with each other or with the tree (``child_ptr``) and the
    features (``n_columns``): the checks here read the pointers only; the search checks every
    entry it follows."""
    arrays, stride = map_layout(directory, child_ptr, n_columns)
    return LevelChunks(**arrays, stride=stride, name=str(directory))
