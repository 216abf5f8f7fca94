"""The multi-GPU combined tensor: local, peer-GPU and zero-copy host rows in one gather (Data Tiering §4.2, Appendix A).

One process per GPU (PyTorch's multiprocessing model, Data Tiering Appendix A.1;
PyTorch-Direct §3.4 runs one producer per GPU the same way).  Every rank of a
``torch.distributed`` group builds ``MultiGPUCombinedTensor`` together; G is
the group's size and must equal ``placement.gpus``.  The tiers are those of
``tiering.features.placement``:

* **replicated** rows [0, R): a copy on every GPU, always read locally;
* **interleaved** rows [R, R + M): row r on GPU (r - R) mod G, so each rank
  reads its own share locally and the others' from their GPUs;
* **host** rows [R + M, N): one copy in host memory for the whole node, read
  by zero-copy as in ``tiering.features.combined``.

Each rank keeps its ``placement.shard`` (replicated tier, then its
interleaved rows) in its own GPU memory.

**Peer GPUs through CUDA IPC** (Data Tiering Appendix A.2, "user-managed virtual
address").  A shard is allocated with ``cudaMalloc`` directly (CuPy's
``runtime.malloc``), not by torch's caching allocator: an IPC handle names a
whole allocation, and a torch tensor's ``data_ptr`` may sit at an offset inside a
larger cached block, which the importer would then have to add back (what
``torch.multiprocessing.reductions`` does with the storage offset).  A
dedicated allocation makes the offset zero by construction, keeps a shard of
many GiB out of the caching allocator's pools, and lets ``close()`` free it at
a known moment.  Each rank exports ``cudaIpcGetMemHandle`` of its shard, the
handles travel with ``all_gather_object``, and each rank opens its peers'
(``cudaIpcOpenMemHandle`` with lazy peer access) on its own device.

**Peer access and the fallback.**  A rank maps a peer's shard only where
``cudaDeviceCanAccessPeer`` allows it (GPUs are matched by PCI bus id, so
``CUDA_VISIBLE_DEVICES`` differing per process is handled; a GPU this process
cannot see counts as unreachable).  Where it does not, or when the caller
passes ``peer_access=False``, that peer's interleaved rows are read from host
memory instead: without NVLink the tensor degrades to "one GPU + host"
(Data Tiering §4.2, Figure 4).  ``peer_access`` (attribute) says whether every
shard is mapped; ``reachable`` says which; the mode is logged on construction.

**One shared host segment per node** (Data Tiering Appendix A.2, PyTorch-Direct
§3.4: memory from ``malloc``, ``cudaHostAlloc`` or ``cudaMallocManaged`` is
bound to the process that allocated it, and a copy per process would multiply
the host footprint; so the memory is allocated shareable first and each
process then registers it with CUDA).  Group rank 0 creates a file in
``shm_dir`` (``/dev/shm``, a tmpfs) and copies the host rows into it: an
explicit copy, read once from the (memory-mapped) table into shared memory.
The other ranks map the same file after it is written, and on a GPU every
rank pins its mapping of that shared memory in place with ``cudaHostRegister``
(``tiering.features.zero_copy.register_host_memory``): no further copy.  The segment holds rows
[R + M, N) when every rank maps every peer, and rows [R, N) when some rank
lacks a peer holding interleaved rows (it must find those rows on the host);
replicated rows are never needed there, and the whole table is never
duplicated.  Row r is row ``r - host_from`` of the segment, and the traffic
model counts it at that offset (the segment starts on a page boundary).  Once
every rank has mapped every file, the files are unlinked: the mappings live
on until ``close()`` and nothing is left in ``/dev/shm`` even if a process
dies.  A tmpfs hands out pages only when they are first written, so a file
sized with ``ftruncate`` on a full one kills the writer with SIGBUS; each
file's blocks are therefore allocated up front (``posix_fallocate``, after a
free-space check with ``statvfs``), and a segment that does not fit is refused
on every rank with a ``ValueError`` giving both sizes.  Docker gives
``/dev/shm`` 64 MiB by default: pass ``shm_dir`` (``tierbench run --shm-dir``)
on a larger tmpfs, or enlarge it (``docker run --shm-size``).  On the CPU
path each rank also writes its own shard there.

**One kernel launch per gather**: ``tiering.features.zero_copy``'s gather kernel (CUDA
C through CuPy's ``RawModule``, for the reasons given there), the same one the
single-GPU combined tensor uses, given a device-side table of G shard
pointers (its own, its peers' IPC mappings, and null for a peer it cannot
reach) plus the host pointer; one warp copies one row, grid-stride, in the
chosen variant (naive, the 128-byte circular shift of PyTorch-Direct §3.2.1, or
wide) and with a cap on the grid (PyTorch-Direct §3.2.2).  Tables are float32,
float16 or bfloat16; the kernel copies bytes.

**CPU path** (CI): the exact emulation.  Each rank writes its shard into its
own shared-memory file, the file names travel with ``all_gather_object``
(the analogue of IPC handles), every rank maps its peers' files, and a gather
is ``index_select`` per tier.  Results and statistics are those of the GPU
path.

Statistics (``MultiGPUStats``): ``hits`` are rows served from GPU memory,
this rank's (replicated and its own interleaved rows) or a peer's,
``peer_rows`` the part read from peers' GPUs, the rest came from the host; PCIe payload and requests are
the exact zero-copy traffic of the host rows (``tiering.features.traffic``).  Counters
stay on the device, so a gather never synchronises for them.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import socket
import uuid

import torch
import torch.distributed as dist

from tiering.features.addressing import LINE, check_variant
from tiering.features.combined import check_host_features
from tiering.features.device_counters import DeviceCounters
from tiering.features.loader import FeatureLoader, LoaderStats
from tiering.features.placement import INTERLEAVED, REPLICATED, Placement, locate, plan_placement, shard
from tiering.features.traffic import zero_copy_traffic_tensors
from tiering.features.zero_copy import (
    DEFAULT_VARIANT,
    launch_gather,
    mapped_pointer,
    register_host_memory,
    unregister_host_memory,
)

logger = logging.getLogger(__name__)

@dataclasses.dataclass
class MultiGPUStats(LoaderStats):
    """``LoaderStats`` plus the rows read from peer GPUs.

    ``hits`` are rows served from GPU memory, this rank's or a peer's (the
    collective GPU memory of Data Tiering Figure 5); ``peer_rows`` is the part of
    them that crossed the GPU interconnect.
    """

    peer_rows: int = 0

    @property
    def host_rows(self) -> int:
        return self.accesses - self.hits


def _check_inputs(features: torch.Tensor, placement: Placement, variant: str) -> None:
    check_host_features(features, "its rows are copied to the GPUs and the host segment")
    check_variant(variant)
    if placement.num_rows != features.shape[0]:
        raise ValueError(f"the placement is for {placement.num_rows} rows but features has {features.shape[0]}")
    row_bytes = features.shape[1] * features.element_size()
    if placement.row_bytes != row_bytes:
        raise ValueError(f"the placement has {placement.row_bytes}-byte rows but features' rows are {row_bytes} bytes")


def check_shm_dir(shm_dir: str) -> None:
    """Refuse a directory that cannot hold the shared-memory files (not a directory, not writable)."""
    if not os.path.isdir(shm_dir):
        raise ValueError(f"the shared-memory directory {shm_dir} is not a directory: pass --shm-dir DIR (shm_dir=), "
                         "a directory on a tmpfs such as /dev/shm")
    if not os.access(shm_dir, os.W_OK | os.X_OK):
        raise ValueError(f"the shared-memory directory {shm_dir} is not writable by this user: pass --shm-dir DIR "
                         "(shm_dir=), a writable directory on a tmpfs")


def _free_bytes(directory: str) -> int:
    """Bytes an unprivileged process may still write into ``directory``'s filesystem."""
    status = os.statvfs(directory)
    return status.f_bavail * status.f_frsize


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB ({nbytes:,} bytes)"


