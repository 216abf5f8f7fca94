"""All features already in the training device's memory: the upper bound of PyTorch-Direct §4.

Nothing crosses PCIe during training, so its epoch time bounds what any
tiered or zero-copy loader can reach.  On a CPU run the "device" is host
memory and every row counts as a hit, as for every loader's CPU code path.
"""

from __future__ import annotations

import torch

from tiering.features.loader import FeatureLoader
from tiering.features.zero_copy import check_table_dtype


class InMemoryLoader(FeatureLoader):
    def __init__(self, features: torch.Tensor, device="cpu"):
        check_table_dtype(features.dtype)
        super().__init__(features.shape[0], features.shape[1], device)
        self.features = features.to(self.device)
        self._stats.gpu_bytes_resident = self.features.numel() * self.features.element_size()

    def _gather(self, ids):
        self._stats.accesses += len(ids)
        self._stats.hits += len(ids)
        return torch.index_select(self.features, 0, ids.to(self.device, non_blocking=True))

    def close(self):
        self.features = None
