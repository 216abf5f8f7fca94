"""The PCIe traffic model: what reading rows of host memory costs, counted exactly (DESIGN.md, "Metrics").

A GPU reads host memory by zero-copy in 32-byte sectors, grouped into
requests of at most one 128-byte cache line (seeds/004 §3.2.1, Fig. 4).  A
warp copying a row issues one request per 128-byte line its 32 lanes touch
in each step, so the count depends on how the row's bytes line up:

* **aligned** (seeds/004's circular shift, ``CombinedTensor(aligned=True)``):
  each step reads one whole line, so a row costs exactly the lines it
  overlaps and the sectors it overlaps;
* **naive** (lane k of step s reads element 32 s + k): each 128-byte step
  starts wherever the row starts, so a misaligned row pays for up to two
  lines and five sectors per step, and sectors at step borders twice.

Offsets are the rows' real byte offsets in their allocation
(``base_offset + row * row_bytes``), so a 400-byte row 1 starts at byte 400.
DMA loaders instead move dense buffers: their payload is the bytes copied,
counted in 128-byte units as requests so the columns compare across loaders.

Everything here is integer arithmetic on tensors and runs on whatever device
the ids are on.
"""

from __future__ import annotations

import torch

SECTOR = 32
LINE = 128


def _span(start: torch.Tensor, end: torch.Tensor, unit: int) -> torch.Tensor:
    """Number of ``unit``-byte blocks that [start, end) overlaps (0 when empty)."""
    count = torch.div(end + unit - 1, unit, rounding_mode="floor") - torch.div(start, unit, rounding_mode="floor")
    return torch.where(end > start, count, torch.zeros_like(count))


def zero_copy_traffic_tensors(rows: torch.Tensor, row_bytes: int, base_offset: int = 0, aligned: bool = True,
                              counted: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(payload_bytes, requests)`` as 0-d int64 tensors on ``rows``' device, without synchronising.

    ``counted`` (a boolean mask over ``rows``) limits the count to those rows,
    e.g. the cold ones of a gather, so no data-dependent indexing is needed.
    """
    if row_bytes <= 0:
        raise ValueError(f"row_bytes must be positive, got {row_bytes}")
    start = rows.to(torch.int64) * row_bytes + base_offset
    end = start + row_bytes
    if counted is not None:
        end = torch.where(counted, end, start)  # an uncounted row spans nothing
    if aligned:
        return _span(start, end, SECTOR).sum() * SECTOR, _span(start, end, LINE).sum()
    steps = -(-row_bytes // LINE)
    offsets = torch.arange(steps, device=rows.device, dtype=torch.int64) * LINE
    step_start = start[:, None] + offsets[None, :]
    step_end = torch.minimum(step_start + LINE, end[:, None])
    return _span(step_start, step_end, SECTOR).sum() * SECTOR, _span(step_start, step_end, LINE).sum()


def zero_copy_traffic(rows: torch.Tensor, row_bytes: int, base_offset: int = 0, aligned: bool = True) -> tuple[int, int]:
    """``(payload_bytes, requests)`` for reading ``rows`` of a table by zero-copy.

    ``rows`` are row numbers in the host allocation; ``base_offset`` is the
    byte offset of row 0 in it.
    """
    payload, requests = zero_copy_traffic_tensors(rows, row_bytes, base_offset, aligned)
    return int(payload), int(requests)


def dma_traffic(num_rows: int, row_bytes: int) -> tuple[int, int]:
    """``(payload_bytes, requests)`` for copying ``num_rows`` dense rows by DMA."""
    payload = num_rows * row_bytes
    return payload, -(-payload // LINE)
