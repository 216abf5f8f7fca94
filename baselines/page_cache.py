"""The feature table memory-mapped from its file: the operating system's page cache decides what stays in memory
(the baseline of Ginex and DGL GraphBolt's disk features; Marius §2).

``gather(ids)`` indexes the mapped ``.npy`` file; a row not in the page cache
faults its page in from disk.  Nothing here chooses what is cached, so the
first epoch after a cold start (``drop_cache``, ``posix_fadvise(DONTNEED)``)
reads from the SSD and later ones from memory as far as the host's free
memory allows.  ``disk_bytes_read`` is measured by the kernel's per-process
I/O accounting (``/proc/self/io``, ``read_bytes``: bytes this process caused
to be fetched from storage) around each gather, so it is the storage reads
of the gathers, page-ahead included.  Rows go to a GPU by DMA, counted like
``cpu-gather``'s.  ``budget_rows`` emulates a host whose page cache holds only
the table's first rows (on a dataset reordered hottest-first, the hottest):
after each gather the pages past them are dropped from the mapping
(``madvise(DONTNEED)``) and from the page cache.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import torch

from tiering.disk.table import npy_layout
from tiering.features.loader import FeatureLoader
from tiering.features.traffic import dma_traffic

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
    def __init__(self, path, device="cpu", *, budget_rows: int | None = None):
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"{self.path} cannot be mapped as a .npy table (no such file)")
        offset, shape, dtype = npy_layout(self.path)
        if budget_rows is not None and not 0 <= budget_rows <= shape[0]:
            raise ValueError(f"budget_rows must be between 0 and the table's {shape[0]:,} rows, got {budget_rows:,}")
        super().__init__(shape[0], shape[1], device)
        self._fd = os.open(self.path, os.O_RDONLY)  # kept: a budgeted loader drops pages after every gather
        self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
        self.table = np.ndarray(shape, dtype=dtype, buffer=self._map, offset=offset)
        self.offset, self.row_bytes = offset, shape[1] * dtype.itemsize
        self.budget_rows = budget_rows

    def drop_cache(self, from_byte: int = 0) -> None:
        """Drop the file's pages from ``from_byte`` on (rounded up to a page) from this mapping and the page cache."""
        start = -(-from_byte // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(self._map):
            self._map.madvise(mmap.MADV_DONTNEED, start, len(self._map) - start)
        os.posix_fadvise(self._fd, start, 0, os.POSIX_FADV_DONTNEED)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        before = storage_bytes_read()
        rows = torch.from_numpy(np.ascontiguousarray(self.table[ids.cpu().numpy()]))
        after = storage_bytes_read()
        if before is not None and after is not None:
            self._stats.disk_bytes_read += after - before
        if self.budget_rows is not None:  # an emulated page-cache budget: only the first rows stay cached
            self.drop_cache(self.offset + self.budget_rows * self.row_bytes)
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
        if getattr(self, "_map", None) is not None and not self._map.closed:
            self._map.close()
            os.close(self._fd)