def _no_room(path: str, need: int) -> ValueError:
    directory = os.path.dirname(path)
    return ValueError(
        f"the shared-memory file {os.path.basename(path)} needs {_size(need)} but {directory} has "
        f"{_size(_free_bytes(directory))} free: pass --shm-dir DIR (shm_dir=) on a larger tmpfs, or enlarge "
        "/dev/shm (docker run --shm-size=..., or mount -o remount,size=... /dev/shm)"
    )


def _create_segment(path: str, rows: torch.Tensor) -> torch.Tensor:
    """A new shared-memory file at ``path`` holding a copy of ``rows``, mapped shared.

    The file's blocks are allocated up front (``posix_fallocate``): a tmpfs
    that is too small then refuses with ENOSPC here, instead of killing the
    process with SIGBUS when the copy touches a page it cannot back.
    """
    need = rows.numel() * rows.element_size()
    if need > _free_bytes(os.path.dirname(path)):
        raise _no_room(path, need)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(fd, 0, need)
    except OSError as error:
        os.unlink(path)
        if error.errno in (errno.ENOSPC, errno.EFBIG):  # another process took the room since the check
            raise _no_room(path, need) from None
        raise
    finally:
        os.close(fd)
    mapped = _attach_segment(path, rows.shape[0], rows.shape[1], rows.dtype)
    mapped.copy_(rows)
    return mapped


