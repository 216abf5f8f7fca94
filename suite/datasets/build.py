"""Preparing a dataset: generate or locate it, read it through ogb, convert, cache.

Both kinds of dataset take the same road from OGB files to the cache::

    synthetic preset --generate--> OGB layout --ogb's NodePropPredDataset--> convert --> cache entry
    real ogbn-* on disk ---------------------> ogb's NodePropPredDataset--> convert --> cache entry

so the converter that turns ogb's arrays into a ``CSRGraph`` plus feature,
label and split arrays is exercised by every synthetic dataset in CI.  The
arrays are checked on the way in (``ogb_format.read_node_dataset``), once.

The OGB files of a synthetic dataset are scratch: they are written inside
the entry's build directory, read back once, and deleted, since nothing
reads them after the conversion (for products-s they are 270 MB).  A real
dataset is read where the user keeps it and never copied.

Conversion keeps memory near the size of what ogb already holds: the CSR is
built by a counting sort over views of ogb's ``edge_index`` rows (one int64
per node of temporaries), features are written straight from ogb's array, and
labels are converted in place of a copy of one column.  For ogbn-papers100M
(1.6B edges, 111M x 128 features) that is about 90 GB at the peak, within a
128 GB machine.
"""

from __future__ import annotations

import datetime
import hashlib
import shutil
import zlib
from pathlib import Path

import numpy as np

from suite.datasets import cache, ogb_format
from suite.datasets.dataset import Dataset, dataset_arrays, load_entry, save_arrays
from suite.datasets.dcsbm import dcsbm_edges
from suite.datasets.errors import DatasetFileError
from suite.datasets.node_data import (
    NO_LABEL,
    random_splits,
    synthesize_features,
    visible_labels,
)
from suite.datasets.presets import Preset, get_preset
from suite.datasets.rmat import rmat_communities, rmat_edges, shuffle_ids
from suite.datasets.stats import graph_stats
from suite.io.progress import Steps
from tiering.graph import CSRGraph


def is_real_ogb(name: str) -> bool:
    return name.startswith("ogbn-")


def regenerate_hint(name: str, ogb_root=None) -> str:
    root = f" --ogb-root {ogb_root}" if ogb_root is not None else ""
    return f"Rebuild it with `tierbench datasets generate {name}{root} --force`."


def entry_path(name: str, ogb_root=None) -> Path:
    """The cache entry directory of a dataset (it may not exist yet)."""
    if is_real_ogb(name):
        if ogb_root is None:
            raise ValueError(f"{name} is a real OGB dataset: give the directory that holds it (--ogb-root)")
        meta = ogb_format.real_meta_dict(name, ogb_root)
        key = hashlib.sha256(str(Path(meta["dir_path"]).resolve()).encode()).hexdigest()[:12]
    else:
        key = get_preset(name).key()
    return cache.cache_root() / f"{name}-{key}"


def _sub_seed(seed: int, purpose: str) -> int:
    """Independent seeds for the independent random parts of one dataset."""
    return int(np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]).generate_state(1, np.uint64)[0])


# ----------------------------------------------------------------- synthetic
def generate_graph(preset: Preset):
    """The coalesced graph and the true class of every node."""
    n = preset.num_nodes
    drawn = int(round(n * preset.avg_degree / (2 if preset.symmetric else 1)))
    seed = _sub_seed(preset.seed, "graph")
    if preset.generator == "rmat":
        src, dst = rmat_edges(n.bit_length() - 1, drawn, seed)
        src, dst, classes = shuffle_ids(src, dst, rmat_communities(n, preset.num_classes), seed)
    else:
        src, dst, classes = dcsbm_edges(
            n, drawn, preset.num_classes, preset.degree_exponent, preset.homophily,
            preset.class_skew, preset.symmetric, seed,
        )
    if preset.symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    graph = CSRGraph.from_edges(src, dst, n)
    del src, dst  # the edge list is the largest array alive here
    return graph.coalesce(drop_self_loops=True), classes


def generate_arrays(preset: Preset):
    """``(graph, features, labels, splits)`` of a preset, exactly as they are written to OGB files."""
    graph, classes = generate_graph(preset)
    fractions = (preset.train_fraction, preset.valid_fraction, preset.test_fraction)
    splits = random_splits(preset.num_nodes, fractions, _sub_seed(preset.seed, "splits"))
    features = synthesize_features(
        graph, classes, preset.feature_dim, preset.signal, preset.neighbor_signal, _sub_seed(preset.seed, "features")
    )
    return graph, features, visible_labels(classes, splits), splits


