"""The fused sampler's CUDA C++ kernels (``tiering/sampling/fused.cu``) compiled for the host, so that the tests run
``FusedNeighborSampler(kernels=...)``'s own launches of them without a GPU.

``fused.cu`` compiled without ``__CUDACC__`` leaves ``thread_index()`` and ``thread_count()`` to the file that
includes it, and its atomics are plain reads and writes.  The harness below defines them and one C entry point,
``launch(name, threads, words, count)``, which runs kernel ``name`` once per thread of the grid, one after another
(a schedule the GPU may also choose), its arguments the 64-bit words CuPy would pass (``fused_cupy.kernel_words``),
each converted to the kernel's own parameter type.  It refuses a word count other than the kernel's parameter count,
so an argument list out of step with the source fails here.
"""

import ctypes
import functools
import importlib.resources
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from tiering.sampling import fused_cupy
from tiering.sampling.fused_cupy import CupyLaunches

HARNESS = r"""
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include SOURCE

static i64 current_thread, threads_total;
i64 thread_index() { return current_thread; }
i64 thread_count() { return threads_total; }

template <typename T>
T from_word(u64 word)
{
    if constexpr (std::is_pointer_v<T>) return reinterpret_cast<T>(word);
    else return (T)word;
}

template <typename... A, std::size_t... I>
void call(void (*kernel)(A...), const u64* words, std::index_sequence<I...>)
{
    kernel(from_word<A>(words[I])...);
}

// 0, or the kernel's parameter count where count differs from it
template <typename... A>
int run(void (*kernel)(A...), i64 threads, const u64* words, int count)
{
    static_assert(((sizeof(A) == 8) && ...), "CuPy passes every argument as 8 bytes: every parameter must take 8");
    if (count != (int)sizeof...(A)) return (int)sizeof...(A);
    threads_total = threads;
    for (current_thread = 0; current_thread < threads; ++current_thread)
        call(kernel, words, std::index_sequence_for<A...>{});
    return 0;
}

extern "C" int launch(const char* name, i64 threads, const u64* words, int count)
{
CASES
    return -1;
}
"""

THREADS = 32
"""Threads per block on the host: fewer than a GPU's, so that small tests still launch grids of several blocks."""


def compiler() -> str | None:
    return shutil.which("c++")


def cuda_cpp_kernels(tmp_path_factory):
    """The CUDA C++ kernels as a test hands them to the sampler: CuPy's (``"cupy"``) where a GPU is visible, else
    compiled for the host (``HostLaunches``, over the one library this test session builds); the test skips without
    a GPU or a C++ compiler."""
    if torch.cuda.is_available():
        return "cupy"
    if compiler() is None:
        pytest.skip("runs fused.cu on the host: needs a C++ compiler (c++)")
    return HostLaunches(session_library(tmp_path_factory.getbasetemp()))


@functools.cache
def session_library(session_temp: Path) -> Path:
    """``build``'s library, built once per test session into its temporary folder ``session_temp``."""
    folder = session_temp / "fused-host"
    folder.mkdir()
    return build(folder)


def build(folder: Path) -> Path:
    """The harness around the package's ``fused.cu``, compiled into a shared library in ``folder``; its path."""
    source = importlib.resources.files(fused_cupy.SAMPLER.package) / fused_cupy.SAMPLER.name
    cases = "\n".join(f'    if (!strcmp(name, "{expression}")) return run({expression}, threads, words, count);'
                      for expression in fused_cupy.NAME_EXPRESSIONS)
    harness = folder / "fused_host.cpp"
    harness.write_text(HARNESS.replace("SOURCE", f'"{source}"').replace("CASES", cases))
    library = folder / "fused_host.so"
    subprocess.run([compiler(), "-std=c++17", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", str(harness), "-o",
                    str(library)], check=True, capture_output=True, text=True, timeout=300)
    return library


class HostLaunches(CupyLaunches):
    """``CupyLaunches`` whose kernels run on the CPU over CPU tensors, from the library ``build`` made."""

    on_host = True
    threads = THREADS

    def __init__(self, library: Path):
        self.library = ctypes.CDLL(str(library))
        self.library.launch.argtypes = (ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int)
        self.library.launch.restype = ctypes.c_int
        self.launched: list[str] = []

    def stream(self, device):
        return None

    def array(self, tensor):
        return fused_cupy.KernelArray(tensor)  # CPU tensors, where these kernels run

    def function(self, expression: str):
        def run(grid, block, words, stream=None):
            packed = np.array([int(word) % 2**64 for word in words], dtype=np.uint64)
            failed = self.library.launch(expression.encode(), grid[0] * block[0], packed.ctypes.data, len(packed))
            assert failed >= 0, f"no kernel named {expression} in {fused_cupy.SAMPLER.name}"
            assert failed == 0, f"{expression}: launched with {len(packed)} words, takes {failed}"
            self.launched.append(expression)
        return run
