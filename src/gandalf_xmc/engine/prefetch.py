"""A software prefetch for numba kernels: ``prefetch(array, flat_index)`` asks the processor to
bring the cache line of that element in, without waiting for it (LLVM's ``llvm.prefetch``, which
numba does not expose). A kernel that visits rows in random order issues it for rows it will reach
a few steps later, so their cache misses overlap the work on the current row."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, array, flat_index):
    """Prefetch element ``flat_index`` of a C-contiguous ``array`` (counted over its flat data) for
    reading into every cache level. A hint only: an index past the end is harmless."""
    if not isinstance(array, types.Array) or not isinstance(flat_index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0]).data
        index = context.cast(builder, args[1], index_type, types.intp)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # llvm.prefetch(address, 0 = read, 3 = keep in all levels, 1 = data cache); LLVM names
        # the overloaded intrinsic for the pointer type itself
        callee = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch"
        )
        builder.call(callee, [builder.bitcast(builder.gep(data, [index]), byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, flat_index), codegen
