"""CombinedTensor: hot rows in GPU memory, cold rows read from pinned host memory by zero-copy (Data Tiering §4.1).

The caller sees one N x D feature table (float32, float16 or bfloat16).
After reordering (``tiering.graph.reorder``) the hottest rows are [0, H): they are
copied once into GPU memory.  Rows [H, N) stay where they are in host memory,
which is pinned *in place* (``cudaHostRegister``: no second copy, shared
memory and memory-mapped files included where the driver allows) and read by
the GPU directly.  One kernel launch (``tiering.features.zero_copy``, in the variant
chosen: naive, aligned by the circular shift of PyTorch-Direct §3.2.1, or wide)
serves a whole gather from both tiers.

Statistics follow ``tiering.features.loader``: hits are rows served from the
GPU tier; PCIe payload and requests are the exact sectors and lines the cold
rows overlap at their real offsets in the host allocation (``host_offset``,
the table's address modulo 128; ``tiering.features.traffic``), for the variant in use.
On a GPU the gather kernel counts them itself as it copies (its ``row_traffic``
re-states the model in C++), so a gather is one launch besides the ids' copy
and the output's allocation, with no small kernels of counting around it.

The counters stay on the device, so a gather never synchronises for them
(``DeviceCounters``).  Each operation on them waits for the event the
previous one recorded, on whatever stream that ran: a pipeline's gathers on a
side stream and ``reset_stats`` or ``stats`` on the main stream apply in the
order they were called.  ``close()`` synchronises the device before it
unpins the host table, so no kernel still reads it.  A loader dropped without
``close()`` unpins its table when it is collected (``weakref.finalize``, which
keeps the table alive until then): the driver would otherwise keep freed memory
registered, and a later allocation in its pages would read as page-locked when
it is not.

On a CPU device the "GPU tier" is an ordinary tensor and the gather is
``index_select`` from the two tiers: the same results and the same
statistics, which is how CI tests this class without a GPU, and the
reference every variant of the kernel must match bit for bit.
"""

from __future__ import annotations

import weakref

import torch

from tiering.features.addressing import LINE, check_variant
from tiering.features.device_counters import DeviceCounters
from tiering.features.loader import FeatureLoader
from tiering.features.traffic import zero_copy_traffic_tensors
from tiering.features.zero_copy import (
    DEFAULT_VARIANT,
    check_table_dtype,
    launch_gather,
    mapped_pointer,
    register_host_memory,
    unregister_host_memory,
)


def check_host_features(features: torch.Tensor, why: str) -> None:
    """Refuse anything but a 2-D float32, float16 or bfloat16 contiguous CPU table; ``why`` says what needs it so."""
    if features.dim() != 2:
        raise TypeError(f"features must be a 2-D tensor, got shape {tuple(features.shape)}")
    check_table_dtype(features.dtype)
    if features.device.type != "cpu" or not features.is_contiguous():
        raise ValueError(f"features must be a contiguous CPU tensor ({why})")


def _unpin(device: torch.device, host: torch.Tensor) -> None:
    """What ``close()`` does for the host table of a loader collected without it: wait for the kernels that may
    still read it, then unregister it."""
    torch.cuda.synchronize(device)
    unregister_host_memory(host)


class HotTierTooLarge(MemoryError):
    """The rows a loader would keep in GPU memory (its hot tier, or a whole table) do not fit in the free memory."""


def check_fits(need_bytes: int, device: torch.device, what: str, detail: str, fix: str) -> None:
    """Raise ``HotTierTooLarge`` unless ``need_bytes`` fit in the free memory of CUDA ``device``.

    The message names ``what`` needs them, how they add up (``detail``) and what to change (``fix``).  The
    caching allocator first hands back the blocks it keeps unused (an earlier loader's tier, a finished cell's
    training), which the driver's free memory would otherwise leave out.
    """
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    if need_bytes > free:
        raise HotTierTooLarge(
            f"{what} needs {need_bytes / 2**30:.2f} GiB ({detail}) but {device} has {free / 2**30:.2f} GiB free; {fix}"
        )


