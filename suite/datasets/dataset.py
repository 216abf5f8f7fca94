"""A prepared dataset in memory, and its files in a cache entry.

On disk an entry holds one ``.npy`` file per array (never pickles), which
load memory-mapped: a feature table larger than RAM opens instantly and pages
in on demand, and the later tiers (pinned host memory, GPU) read from it::

    indptr.npy  int64 (N + 1)      indices.npy  int32/int64 (E)
    features.npy  float32 (N, D)   labels.npy  int64 (N), -1 = no label
    train.npy / valid.npy / test.npy  int64 node ids
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from tiering.graph import CSRGraph

from .. import atomic
from .cache import read_manifest, verify_files
from .errors import DatasetFileError

SPLITS = ("train", "valid", "test")
_MEMORY_MAPPED = ("indices", "features")


@dataclasses.dataclass
class Dataset:
    """Graph, node features, labels and splits of one node-classification dataset."""

    name: str
    graph: CSRGraph
    features: torch.Tensor  # (N, D) float32
    labels: torch.Tensor  # (N,) int64, -1 where a node has no label
    splits: dict[str, torch.Tensor]  # "train", "valid", "test" -> int64 node ids
    num_classes: int
    manifest: dict = dataclasses.field(default_factory=dict)
    path: Path | None = None

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def feature_dim(self) -> int:
        return self.features.shape[1]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        return (
            f"Dataset({self.name!r}, nodes={self.num_nodes}, edges={self.graph.num_edges}, "
            f"features={tuple(self.features.shape)}, classes={self.num_classes}, {sizes})"
        )


def array_files(entry: Path) -> dict[str, Path]:
    names = ("indptr", "indices", "features", "labels", *SPLITS)
    return {name: entry / f"{name}.npy" for name in names}


def save_arrays(entry: Path, graph: CSRGraph, features, labels, splits) -> list[Path]:
    """Write the arrays of a dataset into ``entry``; returns the files written."""
    files = array_files(entry)
    arrays = {"indptr": graph.indptr, "indices": graph.indices, "features": features, "labels": labels, **splits}
    for name, path in files.items():
        value = arrays[name]
        atomic.save_npy(path, value.numpy() if isinstance(value, torch.Tensor) else value)
    return list(files.values())


def _load_npy(path: Path, mmap: bool, hint: str) -> torch.Tensor:
    try:
        array = np.load(path, mmap_mode="c" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise DatasetFileError(f"{path} cannot be read as a .npy array ({err}). {hint}") from None
    return torch.from_numpy(array)


def load_entry(entry: Path, hint: str, verify: bool = True, progress: bool = True) -> Dataset:
    """Open a cache entry, checking its files against the manifest first.

    Every file's size is checked; with ``verify``, the SHA-256 of every array
    that is loaded is checked too (the OGB files are not read again after
    conversion, so hashing them on every load would only cost time).
    """
    manifest = read_manifest(entry, hint)
    verify_files(entry, manifest, hint, checksums=False)
    if verify:
        loaded = {name: manifest["files"][name] for name in (p.name for p in array_files(entry).values())}
        verify_files(entry, {"files": loaded}, hint, checksums=True, progress=progress)
    arrays = {name: _load_npy(path, name in _MEMORY_MAPPED, hint) for name, path in array_files(entry).items()}
    graph = CSRGraph(arrays["indptr"], arrays["indices"])
    return Dataset(
        name=manifest["name"],
        graph=graph,
        features=arrays["features"],
        labels=arrays["labels"],
        splits={name: arrays[name] for name in SPLITS},
        num_classes=int(manifest["num_classes"]),
        manifest=manifest,
        path=entry,
    )
