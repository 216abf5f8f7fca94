"""Data tiering with a third tier on disk: the hottest rows in GPU memory, the next in host memory, the rest read
from the SSD on demand (Data Tiering's tiers below Marius's disk).

On a dataset reordered hottest-first, rows [0, H) are copied to the
training device, rows [H, H + W) into host memory (pinned on a CUDA device,
so they reach it by DMA), and rows [H + W, N) stay in the table's file,
read by ``tiering.disk.table.DiskTable.read_scattered`` when a minibatch
needs them: sorted, blocks shared by neighbouring rows read once, rows at
most ``max_gap_bytes`` apart in one read, at most ``in_flight`` reads
outstanding.  ``W`` is what a host-memory budget leaves
for features; setting it below the table's size emulates a machine whose
host memory cannot hold the table.

Counters: ``hits`` are GPU-tier rows; ``host_bytes_touched`` the host and
disk rows' bytes; ``pcie_payload_bytes`` / ``pcie_requests`` the DMA of host
and disk rows to a GPU (``tiering.features.traffic.dma_traffic``; none on a CPU run);
``disk_bytes_read`` what the reads took from the file, measured, with the
traffic model's count (``modelled_disk_bytes``) beside it.
"""

from __future__ import annotations

import numpy as np
import torch

from tiering.disk.table import BLOCK, CountsDiskReads, DiskTable
from tiering.features.loader import FeatureLoader
from tiering.features.traffic import disk_traffic, dma_traffic


class DiskTieredLoader(CountsDiskReads, FeatureLoader):
    def __init__(self, table: DiskTable, hot_rows: int, host_rows: int, device="cpu", *, in_flight: int = 32,
                 max_gap_bytes: int = 0):
        if hot_rows < 0 or host_rows < 0 or hot_rows + host_rows > table.num_rows:
            raise ValueError(f"the GPU and host tiers ({hot_rows:,} + {host_rows:,} rows) must fit in the table's "
                             f"{table.num_rows:,} rows")
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {in_flight}")
        super().__init__(table.num_rows, table.feature_dim, device)
        if max_gap_bytes < 0:
            raise ValueError(f"max_gap_bytes must be 0 or more, got {max_gap_bytes}")
        self.table, self.in_flight, self.max_gap_bytes = table, in_flight, max_gap_bytes
        self.hot_rows, self.host_rows = hot_rows, host_rows
        hot = np.empty((hot_rows, table.feature_dim), table.dtype)
        table.read_rows(0, hot_rows, hot)
        self.hot = torch.from_numpy(hot).to(self.device)
        host = np.empty((host_rows, table.feature_dim), table.dtype)
        table.read_rows(hot_rows, hot_rows + host_rows, host)
        self.host = torch.from_numpy(host)
        if self.device.type == "cuda":
            self.host = self.host.pin_memory()
        self._stats.gpu_bytes_resident = self.hot.numel() * self.hot.element_size()
        self._disk_bytes_at_reset = table.bytes_read  # the tiers' loading is not an epoch's disk traffic
        self.modelled_disk_bytes = 0

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(torch.int64).cpu()
        out = torch.empty((len(ids), self.feature_dim), dtype=self.hot.dtype, device=self.device)
        hot = ids < self.hot_rows
        if bool(hot.any()):
            where = torch.nonzero(hot).squeeze(1)
            out[where.to(self.device)] = self.hot[ids[where].to(self.device)]
        below = torch.empty((int((~hot).sum()), self.feature_dim), dtype=self.hot.dtype)
        below_ids = ids[~hot]
        in_host = below_ids < self.hot_rows + self.host_rows
        if bool(in_host.any()):
            below[in_host] = self.host[below_ids[in_host] - self.hot_rows]
        if not bool(in_host.all()):
            rows = below_ids[~in_host]
            read = np.empty((len(rows), self.feature_dim), dtype=self.table.dtype)
            self.table.read_scattered(rows.numpy(), read, self.in_flight, self.max_gap_bytes)
            below[~in_host] = torch.from_numpy(read)
            block = BLOCK if self.table.io_mode == "direct" else None
            self.modelled_disk_bytes += disk_traffic(rows, self.table.row_bytes, self.table.offset, block,
                                                     self.max_gap_bytes)
        if len(below):
            out[torch.nonzero(~hot).squeeze(1).to(self.device)] = below.to(self.device, non_blocking=True)
        row_bytes = self.table.row_bytes
        self._stats.accesses += len(ids)
        self._stats.hits += int(hot.sum())
        self._stats.host_bytes_touched += len(below) * row_bytes
        if self.device.type == "cuda":
            payload, requests = dma_traffic(len(below), row_bytes)
            self._stats.pcie_payload_bytes += payload
            self._stats.pcie_requests += requests
        return out

    def reset_stats(self) -> None:
        super().reset_stats()
        self.modelled_disk_bytes = 0

    def close(self) -> None:
        self.hot = self.host = None
        self.table.close()
