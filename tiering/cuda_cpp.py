"""tierbench's CUDA C++ kernels: sources shipped as package data, compiled by CuPy's NVRTC at first use, launched on
torch's streams.

Two sets live so: the zero-copy gather (``tiering.features.zero_copy``, whose docstring says why CUDA C++ through
CuPy) and the fused sampler's kernels (``tiering.sampling.fused_cupy``).  Each is a ``KernelSource``: a real .cu
file, so the tests compile it with nvcc for sm_90 and for the host without a GPU, and CuPy compiles the same text
with NVRTC, one module per source, each kernel named by its name expression (a template's instantiation
included).  CuPy loads a module on each device at its first launch there, in the current CUDA device, which both
``cupy.cuda.Device`` and ``torch.cuda.device`` set.  ``cupy`` is imported only when a kernel is first looked up.
"""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources

import torch

COMPILE_OPTIONS = ("--std=c++17",)


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """The .cu file ``name`` of ``package``, and its kernels' NVRTC name expressions."""

    package: str
    name: str
    name_expressions: tuple[str, ...]

    def text(self) -> str:
        """The source, read from the package (``importlib.resources``)."""
        return resources.files(self.package).joinpath(self.name).read_text(encoding="utf-8")

    def function(self, expression: str):
        """Kernel ``expression`` (one of ``name_expressions``), launched as ``(grid, block, args, stream=...)``."""
        return _function(self, expression)


@functools.cache
def _module(source: KernelSource):
    import cupy

    return cupy.RawModule(code=source.text(), options=COMPILE_OPTIONS, name_expressions=source.name_expressions)


@functools.cache
def _function(source: KernelSource, expression: str):
    return _module(source).get_function(expression)


class _TorchStream:
    """torch's current stream of a device in the CUDA stream protocol (``__cuda_stream__``)."""

    def __init__(self, device: torch.device):
        self.handle = torch.cuda.current_stream(device).cuda_stream

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle


def cupy_stream(device: torch.device):
    """torch's current stream of ``device`` as a CuPy stream (``Stream.from_external``, CuPy >= 14), so CuPy
    launches run in order with torch's work; call it with ``device`` current (``cupy.cuda.Device(device.index)`` or
    ``torch.cuda.device(device)``, both ``cudaSetDevice``)."""
    import cupy

    return cupy.cuda.Stream.from_external(_TorchStream(device))
