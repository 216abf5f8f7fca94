"""The one-launch gather over GPU and zero-copy host memory, and in-place host pinning (seeds/004 §3).

Why CuPy's ``RawModule`` (CUDA C++ compiled by NVRTC at first use) rather than
Triton or a torch extension: the kernel's whole point is warp-level address
arithmetic (seeds/004 Listing 2, the "circular shift" that makes each of a
warp's loads fall in one 128-byte line) on a raw pointer into registered
host memory.  CUDA C states both directly; Triton hides warps and checks that
pointer arguments are device tensors; a torch extension needs a compiler and
CUDA headers at install time on every user's machine.  CuPy ships NVRTC, is
imported only when a CUDA gather runs, and launches on torch's current stream
(``cupy.cuda.Stream.from_external``, CuPy 14's interface to foreign streams).

The kernel: one warp copies one requested row at a time (grid-stride loop,
so the grid can be capped to a few SMs and leave the rest to training,
seeds/004 §3.2.2).  It serves both the single-GPU combined tensor and the
multi-GPU one (``tiering.features.multi_gpu``) from a device-side table of G GPU-tier
pointers (``tiering.features.placement``'s tiers): row r < R is read from this GPU's
tier, row R <= r < S from entry (r - R) mod G at local row R + (r - R) / G
(a null entry: that GPU is out of reach, read the host copy), any other row
from the host table through its mapped pointer, at row r - host_from.
One GPU is G = 1, R = S = H (the hot rows), host_from = 0.  Ids were
range-checked on the host before launch; the kernel still skips any id
outside [0, num_rows) so it can never read past the mapping.

It copies bytes, so float32, float16 and bfloat16 tables share it: a row is
``D * element_size`` bytes, moved in *units* of 16, 4 or 2 bytes, the widest
that the row's source and destination addresses, the row size and the variant
allow (``copy_unit``; fp16 rows of odd D move in 2-byte units).  Warp step s
of a row covers 32 units.  The variants (seeds/004 §3.2.1, Fig. 8):

* ``naive``: lane k of step s reads unit 32 s + k, so each step starts where
  the row starts and straddles two 128-byte lines whenever the row is
  misaligned (units of at most 4 bytes: seeds/004's naive zero-copy);
* ``aligned``: the circular shift of seeds/004 §3.2.1: the warp starts at the
  128-byte line at or before the row's first byte (the 64-byte half line for
  2-byte units, whose steps span 64 bytes), lanes before the row idle, so each
  step reads within one line (units of at most 4 bytes);
* ``wide``: 16-byte vector loads, four per lane in flight before the stores,
  steps of 512 bytes still starting on a 128-byte line, so its PCIe traffic is
  that of ``aligned``; rows whose start or size is not a multiple of 16 bytes
  are copied exactly as ``aligned`` copies them.  Hot-tier rows in HBM gain
  most: one 4-byte load per lane in flight is enough for PCIe but
  latency-bound on HBM.

Pinning in place: ``register_host_memory`` calls ``cudaHostRegister`` on the
tensor's existing pages (shared memory and memory-mapped files included, where
the driver accepts them; it says which when it refuses) and never copies.
Registration goes through ``cupy.cuda.runtime`` (torch's ``cudart()`` cannot
clear an error): a refusal resets the runtime's last error before it is
raised, so the next torch launch does not report it.  The GPU reads the
memory at the host address itself where the device attribute
``cudaDevAttrCanUseHostPointerForRegisteredMem`` says so, and otherwise at the
mapped alias the driver reports (``mapped_pointer``).

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

from tiering.graph.csr import CSRGraph

VARIANTS = ("naive", "aligned", "wide")
DEFAULT_VARIANT = "aligned"
TABLE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
WARP = 32
UNROLL = 4  # the wide variant's loads in flight per lane

_CONSTANTS = "".join(f"constexpr int {name.upper()} = {i};\n" for i, name in enumerate(VARIANTS))
_SOURCE = _CONSTANTS + f"constexpr int UNROLL = {UNROLL};\n" + r"""
// Warp step s: lane k copies unit 32 s - shift + k where it falls in [0, units).  shift 0 is the naive pattern;
// shift = the units from the 128-byte line (64-byte half line for 2-byte units) at or before src to src is the
// circular shift, so each step reads within one line.
template <typename Unit>
__device__ __forceinline__ void copy_row(const unsigned char* src, unsigned char* dst, int units, int shift, int lane)
{
    const Unit* from = reinterpret_cast<const Unit*>(src);
    Unit* to = reinterpret_cast<Unit*>(dst);
    for (int base = -shift; base < units; base += 32) {
        const int j = base + lane;
        if (j >= 0 && j < units) to[j] = from[j];
    }
}

