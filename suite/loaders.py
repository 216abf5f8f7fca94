"""The loader registry: any feature loader by name, from a dataset, a hot fraction and a device.

| name | what | GPU memory |
|---|---|---|
| ``in-memory`` | all features on the device: the upper bound (seeds/004) | all rows |
| ``cpu-gather`` | CPU ``index_select`` into pinned memory + DMA (PyTorch's default) | none |
| ``uva`` / ``uva-naive`` | zero-copy of every row, aligned / naive (seeds/004) | none |
| ``degree-cache`` | top-degree rows cached behind a node -> slot map (PaGraph) | hot fraction |
| ``gns`` | a degree-sampled node set cached, neighbour sampling biased towards it (GNS; changes the sampler) | hot fraction |
| ``tiered`` | data tiering: rows [0, H) on the GPU, the rest zero-copy (seeds/000) | hot fraction |

``tiered`` needs a dataset reordered hottest-first (``tierbench prepare`` /
``load_reordered``); the hot tier is then simply its first rows.  In a
multi-process run (``create_distributed_loader``) it is the multi-GPU
combined tensor, its hot tier interleaved over every process's GPU.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from baselines.cpu_gather import CPUGatherLoader
from baselines.degree_cache import DegreeCacheLoader
from baselines.gns import GNSLoader
from baselines.in_memory import InMemoryLoader
from baselines.uva import UVALoader
from tiering.combined import CombinedTensor
from tiering.feature_loader import FeatureLoader
from tiering.multi_gpu import MultiGPUCombinedTensor
from tiering.placement import plan_placement

LOADERS = ("in-memory", "cpu-gather", "uva", "uva-naive", "degree-cache", "gns", "tiered")


def hot_rows(num_rows: int, hot_fraction: float) -> int:
    if not 0.0 <= hot_fraction <= 1.0:
        raise ValueError(f"hot_fraction must be in [0, 1], got {hot_fraction}")
    return int(round(num_rows * hot_fraction))


def _check_reordered(dataset) -> None:
    if dataset.scores is None:
        raise ValueError(
            "the tiered loader needs a dataset reordered hottest-first: load it with a scorer "
            "(tierbench train --scorer wrpr, or suite.datasets.reordered.load_reordered)"
        )


def create_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", **options) -> FeatureLoader:
    """A loader over ``dataset.features``; ``options`` go to the loader (e.g. ``max_blocks``)."""
    device = torch.device(device)
    features = dataset.features
    if name == "in-memory":
        return InMemoryLoader(features, device)
    if name == "cpu-gather":
        return CPUGatherLoader(features, device)
    if name in ("uva", "uva-naive"):
        return UVALoader(features, device, aligned=name == "uva", **options)
    if name in ("degree-cache", "gns"):
        appearances = dataset.graph.appearances()
        kind = DegreeCacheLoader if name == "degree-cache" else GNSLoader
        return kind(features, appearances, hot_rows(dataset.num_nodes, hot_fraction), device, **options)
    if name == "tiered":
        _check_reordered(dataset)
        return CombinedTensor(features, hot_rows(dataset.num_nodes, hot_fraction), device, **options)
    raise KeyError(f"unknown loader {name!r}; choose one of {', '.join(LOADERS)}")


def create_distributed_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", **options) -> FeatureLoader:
    """The loader of one process of a data-parallel run (every process calls this together).

    ``tiered`` becomes the multi-GPU combined tensor: ``hot_fraction`` of the
    rows interleaved over all the group's GPUs and no replicated tier, as in
    seeds/000 §5.5; every other loader is one per process, as in one-GPU runs.
    """
    if name != "tiered":
        return create_loader(name, dataset, hot_fraction, device, **options)
    _check_reordered(dataset)
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    placement = plan_placement(dataset.num_nodes, row_bytes, dist.get_world_size(), replicated=0,
                               interleaved=hot_rows(dataset.num_nodes, hot_fraction))
    return MultiGPUCombinedTensor(dataset.features, placement, device, **options)
