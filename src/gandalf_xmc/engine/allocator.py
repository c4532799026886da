"""glibc's malloc, told to keep a training step's large temporaries for the next step.

A neural training step allocates the same tens of megabytes of temporaries every step (the
convolutions' buffers, the shortlist's scores). glibc serves blocks above its mmap threshold
(dynamic, 128 KiB to 32 MiB) by mapping fresh pages and unmaps them when freed, and trims its
heap's free top above the trim threshold: either way the next step faults every page in again.
Raising both thresholds keeps that memory in the heap between steps (docs/decisions.md, "glibc
keeps a step's temporaries"). The setting is process-wide, so only entry points call it.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
STEP_MEMORY_BYTES = 64 << 20  # blocks up to this size come from the heap; four times it stays mapped when freed


def reuse_step_memory(block_bytes: int = STEP_MEMORY_BYTES) -> bool:
    """Raise glibc's mmap threshold to ``block_bytes`` and its trim threshold to four times that;
    True where it took (Linux with glibc), False elsewhere (nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # another C library (musl)
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, block_bytes)) and bool(mallopt(M_TRIM_THRESHOLD, 4 * block_bytes))