def _attach_segment(path: str, num_rows: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_file(path, shared=True, size=num_rows * dim, dtype=dtype).view(num_rows, dim)


def _bus_id(device: torch.device) -> str:
    import cupy

    return cupy.cuda.runtime.deviceGetPCIBusId(device.index)


def _can_reach(device: torch.device, peer_bus_id: str) -> bool:
    """Whether this process's ``device`` can read memory of the GPU at ``peer_bus_id``."""
    import cupy

    try:
        peer = cupy.cuda.runtime.deviceGetByPCIBusId(peer_bus_id)
    except cupy.cuda.runtime.CUDARuntimeError:
        return False  # not visible in this process
    return peer == device.index or bool(cupy.cuda.runtime.deviceCanAccessPeer(device.index, peer))


class MultiGPUCombinedTensor(FeatureLoader):
    """This rank's view of a feature table spread over G GPUs and one shared host segment.

    Built collectively: every rank of ``group`` calls the constructor with
    the same ``features`` (e.g. each process memory-maps the same file) and
    the same ``placement``; rank 0 of the group copies the host rows into
    the shared segment, each rank copies its own shard to its GPU.

    Parameters
    ----------
    features : contiguous float32, float16 or bfloat16 CPU tensor (N, D), the whole table in hotness order
    placement : from ``plan_placement`` with ``gpus`` equal to the group's size
    device : this rank's training device (``cuda:k``; ``cpu`` for the emulation)
    group : the process group (default: the default group); gloo or NCCL
    peer_access : ``None`` maps every peer GPU this one can reach, ``False`` none
        ("one GPU + host"), ``True`` requires all and raises otherwise
    variant : the gather kernel's access pattern, one of ``tiering.features.addressing.VARIANTS`` (PyTorch-Direct §3.2.1)
    max_blocks : cap on the gather kernel's grid (PyTorch-Direct §3.2.2)
    shm_dir : directory of the shared-memory files (a tmpfs)

    Attributes: ``placement``, ``rank``, ``reachable`` (per GPU, whether its
    shard is read from GPU memory), ``peer_access`` (all of them),
    ``host_from`` (first row held by the host segment), ``row_bytes``.

    ``close()`` is collective: every rank calls it when it has gathered its
    last rows, and it waits for all of them before freeing the shard that
    peers read.
    """

    def __init__(self, features: torch.Tensor, placement: Placement, device="cpu", *, group=None,
                 peer_access: bool | None = None, variant: str = DEFAULT_VARIANT, max_blocks: int | None = None,
                 shm_dir: str = "/dev/shm"):
        _check_inputs(features, placement, variant)
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("MultiGPUCombinedTensor needs an initialised torch.distributed process group (one rank per GPU)")
        world = dist.get_world_size(group)
        if world != placement.gpus:
            raise ValueError(f"the placement is for {placement.gpus} GPUs but the process group has {world} ranks")
        check_shm_dir(shm_dir)
        super().__init__(features.shape[0], features.shape[1], device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, got {self.device}")
        self.placement = placement
        self.group = group
        self.rank = dist.get_rank(group)
        self.variant = variant
        self.dtype = features.dtype
        self.max_blocks = max_blocks
        self.row_bytes = placement.row_bytes
        self._cuda = self.device.type == "cuda"
        # what close() releases
        self._paths: list[str] = []  # shared-memory files this rank created and has not unlinked yet
        self._pointers = [0] * world  # CUDA path: own shard (cudaMalloc) and peers' (IPC mappings); 0 = not mapped
        self._shards: list[torch.Tensor | None] = [None] * world  # CPU path: own and mapped peers' shards
        self._pointer_table: torch.Tensor | None = None  # CUDA path: the kernel's copy of _pointers
        self._registered = False
        self.host: torch.Tensor | None = None  # the shared host segment, rows [host_from, N)
        self._peers_may_read = False  # set once built: close() then waits for every rank before freeing
        try:
            if self._cuda:
                with torch.cuda.device(self.device):
                    self._build(features, peer_access, shm_dir)
            else:
                self._build(features, peer_access, shm_dir)
        except BaseException:
            self.close()  # this rank's resources only: a peer that did not fail is not calling close()
            raise
        self._peers_may_read = True
        self._stats.gpu_bytes_resident = placement.bytes_per_gpu()[self.rank]
        self._counters = DeviceCounters(4, self.device)  # hits, peer rows, payload, requests

    def _all_gather(self, value) -> list:
        gathered = [None] * self.placement.gpus
        dist.all_gather_object(gathered, value, group=self.group)
        return gathered

    def _build(self, features: torch.Tensor, peer_access: bool | None, shm_dir: str) -> None:
        p, rank = self.placement, self.rank
        meta = self._agree_on(features)
        stem = os.path.join(shm_dir, f"tierbench-{meta[0]['token']}")
        self.reachable = tuple(
            g == rank or (peer_access is not False and (not self._cuda or _can_reach(self.device, meta[g]["bus"])))
            for g in range(p.gpus)
        )
        needs_host = any(not ok and p.interleaved_rows_on(g) for g, ok in enumerate(self.reachable))
        handle = self._export(shard(features, p, rank), f"{stem}-shard{rank}")
        exchanged = self._all_gather((handle, all(self.reachable), needs_host))
        if peer_access and not all(ok for _, ok, _ in exchanged):
            raise RuntimeError(f"peer_access=True but ranks {[g for g, (_, ok, _) in enumerate(exchanged) if not ok]} "
                               "cannot read every peer GPU (no NVLink or P2P between them)")
        self.peer_access = all(self.reachable)
        self.host_from = p.replicated if any(needs for _, _, needs in exchanged) else p.host_start
        self._share_host_tier(features, f"{stem}-host")
        for g, (peer_handle, _, _) in enumerate(exchanged):
            if g != rank and self.reachable[g] and peer_handle is not None:
                self._import(g, peer_handle)
        dist.barrier(group=self.group)  # every rank has mapped every file: the names can go
        self._unlink()
        if self._cuda:
            if self.host is not None:
                self._registered = register_host_memory(self.host)
            self._pointer_table = torch.tensor(self._pointers, dtype=torch.int64, device=self.device)
        self._reachable_mask = torch.tensor(self.reachable, device=self.device)
        mode = "every peer GPU mapped" if self.peer_access else (
            f"one GPU + host: GPUs {[g for g, ok in enumerate(self.reachable) if not ok]} are read from host memory")
        log = logger.warning if not self.peer_access and peer_access is None else logger.info
        log("rank %d on %s: %s; host segment holds rows [%d, %d)", rank, self.device, mode, self.host_from, p.num_rows)

    def _agree_on(self, features: torch.Tensor) -> list[dict]:
        """Every rank's node, table shape, naming token, GPU and free memory; refuses what cannot work."""
        p = self.placement
        meta = self._all_gather({
            "node": socket.gethostname(),
            "shape": tuple(features.shape),
            "token": uuid.uuid4().hex,
            "bus": _bus_id(self.device) if self._cuda else None,
            "free": torch.cuda.mem_get_info(self.device)[0] if self._cuda else None,
        })
        if len({m["node"] for m in meta}) > 1:
            raise ValueError(f"all ranks must run on one node (shared host memory, CUDA IPC); got {[m['node'] for m in meta]}")
        if len({m["shape"] for m in meta}) > 1:
            raise ValueError(f"ranks passed feature tables of different shapes: {[m['shape'] for m in meta]}")
        if self._cuda:  # refuse a plan that does not fit before anything is placed on a GPU
            plan_placement(p.num_rows, p.row_bytes, p.gpus, p.replicated, p.interleaved, free_bytes=[m["free"] for m in meta])
        return meta

    def _share_host_tier(self, features: torch.Tensor, path: str) -> None:
        """Rank 0 writes rows [host_from, N) into the shared segment; the others map it once it is written.

        A segment that does not fit in ``shm_dir`` is refused on every rank
        alike, so no rank waits for a segment that will not come.
        """
        rows = self.num_rows - self.host_from
        refusal = None
        if self.rank == 0 and rows:
            self._paths.append(path)
            try:
                self.host = _create_segment(path, features[self.host_from:])
            except ValueError as error:
                refusal = str(error)
        refusal = self._all_gather(refusal)[0]  # also the barrier: rank 0 has written the segment
        if refusal is not None:
            raise ValueError(refusal)
        if self.rank != 0 and rows:
            self.host = _attach_segment(path, rows, self.feature_dim, self.dtype)

    def _export(self, rows: torch.Tensor, path: str):
        """Place this rank's shard and return what a peer needs to map it (None for an empty shard)."""
        if rows.numel() == 0:
            self._shards[self.rank] = rows  # nothing to share; the CPU gather indexes it with no rows
            return None
        if not self._cuda:
            self._paths.append(path)
            self._shards[self.rank] = _create_segment(path, rows)
            return path
        import cupy

        runtime = cupy.cuda.runtime
        nbytes = rows.numel() * rows.element_size()
        self._pointers[self.rank] = runtime.malloc(nbytes)
        runtime.memcpy(self._pointers[self.rank], rows.data_ptr(), nbytes, runtime.memcpyHostToDevice)
        runtime.deviceSynchronize()  # a pageable copy may still be in flight when memcpy returns; peers read next
        return runtime.ipcGetMemHandle(self._pointers[self.rank])

    def _import(self, gpu: int, handle) -> None:
        rows = self.placement.replicated + self.placement.interleaved_rows_on(gpu)
        if not self._cuda:
            self._shards[gpu] = _attach_segment(handle, rows, self.feature_dim, self.dtype)
            return
        import cupy

        self._pointers[gpu] = cupy.cuda.runtime.ipcOpenMemHandle(handle, cupy.cuda.runtime.cudaIpcMemLazyEnablePeerAccess)

    def _unlink(self) -> None:
        while self._paths:
            path = self._paths.pop()
            if os.path.exists(path):
                os.unlink(path)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(self.device, dtype=torch.int64, non_blocking=True)
        tier, gpu, local = locate(ids, self.placement, self.rank)
        own = (tier == REPLICATED) | ((tier == INTERLEAVED) & (gpu == self.rank))
        peer = (tier == INTERLEAVED) & ~own & self._reachable_mask[gpu.clamp(min=0)]
        from_host = ~(own | peer)
        host_row = ids - self.host_from
        host_offset = self.host.data_ptr() % LINE if self.host is not None else 0
        payload, requests = zero_copy_traffic_tensors(host_row, self.row_bytes, host_offset, self.variant,
                                                      counted=from_host)
        self._stats.accesses += len(ids)
        self._counters.add(torch.stack([(own | peer).sum(), peer.sum(), payload, requests]))  # no sync here
        out = torch.empty((len(ids), self.feature_dim), dtype=self.dtype, device=self.device)
        if self._cuda:
            p = self.placement
            launch_gather(self._pointer_table, mapped_pointer(self.host, self.device) if self.host is not None else 0,
                          ids, out, self.num_rows, replicated=p.replicated, host_start=p.host_start,
                          host_from=self.host_from, gpus=p.gpus, rank=self.rank, variant=self.variant,
                          max_blocks=self.max_blocks)
            return out
        out[own] = torch.index_select(self._shards[self.rank], 0, local[own])
        for g, rows in enumerate(self._shards):
            if g != self.rank and rows is not None:
                mask = peer & (gpu == g)
                out[mask] = torch.index_select(rows, 0, local[mask])
        if self.host is not None:
            out[from_host] = torch.index_select(self.host, 0, host_row[from_host])
        return out

    def stats(self) -> MultiGPUStats:
        hits, peer_rows, payload, requests = self._counters.read()
        return MultiGPUStats(**{**dataclasses.asdict(super().stats()), "hits": hits, "peer_rows": peer_rows,
                                "pcie_payload_bytes": payload, "pcie_requests": requests, "host_bytes_touched": payload})

    def reset_stats(self) -> None:
        super().reset_stats()
        self._counters.zero()

    def close(self) -> None:
        """Wait for every rank to stop gathering, then unpin the host segment, close the peers' IPC mappings,
        free this rank's shard and unlink leftover files.

        Collective once the constructor has returned: peers read this rank's
        shard until they stop gathering, so every rank must call ``close()``;
        each one finishes its own gathers on the device and all meet at a
        barrier of the group; each then closes its mappings of its peers'
        shards, and all meet again before any rank frees its own.  When the
        constructor fails it calls ``close()`` itself, which then releases
        this rank's resources without waiting (the other ranks may not be
        failing, and would never reach the barrier).  A second call does nothing.
        """
        collective, self._peers_may_read = self._peers_may_read, False  # a failed constructor gathered nothing
        if collective:
            if self._cuda:
                torch.cuda.synchronize(self.device)  # no kernel of this rank still reads host memory or a shard
            dist.barrier(group=self.group)  # nor any peer's: every rank has synchronised and reached close()
        if self._registered:
            unregister_host_memory(self.host)
            self._registered = False
        own = self._pointers[self.rank]
        if any(self._pointers):
            import cupy

            with cupy.cuda.Device(self.device.index):
                for g, ptr in enumerate(self._pointers):
                    if ptr and g != self.rank:
                        cupy.cuda.runtime.ipcCloseMemHandle(ptr)
                self._pointers = [0] * len(self._pointers)
        if collective:
            dist.barrier(group=self.group)  # every peer has closed its mapping of this rank's shard
        if own:
            import cupy

            with cupy.cuda.Device(self.device.index):
                cupy.cuda.runtime.free(own)
        self._pointer_table = None
        self._shards = [None] * len(self._shards)
        self.host = None
        self._unlink()
