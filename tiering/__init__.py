"""tierbench's library: data tiering (Min et al., "Graph Neural Network Training and Data Tiering", KDD 2022).

Score the nodes, reorder the graph so the hot ones come first, keep the hot
rows in GPU memory and the cold rows in pinned host memory read by
zero-copy, and sample minibatches over the graph.  Subpackages:

* ``tiering.graph``: the CSR graph, the node scorers and the reordering;
* ``tiering.sampling``: neighbour sampling, on one process or over a CSR
  split across processes;
* ``tiering.features``: the feature-loader interface, the combined tensor and
  its zero-copy kernel, the PCIe traffic model, multi-GPU placement;
* ``tiering.disk``: a tier below host memory, read from disk.

``tiering.rng`` (counter-based random numbers) and ``tiering.prefetch`` (a
software prefetch for numba) are primitives the kernels of several
subpackages share.  Nothing here knows a baseline or the harness exists.
"""

from tiering.disk import DiskTable, DiskTieredLoader
from tiering.features import (
    CombinedTensor,
    FeatureLoader,
    LoaderStats,
    MultiGPUCombinedTensor,
    Placement,
    plan_placement,
)
from tiering.graph import SCORERS, CSRGraph, get_scorer, reorder_graph
from tiering.sampling import DistributedNeighborSampler, GraphPartition, MiniBatch, NeighborSampler

__all__ = [
    "CSRGraph", "SCORERS", "get_scorer", "reorder_graph",
    "MiniBatch", "NeighborSampler", "DistributedNeighborSampler", "GraphPartition",
    "FeatureLoader", "LoaderStats", "CombinedTensor", "MultiGPUCombinedTensor", "Placement", "plan_placement",
    "DiskTable", "DiskTieredLoader",
]
