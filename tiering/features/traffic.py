"""The PCIe traffic model: what reading rows of host memory costs, counted exactly (docs/design.md, "Metrics").

A GPU reads host memory by zero-copy in 32-byte sectors, grouped into
requests of at most one 128-byte cache line (PyTorch-Direct §3.2.1, Fig. 4).
A warp copying a row issues, in each step, one request per 128-byte line its
lanes touch and fetches each sector they touch; which bytes those are is
``tiering.features.addressing``'s definition: steps of ``step_bytes`` (32
units of ``copy_unit``'s 2, 4 or 16 bytes: 64, 128 or 512 bytes) from the
``circular_shift``'s start.  Counted in closed form over a row's steps:

* **aligned** and **wide** (the circular shift): the steps start on a
  multiple of ``shift_window`` (the 128-byte line, or the 64-byte step of
  2-byte units), so no step border splits a sector or a line: a row costs
  exactly the sectors it overlaps, and one request per line it overlaps (per
  64-byte half line where it moves in 2-byte units, each half being its own
  step);
* **naive** (no shift): each step starts where the previous one ended, from
  the row's first byte, so a misaligned row pays for up to two lines and five
  sectors per 128-byte step, and sectors at step borders twice.

``tests/tiering/features/test_zero_copy_kernel.py`` holds these counts to the
sectors and lines of ``addressing.warp_steps``' lane-by-lane accesses.

Offsets are the rows' real byte offsets: ``base_offset + row * row_bytes``
with ``base_offset`` the table's address modulo 128 (``data_ptr() % 128``:
``torch.empty`` does not align large tables to 128 bytes), so a 400-byte row 1
of an aligned table starts at byte 400.  Rows of float16 and bfloat16 tables
are ``D * 2`` bytes and are counted at that size.  The model assumes the
kernel writes into an output whose rows start 16-byte aligned, as a fresh
allocation does.  DMA loaders instead move dense buffers: their payload is
the bytes copied, counted in 128-byte units as requests so the columns
compare across loaders.

A third tier, disk (Marius; ``tiering.disk.tiered``), is counted the same
way: ``disk_traffic`` gives the bytes an on-demand read of rows costs, whole
4 KiB blocks with ``O_DIRECT`` (each block once however many of its rows are
wanted), the rows' own bytes through the page cache.

Everything here is integer arithmetic on tensors and runs on whatever device
the ids are on.
"""

from __future__ import annotations

import torch

from tiering.features.addressing import LINE, SECTOR, check_variant, copy_unit, shift_window, step_bytes
from tiering.features.zero_copy import DEFAULT_VARIANT


def _span(start: torch.Tensor, end: torch.Tensor, unit: int) -> torch.Tensor:
    """Number of ``unit``-byte blocks that [start, end) overlaps (0 when empty)."""
    count = torch.div(end + unit - 1, unit, rounding_mode="floor") - torch.div(start, unit, rounding_mode="floor")
    return torch.where(end > start, count, torch.zeros_like(count))


def _row_spans(rows: torch.Tensor, row_bytes: int, base_offset: int, variant: str,
               counted: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``rows``: ``(payload_bytes, requests)`` as int64 tensors (0 for a row not ``counted``)."""
    check_variant(variant)
    if row_bytes <= 0:
        raise ValueError(f"row_bytes must be positive, got {row_bytes}")
    if not 0 <= base_offset < LINE:
        raise ValueError(f"base_offset must be in [0, {LINE}), got {base_offset}")
    unit = copy_unit(variant, base_offset, row_bytes)  # every row's: start | row_bytes has these low 4 bits
    step = step_bytes(unit)
    start = rows.to(torch.int64) * row_bytes + base_offset
    end = start + row_bytes
    if counted is not None:
        end = torch.where(counted, end, start)  # an uncounted row spans nothing
    if variant != "naive":  # circularly shifted: every step starts on a multiple of shift_window(unit)
        return _span(start, end, SECTOR) * SECTOR, _span(start, end, shift_window(unit))
    # naive: the steps start at the row's first byte
    offsets = torch.arange(-(-row_bytes // step), device=rows.device, dtype=torch.int64) * step
    step_start = start[:, None] + offsets[None, :]
    step_end = torch.minimum(step_start + step, end[:, None])
    return _span(step_start, step_end, SECTOR).sum(dim=1) * SECTOR, _span(step_start, step_end, LINE).sum(dim=1)


def zero_copy_traffic_tensors(rows: torch.Tensor, row_bytes: int, base_offset: int = 0,
                              variant: str = DEFAULT_VARIANT, counted: torch.Tensor | None = None,
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(payload_bytes, requests)`` as 0-d int64 tensors on ``rows``' device, without synchronising.

    ``counted`` (a boolean mask over ``rows``) limits the count to those rows,
    e.g. the cold ones of a gather, so no data-dependent indexing is needed.
    """
    payload, requests = _row_spans(rows, row_bytes, base_offset, variant, counted)
    return payload.sum(), requests.sum()


def zero_copy_row_payload(rows: torch.Tensor, row_bytes: int, base_offset: int = 0,
                          variant: str = DEFAULT_VARIANT) -> torch.Tensor:
    """The payload bytes of reading each of ``rows`` by zero-copy, one int64 per row: what a policy replay charges
    a miss of that row."""
    return _row_spans(rows, row_bytes, base_offset, variant)[0]


def zero_copy_traffic(rows: torch.Tensor, row_bytes: int, base_offset: int = 0,
                      variant: str = DEFAULT_VARIANT) -> tuple[int, int]:
    """``(payload_bytes, requests)`` for reading ``rows`` of a table by zero-copy.

    ``rows`` are row numbers in the host allocation; ``base_offset`` is the
    byte offset of row 0 within its 128-byte line.
    """
    payload, requests = zero_copy_traffic_tensors(rows, row_bytes, base_offset, variant)
    return int(payload), int(requests)


def dma_traffic(num_rows: int, row_bytes: int) -> tuple[int, int]:
    """``(payload_bytes, requests)`` for copying ``num_rows`` dense rows by DMA."""
    payload = num_rows * row_bytes
    return payload, -(-payload // LINE)


def disk_traffic(rows: torch.Tensor, row_bytes: int, data_offset: int, block: int | None, max_gap_bytes: int = 0) -> int:
    """Bytes read from disk to fetch ``rows`` (distinct) of a table whose row 0 starts at byte ``data_offset`` of its
    file: with ``block`` (``O_DIRECT``) every block a row overlaps, each once; without, the rows' own bytes.  Gaps
    of at most ``max_gap_bytes`` between what is wanted (whole blocks with ``block``) are read too."""
    start = torch.sort(rows.to(torch.int64)).values * row_bytes + data_offset
    if block is None:
        gaps = start[1:] - (start[:-1] + row_bytes)
        return len(rows) * row_bytes + int(gaps[(gaps > 0) & (gaps <= max_gap_bytes)].sum())
    first = torch.div(start, block, rounding_mode="floor")
    last = torch.div(start + row_bytes - 1, block, rounding_mode="floor")
    spans = torch.cat([torch.arange(int(a), int(b) + 1) for a, b in zip(first.tolist(), last.tolist())]
                      ) if row_bytes > block else torch.cat([first, last])
    blocks = torch.unique(spans)
    gaps = blocks[1:] - blocks[:-1] - 1
    return (int(blocks.numel()) + int(gaps[(gaps > 0) & (gaps <= max_gap_bytes // block)].sum())) * block
