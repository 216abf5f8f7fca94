"""Checks of a dataset's arrays as ogb hands them over, run once when a dataset is built or imported.

Opening a cache entry stays cheap (sizes, checksums and shapes against the
manifest); the full checks run here, on the way in, where a bad source file
can still be named::

    features   a (N, D) numeric table, N = the dataset's node count, every value finite
    labels     N single-task labels in [0, num_classes); -1 (or NaN) marks a node without one
    splits     integer node ids in [0, N), each of a labelled node; the train split is not empty

Every failure is a ``DatasetFileError`` naming the file and the rebuild command.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from suite.datasets.dataset import SPLITS
from suite.datasets.errors import DatasetFileError

_CHUNK_BYTES = 64 << 20
_PROGRESS_BYTES = 1 << 30  # show a progress bar when checking a larger feature table


def check_features(features, num_nodes: int, source: Path, hint: str, progress: bool = True) -> None:
    """A (num_nodes, D) numeric table without NaN or infinity, checked a chunk of rows at a time."""
    if features is None:
        raise DatasetFileError(f"{source} holds no node features; tierbench needs a feature table. {hint}")
    features = np.asarray(features)
    if features.ndim != 2 or features.dtype.kind not in "fiu":
        raise DatasetFileError(
            f"{source}: the features must be a 2-D numeric table, "
            f"got shape {features.shape} of {features.dtype}. {hint}"
        )
    if features.shape[0] != num_nodes:
        raise DatasetFileError(f"{source} holds {features.shape[0]} feature rows for {num_nodes} nodes. {hint}")
    if features.dtype.kind != "f":
        return
    rows = max(1, _CHUNK_BYTES // max(features.strides[0], 1))
    with tqdm(total=features.nbytes, unit="B", unit_scale=True, desc="checking features", leave=False,
              disable=not progress or features.nbytes < _PROGRESS_BYTES) as bar:
        for start in range(0, num_nodes, rows):
            chunk = features[start : start + rows]
            finite = np.isfinite(chunk).all(axis=1)
            if not finite.all():
                row = start + int(np.flatnonzero(~finite)[0])
                raise DatasetFileError(f"{source}: feature row {row} holds NaN or infinity. {hint}")
            bar.update(chunk.nbytes)


def check_labels(labels, num_nodes: int, num_classes: int, source: Path, hint: str) -> np.ndarray:
    """ogb's label column checked; returns which nodes have a label."""
    column = np.asarray(labels)
    if column.ndim == 2 and column.shape[1] == 1:
        column = column[:, 0]
    if column.ndim != 1:
        raise DatasetFileError(
            f"{source}: tierbench handles single-task node classification; labels have shape {np.shape(labels)}. {hint}"
        )
    if len(column) != num_nodes:
        raise DatasetFileError(f"{source} holds {len(column)} labels for {num_nodes} nodes. {hint}")
    if column.dtype.kind == "f":
        known = ~np.isnan(column)
        bad = known & ((column != np.floor(column)) | (column < 0) | (column >= num_classes))
    elif column.dtype.kind in "iu":
        known = column >= 0
        bad = (column < -1) | (column >= num_classes)
    else:
        raise DatasetFileError(f"{source}: labels must be integers (or floats with NaN), got {column.dtype}. {hint}")
    if bad.any():
        node = int(np.flatnonzero(bad)[0])
        raise DatasetFileError(
            f"{source}: node {node} has label {column[node]}, outside [0, {num_classes}) "
            f"(-1 or NaN marks a node without a label). {hint}"
        )
    return known


def check_splits(split: dict, num_nodes: int, labelled: np.ndarray, sources: dict[str, Path], hint: str) -> None:
    """Integer ids of labelled nodes in [0, num_nodes); a non-empty train split."""
    for name in SPLITS:
        source = sources[name]
        if name not in split:
            raise DatasetFileError(f"{source}: ogb returned no {name} split. {hint}")
        ids = np.asarray(split[name])
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise DatasetFileError(
                f"{source}: the {name} split must be a list of integer node ids, "
                f"got shape {ids.shape} of {ids.dtype}. {hint}"
            )
        if name == "train" and len(ids) == 0:
            raise DatasetFileError(f"{source}: the train split is empty; training needs labelled nodes. {hint}")
        outside = (ids < 0) | (ids >= num_nodes)
        if outside.any():
            raise DatasetFileError(
                f"{source}: node id {ids[np.flatnonzero(outside)[0]]} is outside [0, {num_nodes}). {hint}"
            )
        unlabelled = ~labelled[ids]
        if unlabelled.any():
            raise DatasetFileError(
                f"{source}: node {ids[np.flatnonzero(unlabelled)[0]]} is in the {name} split but has no label. {hint}"
            )


def check_ogb_arrays(graph_dict, labels, split, num_classes: int, sources: dict[str, Path], hint: str,
                     progress: bool = True) -> None:
    """Features, labels and splits as ``NodePropPredDataset`` returned them, against the node count."""
    num_nodes = int(graph_dict["num_nodes"])
    check_features(graph_dict.get("node_feat"), num_nodes, sources["features"], hint, progress)
    labelled = check_labels(labels, num_nodes, num_classes, sources["labels"], hint)
    check_splits(split, num_nodes, labelled, sources, hint)
