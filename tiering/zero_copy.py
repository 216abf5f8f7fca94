"""The one-launch gather over GPU and zero-copy host memory, and in-place host pinning (seeds/004 §3).

Why CuPy's ``RawKernel`` (CUDA C compiled by NVRTC at first use) rather than
Triton or a torch extension: the kernel's whole point is warp-level address
arithmetic (seeds/004 Listing 2, the "circular shift" that makes each of a
warp's 32 loads fall in one 128-byte line) on a raw pointer into registered
host memory.  CUDA C states both directly; Triton hides warps and checks that
pointer arguments are device tensors; a torch extension needs a compiler and
CUDA headers at install time on every user's machine.  CuPy ships NVRTC, is
imported only when a CUDA gather runs, and launches on torch's current stream.

The kernel: one warp copies one requested row at a time (grid-stride loop,
so the grid can be capped to a few SMs and leave the rest to training,
seeds/004 §3.2.2).  It serves both the single-GPU combined tensor and the
multi-GPU one (``tiering.multi_gpu``) from a device-side table of G GPU-tier
pointers (``tiering.placement``'s tiers): row r < R is read from this GPU's
tier, row R <= r < S from entry (r - R) mod G at local row R + (r - R) / G
(a null entry: that GPU is out of reach, read the host copy), any other row
from the host table through its registered pointer, at row r - host_from.
One GPU is G = 1, R = S = H (the hot rows), host_from = 0.  ``aligned`` shifts each
lane's element so every 32-float step of the warp covers exactly one
128-byte line of the source row; the naive variant reads element
``32 s + lane`` and straddles two lines whenever the row is misaligned
(seeds/004 Fig. 8 compares the two).  Ids were range-checked on the host
before launch; the kernel still skips any id outside [0, num_rows) so it can
never read past the mapping.

Pinning in place: ``register_host_memory`` calls ``cudaHostRegister`` on the
tensor's existing pages (shared memory and memory-mapped files included, where
the driver accepts them; it says which when it refuses) and never copies.
On 64-bit Linux the registered host address is itself the device address
(``cudaDevAttrCanUseHostPointerForRegisteredMem``).

UVA views: ``mapped_view`` wraps pinned host memory as a CUDA tensor (through
CuPy's ``UnownedMemory`` and DLPack), so any torch CUDA op reads it over PCIe
in place; ``mapped_graph`` does this for a CSR, which is how the torch sampler
samples a graph kept in host memory from the GPU (UVA sampling, as DGL and
PyG's UVA samplers do; compared with CPU and distributed GPU sampling in
Figure 11).
"""

from __future__ import annotations

import functools

import torch

from .graph import CSRGraph

_SOURCE = r"""
extern "C" __global__ void gather_rows(
    const float* const* __restrict__ gpu_tiers, const float* __restrict__ host, const long long* __restrict__ ids,
    float* __restrict__ out, long long num_ids, long long num_rows, long long replicated, long long host_start,
    long long host_from, int gpus, int rank, int dim, int aligned)
{
    const int lane = threadIdx.x & 31;
    const long long warps_per_block = blockDim.x >> 5;
    const long long first = (long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const long long stride = (long long)gridDim.x * warps_per_block;
    for (long long i = first; i < num_ids; i += stride) {
        const long long row = ids[i];
        if (row < 0 || row >= num_rows) continue;  // checked on the host; never read past a mapping
        const float* src;
        if (row < replicated) {
            src = gpu_tiers[rank] + row * (long long)dim;
        } else if (row < host_start) {
            const long long shifted = row - replicated;
            const float* owner = gpu_tiers[shifted % gpus];  // null: the owner is out of reach, read the host copy
            src = owner != nullptr ? owner + (replicated + shifted / gpus) * (long long)dim
                                   : host + (row - host_from) * (long long)dim;
        } else {
            src = host + (row - host_from) * (long long)dim;
        }
        float* dst = out + i * (long long)dim;
        // circular shift: start the warp at the 128-byte line boundary at or before the row
        const int shift = aligned ? (int)(((unsigned long long)src & 127ULL) >> 2) : 0;
        for (int base = -shift; base < dim; base += 32) {
            const int j = base + lane;
            if (j >= 0 && j < dim) dst[j] = src[j];
        }
    }
}
"""

REGISTER_PORTABLE = 1
REGISTER_MAPPED = 2
REGISTER_READ_ONLY = 8


