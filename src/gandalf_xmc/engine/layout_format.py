"""The files of a tree level's search layout (:mod:`.level_chunks`, whose docstring gives the
encoding), read and checked with numpy alone: the numpy-only reader of ``gandalf predict --text``
(:mod:`gandalf_xmc.models.linear_reader`) searches them too."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .level_store import finite_problem, load_array

CHUNK_FILES = ("feat_lo", "entry_lo", "feat", "feat_end", "end_mark", "child", "value")
DTYPES = {"feat_lo": np.int64, "entry_lo": np.int64, "feat": np.uint16, "feat_end": np.uint16, "end_mark": np.int64}
BLOCK_BITS = 16  # a feature's block: its id >> 16; within it, its low 16 bits
CHILD_DTYPES = (np.uint8, np.uint16, np.uint32)
VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


def mark_stride(child_ptr: np.ndarray) -> int:
    """K, pairs between two exact ends (see :mod:`.level_chunks`), for a level whose parents'
    children are ``child_ptr``: 65535 // the largest family."""
    return max(1, 65535 // max(int(np.diff(child_ptr).max(initial=0)), 1))


def n_blocks(n_columns: int) -> int:
    """B: blocks of 65,536 feature ids that cover ``n_columns``."""
    return max(1, (int(n_columns) + (1 << BLOCK_BITS) - 1) >> BLOCK_BITS)


def has_chunks(directory: Path | None) -> bool:
    """Whether :func:`.level_chunks.write_chunks` finished a layout in ``directory``."""
    return directory is not None and all((directory / f"chunk_{name}.npy").exists() for name in CHUNK_FILES)


def map_layout(directory: Path, child_ptr: np.ndarray, n_columns: int) -> tuple[dict[str, np.ndarray], int]:
    """The layout files in ``directory``, mapped read-only (the per-parent pointers read into
    memory), and K. Raises ValueError when the files disagree with each other, with the tree
    (``child_ptr``) or with the features (``n_columns``): the checks read the pointers only; a
    search checks every entry it follows."""
    arrays = {name: load_array(directory / f"chunk_{name}.npy", mapped=True) for name in CHUNK_FILES}
    child_ptr = np.asarray(child_ptr, dtype=np.int64)
    problem = _layout_problem(arrays, child_ptr, n_blocks(n_columns))
    if problem:
        raise ValueError(f"{directory.name}: {problem}")
    for name in ("feat_lo", "entry_lo"):  # small: held in memory
        arrays[name] = np.array(arrays[name])
    return arrays, mark_stride(child_ptr)


def _layout_problem(arrays: dict, child_ptr: np.ndarray, blocks: int) -> str | None:
    for name, dtype in DTYPES.items():
        if arrays[name].ndim != 1 or arrays[name].dtype != dtype:
            return f"chunk_{name}.npy is not a one-dimensional {np.dtype(dtype).name} array"
    if arrays["value"].ndim != 1 or arrays["value"].dtype not in VALUE_DTYPES:
        return "chunk_value.npy is not a one-dimensional float32 or float16 array"
    child = arrays["child"]
    if child.ndim != 1 or child.dtype not in [np.dtype(d) for d in CHILD_DTYPES]:
        return "chunk_child.npy is not a one-dimensional unsigned integer array"
    n_parents = child_ptr.size - 1
    for name, size, cells in (("feat_lo", arrays["feat"].size, n_parents * blocks), ("entry_lo", child.size, n_parents)):
        pointer = np.asarray(arrays[name])
        if pointer.size != cells + 1 or pointer[0] != 0 or pointer[-1] != size or np.any(np.diff(pointer) < 0):
            return f"chunk_{name}.npy does not match the tree and the other arrays"
    stride = mark_stride(child_ptr)
    if (
        arrays["feat_end"].size != arrays["feat"].size
        or arrays["end_mark"].size != -(-arrays["feat"].size // stride)
        or arrays["value"].size != child.size
    ):
        return "the layout's arrays differ in length"
    if finite_problem(arrays["value"]):
        return "a weight of the layout is not a finite number"
    return None
