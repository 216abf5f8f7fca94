"""A software prefetch for numba kernels: ``prefetch(array, index)`` asks the CPU to start loading ``array[index]``.

Neighbour sampling (Data Tiering §2.2) is bound by memory latency: each sampled entry and each relabelled
node is a read at a random place in an array far larger than the caches, and a loop whose trip count
is known only at run time leaves the out-of-order core few misses to overlap.  Issuing the reads a few
steps ahead, as ``llvm.prefetch`` does (read, keep in all cache levels, data cache), lets them
overlap.  It is only a hint: it never faults and changes no result.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_READ, _HIGH_LOCALITY, _DATA_CACHE = 0, 3, 1


@intrinsic
def prefetch(typingctx, array, index):
    """Hint that ``array[index]`` (a 1-D array, read as contiguous) is read soon; ``index`` is not bounds-checked:
    a prefetch cannot fault."""
    if not isinstance(array, types.Array) or array.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        data = context.make_array(array_type)(context, builder, args[0]).data
        address = builder.gep(data, [context.cast(builder, args[1], index_type, types.intp)])
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0i8")
        builder.call(function, [builder.bitcast(address, byte_pointer), ir.Constant(int32, _READ),
                                ir.Constant(int32, _HIGH_LOCALITY), ir.Constant(int32, _DATA_CACHE)])
        return context.get_dummy_value()

    return types.void(array, index), codegen
