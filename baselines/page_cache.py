"""The feature table memory-mapped from its file: the operating system's page cache decides what stays in memory
(the baseline of Ginex and DGL GraphBolt's disk features; seeds/003 §2).

``gather(ids)`` indexes the mapped ``.npy`` file; a row not in the page cache
faults its page in from disk.  Nothing here chooses what is cached, so the
first epoch after a cold start (``drop_cache``, ``posix_fadvise(DONTNEED)``)
reads from the SSD and later ones from memory as far as the host's free
memory allows.  ``disk_bytes_read`` is measured by the kernel's per-process
I/O accounting (``/proc/self/io``, ``read_bytes``: bytes this process caused
to be fetched from storage) around each gather, so it is the storage reads
of the gathers, page-ahead included.  Rows go to a GPU by DMA, counted like
``cpu-gather``'s.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from tiering.feature_loader import FeatureLoader
from tiering.traffic import dma_traffic

_PROC_IO = Path("/proc/self/io")


def storage_bytes_read() -> int | None:
    """Bytes this process has had fetched from storage (``/proc/self/io``), or None where the kernel does not say."""
    try:
        for line in _PROC_IO.read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class MmapLoader(FeatureLoader):
    def __init__(self, path, device="cpu"):
        self.path = Path(path)
        try:
            self.table = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ValueError(f"{self.path} cannot be mapped as a .npy table ({err})") from None
        if self.table.ndim != 2:
            raise ValueError(f"{self.path} must hold a 2-D table, not shape {self.table.shape}")
        super().__init__(self.table.shape[0], self.table.shape[1], device)
        self.row_bytes = self.table.shape[1] * self.table.dtype.itemsize
        self.measured = storage_bytes_read() is not None

    def drop_cache(self) -> None:
        """Drop the file from the page cache (``posix_fadvise(DONTNEED)``): the next epoch starts cold."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        before = storage_bytes_read()
        rows = torch.from_numpy(np.ascontiguousarray(self.table[ids.cpu().numpy()]))
        after = storage_bytes_read()
        if before is not None and after is not None:
            self._stats.disk_bytes_read += after - before
        self._stats.accesses += len(ids)
        self._stats.host_bytes_touched += len(ids) * self.row_bytes
        if self.device.type == "cuda":
            payload, requests = dma_traffic(len(ids), self.row_bytes)
            self._stats.pcie_payload_bytes += payload
            self._stats.pcie_requests += requests
            return rows.pin_memory().to(self.device, non_blocking=True)
        return rows

    def close(self) -> None:
        self.table = None
