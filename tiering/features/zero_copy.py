"""The one-launch gather over GPU and zero-copy host memory, and in-place host pinning (PyTorch-Direct §3).

Why CuPy's ``RawModule`` (CUDA C++ compiled by NVRTC at first use) rather than
Triton or a torch extension: the kernel's whole point is warp-level address
arithmetic (PyTorch-Direct Listing 2, the "circular shift" that makes each of a
warp's loads fall in one 128-byte line) on a raw pointer into registered
host memory.  CUDA C states both directly; Triton hides warps and checks that
pointer arguments are device tensors; a torch extension needs a compiler and
CUDA headers at install time on every user's machine.  CuPy ships NVRTC, is
imported only when a CUDA gather runs, and launches on torch's current stream
(``cupy.cuda.Stream.from_external``, CuPy 14's interface to foreign streams).

The kernel: one warp copies one requested row at a time (grid-stride loop,
so the grid can be capped to a few SMs and leave the rest to training,
PyTorch-Direct §3.2.2).  It serves both the single-GPU combined tensor and the
multi-GPU one (``tiering.features.multi_gpu``) from a device-side table of G GPU-tier
pointers (``tiering.features.placement``'s tiers): row r < R is read from this GPU's
tier, row R <= r < S from entry (r - R) mod G at local row R + (r - R) / G
(a null entry: that GPU is out of reach, read the host copy), any other row
from the host table through its mapped pointer, at row r - host_from.
One GPU is G = 1, R = S = H (the hot rows), host_from = 0.  Ids were
range-checked on the host before launch; the kernel still skips any id
outside [0, num_rows) so it can never read past the mapping.

It copies bytes, so float32, float16 and bfloat16 tables share it: a row is
``D * element_size`` bytes.  Which bytes each lane reads in each warp step,
per variant (``naive``, ``aligned`` by the circular shift of
PyTorch-Direct §3.2.1, and ``wide`` 16-byte vector loads, four per lane in flight: hot-tier
rows in HBM gain most, where one 4-byte load per lane in flight is enough for
PCIe but latency-bound on HBM), is defined once in
``tiering.features.addressing``; the traffic model counts from it.

The kernel's source is the file ``zero_copy.cu`` beside this module, shipped
as package data and read through ``importlib.resources`` at the first
launch (``tiering.cuda_cpp``): a real .cu file compiles as it is with nvcc, so the tests build it for
sm_90 to check for register spills, and build it for the host to run each
lane's copy of a row and hold it to ``addressing.warp_steps``, all without a
GPU.  It re-states the addressing in C++ (its constants, ``copy_unit``,
``circular_shift``, ``copy_row``); those tests are what keep the two in step.

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

import threading

import torch

from tiering.cuda_cpp import KernelSource, cupy_stream
from tiering.features.addressing import VARIANTS, WARP, check_variant
from tiering.graph.csr import CSRGraph

DEFAULT_VARIANT = "aligned"
TABLE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
KERNEL_NAMES = {(variant, counting): f"gather_rows<{i}, {str(counting).lower()}>"  # NVRTC name expressions
                for i, variant in enumerate(VARIANTS) for counting in (False, True)}
"""The kernel of each variant, without and with counting the traffic into counters (``launch_gather``)."""
GATHER = KernelSource(__package__, "zero_copy.cu", tuple(KERNEL_NAMES.values()))
"""The gather kernel's source, package data of ``tiering.features`` (``tiering.cuda_cpp``)."""

REGISTER_PORTABLE = 1
REGISTER_MAPPED = 2
REGISTER_READ_ONLY = 8
DEV_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91  # cudaDevAttrCanUseHostPointerForRegisteredMem
MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: cudaPointerGetAttributes' type for page-locked host memory


def check_table_dtype(dtype: torch.dtype) -> None:
    if dtype not in TABLE_DTYPES:
        raise TypeError(f"feature tables must be float32, float16 or bfloat16, got {dtype}")


