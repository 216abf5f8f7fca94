"""Plain zero-copy ("UVA") over the whole feature table: seeds/004's unified tensor.

It is the combined tensor with no GPU tier (H = 0): every row is read from
pinned host memory by the gather kernel.  ``aligned=False`` is seeds/004's
naive zero-copy, ``aligned=True`` its circular-shift version; the pair
reproduces seeds/004 Fig. 8.
"""

from __future__ import annotations

from tiering.combined import CombinedTensor


class UVALoader(CombinedTensor):
    def __init__(self, features, device="cpu", *, aligned: bool = True, max_blocks: int | None = None):
        super().__init__(features, 0, device, aligned=aligned, max_blocks=max_blocks)
