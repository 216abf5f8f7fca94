"""Feature tables in tiers, and the one interface every feature loader implements.

* ``loader``: ``FeatureLoader`` (``gather(ids)``, ``stats()``) and its counters;
* ``combined``: ``CombinedTensor``, hot rows in GPU memory and cold rows read
  from pinned host memory by zero-copy, in one gather (data tiering §4.1);
* ``zero_copy``: the one-launch gather kernel (its CUDA source is
  ``zero_copy.cu``) and in-place host pinning (PyTorch-Direct §3);
* ``addressing``: which bytes of a row the kernel's warp reads in each step,
  per variant (PyTorch-Direct §3.2.1), defined once for the kernel's tests
  and the traffic model;
* ``traffic``: the exact PCIe traffic model of what a gather reads;
* ``placement`` / ``multi_gpu``: replicated, interleaved and host tiers over
  several GPUs, and the gather that reads them all (data tiering §4.2).
"""

from tiering.features.combined import CombinedTensor
from tiering.features.loader import FeatureLoader, LoaderStats
from tiering.features.multi_gpu import MultiGPUCombinedTensor
from tiering.features.placement import Placement, locate, plan_placement, shard
from tiering.features.traffic import disk_traffic, dma_traffic, zero_copy_traffic_tensors

__all__ = [
    "CombinedTensor", "FeatureLoader", "LoaderStats", "MultiGPUCombinedTensor",
    "Placement", "locate", "plan_placement", "shard",
    "disk_traffic", "dma_traffic", "zero_copy_traffic_tensors",
]
