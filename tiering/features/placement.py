"""Where each feature row lives on G GPUs: replicated, interleaved and host tiers (Data Tiering §4.2, Appendix A).

After reordering, rows are sorted by hotness.  With G GPUs:

* rows [0, R) are the **replicated** tier: a copy on every GPU (the very
  hottest rows, read locally by every process);
* rows [R, R + M) are the **interleaved** tier: row r lives on GPU
  (r - R) mod G, at local row (r - R) // G.  Interleaved, not blocked:
  rows are sorted by score, so contiguous blocks would put the hottest share
  of the tier, and most of the traffic, on GPU 0;
* rows [R + M, N) stay in host memory (zero-copy, as in ``CombinedTensor``).

``plan_placement`` takes R and M as row counts or as fractions of N, reports
the bytes every GPU and the host hold, and refuses a plan that does not fit a
GPU's free memory, naming both sizes.  ``locate`` maps rows to (tier, GPU,
local row) for a gather; it is plain tensor arithmetic and runs anywhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

REPLICATED, INTERLEAVED, HOST = 0, 1, 2


def order_ranks(order, num_rows: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``order`` (row ids, the first placed first) as int64, and each row's place in it; ``ValueError`` naming ``what``
    unless it holds every one of the ``num_rows`` rows once."""
    order = np.asarray(order, dtype=np.int64)
    rank = np.full(num_rows, -1, np.int64)
    if order.shape == (num_rows,) and (num_rows == 0 or (order.min() >= 0 and order.max() < num_rows)):
        rank[order] = np.arange(num_rows)
    if order.shape != (num_rows,) or (rank < 0).any():
        raise ValueError(f"{what} must hold every one of the {num_rows:,} rows once")
    return order, rank


class PlacementTooLarge(MemoryError):
    """A GPU's share of the plan does not fit in its free memory."""


@dataclasses.dataclass(frozen=True)
class Placement:
    num_rows: int
    row_bytes: int
    gpus: int
    replicated: int  # R
    interleaved: int  # M

    @property
    def host_start(self) -> int:
        return self.replicated + self.interleaved

    def interleaved_rows_on(self, gpu: int) -> int:
        """How many interleaved rows GPU ``gpu`` holds (the first M mod G GPUs hold one more)."""
        return self.interleaved // self.gpus + (1 if gpu < self.interleaved % self.gpus else 0)

    def bytes_per_gpu(self) -> list[int]:
        return [(self.replicated + self.interleaved_rows_on(g)) * self.row_bytes for g in range(self.gpus)]

    @property
    def host_bytes(self) -> int:
        return (self.num_rows - self.host_start) * self.row_bytes

    def describe(self) -> str:
        per_gpu = ", ".join(f"GPU {g}: {b / 2**30:.2f} GiB" for g, b in enumerate(self.bytes_per_gpu()))
        return (
            f"replicated rows [0, {self.replicated}), interleaved [{self.replicated}, {self.host_start}) over "
            f"{self.gpus} GPUs, host [{self.host_start}, {self.num_rows}); {per_gpu}; host {self.host_bytes / 2**30:.2f} GiB"
        )


def hot_rows(num_rows: int, hot_fraction: float) -> int:
    """How many of ``num_rows`` rows a hot tier of ``hot_fraction`` of them holds (rounded to the nearest row)."""
    if not 0.0 <= hot_fraction <= 1.0:
        raise ValueError(f"hot_fraction must be in [0, 1], got {hot_fraction}")
    return int(round(num_rows * hot_fraction))


def _rows(amount, num_rows: int, name: str) -> int:
    """A row count from a count (int) or a fraction of the rows (float in [0, 1])."""
    if isinstance(amount, float):
        if not 0.0 <= amount <= 1.0:
            raise ValueError(f"{name} as a fraction must be in [0, 1], got {amount}")
        return int(round(amount * num_rows))
    if amount < 0:
        raise ValueError(f"{name} must be non-negative, got {amount}")
    return int(amount)


def plan_placement(num_rows: int, row_bytes: int, gpus: int, replicated=0, interleaved=0.0,
                   free_bytes: list[int] | None = None) -> Placement:
    """A placement of R replicated and M interleaved rows on ``gpus`` GPUs; the rest stays on the host.

    ``free_bytes`` (one entry per GPU, e.g. from ``torch.cuda.mem_get_info``)
    makes the plan refuse what does not fit.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    r = _rows(replicated, num_rows, "replicated")
    m = _rows(interleaved, num_rows, "interleaved")
    if r + m > num_rows:
        raise ValueError(f"replicated ({r}) + interleaved ({m}) rows exceed the table's {num_rows} rows")
    placement = Placement(num_rows, row_bytes, gpus, r, m)
    if free_bytes is not None:
        if len(free_bytes) != gpus:
            raise ValueError(f"free_bytes has {len(free_bytes)} entries for {gpus} GPUs")
        for gpu, (need, free) in enumerate(zip(placement.bytes_per_gpu(), free_bytes)):
            if need > free:
                raise PlacementTooLarge(
                    f"GPU {gpu} would hold {need / 2**30:.2f} GiB of features but has {free / 2**30:.2f} GiB free; "
                    "lower the replicated or interleaved share"
                )
    return placement


def locate(rows: torch.Tensor, placement: Placement, rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tier, gpu, local_row)`` of each row as seen from GPU ``rank``.

    Replicated rows are read from ``rank`` itself and interleaved rows from
    their owner, at ``local_row`` of that GPU's ``shard``; host rows have gpu
    -1 and their local row is their row in the host table (rows [R + M, N)).
    """
    rows = rows.to(torch.int64)
    r, start = placement.replicated, placement.host_start
    tier = torch.full_like(rows, HOST)
    tier[rows < start] = INTERLEAVED
    tier[rows < r] = REPLICATED
    shifted = rows - r
    gpu = torch.where(tier == INTERLEAVED, shifted % placement.gpus, torch.full_like(rows, -1))
    gpu = torch.where(tier == REPLICATED, torch.full_like(rows, rank), gpu)
    local = torch.where(tier == INTERLEAVED, r + torch.div(shifted, placement.gpus, rounding_mode="floor"), rows)
    local = torch.where(tier == HOST, rows - start, local)
    return tier, gpu, local


def shard(features: torch.Tensor, placement: Placement, gpu: int) -> torch.Tensor:
    """The rows GPU ``gpu`` holds: the replicated tier, then its interleaved rows in local order."""
    r, start = placement.replicated, placement.host_start
    return torch.cat([features[:r], features[r + gpu : start : placement.gpus]])
