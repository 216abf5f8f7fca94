"""The fused GPU sampler's kernels in CUDA C++, launched through CuPy (``FusedNeighborSampler(kernels="cupy")``).

Why a second set beside the numba-cuda kernels (``tiering.sampling.fused_kernels``): a (12,12,12) minibatch makes
nine launches, so what a launch costs the host is paid by every minibatch whatever its size.  numba-cuda prepares
each launch in Python, every array argument a numba device array made from a torch tensor; CuPy's ``RawKernel``
launches from compiled code, and here each argument is a plain integer: a tensor is its address and its number of
elements (``kernel_words``), the way ``tiering.features.zero_copy.launch_gather`` passes its pointers.
``tierbench samplerbench`` measures both sets on the same minibatches, and their launch costs.

The source is ``fused.cu`` beside this module, shipped as package data and compiled by NVRTC at the first launch on
each device (``tiering.cuda_cpp``; ``sample`` once per index type of the graph, ``int`` or ``long long``).  It
states the numba kernels again, argument for argument and with the same integer arithmetic, so both sets return the
CPU sampler's minibatches.  Compiled for the host, it runs without a GPU: the tests launch it one thread at a time through the
sampler's own code (``HostLaunches`` there replaces ``function`` and ``stream``).
"""

from __future__ import annotations

import numpy as np
import torch

from tiering.cuda_cpp import KernelSource, cupy_stream
from tiering.sampling.fused import GPU_THREADS

INDEX_TYPES = {torch.int32: "int", torch.int64: "long long"}
"""The C++ type of each dtype a graph's ``indices`` may have: ``sample``'s template argument."""
NAME_EXPRESSIONS = (*(f"sample<{c_type}>" for c_type in INDEX_TYPES.values()), "insert_all", "marks", "write")
"""Every kernel as NVRTC names it."""
SAMPLER = KernelSource(__package__, "fused.cu", NAME_EXPRESSIONS)
"""The kernels' source, package data of ``tiering.sampling`` (``tiering.cuda_cpp``)."""


class KernelArray:
    """A tensor as the kernels take it: its address and its number of elements, and its dtype (which chooses
    ``sample``'s instantiation)."""

    __slots__ = ("dtype", "words")

    def __init__(self, tensor: torch.Tensor):
        if not tensor.is_contiguous() or tensor.dtype not in INDEX_TYPES:
            raise ValueError(f"the fused sampler's kernels take contiguous int32 or int64 tensors, got {tensor.dtype} "
                             f"with strides {tensor.stride()}")
        self.words = (np.uint64(tensor.data_ptr()), np.int64(tensor.numel()))
        self.dtype = tensor.dtype


INDICES = ("sample", 1)
"""(kernel, position) of the one array the kernels take as int32 or int64: ``sample``'s graph indices."""


def kernel_words(args, name: str = "") -> tuple:
    """``args`` (tensors, ``KernelArray``, integers) of kernel ``name`` as its arguments: each array its address and
    size, each integer an ``int64`` but a ``uint64`` (the hop's seed), so that every word is the 8 bytes the kernel's
    parameters take.  Every array but ``INDICES`` must be int64, which is how the kernels read them."""
    words = []
    for position, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            arg = KernelArray(arg)
        if isinstance(arg, KernelArray):
            if arg.dtype is not torch.int64 and (name, position) != INDICES:
                raise ValueError(f"{name}: argument {position} is {arg.dtype}; the kernels read every array but the "
                                 "graph's indices as int64")
            words.extend(arg.words)
        else:
            words.append(arg if isinstance(arg, np.uint64) else np.int64(arg))
    return tuple(words)


def name_expression(name: str, args) -> str:
    """Kernel ``name``'s instantiation for ``args``: ``sample`` by the dtype of the graph's ``indices`` (its
    second argument)."""
    if name != INDICES[0]:
        return name
    return f"sample<{INDEX_TYPES[args[INDICES[1]].dtype]}>"


class CupyLaunches:
    """The kernels of ``fused.cu`` launched through CuPy in the current CUDA device, which the sampler makes its
    own (the interface is ``tiering.sampling.fused.NumbaLaunches``'s)."""

    name = "cupy"
    on_host = False
    threads = GPU_THREADS

    def stream(self, device: torch.device):
        return cupy_stream(device)

    def arrays(self, args) -> tuple:
        return tuple(self.array(arg) if isinstance(arg, torch.Tensor) else arg for arg in args)

    def array(self, tensor: torch.Tensor) -> KernelArray:
        """``tensor`` as the kernels take it, refused unless it lies in the current CUDA device's memory (a mapped
        view of pinned host memory counts): a kernel that reads an address of the host or of another GPU faults, and
        the fault leaves the device's context unusable for the rest of the process."""
        if not (tensor.is_cuda and tensor.device.index == torch.cuda.current_device()):
            raise ValueError(f"the CUDA C++ kernels read tensors of the current CUDA device; this one is on "
                             f"{tensor.device}")
        return KernelArray(tensor)

    def function(self, expression: str):
        """The launchable kernel ``expression``: called as ``(grid, block, words, stream=...)``, CuPy's way."""
        return SAMPLER.function(expression)

    def launch(self, name: str, blocks: int, stream, *args) -> None:
        kernel = self.function(name_expression(name, args))
        kernel((blocks,), (self.threads,), kernel_words(args, name), stream=stream)