def launch_gather(gpu_tiers: torch.Tensor, host_ptr: int, ids: torch.Tensor, out: torch.Tensor, num_rows: int, *,
                  replicated: int, host_start: int, host_from: int = 0, gpus: int = 1, rank: int = 0,
                  variant: str = DEFAULT_VARIANT, max_blocks: int | None = None, threads: int = 256,
                  counters: torch.Tensor | None = None) -> None:
    """Enqueue on torch's current stream: ``out[i] = row ids[i]`` from the GPU tiers or the host table.

    ``gpu_tiers`` is the int64 table of the G GPU tiers' addresses, on
    ``out``'s device; ``host_ptr`` is the address at which this device reads
    the host table (``mapped_pointer``); rows are placed as the module
    docstring says.  ``ids`` (int64) and ``out`` (contiguous, float32, float16
    or bfloat16, ``len(ids)`` rows) are on that device; a row is
    ``out.shape[1] * out.element_size()`` bytes in every tier.  ``max_blocks``
    caps the grid (``None``: enough blocks for one warp per id).  ``counters``: ``None``, or three int64 on that
    device to which the launch adds, as it copies, the rows it read from a GPU tier and the payload bytes and
    requests of those it read from the host, as ``tiering.features.traffic`` counts them (the kernel's
    ``row_traffic``): the counts cost the gather no launches of their own.
    """
    check_variant(variant)
    check_table_dtype(out.dtype)
    if ids.dtype != torch.int64 or out.dim() != 2 or out.shape[0] != len(ids) or not out.is_contiguous():
        raise ValueError(f"launch_gather needs int64 ids and a contiguous (len(ids), D) output, got {ids.dtype} ids "
                         f"and a {tuple(out.shape)} output")
    if counters is not None and (counters.dtype != torch.int64 or counters.shape != (3,)
                                 or counters.device != out.device or not counters.is_contiguous()):
        raise ValueError(f"launch_gather counts into three contiguous int64 on the output's device, got "
                         f"{counters.dtype} {tuple(counters.shape)} on {counters.device}")
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
        GATHER.function(KERNEL_NAMES[variant, counters is not None])(
            (blocks,), (threads,),
            (
                cupy.uint64(gpu_tiers.data_ptr()), cupy.uint64(host_ptr), cupy.uint64(ids.data_ptr()),
                cupy.uint64(out.data_ptr()), cupy.int64(num_ids), cupy.int64(num_rows), cupy.int64(replicated),
                cupy.int64(host_start), cupy.int64(host_from), cupy.int32(gpus), cupy.int32(rank),
                cupy.int64(out.shape[1] * out.element_size()),
                cupy.uint64(0 if counters is None else counters.data_ptr()),
            ),
            stream=stream,
        )


_registrations: dict[tuple[int, int], int] = {}
"""(address, bytes) -> how many owners ``register_host_memory`` registered that memory for."""
_REGISTRATIONS_LOCK = threading.Lock()


def is_page_locked(tensor: torch.Tensor) -> bool:
    """Whether every byte of the CPU tensor ``tensor`` is page-locked: allocated pinned, or registered.

    ``Tensor.is_pinned`` asks about the first byte of the tensor's storage, so it answers False for a view into
    memory registered from a later address (``page_aligned_empty`` returns such views, and a table is often a view
    of a larger registered buffer), and True for a view whose storage starts inside a registration that ends before
    the view does.  This asks the driver about the view's own first and last byte; a view only partly page-locked
    then goes to ``cudaHostRegister``, which refuses it, rather than to a copy that reads past the registration.
    """
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return tensor.is_pinned()
    try:
        import cupy
    except ImportError:  # without CuPy nothing here registered memory: only torch's own can be pinned
        return tensor.is_pinned()
    runtime = cupy.cuda.runtime
    first = tensor.data_ptr()
    ends = (first, first + nbytes - 1)
    return all(runtime.pointerGetAttributes(address).type == MEMORY_TYPE_HOST for address in ends)


def register_host_memory(tensor: torch.Tensor, read_only: bool = False) -> bool:
    """Page-lock and map ``tensor``'s memory in place; returns False if it was already page-locked by others.

    A tensor registered here already (the same address and size, say two loaders over one table) is counted again
    and True returned: each owner calls ``unregister_host_memory`` once, and only the last one unpins the memory,
    so no owner unpins it while another still reads it.

    Raises ``RuntimeError`` naming the CUDA error when the driver refuses
    (for example a memory-mapped file on a filesystem it cannot pin).  CuPy's
    ``hostRegister`` resets the runtime's last error (``cudaGetLastError``)
    before raising, so no pending error is left for the next kernel launch.
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise ValueError("only a contiguous CPU tensor can be pinned in place")
    nbytes = tensor.numel() * tensor.element_size()
    key = (tensor.data_ptr(), nbytes)
    with _REGISTRATIONS_LOCK:
        if key in _registrations:
            _registrations[key] += 1
            return True
        if is_page_locked(tensor):
            return False
        import cupy

        runtime = cupy.cuda.runtime
        flags = REGISTER_PORTABLE | REGISTER_MAPPED | (REGISTER_READ_ONLY if read_only else 0)
        try:
            runtime.hostRegister(tensor.data_ptr(), nbytes, flags)
        except runtime.CUDARuntimeError as error:
            raise RuntimeError(
                f"cudaHostRegister refused {nbytes} bytes at {tensor.data_ptr():#x} ({error}). "
                "If the features are a memory-mapped file, this driver cannot pin it in place: load them into "
                "memory or shared memory first."
            ) from None
        _registrations[key] = 1
    return True


def unregister_host_memory(tensor: torch.Tensor) -> None:
    """Undo ``register_host_memory``; the caller has synchronised every stream that read the memory.  Memory
    registered more than once is unpinned by the last call."""
    key = (tensor.data_ptr(), tensor.numel() * tensor.element_size())
    with _REGISTRATIONS_LOCK:
        owners = _registrations.pop(key, 1)
        if owners > 1:
            _registrations[key] = owners - 1
            return
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