@functools.lru_cache(maxsize=None)
def _kernel(device_index: int):
    import cupy

    with cupy.cuda.Device(device_index):
        return cupy.RawKernel(_SOURCE, "gather_rows")


def launch_gather(gpu_tiers: torch.Tensor, host_ptr: int, ids: torch.Tensor, out: torch.Tensor, num_rows: int, *,
                  replicated: int, host_start: int, host_from: int = 0, gpus: int = 1, rank: int = 0,
                  aligned: bool = True, max_blocks: int | None = None, threads: int = 256) -> None:
    """Fill ``out[i] = row ids[i]`` from the GPU tiers or the registered host table at ``host_ptr``.

    ``gpu_tiers`` is the int64 table of the G GPU tiers' addresses, on
    ``out``'s device; rows are placed as the module docstring says.  ``ids``
    (int64) and ``out`` (float32, contiguous) are on that device;
    ``max_blocks`` caps the grid (``None``: enough blocks for one warp per id).
    """
    import cupy

    device = out.device
    ids = ids.contiguous()
    num_ids = len(ids)
    if num_ids == 0:
        return
    warps_per_block = threads // 32
    blocks = -(-num_ids // warps_per_block)
    if max_blocks is not None:
        blocks = max(1, min(blocks, max_blocks))
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(device).cuda_stream, device.index)
    with cupy.cuda.Device(device.index), stream:
        _kernel(device.index)(
            (blocks,), (threads,),
            (
                cupy.uint64(gpu_tiers.data_ptr()), cupy.uint64(host_ptr), cupy.uint64(ids.data_ptr()),
                cupy.uint64(out.data_ptr()), cupy.int64(num_ids), cupy.int64(num_rows), cupy.int64(replicated),
                cupy.int64(host_start), cupy.int64(host_from), cupy.int32(gpus), cupy.int32(rank),
                cupy.int32(out.shape[1]), cupy.int32(int(aligned)),
            ),
        )


def register_host_memory(tensor: torch.Tensor, read_only: bool = False) -> bool:
    """Page-lock and map ``tensor``'s memory in place; returns False if it was already pinned.

    Raises ``RuntimeError`` naming the CUDA error when the driver refuses
    (for example a memory-mapped file on a filesystem it cannot pin).
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise ValueError("only a contiguous CPU tensor can be pinned in place")
    if tensor.is_pinned():
        return False
    flags = REGISTER_PORTABLE | REGISTER_MAPPED | (REGISTER_READ_ONLY if read_only else 0)
    nbytes = tensor.numel() * tensor.element_size()
    error = int(torch.cuda.cudart().cudaHostRegister(tensor.data_ptr(), nbytes, flags))
    if error != 0:
        raise RuntimeError(
            f"cudaHostRegister refused {nbytes} bytes at {tensor.data_ptr():#x} (CUDA error {error}). "
            "If the features are a memory-mapped file, this driver cannot pin it in place: load them into "
            "memory or shared memory first."
        )
    return True


def unregister_host_memory(tensor: torch.Tensor) -> None:
    error = int(torch.cuda.cudart().cudaHostUnregister(tensor.data_ptr()))
    if error != 0:
        raise RuntimeError(f"cudaHostUnregister failed at {tensor.data_ptr():#x} (CUDA error {error})")


def mapped_view(tensor: torch.Tensor, device) -> torch.Tensor:
    """A CUDA tensor on ``device`` aliasing ``tensor``'s pinned host memory (no copy; reads cross PCIe).

    The view keeps ``tensor`` alive.  ``tensor`` must be pinned: allocated
    pinned (``pin_memory()``) or registered with ``register_host_memory``.
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or not tensor.is_pinned():
        raise ValueError("only a contiguous, pinned CPU tensor can be viewed from the GPU")
    import cupy

    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    nbytes = tensor.numel() * tensor.element_size()
    memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), nbytes, tensor, index)
    flat = cupy.ndarray((tensor.numel(),), dtype=str(tensor.dtype).removeprefix("torch."),
                        memptr=cupy.cuda.MemoryPointer(memory, 0))
    return torch.from_dlpack(flat).view(tensor.shape)


def mapped_graph(graph: CSRGraph, device) -> CSRGraph:
    """``graph`` copied once into pinned host memory and viewed from ``device``: the CSR for UVA sampling."""
    return CSRGraph(mapped_view(graph.indptr.pin_memory(), device), mapped_view(graph.indices.pin_memory(), device),
                    validate=False)
