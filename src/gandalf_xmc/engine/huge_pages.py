"""Arrays on transparent huge pages for numba kernels that read them at random.

The solver visits a parent's rows in random order, and every visit touches a dozen arrays of
that parent (the row's features, dual variables, weight rows) at unrelated places: with 4 KiB
pages nearly every touch of a big parent's arrays also misses the TLB. Linux backs memory with
2 MiB pages where asked (``madvise(MADV_HUGEPAGE)``; the kernel's default mode on most
distributions is ``madvise``), which numpy does for its own large arrays but numba's allocator
does not, so these helpers allocate, advise, then fill. The advice is a hint: elsewhere than on
Linux, or where the kernel refuses it, the arrays are ordinary ones with the same contents.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

HUGE_PAGE_BYTES = 2 << 20
MADV_HUGEPAGE = 14  # <sys/mman.h> on Linux
ADVISES = sys.platform.startswith("linux")


@intrinsic
def _madvise(typingctx, address, length, advice):
    """libc's ``madvise(address, length, advice)``; returns its result (0 on success). Linux only."""
    if not all(isinstance(t, types.Integer) for t in (address, length, advice)):
        return None

    def codegen(context, builder, signature, args):
        i32, i64, byte_pointer = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
        if not ADVISES:  # no reference to a symbol the platform may lack
            return i32(-1)
        callee = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [byte_pointer, i64, i32]), "madvise")
        address_type, length_type, advice_type = signature.args
        pointer = builder.inttoptr(context.cast(builder, args[0], address_type, types.intp), byte_pointer)
        return builder.call(
            callee,
            [
                pointer,
                context.cast(builder, args[1], length_type, types.int64),
                context.cast(builder, args[2], advice_type, types.int32),
            ],
        )

    return types.int32(address, length, advice), codegen


@numba.njit(cache=True, nogil=True)
def huge_page_span(address, nbytes):
    """The whole 2 MiB pages inside ``[address, address + nbytes)``: (first byte, length), the
    length 0 where none fits."""
    start = (address + HUGE_PAGE_BYTES - 1) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    end = (address + nbytes) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    return start, max(end - start, 0)


@numba.njit(cache=True, nogil=True)
def advise_huge_pages(a):
    """Asks for huge pages under the whole 2 MiB pages of ``a``'s memory (only pages not yet
    touched get them). Returns madvise's result, or 1 where nothing was asked (too small, or
    not Linux)."""
    start, length = huge_page_span(a.ctypes.data, a.nbytes)
    if ADVISES and length > 0:
        return np.int64(_madvise(start, length, MADV_HUGEPAGE))
    return np.int64(1)


@numba.njit(cache=True, nogil=True)
def huge_empty(n, dtype):
    """``np.empty(n, dtype)`` on huge pages where they can be had."""
    a = np.empty(n, dtype)
    advise_huge_pages(a)
    return a


@numba.njit(cache=True, nogil=True)
def huge_full(n, value, dtype):
    """``np.full(n, value, dtype)`` on huge pages where they can be had (advised before the
    fill touches the pages)."""
    a = huge_empty(n, dtype)
    a[:] = value
    return a
