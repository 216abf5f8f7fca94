"""A dataset's METIS partitions, computed once and kept in the dataset cache (SAR).

``cached_partition(dataset, parts)`` returns the partition of the dataset's
graph into ``parts`` parts (``baselines.sar.metis.metis_partition``) from
``<cache root>/partitions``, computing and writing it there (a temporary file
renamed into place, under a lock, so two runs compute it once and a killed
run leaves no partial file) when it is not there yet.  The file name holds
the dataset's name, the checksums of its files, the number of parts and the
seed: a regenerated dataset gets a partition of its own.

A partition file is validated where it enters: an ``.npz`` (never a pickle)
of the parts, integers, one per node of the graph, each a part in range and
every part holding a node, and of what they were computed from (the
dataset, its fingerprint, the number of parts and the seed), which must be
what is asked for; any other file is refused by name.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import filelock
import numpy as np

from baselines.sar.metis import Partition, metis_partition
from suite.datasets.cache import cache_root, check_writable
from suite.datasets.dataset import content_fingerprint
from suite.datasets.errors import DatasetFileError
from suite.errors import BadValue
from suite.io import atomic


def partition_directory() -> Path:
    return cache_root() / "partitions"


def partition_path(dataset, num_parts: int, seed: int = 0, directory=None) -> Path:
    directory = Path(directory) if directory else partition_directory()
    return directory / f"{dataset.name}-{content_fingerprint(dataset)[:16]}-metis-{num_parts}-seed{seed}.npz"


def partition_meta(dataset, num_parts: int, seed: int) -> dict:
    """What a partition file says it was computed from."""
    return {"dataset": dataset.name, "fingerprint": content_fingerprint(dataset), "num_parts": num_parts, "seed": seed}


def load_partition(path, num_nodes: int, num_parts: int, expect: dict | None = None) -> Partition:
    """The partition in ``path``, checked against a graph of ``num_nodes`` nodes split into ``num_parts`` parts, and
    against what it must say it was computed from (``expect``, a ``partition_meta``)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if sorted(archive.files) != ["meta", "parts"]:
                raise DatasetFileError(f"partition file {path} holds {sorted(archive.files)}, not the parts and "
                                       "what they were computed from")
            parts, meta = archive["parts"], json.loads(str(archive["meta"]))
    except (OSError, ValueError, EOFError, AttributeError) as err:  # AttributeError: one array, not an archive
        raise DatasetFileError(f"partition file {path} cannot be read as a .npz archive ({err})") from None
    for key, value in (expect or {}).items():
        if not isinstance(meta, dict) or meta.get(key) != value:
            found = meta.get(key) if isinstance(meta, dict) else None
            raise DatasetFileError(f"partition file {path} was computed with {key} {found!r}, not {value!r}: it is "
                                   "the partition of something else (remove it, and it is computed again)")
    if parts.ndim != 1 or not np.issubdtype(parts.dtype, np.integer):
        raise DatasetFileError(f"partition file {path} holds a {parts.dtype} array of shape {parts.shape}, not one "
                               "part number per node")
    if len(parts) != num_nodes:
        raise DatasetFileError(f"partition file {path} has parts for {len(parts):,} nodes; the graph has "
                               f"{num_nodes:,}")
    if len(parts) and (parts.min() < 0 or parts.max() >= num_parts):
        raise DatasetFileError(f"partition file {path} names parts {int(parts.min())}..{int(parts.max())}, outside "
                               f"0..{num_parts - 1}")
    empty = np.flatnonzero(np.bincount(parts, minlength=num_parts) == 0) if len(parts) >= num_parts else []
    if len(empty):
        raise DatasetFileError(f"partition file {path} leaves part {int(empty[0])} of {num_parts} without a node")
    return Partition(parts.astype(np.int32, copy=False), num_parts)


def cached_partition(dataset, num_parts: int, seed: int = 0, *, directory=None) -> tuple[Partition, Path, float]:
    """``(partition, its file, seconds METIS took)`` (0 when the file was there already)."""
    path = partition_path(dataset, num_parts, seed, directory)
    meta = partition_meta(dataset, num_parts, seed)
    if path.is_file():  # written whole (renamed into place): read without the lock, which a read-only cache refuses
        return load_partition(path, dataset.num_nodes, num_parts, expect=meta), path, 0.0
    check_writable(path.parent, f"the partition {path.name} ({num_parts} parts)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{path}.lock"):
        if path.is_file():
            return load_partition(path, dataset.num_nodes, num_parts, expect=meta), path, 0.0
        start = time.perf_counter()
        try:
            partition = metis_partition(dataset.graph, num_parts, seed)
        except ValueError as err:  # more parts than nodes: the number of workers the user asked for
            raise BadValue(f"{dataset.name}: {err}; give fewer workers (--workers)") from None
        seconds = time.perf_counter() - start
        with atomic.atomic_path(path) as tmp, open(tmp, "wb") as out:
            np.savez(out, parts=partition.parts, meta=np.array(json.dumps(meta, sort_keys=True)))
    return partition, path, seconds
