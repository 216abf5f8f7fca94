"""Plain zero-copy ("UVA") over the whole feature table: PyTorch-Direct's unified tensor.

It is the combined tensor with no GPU tier (H = 0): every row is read from
pinned host memory by the gather kernel.  ``variant="naive"`` is PyTorch-Direct's
naive zero-copy, ``variant="aligned"`` its circular-shift version (§3.2.1);
the pair reproduces PyTorch-Direct Fig. 8.  ``variant="wide"`` adds 16-byte vector
loads (``tiering.features.zero_copy``).
"""

from __future__ import annotations

from tiering.features.combined import CombinedTensor
from tiering.features.zero_copy import DEFAULT_VARIANT


class UVALoader(CombinedTensor):
    def __init__(self, features, device="cpu", *, variant: str = DEFAULT_VARIANT, max_blocks: int | None = None):
        super().__init__(features, 0, device, variant=variant, max_blocks=max_blocks)
