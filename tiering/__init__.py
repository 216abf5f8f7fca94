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

import importlib

_EXPORTS = {
    "CSRGraph": "tiering.graph", "SCORERS": "tiering.graph", "get_scorer": "tiering.graph",
    "reorder_graph": "tiering.graph",
    "MiniBatch": "tiering.sampling", "NeighborSampler": "tiering.sampling",
    "DistributedNeighborSampler": "tiering.sampling", "GraphPartition": "tiering.sampling",
    "FeatureLoader": "tiering.features", "LoaderStats": "tiering.features", "CombinedTensor": "tiering.features",
    "MultiGPUCombinedTensor": "tiering.features", "Placement": "tiering.features", "plan_placement": "tiering.features",
    "DiskTable": "tiering.disk", "DiskTieredLoader": "tiering.disk",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    """The public API, imported when first asked for: importing one module of the package (``tiering.rng`` in a
    generator's worker, say) does not import torch and every subpackage with it."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tiering' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
