"""A tree level's weights as they come out of the solver: held in memory while small, written to
files once they pass a size, and read back mapped from disk.

At a million labels the kept weights of the lower levels are billions of entries (8 bytes each as
CSR), more than the machine's memory beside the training data; nothing in training reads a
finished level again, so a level that outgrows ``spill_bytes`` leaves memory for files as its
work units finish, and the level is returned as a CSR matrix over read-only mapped ``.npy`` files
(prediction touches only the rows its beam visits).

Memory: one lane's in-memory blocks stay below ``spill_bytes``; assembling a spilled level reads
one work unit's block at a time.
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

LEVEL_FILES = ("indptr", "indices", "data")


@dataclass(frozen=True)
class LaidOutLevel:
    """A level kept in files as its search layout alone (:mod:`.level_chunks`), its CSR dropped:
    ``indptr`` (int64, each node's first weight) gives its shape and weights, and
    :func:`.level_chunks.to_csr` rebuilds its CSR where one is wanted."""

    indptr: np.ndarray
    n_columns: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.indptr.size - 1, self.n_columns)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])


class UnitBlocks:
    """The kept weights of one lane's work units, in the order they finish: unit ``(lo, hi)``'s
    nodes' weights are consecutive CSR rows ``(feature ids, values)``. Held in memory until they
    pass ``spill_bytes`` and ``directory`` is given, then appended to ``directory/lane{lane}.*``."""

    def __init__(self, directory: Path | None, lane: int, spill_bytes: int):
        self.spill_bytes = spill_bytes
        self.paths = None if directory is None else (directory / f"lane{lane}.feat", directory / f"lane{lane}.val")
        self.units: list[tuple[int, int, int, int]] = []  # (lo, hi, part, first entry in that part); part -1: the files
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        self.in_memory = 0  # bytes of self.parts
        self.on_disk = 0  # entries written to the files
        self.spilled = False

    def add(self, lo: int, hi: int, feat: np.ndarray, val: np.ndarray) -> None:
        """Unit ``lo:hi``'s entries."""
        self.units.append((lo, hi, len(self.parts), 0))
        self.parts.append((feat, val))
        self.in_memory += feat.nbytes + val.nbytes
        if self.paths is not None and self.in_memory > self.spill_bytes:
            self._spill()

    def _spill(self) -> None:
        offsets = []
        with open(self.paths[0], "ab") as feat_file, open(self.paths[1], "ab") as val_file:
            for feat, val in self.parts:
                offsets.append(self.on_disk)
                feat.tofile(feat_file)
                val.tofile(val_file)
                self.on_disk += feat.size
        self.units = [(lo, hi, -1, s if part < 0 else offsets[part] + s) for lo, hi, part, s in self.units]
        self.parts = []
        self.in_memory = 0
        self.spilled = True

    def read(self, part: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` entries of a unit held in memory, from ``start`` in its part."""
        feat, val = self.parts[part]
        return feat[start : start + n], val[start : start + n]

    def remove_files(self) -> None:
        if self.paths is not None:
            for path in self.paths:
                path.unlink(missing_ok=True)


def assemble_level(lanes: list[UnitBlocks], counts: np.ndarray, n_columns: int, directory: Path | None) -> sp.csr_matrix:
    """The level's ``K x n_columns`` CSR from its lanes' unit blocks (``counts``: weights of each
    node): in memory if no lane spilled, else written to ``directory/{indptr,indices,data}.npy``
    and returned mapped read-only."""
    indptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    spilled = directory is not None and any(lane.spilled for lane in lanes)
    if not spilled:
        indices = np.empty(indptr[-1], dtype=np.int32)
        data = np.empty(indptr[-1], dtype=np.float32)
        for lane in lanes:
            for lo, hi, part, start in lane.units:
                at, n = indptr[lo], indptr[hi] - indptr[lo]
                indices[at : at + n], data[at : at + n] = lane.read(part, start, n)
        return _csr(data, indices, indptr, n_columns)
    paths = {name: directory / f"{name}.npy" for name in LEVEL_FILES}
    np.save(paths["indptr"], indptr)
    # the files' headers and sizes from numpy, then the units' blocks written where they belong
    # (plain writes: pages of a writable mapping would count as the process's memory until flushed)
    offsets = {}
    for name, dtype in (("indices", np.int32), ("data", np.float32)):
        header = np.lib.format.open_memmap(paths[name], mode="w+", dtype=dtype, shape=(int(indptr[-1]),))
        offsets[name] = header.offset
        del header
    with open(paths["indices"], "r+b") as indices_file, open(paths["data"], "r+b") as data_file:
        targets = (indices_file.fileno(), offsets["indices"]), (data_file.fileno(), offsets["data"])
        for lane in lanes:
            sources = [open(path, "rb") for path in lane.paths] if lane.spilled else []
            try:
                for lo, hi, part, start in lane.units:
                    at, n = int(indptr[lo]), int(indptr[hi] - indptr[lo])
                    for j, (target, offset) in enumerate(targets):
                        if part < 0:  # file to file in the kernel: no read into this process and back
                            copy_range(sources[j].fileno(), target, 4 * n, 4 * start, offset + 4 * at)
                        else:
                            block = lane.read(part, start, n)[j]
                            os.pwrite(target, memoryview(block).cast("B"), offset + 4 * at)  # type: ignore[arg-type]
            finally:
                for source in sources:
                    source.close()
            lane.remove_files()
    return read_level(directory, n_columns)


def copy_range(source: int, target: int, count: int, source_offset: int, target_offset: int, block: int = 1 << 26) -> None:
    """Copy ``count`` bytes from ``source_offset`` of one open file to ``target_offset`` of another
    (file descriptors): ``os.copy_file_range`` where the platform has it, else reads and writes of
    ``block`` bytes."""
    done, kernel = 0, hasattr(os, "copy_file_range")
    while done < count:
        n = min(block, count - done)
        copied = 0
        if kernel:
            try:
                copied = os.copy_file_range(source, target, n, source_offset + done, target_offset + done)
            except OSError as error:  # a file system or kernel without it: copy through memory from here on
                if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                kernel = False
        if copied == 0:
            chunk = os.pread(source, n, source_offset + done)
            if not chunk:
                raise OSError(errno.EIO, f"a spilled weight file ended {count - done:,} bytes early")
            copied = os.pwrite(target, chunk, target_offset + done)
        done += copied


def _csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_columns: int) -> sp.csr_matrix:
    import scipy.sparse as sp  # here: the cold-start reader imports this module for check_level alone

    W = sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, n_columns), copy=False)
    W.has_sorted_indices = True  # each row's features ascend by construction; scipy would re-check them
    return W


def check_level(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_columns: int, name: str, check_entries: int = 100_000_000
) -> None:
    """Raise ValueError unless a saved level's row pointers are consistent with its arrays and,
    for levels of at most ``check_entries`` weights (the ones the search copies into its chunk
    layout, where a feature id indexes memory), every feature id is below ``n_columns``; larger
    levels are searched by comparing feature ids only, so their ids are not read; likewise every
    weight of such a level is finite (numpy only: the cold-start reader calls it too)."""
    if (
        indptr.ndim != 1
        or indptr.size == 0
        or indptr[0] != 0
        or np.any(np.diff(indptr) < 0)
        or indptr[-1] != indices.size
        or indices.size != data.size
        or indices.dtype != np.int32
        or data.dtype != np.float32
    ):
        raise ValueError(f"{name}: inconsistent weight arrays")
    if 0 < indices.size <= check_entries and (indices.min() < 0 or indices.max() >= n_columns):
        raise ValueError(f"{name}: a feature id out of range")
    if finite_problem(data, check_entries):
        raise ValueError(f"{name}: a weight is not a finite number")


def finite_problem(values: np.ndarray, check_entries: int = 100_000_000) -> bool:
    """Whether ``values`` (of at most ``check_entries``; larger arrays are not read here) hold a
    NaN or an infinity: their sum in float64 is finite exactly when every float32 value is (no
    sum of at most 2**53 float32 values can overflow float64), and it reads without a copy."""
    return 0 < values.size <= check_entries and not np.isfinite(np.add.reduce(values, dtype=np.float64))


def load_array(path: Path, mapped: bool = False) -> np.ndarray:
    """A ``.npy`` file of a model, read (or ``mapped`` read-only) without pickles, after checking
    that it is a regular file (a FIFO would hang the reader) whose size is exactly what its header
    promises (a file cut short or padded is damaged, not a reason to ask for memory). Raises
    ValueError naming the file."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before open: opening a FIFO waits for a writer
            raise ValueError(f"{path.name} is not a regular file")
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(fh)
            expected = fh.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            size = os.fstat(fh.fileno()).st_size
            if size != expected:
                raise ValueError(f"{path.name} holds {size:,} bytes but its header describes {expected:,}")
            if dtype.hasobject:
                raise ValueError(f"{path.name} holds Python objects")
            if not mapped:
                fh.seek(0)
                return np.load(fh, allow_pickle=False)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        raise ValueError(f"{path.name}: {exc.strerror or exc}") from None
    return np.load(path, mmap_mode="r", allow_pickle=False)


def map_level(directory: Path, n_columns: int, n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``(indptr, indices, data)`` arrays of a level written by :func:`assemble_level` or
    :func:`write_level`, mapped read-only and checked by :func:`check_level` (numpy only);
    ``n_rows``: the rows the level must have, checked before anything is read (a huge row-pointer
    file is damaged, not a reason to allocate)."""
    arrays = {name: load_array(directory / f"{name}.npy", mapped=True) for name in LEVEL_FILES}
    if n_rows is not None and arrays["indptr"].shape != (n_rows + 1,):
        raise ValueError(
            f"{directory.name}: {max(arrays['indptr'].size - 1, 0):,} rows of weights for the level's {n_rows:,} nodes"
        )
    indptr, indices, data = np.asarray(arrays["indptr"]), arrays["indices"], arrays["data"]
    check_level(indptr, indices, data, n_columns, directory.name)
    return indptr, indices, data


def read_level(directory: Path, n_columns: int, n_rows: int | None = None) -> sp.csr_matrix:
    """:func:`map_level`'s arrays as a CSR matrix."""
    indptr, indices, data = map_level(directory, n_columns, n_rows)
    return _csr(data, indices, indptr, n_columns)


def open_level(directory: Path, n_columns: int, n_rows: int | None = None) -> sp.csr_matrix | LaidOutLevel:
    """A level saved as files: its CSR (:func:`read_level`), or, where :func:`drop_csr` left its
    search layout alone, its row pointers as a :class:`LaidOutLevel` (the caller maps the layout)."""
    if (directory / "indices.npy").exists() or (directory / "data.npy").exists():
        return read_level(directory, n_columns, n_rows)
    indptr = np.array(load_array(directory / "indptr.npy"))
    if (
        indptr.ndim != 1
        or indptr.dtype != np.int64
        or indptr.size == 0
        or (n_rows is not None and indptr.size != n_rows + 1)
        or indptr[0] != 0
        or np.any(np.diff(indptr) < 0)
    ):
        raise ValueError(f"{directory.name}: inconsistent weight arrays")
    return LaidOutLevel(indptr, n_columns)


def drop_csr(directory: Path) -> None:
    """Remove a level's CSR weights from its files once its search layout holds them (the row
    pointers stay): at a million labels each copy of the weights is about as large as the other."""
    for name in ("indices", "data"):
        (directory / f"{name}.npy").unlink(missing_ok=True)


def page_in(arrays: list[np.ndarray]) -> int:
    """Read the mapped ones of ``arrays`` into the page cache now, so that the first queries do not
    each wait on the disk for the pages their weights lie on (a server's warm-up); returns the
    bytes read (arrays held in memory count 0)."""
    total = 0
    for mapped in mappings(arrays):
        mapped._mmap.madvise(mmap.MADV_WILLNEED)  # type: ignore[attr-defined]  # numpy keeps the mmap there  # the kernel reads ahead in large requests
        flat = np.asarray(mapped).reshape(-1).view(np.uint8)
        int(flat[:: mmap.PAGESIZE].sum())  # one byte a page: returns once every page is in
        total += flat.size
    return total


def release_pages(arrays) -> None:
    """Drop the mapped ones of ``arrays`` from this process's page tables (the page cache keeps
    them): a pass over a level larger than memory, reading each page once, would otherwise count
    every page it read as the process's resident memory."""
    for mapped in mappings(arrays):
        mapped._mmap.madvise(mmap.MADV_DONTNEED)  # type: ignore[attr-defined]


def mappings(arrays) -> list[np.memmap]:
    """The read-only file mappings behind ``arrays`` (none for arrays held in memory)."""
    found = []
    for array in arrays:
        mapped = array
        while mapped is not None and not isinstance(mapped, np.memmap):
            mapped = getattr(mapped, "base", None)
        if mapped is not None and getattr(mapped, "_mmap", None) is not None:
            found.append(mapped)
    return found


def write_level(W: sp.csr_matrix | LaidOutLevel, directory: Path, source: Path | None = None) -> None:
    """``W``'s arrays as ``directory/{indptr,indices,data}.npy``; ``source``: a directory where
    :func:`assemble_level` already wrote them, with whatever else was written there for the
    level (its search layout, which replaces the CSR of a :class:`LaidOutLevel`): every ``.npy``
    file of it is hard-linked (or copied across file systems). Files of an earlier model in
    ``directory`` are removed first."""
    if isinstance(W, LaidOutLevel) and not is_spilled(source):
        raise ValueError("a level kept as its search layout is saved from its files")
    if source is not None and directory.exists() and source.resolve() == directory.resolve():
        return  # saved where it was read from
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.npy"):
        stale.unlink()
    if source is not None and is_spilled(source):  # every file of it: its CSR or its layout, or both
        for path in sorted(source.glob("*.npy")):
            try:
                os.link(path, directory / path.name)
            except OSError:
                shutil.copyfile(path, directory / path.name)
        return
    for name in LEVEL_FILES:
        np.save(directory / f"{name}.npy", np.asarray(getattr(W, name), dtype=np.int64 if name == "indptr" else None))


def is_spilled(directory: Path | None) -> bool:
    """Whether :func:`assemble_level` wrote its level to ``directory`` (its CSR may have been
    dropped since for its layout: the row pointers stay)."""
    return directory is not None and (directory / "indptr.npy").exists()
