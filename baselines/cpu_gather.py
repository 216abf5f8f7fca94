"""CPU gather + DMA: PyTorch's default way of feeding a GPU from host memory (Data Tiering §6, PyTorch-Direct §2).

The CPU gathers the requested rows with ``index_select`` (multithreaded by
torch) into a pinned staging buffer, and one asynchronous copy moves the dense
block to the GPU.  Every row crosses PCIe as part of that copy: the model
counts the dense bytes (``tiering.features.traffic.dma_traffic``), and the CPU reads
each row once.  The staging buffer is reused; before refilling it the loader
waits for the previous copy out of it to finish.

On a CPU device there is no copy: the gathered rows are the result.

The CPU gathers, so ids on the GPU (a GPU sampler's) are first copied to host
memory, which waits for them: one synchronisation per minibatch that the
design requires, as does the wait for the previous copy out of the buffer.
"""

from __future__ import annotations

import torch

from tiering.features.loader import FeatureLoader
from tiering.features.traffic import dma_traffic
from tiering.features.zero_copy import check_table_dtype


class StagedCopy:
    """Gather rows on the CPU into a reusable pinned buffer and copy them to a device asynchronously."""

    def __init__(self, features: torch.Tensor, device: torch.device):
        self.features = features
        self.device = device
        self.buffer = None
        self.copied = None  # CUDA event: the last copy out of the buffer

    def gather(self, rows: torch.Tensor) -> torch.Tensor:
        rows = rows.to("cpu", dtype=torch.int64)
        if self.device.type != "cuda":
            return torch.index_select(self.features, 0, rows)
        if self.copied is not None:
            self.copied.synchronize()  # the previous copy out of the buffer has finished
        if self.buffer is None or len(self.buffer) < len(rows):
            shape = (max(len(rows), 1024), self.features.shape[1])
            self.buffer = torch.empty(shape, dtype=self.features.dtype).pin_memory()
        staged = self.buffer[: len(rows)]
        torch.index_select(self.features, 0, rows, out=staged)
        out = staged.to(self.device, non_blocking=True)
        self.copied = torch.cuda.Event()
        self.copied.record(torch.cuda.current_stream(self.device))
        return out


class CPUGatherLoader(FeatureLoader):
    def __init__(self, features: torch.Tensor, device="cpu"):
        check_table_dtype(features.dtype)
        super().__init__(features.shape[0], features.shape[1], device)
        self.row_bytes = features.shape[1] * features.element_size()
        self._staging = StagedCopy(features, self.device)

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        payload, requests = dma_traffic(len(ids), self.row_bytes)
        self._stats.accesses += len(ids)
        self._stats.pcie_payload_bytes += payload
        self._stats.pcie_requests += requests
        self._stats.host_bytes_touched += payload
        return self._staging.gather(ids)