class CombinedTensor(FeatureLoader):
    """Features split into a GPU tier (rows [0, hot_rows)) and a zero-copy host tier.

    Parameters
    ----------
    features : contiguous float32, float16 or bfloat16 CPU tensor (N, D); with a CUDA device its memory is
        pinned in place
    hot_rows : H, rows kept in GPU memory (0 gives plain zero-copy, the UVA baseline)
    device : the training device
    variant : the gather kernel's access pattern, one of ``tiering.features.addressing.VARIANTS``
    max_blocks : cap on the gather kernel's grid, to leave SMs to training (PyTorch-Direct §3.2.2)
    read_only : register the host memory read-only (for read-only memory-mapped files)

    Attributes: ``host`` (the table), ``hot`` (its GPU tier), ``variant``,
    ``row_bytes`` (D * element size), ``host_offset`` (the byte offset of row 0
    within its 128-byte line).
    """

    def __init__(self, features: torch.Tensor, hot_rows: int, device="cpu", *, variant: str = DEFAULT_VARIANT,
                 max_blocks: int | None = None, read_only: bool = False):
        check_host_features(features, "the host tier is read in place")
        check_variant(variant)
        super().__init__(features.shape[0], features.shape[1], device)
        if not 0 <= hot_rows <= self.num_rows:
            raise ValueError(f"hot_rows must be in [0, {self.num_rows}], got {hot_rows}")
        self.host = features
        self.hot_rows = hot_rows
        self.variant = variant
        self.max_blocks = max_blocks
        self.row_bytes = features.shape[1] * features.element_size()
        self.host_offset = features.data_ptr() % LINE
        self._registered = False
        self._unpin_when_collected = None
        self.hot = self._gpu_tiers = None
        try:
            self._host_pointer = features.data_ptr()  # where the device reads the host table
            if self.device.type == "cuda":
                self._check_fits()
                self._registered = register_host_memory(features, read_only=read_only)
                if self._registered:
                    self._unpin_when_collected = weakref.finalize(self, _unpin, self.device, features)
                    self._unpin_when_collected.atexit = False  # the process's end frees the mapping with the rest
                self._host_pointer = mapped_pointer(features, self.device)
            self.hot = features[:hot_rows].to(self.device, copy=True)
            self._gpu_tiers = torch.tensor([self.hot.data_ptr()], dtype=torch.int64, device=self.device)
        except BaseException:
            self.close()
            raise
        self._stats.gpu_bytes_resident = hot_rows * self.row_bytes
        self._counters = DeviceCounters(3, self.device)  # hits, payload, requests

    def _check_fits(self) -> None:
        check_fits(self.hot_rows * self.row_bytes, self.device, "the hot tier",
                   f"{self.hot_rows} rows x {self.row_bytes} B", "lower the hot fraction")

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(self.device, dtype=torch.int64, non_blocking=True)
        self._stats.accesses += len(ids)
        out = torch.empty((len(ids), self.feature_dim), dtype=self.host.dtype, device=self.device)
        if self.device.type == "cuda":  # the kernel adds the hits and the cold rows' traffic as it copies
            with self._counters.in_order():
                self.launch_kernel(ids, out, counters=self._counters.values)
            return out
        is_hot = ids < self.hot_rows
        payload, requests = zero_copy_traffic_tensors(ids, self.row_bytes, self.host_offset, self.variant,
                                                      counted=~is_hot)
        self._counters.add(torch.stack([is_hot.sum(), payload, requests]))
        self.launch_kernel(ids, out)
        return out

    def launch_kernel(self, ids: torch.Tensor, out: torch.Tensor, counters: torch.Tensor | None = None) -> None:
        """Fill ``out`` with rows ``ids``: on a GPU, enqueue the gather kernel alone on the current stream.

        ``ids``: int64 on the device, already in range; ``out``: a (len(ids), D)
        tensor of the table's dtype on the device.  No range check, no
        statistics unless ``counters`` (on a GPU: three int64 the kernel adds
        the hits, payload bytes and requests to, ``launch_gather``), no
        synchronisation (what a benchmark times against
        ``torch.index_select``).  On a CPU device: the reference,
        ``index_select`` from the two tiers.
        """
        if self.device.type == "cuda":
            launch_gather(self._gpu_tiers, self._host_pointer, ids, out, self.num_rows, replicated=self.hot_rows,
                          host_start=self.hot_rows, variant=self.variant, max_blocks=self.max_blocks,
                          counters=counters)
            return
        is_hot = ids < self.hot_rows
        out[is_hot] = torch.index_select(self.hot, 0, ids[is_hot])
        out[~is_hot] = torch.index_select(self.host, 0, ids[~is_hot])

    def stats(self):
        hits, payload, requests = self._counters.read()
        stats = super().stats()
        stats.hits, stats.pcie_payload_bytes, stats.pcie_requests = hits, payload, requests
        stats.host_bytes_touched = payload
        return stats

    def reset_stats(self) -> None:
        super().reset_stats()
        self._counters.zero()

    def close(self) -> None:
        if self.device.type == "cuda" and (self._registered or self.hot is not None):
            torch.cuda.synchronize(self.device)  # no kernel on any stream still reads either tier
        if self._unpin_when_collected is not None:
            self._unpin_when_collected.detach()
            self._unpin_when_collected = None
        if self._registered:
            unregister_host_memory(self.host)
            self._registered = False
        self.hot = self._gpu_tiers = None
