"""Neighbour sampling: minibatches of seeds and their sampled blocks (data tiering §2.2).

* ``neighbors``: node-wise sampling of a fixed fanout per hop, by
  counter-based draws, so every backend and every process draws the same
  neighbours for the same seed;
* ``fused``: the same minibatches sampled on the GPU, each hop three kernels
  and two scans with relabelling by a hash table (numba-cuda kernels in
  ``fused_kernels``, or the same in CUDA C++, ``fused.cu``, launched by
  ``fused_cupy``; each imported at first use);
* ``distributed``: the same sampling over a CSR split across processes,
  frontier nodes shuffled to the process owning their lists and back
  (DSP §4; data tiering §5.5).
"""

from tiering.sampling.distributed import DistributedNeighborSampler, GraphPartition
from tiering.sampling.fused import FusedNeighborSampler, append_new_nodes_hashed
from tiering.sampling.neighbors import (
    MiniBatch,
    NeighborSampler,
    epoch_order,
    minibatches,
    sample_neighbors,
    sample_rows,
)

__all__ = [
    "DistributedNeighborSampler", "FusedNeighborSampler", "GraphPartition", "append_new_nodes_hashed",
    "MiniBatch", "NeighborSampler", "epoch_order", "minibatches", "sample_neighbors", "sample_rows",
]
