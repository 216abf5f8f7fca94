"""A prepared dataset in memory, and its files in a cache entry.

On disk an entry holds one ``.npy`` file per array (never pickles).  The
feature table and the adjacency lists load memory-mapped copy-on-write: a
table larger than RAM opens instantly and pages in on demand, and the
loaders read from it.  A mapping of the file cannot be pinned in place, so
the zero-copy loaders on a GPU read the table into memory first
(``suite.datasets.host_copy``) and pin that::

    indptr.npy  int64 (N + 1)      indices.npy  int32/int64 (E)
    features.npy  float32 (N, D)   labels.npy  int64 (N), -1 = no label
    train.npy / valid.npy / test.npy  int64 node ids

A reordered entry (``suite.datasets.reordered``) also holds the renumbering
and the scores it came from, in the new order::

    old_to_new.npy / new_to_old.npy  int64 (N)      scores.npy  float64 (N), descending

The paper-scale presets' entries hold no ``features.npy``: their table is made in memory, already where the
zero-copy loaders pin it, each time the entry is opened (``suite.datasets.generated``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from suite.datasets.cache import read_manifest, verify_files
from suite.datasets.errors import DatasetFileError
from suite.datasets.generated import feature_table, is_generated
from suite.io import atomic
from tiering.graph.csr import CSRGraph

SPLITS = ("train", "valid", "test")
ARRAYS = ("indptr", "indices", "features", "labels", *SPLITS)
PERMUTATION_ARRAYS = ("old_to_new", "new_to_old", "scores")
_MEMORY_MAPPED = ("indices", "features")


@dataclasses.dataclass
class Dataset:
    """Graph, node features, labels and splits of one node-classification dataset."""

    name: str
    graph: CSRGraph
    features: torch.Tensor | None  # (N, D) float32 (or float16); None only where asked not to make a generated one
    labels: torch.Tensor  # (N,) int64, -1 where a node has no label
    splits: dict[str, torch.Tensor]  # "train", "valid", "test" -> int64 node ids
    num_classes: int
    manifest: dict = dataclasses.field(default_factory=dict)
    path: Path | None = None
    # set on reordered datasets: node v here is node new_to_old[v] of the dataset it came from
    old_to_new: torch.Tensor | None = None
    new_to_old: torch.Tensor | None = None
    scores: torch.Tensor | None = None  # the scores that ordered it, in the new order
    scorer: str | None = None  # the scorer it is ordered by, hottest first; None: the order it came in

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def feature_dim(self) -> int:
        return self.manifest["feature_dim"] if self.features is None else self.features.shape[1]

    @property
    def features_in_memory(self) -> bool:
        """Whether the feature table was made in memory when the entry was opened, rather than mapped from its
        file: a zero-copy loader can pin it where it is."""
        return is_generated(self.manifest)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        features = "not made" if self.features is None else tuple(self.features.shape)
        return (
            f"Dataset({self.name!r}, nodes={self.num_nodes}, edges={self.graph.num_edges}, "
            f"features={features}, classes={self.num_classes}, {sizes})"
        )


def content_fingerprint(dataset: Dataset) -> str:
    """What names a dataset's content in the files derived from it (traces, partitions): the checksums of its cache
    entry's files."""
    return hashlib.sha256(json.dumps(dataset.manifest.get("files", {}), sort_keys=True).encode()).hexdigest()


def array_file(entry: Path, name: str) -> Path:
    return entry / f"{name}.npy"


def save_arrays(entry: Path, **arrays) -> list[Path]:
    """Write each named array (tensor or numpy) to ``entry/<name>.npy``; returns the files written."""
    paths = []
    for name, value in arrays.items():
        paths.append(array_file(entry, name))
        atomic.save_npy(paths[-1], value.numpy() if isinstance(value, torch.Tensor) else value)
    return paths


def dataset_arrays(graph: CSRGraph, features, labels, splits) -> dict:
    """The arrays ``save_arrays`` writes for a dataset, by file name."""
    return {"indptr": graph.indptr, "indices": graph.indices, "features": features, "labels": labels, **splits}


def _load_npy(path: Path, mmap: bool, hint: str) -> torch.Tensor:
    try:
        array = np.load(path, mmap_mode="c" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise DatasetFileError(f"{path} cannot be read as a .npy array ({err}). {hint}") from None
    return torch.from_numpy(array)


def _check_shapes(entry: Path, manifest: dict, arrays: dict, hint: str) -> None:
    """Each array's shape against the manifest's sizes (read from the ``.npy`` headers, so it costs nothing)."""
    n = manifest["num_nodes"]
    expected = {
        "indptr": (n + 1,),
        "indices": (manifest["num_edges"],),
        "features": (n, manifest["feature_dim"]),
        "labels": (n,),
        **{name: (manifest["split_sizes"].get(name),) for name in SPLITS},
        **{name: (n,) for name in PERMUTATION_ARRAYS},
    }
    for name, array in arrays.items():
        if tuple(array.shape) != expected[name]:
            raise DatasetFileError(
                f"{array_file(entry, name)} has shape {tuple(array.shape)}, "
                f"but the manifest says {expected[name]}. {hint}"
            )


def load_entry(entry: Path, hint: str, verify: bool = True, progress: bool = True,
               make_features: bool = True) -> Dataset:
    """Open a cache entry, checking its files against the manifest first.

    Every file's size and every array's shape is checked; with ``verify``,
    the SHA-256 of every array that is loaded is checked too.  The contents
    were checked once, when the entry was built (``suite.datasets.validate``).
    An entry with no feature table on disk (``suite.datasets.generated``) gets
    one made in memory, or ``None`` when not ``make_features``.
    """
    manifest = read_manifest(entry, hint)
    generated = is_generated(manifest)
    names = tuple(n for n in ARRAYS if not (generated and n == "features"))
    names += tuple(n for n in PERMUTATION_ARRAYS if f"{n}.npy" in manifest["files"])
    missing = [f"{name}.npy" for name in names if f"{name}.npy" not in manifest["files"]]
    if missing:
        raise DatasetFileError(f"{entry / 'manifest.json'} lists no {', '.join(missing)}. {hint}")
    verify_files(entry, manifest, hint, checksums=False)
    if verify:
        loaded = {f"{name}.npy": manifest["files"][f"{name}.npy"] for name in names}
        verify_files(entry, {"files": loaded}, hint, checksums=True, progress=progress)
    arrays = {name: _load_npy(array_file(entry, name), name in _MEMORY_MAPPED, hint) for name in names}
    _check_shapes(entry, manifest, arrays, hint)
    try:
        graph = CSRGraph(arrays["indptr"], arrays["indices"])
    except (ValueError, TypeError) as err:
        raise DatasetFileError(f"{entry / 'indices.npy'}: {err}. {hint}") from None
    if generated:
        arrays["features"] = (feature_table(manifest, graph, arrays.get("new_to_old"), hint, progress)
                              if make_features else None)
    return Dataset(
        name=manifest["name"],
        graph=graph,
        features=arrays["features"],
        labels=arrays["labels"],
        splits={name: arrays[name] for name in SPLITS},
        num_classes=int(manifest["num_classes"]),
        manifest=manifest,
        path=entry,
        **{name: arrays[name] for name in PERMUTATION_ARRAYS if name in arrays},
        scorer=manifest["source"].get("scorer") if manifest["source"].get("kind") == "reordered" else None,
    )