# ---------------------------------------------------------------- conversion
def labels_from_ogb(labels) -> np.ndarray:
    """ogb's (N, 1) label column (int, or float with NaN) as int64 with -1 for no label."""
    column = np.asarray(labels).reshape(len(labels), -1)
    if column.shape[1] != 1:
        raise ValueError(f"tierbench handles single-task node classification; labels have shape {column.shape}")
    column = column[:, 0]
    if column.dtype.kind == "f":
        out = np.full(len(column), NO_LABEL, dtype=np.int64)
        known = ~np.isnan(column)
        out[known] = column[known].astype(np.int64)
        return out
    return column.astype(np.int64)


def convert_ogb(graph_dict, labels, split, name: str):
    """ogb's arrays, checked by ``read_node_dataset`` -> (CSRGraph, float32 features, int64 labels, int64 splits)."""
    try:
        graph = CSRGraph.from_ogb(graph_dict["edge_index"], int(graph_dict["num_nodes"]))
    except TypeError as err:  # ids that are not integers
        raise ValueError(f"the edge list of {name}: {err}") from None
    features = np.asarray(graph_dict["node_feat"], dtype=np.float32)
    splits = {k: np.asarray(split[k], dtype=np.int64) for k in ("train", "valid", "test")}
    return graph, features, labels_from_ogb(labels), splits


def _manifest(name: str, source: dict, graph: CSRGraph, features, labels, splits, num_classes: int, files: dict):
    return {
        "name": name,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "index_dtype": str(graph.index_dtype).replace("torch.", ""),
        "feature_dim": int(features.shape[1]),
        "num_classes": num_classes,
        "split_sizes": {k: len(v) for k, v in splits.items()},
        "stats": graph_stats(graph, labels, splits),
        "files": files,
    }


# ------------------------------------------------------------------- prepare
def _build(name: str, ogb_root, partial: Path, progress: bool) -> None:
    """Write the arrays and the manifest of ``name`` into the build directory ``partial``."""
    hint = regenerate_hint(name, ogb_root)
    real = is_real_ogb(name)
    steps = Steps(name, 4 if real else 6, progress)
    try:
        if real:
            meta = ogb_format.real_meta_dict(name, ogb_root)
            num_classes = int(meta["num classes"])
            source = {"kind": "ogb", "dir": str(Path(meta["dir_path"]).resolve())}
        else:
            preset = get_preset(name)
            scratch = partial / "ogb"
            with steps.step("generating graph and features"):
                graph, features, labels, splits = generate_arrays(preset)
            with steps.step("writing OGB files"):
                ogb_dir = scratch / name.replace("-", "_")
                ogb_format.write_node_dataset(ogb_dir, graph.to_edge_index(), features, labels, splits)
                del graph, features, labels, splits
            meta = ogb_format.synthetic_meta_dict(ogb_dir, f"tierbench-{name}", preset.num_classes)
            num_classes = preset.num_classes
            source = {"kind": "synthetic", "preset": preset.params()}
        with steps.step("reading through ogb"):
            graph_dict, ogb_labels, split = ogb_format.read_node_dataset(
                meta, hint, cache_processed=real, progress=progress
            )
            if not real:
                shutil.rmtree(scratch)  # ogb's arrays are in memory; nothing reads the files again
        with steps.step("converting to CSR"):
            try:
                graph, features, labels, splits = convert_ogb(graph_dict, ogb_labels, split, name)
            except ValueError as err:  # the edge list: ids out of range, or not integers
                raise DatasetFileError(f"{meta['dir_path']} holds a malformed edge list: {err}. {hint}") from None
            del graph_dict, ogb_labels
        with steps.step("writing arrays"):
            written = save_arrays(partial, **dataset_arrays(graph, features, labels, splits))
        with steps.step("checksums"):
            files = cache.describe_files(partial, written, progress)
            cache.write_manifest(partial, _manifest(name, source, graph, features, labels, splits, num_classes, files))
    finally:
        steps.close()


def prepare_dataset(name: str, *, ogb_root=None, force: bool = False, progress: bool = True) -> Path:
    """Make sure the cache entry of ``name`` exists; build it if not (or if ``force``).

    Concurrent calls for one entry build it once (``cache.build_entry``).
    """
    entry = entry_path(name, ogb_root)
    return cache.build_entry(entry, lambda partial: _build(name, ogb_root, partial, progress), force=force)


def load_dataset(name: str, *, ogb_root=None, verify: bool = True, progress: bool = True) -> Dataset:
    """The dataset ``name`` from the cache, preparing it first when it is not there.

    ``verify`` checks every file's SHA-256 against the manifest (sizes are
    always checked); a mismatch raises ``DatasetFileError`` naming the file.
    """
    entry = prepare_dataset(name, ogb_root=ogb_root, progress=progress)
    return load_entry(entry, regenerate_hint(name, ogb_root), verify=verify, progress=progress)

