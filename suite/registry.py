"""The registry: every feature loader and every scorer by name, with the traits the rest of the suite reads.

A loader is one ``LoaderSpec`` in ``LOADERS``; a scorer one
``tiering.graph.scores.ScorerSpec`` in ``SCORERS``.  Sweeps, training, the
command line's choices and help, and the order of tables and figures all read
them from here, so a new loader is its class plus one line below, and a new
scorer its function plus one ``ScorerSpec``.  ``create_loader`` checks a
request against the loader's traits (a reordered dataset, GPU memory) before
it builds anything, then dispatches to the loader's factory.

| name | what | GPU memory |
|---|---|---|
| ``cpu-gather`` | CPU ``index_select`` into pinned memory + DMA (PyTorch's default) | none |
| ``uva-naive`` / ``uva`` | zero-copy of every row, naive / aligned (PyTorch-Direct) | none |
| ``degree-cache`` | top-degree rows cached behind a node -> slot map (PaGraph) | hot fraction |
| ``gns`` | a degree-sampled node set cached, neighbour sampling biased towards it (GNS; changes the sampler) | hot fraction |
| ``tiered`` | data tiering: rows [0, H) on the GPU, the rest zero-copy (Data Tiering) | hot fraction |
| ``lookahead`` | a GPU slot table kept by Belady's rule over the next ``window`` minibatches sampled ahead, the dataset's order beyond them; misses zero-copy (Ginex's rule, ``tiering.features.lookahead``) | hot fraction |
| ``in-memory`` | all features on the device: the upper bound (PyTorch-Direct) | all rows |
| ``mmap`` | the table's file memory-mapped: the page cache decides (Ginex, GraphBolt's baseline) | none |
| ``disk-tiered`` | data tiering over three tiers: hot rows on the GPU, the next ``host_fraction`` in host memory, the rest read from disk on demand (Data Tiering + Marius) | hot fraction |

``tiered`` (and ``lookahead``, whose order beyond its window is the row order) needs a dataset reordered hottest-first (``tierbench prepare`` /
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
for ``in-memory``, the hot rows (and an N-entry int64 node -> slot map for
``degree-cache`` and ``gns``) for a loader with a hot tier; a loader that
does not fit is refused with ``tiering.features.combined.HotTierTooLarge`` before any
table is copied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from baselines.cpu_gather import CPUGatherLoader
from baselines.degree_cache import DegreeCacheLoader
from baselines.gns import GNSLoader
from baselines.in_memory import InMemoryLoader
from baselines.page_cache import MmapLoader
from baselines.uva import UVALoader
from suite.datasets.dataset import array_file
from suite.datasets.host_copy import read_into_memory
from suite.errors import BadValue, UnknownName
from tiering.disk.table import DiskTable
from tiering.disk.tiered import DiskTieredLoader
from tiering.features.combined import CombinedTensor, check_fits
from tiering.features.loader import FeatureLoader
from tiering.features.lookahead import LookaheadLoader
from tiering.features.multi_gpu import MultiGPUCombinedTensor
from tiering.features.placement import hot_rows, plan_placement
from tiering.graph.scores import SCORERS, ScorerSpec
from tiering.graph.scores import get_scorer as scorer


@dataclasses.dataclass(frozen=True)
class LoaderSpec:
    """A feature loader and its traits.

    ``build(features, dataset, hot_rows, device, **options)`` makes the loader
    over ``features`` (the dataset's table, or its copy in memory for a
    zero-copy loader on a GPU).  Traits: ``hot_tier``, it keeps a hot fraction
    of the rows in GPU memory (the sweep's hot fractions apply to it), else it
    always keeps ``gpu_share`` of them there (1 for ``in-memory``, 0 for the
    rest); ``slot_map``, its hot tier sits behind an N-entry node -> slot map;
    ``reordered``, it needs a dataset reordered hottest-first; ``zero_copy``,
    it reads a pinned host table from the GPU; ``disk``, it reads rows from
    the table's file during training (its epochs record ``disk_bytes_read``).  ``build_distributed`` makes
    one process's loader in a multi-process run, where that differs.
    """

    name: str
    build: Callable[..., FeatureLoader]
    hot_tier: bool = False
    gpu_share: float = 0.0
    slot_map: bool = False
    reordered: bool = False
    zero_copy: bool = False
    disk: bool = False
    build_distributed: Callable[..., FeatureLoader] | None = None

    def hot_fractions(self, requested) -> list[float]:
        """The hot fractions a sweep runs this loader at: ``requested`` with a hot tier, else its fixed share."""
        return [float(f) for f in requested] if self.hot_tier else [self.gpu_share]


def _multi_gpu_tiered(dataset, hot_fraction: float, device, *, shm_dir: str, **options) -> FeatureLoader:
    """The multi-GPU combined tensor: ``hot_fraction`` of the rows interleaved over all the group's GPUs and no
    replicated tier, as in Data Tiering §5.5, its host tier in a segment in ``shm_dir``."""
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    placement = plan_placement(dataset.num_nodes, row_bytes, dist.get_world_size(), replicated=0,
                               interleaved=hot_rows(dataset.num_nodes, hot_fraction))
    return MultiGPUCombinedTensor(dataset.features, placement, device, shm_dir=shm_dir, **options)


DEFAULT_HOST_FRACTION = 0.25
"""The share of rows ``disk-tiered`` keeps in host memory below its GPU tier unless told (``host_fraction``): a host
budget of a quarter of the table, the rest on disk."""


def _table_file(dataset) -> Path:
    """The ``.npy`` file of ``dataset``'s feature table in its cache entry."""
    if dataset.path is None:
        raise BadValue(f"the disk loaders read the feature table's file, and {dataset.name} has none "
                       "(load it from the dataset cache)")
    return array_file(dataset.path, "features")


def _mmap(dataset, device, *, host_fraction: float | None = None) -> FeatureLoader:
    """The table's file memory-mapped, dropped from the page cache first (an epoch starts cold); with
    ``host_fraction``, the page cache held to that share of the rows (emulated: ``MmapLoader``'s ``budget_rows``)."""
    budget = None if host_fraction is None else hot_rows(dataset.num_nodes, host_fraction)
    mapped = MmapLoader(_table_file(dataset), device, budget_rows=budget)
    mapped.drop_cache()
    return mapped


def _disk_tiered(dataset, hot: int, device, *, host_fraction: float = DEFAULT_HOST_FRACTION, in_flight: int = 32,
                 direct: bool = True, max_gap_bytes: int = 0) -> FeatureLoader:
    table = DiskTable(_table_file(dataset), direct=direct)
    table.drop_cache()
    host = min(hot_rows(dataset.num_nodes, host_fraction), dataset.num_nodes - hot)
    return DiskTieredLoader(table, hot, host, device, in_flight=in_flight, max_gap_bytes=max_gap_bytes)


LOADERS = {
    spec.name: spec
    for spec in (
        LoaderSpec("cpu-gather", lambda features, dataset, hot, device, **o: CPUGatherLoader(features, device)),
        LoaderSpec("uva-naive", lambda features, dataset, hot, device, **o: UVALoader(features, device, variant="naive",
                                                                                      **o), zero_copy=True),
        LoaderSpec("uva", lambda features, dataset, hot, device, **o: UVALoader(features, device, variant="aligned", **o),
                   zero_copy=True),
        LoaderSpec("degree-cache", lambda features, dataset, hot, device, **o: DegreeCacheLoader(
            features, dataset.graph.appearances(), hot, device, **o), hot_tier=True, slot_map=True),
        LoaderSpec("gns", lambda features, dataset, hot, device, **o: GNSLoader(
            features, dataset.graph.appearances(), hot, device, **o), hot_tier=True, slot_map=True),
        LoaderSpec("tiered", lambda features, dataset, hot, device, **o: CombinedTensor(features, hot, device, **o),
                   hot_tier=True, reordered=True, zero_copy=True, build_distributed=_multi_gpu_tiered),
        LoaderSpec("lookahead", lambda features, dataset, hot, device, **o: LookaheadLoader(features, hot, device, **o),
                   hot_tier=True, reordered=True, zero_copy=True),
        LoaderSpec("in-memory", lambda features, dataset, hot, device, **o: InMemoryLoader(features, device),
                   gpu_share=1.0),
        LoaderSpec("mmap", lambda features, dataset, hot, device, **o: _mmap(dataset, device, **o), disk=True),
        LoaderSpec("disk-tiered", lambda features, dataset, hot, device, **o: _disk_tiered(dataset, hot, device, **o),
                   hot_tier=True, reordered=True, disk=True),
    )
}
"""The loaders by the name the command line spells, in the order tables and figures show them."""

__all__ = ["DEFAULT_HOST_FRACTION", "LOADERS", "SCORERS", "LoaderSpec", "ScorerSpec", "check_gpu_memory",
           "create_distributed_loader", "create_loader", "disk_loaders", "hot_rows", "hot_tier_loaders", "loader",
           "reordered_loaders", "scorer", "scorer_params"]


def loader(name: str) -> LoaderSpec:
    """The loader called ``name``; ``KeyError`` naming the choices for any other."""
    if name not in LOADERS:
        raise UnknownName(f"unknown loader {name!r}; choose one of {', '.join(LOADERS)}")
    return LOADERS[name]


def scorer_params(name: str, **overrides) -> dict:
    """Scorer ``name``'s parameters: its defaults with ``overrides`` (None values ignored) applied."""
    return scorer(name).params(**overrides)


def disk_loaders() -> list[str]:
    """The loaders that read rows from disk, whose host-memory budget is a setting."""
    return [name for name, spec in LOADERS.items() if spec.disk]


def hot_tier_loaders() -> list[str]:
    """The loaders with a hot tier, whose share of rows in GPU memory is a setting."""
    return [name for name, spec in LOADERS.items() if spec.hot_tier]


def reordered_loaders() -> list[str]:
    """The loaders that need a dataset reordered hottest-first."""
    return [name for name, spec in LOADERS.items() if spec.reordered]


def _check_reordered(spec: LoaderSpec, dataset) -> None:
    if spec.reordered and dataset.scorer is None:
        raise BadValue(
            f"the {spec.name} loader needs a dataset reordered hottest-first: load it with a scorer "
            "(tierbench train --scorer wrpr, or suite.datasets.reordered.load_reordered)"
        )


def host_table(name: str, dataset, device, progress: bool = True) -> torch.Tensor:
    """The table loader ``name`` is built over: for a zero-copy loader on a GPU, the dataset's table read into memory
    (or the table as it is, where it was made in memory: ``suite.datasets.generated``), else the table as it is."""
    if loader(name).zero_copy and torch.device(device).type == "cuda" and not dataset.features_in_memory:
        return read_into_memory(dataset.features, progress=progress)
    return dataset.features


def check_gpu_memory(name: str, dataset, hot_fraction: float, device) -> None:
    """Refuse loader ``name`` with ``HotTierTooLarge`` if the rows it keeps on CUDA ``device`` exceed its free memory.

    Nothing is checked on a CPU or for loaders that keep no rows on the GPU
    (``cpu-gather``, ``uva``, ``uva-naive``).
    """
    spec = loader(name)
    device = torch.device(device)
    if device.type != "cuda" or not (spec.hot_tier or spec.gpu_share):
        return
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    if not spec.hot_tier:
        rows = hot_rows(dataset.num_nodes, spec.gpu_share)
        check_fits(rows * row_bytes, device, f"the {name} loader's table", f"{rows} rows x {row_bytes} B",
                   f"use a loader with a hot tier ({', '.join(hot_tier_loaders())}) or a smaller dataset")
        return
    rows = hot_rows(dataset.num_nodes, hot_fraction)
    detail = f"{rows} rows x {row_bytes} B"
    slot_map = 0
    if spec.slot_map:
        slot_map = dataset.num_nodes * torch.iinfo(torch.int64).bits // 8
        detail += f" + a {dataset.num_nodes}-entry node -> slot map"
    check_fits(rows * row_bytes + slot_map, device, f"the hot tier of {name}", detail, "lower the hot fraction")


def create_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", *, progress: bool = True,
                  **options) -> FeatureLoader:
    """A loader over ``dataset.features``; ``options`` go to the loader (e.g. ``max_blocks``).

    ``progress`` shows the bar of ``host_table``'s copy (zero-copy loaders on a GPU).
    """
    spec = loader(name)
    device = torch.device(device)
    _check_reordered(spec, dataset)  # before the table is copied
    check_gpu_memory(name, dataset, hot_fraction, device)
    features = host_table(name, dataset, device, progress)
    return spec.build(features, dataset, hot_rows(dataset.num_nodes, hot_fraction), device, **options)


def create_distributed_loader(name: str, dataset, hot_fraction: float = 0.0, device="cpu", *,
                              shm_dir: str = "/dev/shm", progress: bool = True, **options) -> FeatureLoader:
    """The loader of one process of a data-parallel run (every process calls this together).

    A loader with a multi-process form (``tiered``: the multi-GPU combined
    tensor, its host tier in a segment in ``shm_dir``) builds that; every
    other loader is one per process, as in one-GPU runs.
    """
    spec = loader(name)
    if spec.build_distributed is None:
        return create_loader(name, dataset, hot_fraction, device, progress=progress, **options)
    _check_reordered(spec, dataset)
    return spec.build_distributed(dataset, hot_fraction, device, shm_dir=shm_dir, **options)
