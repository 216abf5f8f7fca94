"""The DC-SBM's edges drawn with torch on any device, edge for edge equal to ``BlockModel.draw``.

The numba kernel (``suite.datasets.dcsbm``) draws edge e from four
counter-based uniforms, ``uniform(seed, EDGE_STREAM, 4 * e + k)``; here the
same SplitMix64 hash runs as int64 tensor arithmetic (``tiering.rng``), so a
GPU can draw a paper-scale graph's edges with the same bits as the CPU
builder.  Only the draws and the searches are ported: the cumulative masses
are the ones ``block_model`` computed, copied as they are, so every float the
searches compare is the same.  The numba kernel narrows each search with a
guide table (Chen and Asau's indexed search, 1974) and then returns exactly
``searchsorted(cum, x, side="right")``; ``torch.searchsorted(..., right=True)``
is that full binary search, so the guide tables are not needed here.
"""

from __future__ import annotations

import dataclasses

import torch

from suite.datasets.dcsbm import (
    CLASS_DRAW,
    DST_DRAW,
    EDGE_STREAM,
    SAME_CLASS_DRAW,
    SRC_DRAW,
    BlockModel,
)
from tiering.rng import stream_hashes, uniform_from_hashes


def search(cum: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """How many entries of the sorted ``cum`` are at most ``x``: ``np.searchsorted(cum, x, side="right")``, which
    ``dcsbm.guided_search`` returns (an x equal to an entry, or to a run of equal entries, goes after them)."""
    return torch.searchsorted(cum, x, right=True)


@dataclasses.dataclass
class TorchBlockModel:
    """A ``BlockModel``'s arrays as tensors on one device, from which any range of edges can be drawn there."""

    order: torch.Tensor  # int64 node ids in class order
    block_ptr: torch.Tensor  # int64 class boundaries in ``order``
    cum_src: torch.Tensor  # float64 cumulative masses, as block_model computed them
    cum_dst: torch.Tensor
    cum_block_dst: torch.Tensor
    homophily: float
    seed: int

    @classmethod
    def from_model(cls, model: BlockModel, device: torch.device | str) -> TorchBlockModel:
        """``model``'s arrays copied to ``device`` (a symmetric model's one mass array copied once)."""
        cum_src = torch.as_tensor(model.cum_src, device=device)
        cum_dst = cum_src if model.cum_dst is model.cum_src else torch.as_tensor(model.cum_dst, device=device)
        return cls(torch.as_tensor(model.order, device=device), torch.as_tensor(model.block_ptr, device=device),
                   cum_src, cum_dst, torch.as_tensor(model.cum_block_dst, device=device), float(model.homophily),
                   int(model.seed))

    def draw(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Edges ``first`` to ``first + count - 1`` as int64 ``(src, dst)`` on the model's device."""
        device = self.cum_src.device
        n = len(self.cum_src)
        num_blocks = len(self.block_ptr) - 1
        counters = 4 * torch.arange(first, first + count, dtype=torch.int64, device=device)
        stream = stream_hashes(self.seed, torch.tensor(EDGE_STREAM, dtype=torch.int64, device=device))

        def uniform(draw: int) -> torch.Tensor:
            return uniform_from_hashes(stream, counters + draw)

        x = uniform(SRC_DRAW) * self.cum_src[-1]
        src = search(self.cum_src, x).clamp_(max=n - 1)
        block = search(self.block_ptr, src) - 1
        x = uniform(CLASS_DRAW) * self.cum_block_dst[-1]
        other = search(self.cum_block_dst, x).clamp_(0, num_blocks - 1)
        block = torch.where(uniform(SAME_CLASS_DRAW) >= self.homophily, other, block)

        lo = self.block_ptr[block]
        hi = self.block_ptr[block + 1]
        base = torch.where(lo > 0, self.cum_dst[(lo - 1).clamp(min=0)], 0.0)
        x = base + uniform(DST_DRAW) * (self.cum_dst[hi - 1] - base)
        dst = torch.minimum(torch.maximum(search(self.cum_dst, x), lo), hi - 1)
        return self.order[src], self.order[dst]
