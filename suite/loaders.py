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

Host memory of the zero-copy loaders (``tiered``, ``uva``, ``uva-naive``) on
a GPU: datasets open their feature table as a memory map of the cache file,
which CUDA cannot pin in place, so ``host_table`` reads it once from the file
into memory (``suite.datasets.host_copy``, with a progress bar) and the
loader pins that memory in place (``cudaHostRegister``), with no further
copy.  The multi-GPU tensor copies its host rows into a shared-memory segment
and pins that instead.  On the CPU, and for every other loader, the loaders
read the memory-mapped table as it is.

GPU memory: on a CUDA device ``create_loader`` first checks that what the
loader keeps there fits in the free memory (``check_gpu_memory``): every row
for ``in-memory``, the hot rows and an N-entry int64 node -> slot map for
``degree-cache`` and ``gns``, rows [0, H) for ``tiered``; a loader that does
not fit is refused with ``tiering.combined.HotTierTooLarge`` before any
table is copied.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from baselines.cpu_gather import CPUGatherLoader
from baselines.degree_cache import DegreeCacheLoader
from baselines.gns import GNSLoader
from baselines.in_memory import InMemoryLoader
from baselines.uva import UVALoader
from tiering.combined import CombinedTensor, check_fits
from tiering.feature_loader import FeatureLoader
from tiering.multi_gpu import MultiGPUCombinedTensor
from tiering.placement import plan_placement

from .datasets.host_copy import read_into_memory

LOADERS = ("in-memory", "cpu-gather", "uva", "uva-naive", "degree-cache", "gns", "tiered")
ZERO_COPY_LOADERS = ("uva", "uva-naive", "tiered")  # they pin their host table and read it from the GPU
HOT_TIER_LOADERS = ("degree-cache", "gns", "tiered")  # they keep a hot fraction of the rows in GPU memory
REORDERED_LOADERS = ("tiered",)  # they need a dataset reordered hottest-first


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


def host_table(name: str, features: torch.Tensor, device, progress: bool = True) -> torch.Tensor:
    """The table loader ``name`` is built over: read into memory for a zero-copy loader on a GPU, else ``features``."""
    if name in ZERO_COPY_LOADERS and torch.device(device).type == "cuda":
        return read_into_memory(features, progress=progress)
    return features


def check_gpu_memory(name: str, dataset, hot_fraction: float, device) -> None:
    """Refuse loader ``name`` with ``HotTierTooLarge`` if the rows it keeps on CUDA ``device`` exceed its free memory.

    Nothing is checked on a CPU or for loaders that keep no rows on the GPU
    (``cpu-gather``, ``uva``, ``uva-naive``).
    """
    device = torch.device(device)
    if device.type != "cuda" or name not in ("in-memory", *HOT_TIER_LOADERS):
        return
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    if name == "in-memory":
        check_fits(dataset.num_nodes * row_bytes, device, "the in-memory loader's table",
                   f"{dataset.num_nodes} rows x {row_bytes} B",
                   f"use a loader with a hot tier ({', '.join(HOT_TIER_LOADERS)}) or a smaller dataset")
        return
    rows = hot_rows(dataset.num_nodes, hot_fraction)
    detail = f"{rows} rows x {row_bytes} B"
    slot_map = 0
    if name != "tiered":
        slot_map = dataset.num_nodes * torch.iinfo(torch.int64).bits // 8
        detail += f" + a {dataset.num_nodes}-entry node -> slot map"
    check_fits(rows * row_bytes + slot_map, device, f"the hot tier of {name}", detail, "lower the hot fraction")


def create_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", *, progress: bool = True,
                  **options) -> FeatureLoader:
    """A loader over ``dataset.features``; ``options`` go to the loader (e.g. ``max_blocks``).

    ``progress`` shows the bar of ``host_table``'s copy (zero-copy loaders on a GPU).
    """
    device = torch.device(device)
    if name in REORDERED_LOADERS:
        _check_reordered(dataset)  # before the table is copied
    check_gpu_memory(name, dataset, hot_fraction, device)
    features = host_table(name, dataset.features, device, progress)
    if name == "in-memory":
        return InMemoryLoader(features, device)
    if name == "cpu-gather":
        return CPUGatherLoader(features, device)
    if name in ("uva", "uva-naive"):
        return UVALoader(features, device, variant="aligned" if name == "uva" else "naive", **options)
    if name in ("degree-cache", "gns"):
        appearances = dataset.graph.appearances()
        kind = DegreeCacheLoader if name == "degree-cache" else GNSLoader
        return kind(features, appearances, hot_rows(dataset.num_nodes, hot_fraction), device, **options)
    if name == "tiered":
        return CombinedTensor(features, hot_rows(dataset.num_nodes, hot_fraction), device, **options)
    raise KeyError(f"unknown loader {name!r}; choose one of {', '.join(LOADERS)}")


def create_distributed_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", *,
                              shm_dir: str = "/dev/shm", progress: bool = True, **options) -> FeatureLoader:
    """The loader of one process of a data-parallel run (every process calls this together).

    ``tiered`` becomes the multi-GPU combined tensor: ``hot_fraction`` of the
    rows interleaved over all the group's GPUs and no replicated tier, as in
    seeds/000 §5.5, its host tier in a segment in ``shm_dir``; every other
    loader is one per process, as in one-GPU runs.
    """
    if name != "tiered":
        return create_loader(name, dataset, hot_fraction, device, progress=progress, **options)
    _check_reordered(dataset)
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    placement = plan_placement(dataset.num_nodes, row_bytes, dist.get_world_size(), replicated=0,
                               interleaved=hot_rows(dataset.num_nodes, hot_fraction))
    return MultiGPUCombinedTensor(dataset.features, placement, device, shm_dir=shm_dir, **options)