// 16-byte units, circularly shifted, UNROLL loads in flight per lane before the stores: iteration t issues the
// steps UNROLL t .. UNROLL t + UNROLL - 1 of copy_row's pattern.
__device__ __forceinline__ void copy_row_wide(const unsigned char* src, unsigned char* dst, int units, int shift,
                                              int lane)
{
    const uint4* from = reinterpret_cast<const uint4*>(src);
    uint4* to = reinterpret_cast<uint4*>(dst);
    for (int base = -shift; base < units; base += 32 * UNROLL) {
        uint4 staged[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int j = base + 32 * u + lane;
            if (j >= 0 && j < units) staged[u] = from[j];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int j = base + 32 * u + lane;
            if (j >= 0 && j < units) to[j] = staged[u];
        }
    }
}

template <int VARIANT>
__global__ void gather_rows(
    const unsigned char* const* __restrict__ gpu_tiers, const unsigned char* __restrict__ host,
    const long long* __restrict__ ids, unsigned char* __restrict__ out, long long num_ids, long long num_rows,
    long long replicated, long long host_start, long long host_from, int gpus, int rank, long long row_bytes)
{
    static_assert(VARIANT == NAIVE || VARIANT == ALIGNED || VARIANT == WIDE, "one of the variants");
    const int lane = threadIdx.x & 31;
    const long long warps_per_block = blockDim.x >> 5;
    const long long first = (long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const long long stride = (long long)gridDim.x * warps_per_block;
    for (long long i = first; i < num_ids; i += stride) {
        const long long row = ids[i];
        if (row < 0 || row >= num_rows) continue;  // checked on the host; never read past a mapping
        const unsigned char* src;
        if (row < replicated) {
            src = gpu_tiers[rank] + row * row_bytes;
        } else if (row < host_start) {
            const long long shifted = row - replicated;
            const unsigned char* owner = gpu_tiers[shifted % gpus];  // null: out of reach, read the host copy
            src = owner != nullptr ? owner + (replicated + shifted / gpus) * row_bytes
                                   : host + (row - host_from) * row_bytes;
        } else {
            src = host + (row - host_from) * row_bytes;
        }
        unsigned char* dst = out + i * row_bytes;
        // the widest unit dividing both addresses and the row size; the circular shift counts units back to
        // the 128-byte line at or before src (seeds/004 §3.2.1)
        const unsigned long long bits =
            (unsigned long long)src | (unsigned long long)dst | (unsigned long long)row_bytes;
        const int line_offset = (int)((unsigned long long)src & 127ULL);
        if (VARIANT == WIDE && (bits & 15ULL) == 0) {
            copy_row_wide(src, dst, (int)(row_bytes >> 4), line_offset >> 4, lane);
        } else if ((bits & 3ULL) == 0) {
            copy_row<unsigned int>(src, dst, (int)(row_bytes >> 2), VARIANT == NAIVE ? 0 : line_offset >> 2, lane);
        } else {  // 2-byte units: a step spans 64 bytes, so the shift is to the half line
            copy_row<unsigned short>(src, dst, (int)(row_bytes >> 1), VARIANT == NAIVE ? 0 : (line_offset & 63) >> 1,
                                     lane);
        }
    }
}
"""

KERNEL_NAMES = {variant: f"gather_rows<{i}>" for i, variant in enumerate(VARIANTS)}  # NVRTC name expressions

REGISTER_PORTABLE = 1
REGISTER_MAPPED = 2
REGISTER_READ_ONLY = 8
DEV_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91  # cudaDevAttrCanUseHostPointerForRegisteredMem
MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: cudaPointerGetAttributes' type for page-locked host memory


def check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown gather kernel variant {variant!r}; choose one of {', '.join(VARIANTS)}")


def check_table_dtype(dtype: torch.dtype) -> None:
    if dtype not in TABLE_DTYPES:
        raise TypeError(f"feature tables must be float32, float16 or bfloat16, got {dtype}")


def copy_unit(variant: str, address: int, row_bytes: int) -> int:
    """The unit in bytes the kernel copies a row at ``address`` with, into a 16-byte aligned destination row.

    As the kernel chooses it: 16 for ``wide`` where address and row size are
    multiples of 16, else 4 where they are multiples of 4, else 2.
    """
    bits = address | row_bytes
    if variant == "wide" and bits % 16 == 0:
        return 16
    return 4 if bits % 4 == 0 else 2


@functools.lru_cache(maxsize=None)
def _module():
    import cupy

    return cupy.RawModule(code=_SOURCE, options=("--std=c++17",), name_expressions=tuple(KERNEL_NAMES.values()))


@functools.lru_cache(maxsize=None)
def _kernel(variant: str):
    """``variant``'s kernel; CuPy compiles the module for each device on its first launch there."""
    return _module().get_function(KERNEL_NAMES[variant])


class _TorchStream:
    """torch's current stream of a device in the CUDA stream protocol (``__cuda_stream__``)."""

    def __init__(self, device: torch.device):
        self.handle = torch.cuda.current_stream(device).cuda_stream

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle


def cupy_stream(device: torch.device):
    """torch's current stream of ``device`` as a CuPy stream (``Stream.from_external``, CuPy >= 14), so CuPy
    launches run in order with torch's work; call it inside ``cupy.cuda.Device(device.index)``."""
    import cupy

    return cupy.cuda.Stream.from_external(_TorchStream(device))


def launch_gather(gpu_tiers: torch.Tensor, host_ptr: int, ids: torch.Tensor, out: torch.Tensor, num_rows: int, *,
                  replicated: int, host_start: int, host_from: int = 0, gpus: int = 1, rank: int = 0,
                  variant: str = DEFAULT_VARIANT, max_blocks: int | None = None, threads: int = 256) -> None:
    """Enqueue on torch's current stream: ``out[i] = row ids[i]`` from the GPU tiers or the host table.

    ``gpu_tiers`` is the int64 table of the G GPU tiers' addresses, on
    ``out``'s device; ``host_ptr`` is the address at which this device reads
    the host table (``mapped_pointer``); rows are placed as the module
    docstring says.  ``ids`` (int64) and ``out`` (contiguous, float32, float16
    or bfloat16, ``len(ids)`` rows) are on that device; a row is
    ``out.shape[1] * out.element_size()`` bytes in every tier.  ``max_blocks``
    caps the grid (``None``: enough blocks for one warp per id).
    """
    check_variant(variant)
    check_table_dtype(out.dtype)
    if ids.dtype != torch.int64 or out.dim() != 2 or out.shape[0] != len(ids) or not out.is_contiguous():
        raise ValueError(f"launch_gather needs int64 ids and a contiguous (len(ids), D) output, got {ids.dtype} ids "
                         f"and a {tuple(out.shape)} output")
    import cupy

    device = out.device
    ids = ids.contiguous()
    num_ids = len(ids)
    if num_ids == 0:
        return
    warps_per_block = threads // WARP
    blocks = -(-num_ids // warps_per_block)
    if max_blocks is not None:
        blocks = max(1, min(blocks, max_blocks))
    with cupy.cuda.Device(device.index):
        stream = cupy_stream(device)
        _kernel(variant)(
            (blocks,), (threads,),
            (
                cupy.uint64(gpu_tiers.data_ptr()), cupy.uint64(host_ptr), cupy.uint64(ids.data_ptr()),
                cupy.uint64(out.data_ptr()), cupy.int64(num_ids), cupy.int64(num_rows), cupy.int64(replicated),
                cupy.int64(host_start), cupy.int64(host_from), cupy.int32(gpus), cupy.int32(rank),
                cupy.int64(out.shape[1] * out.element_size()),
            ),
            stream=stream,
        )


def is_page_locked(tensor: torch.Tensor) -> bool:
    """Whether every byte of the CPU tensor ``tensor`` is page-locked: allocated pinned, or registered.

    ``Tensor.is_pinned`` asks about the first byte of the tensor's storage, so it answers False for a view into
    memory registered from a later address (``page_aligned_empty`` returns such views, and a table is often a view
    of a larger registered buffer).  This asks the driver about the view's own first and last byte.
    """
    if tensor.is_pinned():
        return True
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return False
    try:
        import cupy
    except ImportError:  # without CuPy nothing here registered memory, and torch said its own is not pinned
        return False
    runtime = cupy.cuda.runtime
    first = tensor.data_ptr()
    ends = (first, first + nbytes - 1)
    return all(runtime.pointerGetAttributes(address).type == MEMORY_TYPE_HOST for address in ends)


def register_host_memory(tensor: torch.Tensor, read_only: bool = False) -> bool:
    """Page-lock and map ``tensor``'s memory in place; returns False if it was already page-locked.

    Raises ``RuntimeError`` naming the CUDA error when the driver refuses
    (for example a memory-mapped file on a filesystem it cannot pin).  CuPy's
    ``hostRegister`` resets the runtime's last error (``cudaGetLastError``)
    before raising, so no pending error is left for the next kernel launch.
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise ValueError("only a contiguous CPU tensor can be pinned in place")
    if is_page_locked(tensor):
        return False
    import cupy

    runtime = cupy.cuda.runtime
    flags = REGISTER_PORTABLE | REGISTER_MAPPED | (REGISTER_READ_ONLY if read_only else 0)
    nbytes = tensor.numel() * tensor.element_size()
    try:
        runtime.hostRegister(tensor.data_ptr(), nbytes, flags)
    except runtime.CUDARuntimeError as error:
        raise RuntimeError(
            f"cudaHostRegister refused {nbytes} bytes at {tensor.data_ptr():#x} ({error}). "
            "If the features are a memory-mapped file, this driver cannot pin it in place: load them into "
            "memory or shared memory first."
        ) from None
    return True


def unregister_host_memory(tensor: torch.Tensor) -> None:
    """Undo ``register_host_memory``; the caller has synchronised every stream that read the memory."""
    import cupy

    runtime = cupy.cuda.runtime
    try:
        runtime.hostUnregister(tensor.data_ptr())
    except runtime.CUDARuntimeError as error:
        raise RuntimeError(f"cudaHostUnregister failed at {tensor.data_ptr():#x} ({error})") from None


def mapped_pointer(tensor: torch.Tensor, device) -> int:
    """The address at which ``device`` reads the pinned host memory of ``tensor``.

    The host address itself where ``cudaDevAttrCanUseHostPointerForRegisteredMem``
    is set (64-bit Linux on current GPUs), otherwise the device alias of the
    mapping (``cudaPointerGetAttributes``, as ``cudaHostGetDevicePointer``
    gives it; CuPy wraps only the former).
    """
    import cupy

    runtime = cupy.cuda.runtime
    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    if runtime.deviceGetAttribute(DEV_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, index):
        return tensor.data_ptr()
    with cupy.cuda.Device(index):
        pointer = runtime.pointerGetAttributes(tensor.data_ptr()).devicePointer
    if not pointer:
        raise RuntimeError(f"host memory at {tensor.data_ptr():#x} is not mapped for {device}: pin it with "
                           "register_host_memory (cudaHostRegisterMapped) first")
    return pointer


def mapped_view(tensor: torch.Tensor, device) -> torch.Tensor:
    """A CUDA tensor on ``device`` aliasing ``tensor``'s pinned host memory (no copy; reads cross PCIe).

    The view keeps ``tensor`` alive.  ``tensor`` must be pinned: allocated
    pinned (``pin_memory()``) or registered with ``register_host_memory``.
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or not is_page_locked(tensor):
        raise ValueError("only a contiguous, pinned CPU tensor can be viewed from the GPU")
    import cupy

    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    nbytes = tensor.numel() * tensor.element_size()
    memory = cupy.cuda.UnownedMemory(mapped_pointer(tensor, device), nbytes, tensor, index)
    flat = cupy.ndarray((tensor.numel(),), dtype=str(tensor.dtype).removeprefix("torch."),
                        memptr=cupy.cuda.MemoryPointer(memory, 0))
    return torch.from_dlpack(flat).view(tensor.shape)


def mapped_graph(graph: CSRGraph, device) -> CSRGraph:
    """``graph`` copied once into pinned host memory and viewed from ``device``: the CSR for UVA sampling."""
    return CSRGraph(mapped_view(graph.indptr.pin_memory(), device), mapped_view(graph.indices.pin_memory(), device),
                    validate=False)
