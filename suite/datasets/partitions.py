"""A dataset's METIS partitions, computed once and kept in the dataset cache (SAR).

``cached_partition(dataset, parts)`` returns the partition of the dataset's
graph into ``parts`` parts (``baselines.sar.metis.metis_partition``) from
``<cache root>/partitions``, computing and writing it there (a temporary file
renamed into place, under a lock, so two runs compute it once and a killed
run leaves no partial file) when it is not there yet.  The file name holds
the dataset's name, the checksums of its files, the number of parts and the
seed: a regenerated dataset gets a partition of its own.

A partition file is validated where it enters: a ``.npy`` of integers (never
a pickle), one per node of the graph, each a part in range; any other file
is refused by name.
"""

from __future__ import annotations

import time
from pathlib import Path

import filelock
import numpy as np

from baselines.sar.metis import Partition, metis_partition
from suite.datasets.cache import cache_root
from suite.datasets.dataset import content_fingerprint
from suite.datasets.errors import DatasetFileError
from suite.io import atomic


def partition_directory() -> Path:
    return cache_root() / "partitions"


def partition_path(dataset, num_parts: int, seed: int = 0, directory=None) -> Path:
    directory = Path(directory) if directory else partition_directory()
    return directory / f"{dataset.name}-{content_fingerprint(dataset)[:16]}-metis-{num_parts}-seed{seed}.npy"


def load_partition(path, num_nodes: int, num_parts: int) -> Partition:
    """The partition in ``path``, checked against a graph of ``num_nodes`` nodes split into ``num_parts`` parts."""
    path = Path(path)
    try:
        parts = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DatasetFileError(f"partition file {path} cannot be read as a .npy array ({err})") from None
    if parts.ndim != 1 or not np.issubdtype(parts.dtype, np.integer):
        raise DatasetFileError(f"partition file {path} holds a {parts.dtype} array of shape {parts.shape}, not one "
                               "part number per node")
    if len(parts) != num_nodes:
        raise DatasetFileError(f"partition file {path} has parts for {len(parts):,} nodes; the graph has "
                               f"{num_nodes:,}")
    if len(parts) and (parts.min() < 0 or parts.max() >= num_parts):
        raise DatasetFileError(f"partition file {path} names parts {int(parts.min())}..{int(parts.max())}, outside "
                               f"0..{num_parts - 1}")
    return Partition(parts.astype(np.int32, copy=False), num_parts)


def cached_partition(dataset, num_parts: int, seed: int = 0, *, directory=None) -> tuple[Partition, Path, float]:
    """``(partition, its file, seconds METIS took)`` (0 when the file was there already)."""
    path = partition_path(dataset, num_parts, seed, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{path}.lock"):
        if path.is_file():
            return load_partition(path, dataset.num_nodes, num_parts), path, 0.0
        start = time.perf_counter()
        partition = metis_partition(dataset.graph, num_parts, seed)
        seconds = time.perf_counter() - start
        atomic.save_npy(path, partition.parts)
    return partition, path, seconds
