"""CombinedTensor: hot rows in GPU memory, cold rows read from pinned host memory by zero-copy (seeds/000 §4.1).

The caller sees one N x D feature table.  After reordering (``tiering.reorder``)
the hottest rows are [0, H): they are copied once into GPU memory.  Rows
[H, N) stay where they are in host memory, which is pinned *in place*
(``cudaHostRegister``: no second copy, shared memory and memory-mapped files
included where the driver allows) and read by the GPU directly.  One kernel
launch (``tiering.zero_copy``) serves a whole gather from both tiers.

Statistics follow ``tiering.feature_loader``: hits are rows served from the
GPU tier; PCIe payload and requests are the exact sectors and lines the cold
rows overlap at their real offsets in the host allocation
(``tiering.traffic``), for the aligned or naive access pattern in use.

On a CPU device the "GPU tier" is an ordinary tensor and the gather is
``index_select`` from the two tiers: the same results and the same
statistics, which is how CI tests this class without a GPU.
"""

from __future__ import annotations

import torch

from .feature_loader import FeatureLoader
from .traffic import zero_copy_traffic_tensors
from .zero_copy import launch_gather, register_host_memory, unregister_host_memory


def check_host_features(features: torch.Tensor, why: str) -> None:
    """Refuse anything but a 2-D float32 contiguous CPU table; ``why`` says what needs it so."""
    if features.dim() != 2 or features.dtype != torch.float32:
        raise TypeError(f"features must be a 2-D float32 tensor, got {tuple(features.shape)} {features.dtype}")
    if features.device.type != "cpu" or not features.is_contiguous():
        raise ValueError(f"features must be a contiguous CPU tensor ({why})")


class HotTierTooLarge(MemoryError):
    """The requested hot tier does not fit in the GPU's free memory."""


class CombinedTensor(FeatureLoader):
    """Features split into a GPU tier (rows [0, hot_rows)) and a zero-copy host tier.

    Parameters
    ----------
    features : contiguous float32 CPU tensor (N, D); with a CUDA device its memory is pinned in place
    hot_rows : H, rows kept in GPU memory (0 gives plain zero-copy, the UVA baseline)
    device : the training device
    aligned : circular-shift the warps' reads onto 128-byte lines (seeds/004 §3.2.1)
    max_blocks : cap on the gather kernel's grid, to leave SMs to training (seeds/004 §3.2.2)
    read_only : register the host memory read-only (for read-only memory-mapped files)
    """

    def __init__(self, features: torch.Tensor, hot_rows: int, device="cpu", *, aligned: bool = True,
                 max_blocks: int | None = None, read_only: bool = False):
        check_host_features(features, "the host tier is read in place")
        super().__init__(features.shape[0], features.shape[1], device)
        if not 0 <= hot_rows <= self.num_rows:
            raise ValueError(f"hot_rows must be in [0, {self.num_rows}], got {hot_rows}")
        self.host = features
        self.hot_rows = hot_rows
        self.aligned = aligned
        self.max_blocks = max_blocks
        self.row_bytes = features.shape[1] * features.element_size()
        self._registered = False
        if self.device.type == "cuda":
            self._check_fits()
            self._registered = register_host_memory(features, read_only=read_only)
        self.hot = features[:hot_rows].to(self.device, copy=True)
        self._gpu_tiers = torch.tensor([self.hot.data_ptr()], dtype=torch.int64, device=self.device)  # the kernel's table
        self._stats.gpu_bytes_resident = hot_rows * self.row_bytes
        self._pending = torch.zeros(3, dtype=torch.int64, device=self.device)  # hits, payload, requests

    def _check_fits(self) -> None:
        need = self.hot_rows * self.row_bytes
        free, _ = torch.cuda.mem_get_info(self.device)
        if need > free:
            raise HotTierTooLarge(
                f"the hot tier needs {need / 2**30:.2f} GiB ({self.hot_rows} rows x {self.row_bytes} B) but "
                f"{self.device} has {free / 2**30:.2f} GiB free; lower the hot fraction"
            )

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(self.device, dtype=torch.int64, non_blocking=True)
        is_hot = ids < self.hot_rows
        payload, requests = zero_copy_traffic_tensors(ids, self.row_bytes, aligned=self.aligned, counted=~is_hot)
        self._stats.accesses += len(ids)
        self._pending += torch.stack([is_hot.sum(), payload, requests])  # stays on the device: no sync here
        if self.device.type == "cuda":
            out = torch.empty((len(ids), self.feature_dim), dtype=torch.float32, device=self.device)
            launch_gather(self._gpu_tiers, self.host.data_ptr(), ids, out, self.num_rows, replicated=self.hot_rows,
                          host_start=self.hot_rows, aligned=self.aligned, max_blocks=self.max_blocks)
            return out
        out = torch.empty((len(ids), self.feature_dim), dtype=torch.float32)
        out[is_hot] = torch.index_select(self.hot, 0, ids[is_hot])
        out[~is_hot] = torch.index_select(self.host, 0, ids[~is_hot])
        return out

    def stats(self):
        hits, payload, requests = (int(v) for v in self._pending.cpu())
        stats = super().stats()
        stats.hits, stats.pcie_payload_bytes, stats.pcie_requests, stats.host_bytes_touched = hits, payload, requests, payload
        return stats

    def reset_stats(self) -> None:
        super().reset_stats()
        self._pending.zero_()

    def close(self) -> None:
        if self._registered:
            unregister_host_memory(self.host)
            self._registered = False
        self.hot = self._gpu_tiers = None
