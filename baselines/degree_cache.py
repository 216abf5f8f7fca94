"""PaGraph's degree cache (Lin et al., SoCC 2020): the highest-degree rows cached on the GPU, no reordering.

The ``capacity`` rows whose nodes appear in the most neighbour lists are
copied into GPU memory, and an N-entry node -> slot map (-1 for uncached)
sits beside them.  A gather looks every id up in the map: hits are read from
the cache, misses are gathered by the CPU and copied by DMA (as in
``baselines.cpu_gather``), and the two are merged on the GPU.  Unlike data
tiering the graph keeps its ids, which is why the map is needed (Data Tiering
§3.2 explains the cost of such a map at 100M nodes).

The CPU gathers the misses, so it must know which they are: a gather of ids
on the GPU waits for the map lookup to reach the host (``ids[~hit]``), one
synchronisation per minibatch that the design requires.  The counters are
then host numbers (the misses' count), read without a further wait.
"""

from __future__ import annotations

import torch

from tiering.features.loader import FeatureLoader
from tiering.features.traffic import dma_traffic
from tiering.features.zero_copy import check_table_dtype

from .cpu_gather import StagedCopy


class CachedRowsLoader(FeatureLoader):
    """Some rows copied to GPU memory behind a node -> slot map; the rest gathered by the CPU and copied by DMA."""

    def __init__(self, features: torch.Tensor, capacity: int, device="cpu"):
        check_table_dtype(features.dtype)
        super().__init__(features.shape[0], features.shape[1], device)
        if not 0 <= capacity <= self.num_rows:
            raise ValueError(f"capacity must be in [0, {self.num_rows}], got {capacity}")
        self.features = features
        self.capacity = capacity
        self.row_bytes = features.shape[1] * features.element_size()
        self._stats.gpu_bytes_resident = capacity * self.row_bytes
        self._staging = StagedCopy(features, self.device)

    def load(self, cached: torch.Tensor) -> None:
        """Cache exactly the rows ``cached`` (``capacity`` distinct ids)."""
        slot = torch.full((self.num_rows,), -1, dtype=torch.int64)
        slot[cached] = torch.arange(len(cached))
        self.cached_mask = (slot >= 0).numpy()
        self.slot = slot.to(self.device)
        self.cache = torch.index_select(self.features, 0, cached).to(self.device)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(self.device, dtype=torch.int64)
        slots = self.slot[ids]
        hit = slots >= 0
        misses = ids[~hit]
        payload, requests = dma_traffic(len(misses), self.row_bytes)
        self._stats.accesses += len(ids)
        self._stats.hits += len(ids) - len(misses)
        self._stats.pcie_payload_bytes += payload
        self._stats.pcie_requests += requests
        self._stats.host_bytes_touched += payload
        out = torch.empty((len(ids), self.feature_dim), dtype=self.features.dtype, device=self.device)
        out[hit] = torch.index_select(self.cache, 0, slots[hit])
        out[~hit] = self._staging.gather(misses)
        return out


class DegreeCacheLoader(CachedRowsLoader):
    def __init__(self, features: torch.Tensor, appearances: torch.Tensor, capacity: int, device="cpu"):
        super().__init__(features, capacity, device)
        if len(appearances) != self.num_rows:
            raise ValueError(f"appearances has {len(appearances)} entries for {self.num_rows} rows")
        # on the GPU where the cache is: a stable sort of papers-100m's 111M counts takes tens of seconds on the CPU
        hottest = torch.sort(appearances.to(self.device), descending=True, stable=True).indices[:capacity]
        self.load(hottest.cpu())
