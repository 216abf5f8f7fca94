"""Preparing a dataset: build a synthetic preset straight into its cache entry, or convert a real one read through ogb.

Three roads lead into the cache::

    synthetic preset --edges in chunks, twice--> CSR --features, a chunk of rows at a time--> cache entry
    paper-scale preset --torch draws, sorted in parts on the GPU--> CSR --> cache entry without features
    real ogbn-* on disk --ogb's NodePropPredDataset--> convert --> cache entry

The paper-scale (``gpu_built``) presets take the second road (``generate_graph_torch``, the same CSR as the first):
their feature table is made whenever the entry is opened (``suite.datasets.generated``), never written.

A synthetic preset never exists as an edge list or a feature table in
memory.  Every random draw is counter-based (``tiering.rng``), so edge e and
feature row v are the same whichever chunk makes them: the edges are drawn
in chunks of ``EDGE_CHUNK``, once to count every list's length and once more
to place the entries (``CSRGraph.from_edge_chunks``), and the lists are then
sorted and deduplicated where they lie; the features are made and written a
chunk of rows at a time (``write_npy_chunks``, hashing as it writes).  The
arrays are exactly those of the in-memory route the presets were first built
by (``from_edges(...).coalesce()``, one ``synthesize_features`` call:
``tests/suite/datasets/test_build.py`` checks), so older entries stay valid.
The peak is the uncoalesced ``indices`` (int32: 4 bytes per drawn list
entry), the generator's per-node arrays (tens of bytes per node) and one
chunk; ``tierbench datasets cost`` measures it (README, Datasets).

A real dataset is read where the user keeps it, never copied, and checked
on the way in (``ogb_format.read_node_dataset``).  Conversion keeps memory
near the size of what ogb already holds: the CSR is built by a counting sort
over views of ogb's ``edge_index`` rows (one int64 per node of temporaries),
features are written straight from ogb's array, and labels are converted in
place of a copy of one column.  For ogbn-papers100M (1.6B edges, 111M x 128
features) that is about 90 GB at the peak, within a 128 GB machine.
"""

from __future__ import annotations

import datetime
import hashlib
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from suite.datasets import cache, ogb_format
from suite.datasets.dataset import Dataset, dataset_arrays, load_entry, save_arrays
from suite.datasets.dcsbm import block_model
from suite.datasets.dcsbm_torch import TorchBlockModel
from suite.datasets.errors import DatasetFileError
from suite.datasets.generated import manifest_field
from suite.datasets.memory_plan import PART_ENTRIES, check_build, this_machine
from suite.datasets.node_data import (
    NO_LABEL,
    random_splits,
    synthesize_features,
    table_centroids,
    visible_labels,
)
from suite.datasets.presets import Preset, get_preset
from suite.datasets.rmat import id_permutation, rmat_communities, rmat_edges
from suite.datasets.stats import graph_stats
from suite.errors import BadValue
from suite.io.progress import Steps
from tiering.graph.csr import CSRGraph
from tiering.graph.csr_sort import coalesced_csr


def is_real_ogb(name: str) -> bool:
    return name.startswith("ogbn-")


def regenerate_hint(name: str, ogb_root=None) -> str:
    """What to do about a damaged cache entry: build it again."""
    root = f" --ogb-root {ogb_root}" if ogb_root is not None else ""
    return f"Rebuild it with `tierbench datasets generate {name}{root} --force`."


def ogb_source_hint(name: str, meta: dict) -> str:
    """What to do about a real dataset's own files, which no rebuild replaces: tierbench reads them where they lie."""
    return (f"tierbench reads {name} from {meta['dir_path']} in OGB's layout (--ogb-root names the folder above it): "
            f"put a complete copy of OGB's download there.")


def entry_path(name: str, ogb_root=None) -> Path:
    """The cache entry directory of a dataset (it may not exist yet)."""
    if is_real_ogb(name):
        if ogb_root is None:
            raise BadValue(f"{name} is a real OGB dataset: give the directory that holds it (--ogb-root)")
        meta = ogb_format.real_meta_dict(name, ogb_root)
        key = hashlib.sha256(str(Path(meta["dir_path"]).resolve()).encode()).hexdigest()[:12]
    else:
        key = get_preset(name).key()
    return cache.cache_root() / f"{name}-{key}"


# ----------------------------------------------------------------- synthetic
EDGE_CHUNK = 1 << 23
"""Edges drawn at once (two int64 arrays of them: 128 MB)."""
FEATURE_CHUNK_BYTES = 64 << 20
"""Feature rows made and written at once, in bytes."""


def _edge_source(preset: Preset):
    """``(draw, classes)``: ``draw(first, count)`` gives edges ``first`` to ``first + count - 1`` as ``(src, dst)``."""
    n = preset.num_nodes
    seed = preset.sub_seed("graph")
    if preset.generator == "rmat":
        perm = id_permutation(n, seed)  # ids shuffled as shuffle_ids does, a chunk at a time
        classes = np.empty(n, dtype=np.int64)
        classes[perm] = rmat_communities(n, preset.num_classes)

        def draw(first: int, count: int):
            src, dst = rmat_edges(n.bit_length() - 1, count, seed, first=first)
            return np.take(perm, src, out=src), np.take(perm, dst, out=dst)

        return draw, classes
    model = _block_model(preset)
    return model.draw, model.classes


def _block_model(preset: Preset):
    """The DC-SBM preset's classes and propensities (``suite.datasets.dcsbm.block_model``), from its graph seed."""
    return block_model(preset.num_nodes, preset.num_classes, preset.degree_exponent, preset.homophily,
                       preset.class_skew, preset.symmetric, preset.sub_seed("graph"))


def generate_graph(preset: Preset, progress: bool = False):
    """The coalesced graph and the true class of every node; the edges are drawn ``EDGE_CHUNK`` at a time, twice.

    A symmetric preset adds every drawn edge both ways.
    """
    chunk_edges = EDGE_CHUNK
    n = preset.num_nodes
    drawn = preset.drawn_edges
    draw, classes = _edge_source(preset)
    firsts = range(0, drawn, chunk_edges)
    bar = tqdm(total=2 * len(firsts), desc="drawing edges (twice)", unit="chunk", leave=False,
               disable=not progress or len(firsts) < 2)

    def chunks():
        for first in firsts:
            yield draw(first, min(chunk_edges, drawn - first))
            bar.update(1)

    with bar:
        graph = CSRGraph.from_edge_chunks(chunks, n, both_ways=preset.symmetric)
    return graph, classes


def generate_graph_torch(preset: Preset, device, progress: bool = False, part_entries: int | None = None):
    """``generate_graph`` of a DC-SBM preset drawn and sorted on a torch ``device``: the same graph, array for array,
    and the same classes.

    The same edges are drawn (``TorchBlockModel``, ``EDGE_CHUNK`` at a time,
    from the same sub-seed) and their lists are sorted by
    ``tiering.graph.csr_sort.coalesced_csr`` in parts of at most
    ``part_entries`` drawn entries (default: from the device's free memory),
    so a GPU builds papers-100m in a few draws.  R-MAT presets are drawn by
    numba only.
    """
    if preset.generator != "dcsbm":
        raise ValueError(f"{preset.name} is a {preset.generator} preset; only DC-SBM presets are drawn with torch")
    n = preset.num_nodes
    drawn = preset.drawn_edges
    model = _block_model(preset)
    torch_model = TorchBlockModel.from_model(model, device)

    def chunks():
        for first in range(0, drawn, EDGE_CHUNK):
            yield torch_model.draw(first, min(EDGE_CHUNK, drawn - first))

    graph = coalesced_csr(chunks, n, device=device, both_ways=preset.symmetric, part_entries=part_entries,
                          progress=progress)
    return graph, model.classes


def generate_labels(preset: Preset, classes: np.ndarray):
    """``(labels, splits)``: a seeded split of the nodes, and the class of every node in one (-1 elsewhere)."""
    fractions = (preset.train_fraction, preset.valid_fraction, preset.test_fraction)
    splits = random_splits(preset.num_nodes, fractions, preset.sub_seed("splits"))
    return visible_labels(classes, splits), splits


def _features(preset: Preset, graph: CSRGraph, classes: np.ndarray, out=None, first: int = 0, centroids=None):
    return synthesize_features(graph, classes, preset.feature_dim, preset.signal, preset.neighbor_signal,
                               preset.sub_seed("features"), out=out, first=first, centroids=centroids)


def feature_chunks(preset: Preset, graph: CSRGraph, classes: np.ndarray, progress: bool = False):
    """The feature table ``FEATURE_CHUNK_BYTES`` at a time, in order (each chunk is overwritten by the next)."""
    n = preset.num_nodes
    rows = max(1, FEATURE_CHUNK_BYTES // (4 * preset.feature_dim))
    buffer = np.empty((min(rows, n), preset.feature_dim), dtype=np.float32)
    firsts = range(0, n, rows)
    centroids = table_centroids(classes, preset.feature_dim, preset.sub_seed("features"))
    for first in tqdm(firsts, desc="features", unit="chunk", leave=False, disable=not progress or len(firsts) < 2):
        yield _features(preset, graph, classes, out=buffer[: min(rows, n - first)], first=first, centroids=centroids)


def generate_arrays(preset: Preset):
    """``(graph, features, labels, splits)`` of a preset, in memory: the arrays of its cache entry.

    For small presets only (the OGB-layout tests and the conversion benchmark
    write them as OGB files); the cache entry is built without them.
    """
    graph, classes = generate_graph(preset)
    labels, splits = generate_labels(preset, classes)
    return graph, _features(preset, graph, classes), labels, splits


# ---------------------------------------------------------------- conversion
def labels_from_ogb(labels) -> np.ndarray:
    """ogb's (N, 1) label column (int, or float with NaN) as int64 with -1 for no label."""
    column = np.asarray(labels).reshape(len(labels), -1)
    if column.shape[1] != 1:
        raise BadValue(f"tierbench handles single-task node classification; labels have shape {column.shape}")
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
        raise BadValue(f"the edge list of {name}: {err}") from None
    features = np.asarray(graph_dict["node_feat"], dtype=np.float32)
    splits = {k: np.asarray(split[k], dtype=np.int64) for k in ("train", "valid", "test")}
    return graph, features, labels_from_ogb(labels), splits


def _manifest(name: str, source: dict, graph: CSRGraph, feature_dim: int, labels, splits, num_classes: int,
              files: dict):
    return {
        "name": name,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "index_dtype": str(graph.index_dtype).replace("torch.", ""),
        "feature_dim": int(feature_dim),
        "num_classes": num_classes,
        "split_sizes": {k: len(v) for k, v in splits.items()},
        "stats": graph_stats(graph, labels, splits),
        "files": files,
    }


# ------------------------------------------------------------------- prepare
def build_device():
    """Where a ``gpu_built`` preset's edges are drawn and sorted into lists: the GPU, or the CPU where there is none."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _build_synthetic(name: str, partial: Path, progress: bool) -> None:
    """Draw the preset ``name`` into the build directory ``partial``: graph, labels, features (streamed), manifest.

    A ``gpu_built`` preset draws its graph with torch on the GPU (``generate_graph_torch``: the same CSR) and
    writes no feature table (``suite.datasets.generated`` makes it when the entry is opened); its manifest records
    the device and the seconds of each step.
    """
    preset = get_preset(name)
    steps = Steps(name, 4 if preset.gpu_built else 5, progress)
    seconds = {}
    try:
        with steps.step("drawing the graph"):
            start = time.perf_counter()
            if preset.gpu_built:
                device = build_device()
                graph, classes = generate_graph_torch(preset, device, progress,
                                                      part_entries=PART_ENTRIES if device.type == "cuda" else None)
            else:
                graph, classes = generate_graph(preset, progress)
            seconds["graph"] = time.perf_counter() - start
        with steps.step("labels and splits"):
            labels, splits = generate_labels(preset, classes)
        features = {}
        if not preset.gpu_built:
            with steps.step("writing features"):
                shape = (preset.num_nodes, preset.feature_dim)
                chunks = feature_chunks(preset, graph, classes, progress=progress)
                features = {"features.npy": cache.write_npy_chunks(partial / "features.npy", np.float32, shape,
                                                                   chunks)}
        del classes
        with steps.step("writing arrays"):
            start = time.perf_counter()
            arrays = dataset_arrays(graph, None, labels, splits)
            del arrays["features"]  # written above, or made when the entry is opened
            written = save_arrays(partial, **arrays)
            seconds["write"] = time.perf_counter() - start
        with steps.step("checksums"):
            files = {**cache.describe_files(partial, written, progress), **features}
            source = {"kind": "synthetic", "preset": preset.params()}
            manifest = _manifest(name, source, graph, preset.feature_dim, labels, splits, preset.num_classes, files)
            if preset.gpu_built:
                manifest.update(manifest_field(preset), build={"device": str(device), "seconds": seconds})
            cache.write_manifest(partial, manifest)
    finally:
        steps.close()


def _build_real(name: str, ogb_root, partial: Path, progress: bool) -> None:
    """Read the real OGB dataset ``name`` through ogb, check and convert it into the build directory ``partial``."""
    steps = Steps(name, 4, progress)
    try:
        meta = ogb_format.real_meta_dict(name, ogb_root)
        hint = ogb_source_hint(name, meta)
        num_classes = int(meta["num classes"])
        source = {"kind": "ogb", "dir": str(Path(meta["dir_path"]).resolve())}
        with steps.step("reading through ogb"):
            graph_dict, ogb_labels, split = ogb_format.read_node_dataset(meta, hint, cache_processed=True,
                                                                         progress=progress)
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
            cache.write_manifest(partial, _manifest(name, source, graph, features.shape[1], labels, splits, num_classes,
                                                    files))
    finally:
        steps.close()


def _build(name: str, ogb_root, partial: Path, progress: bool) -> None:
    """Write the arrays and the manifest of ``name`` into the build directory ``partial``."""
    if is_real_ogb(name):
        _build_real(name, ogb_root, partial, progress)
    else:
        _build_synthetic(name, partial, progress)


def prepare_dataset(name: str, *, ogb_root=None, force: bool = False, progress: bool = True, on_reuse=None) -> Path:
    """Make sure the cache entry of ``name`` exists; build it if not (or if ``force``).

    Concurrent calls for one entry build it once (``cache.build_entry``);
    ``on_reuse(entry)`` is called when the entry is there already.  A ``gpu_built`` preset (paper scale) is
    refused before anything is allocated when its memory plan does not fit (``suite.datasets.memory_plan``).
    """
    entry = entry_path(name, ogb_root)
    if not is_real_ogb(name) and get_preset(name).gpu_built and (force or not cache.is_complete(entry)):
        check_build(get_preset(name), this_machine(cache.cache_root()))
    return cache.build_entry(entry, lambda partial: _build(name, ogb_root, partial, progress), force=force,
                             on_reuse=on_reuse)


def load_dataset(name: str, *, ogb_root=None, verify: bool = True, progress: bool = True) -> Dataset:
    """The dataset ``name`` from the cache, preparing it first when it is not there.

    ``verify`` checks every file's SHA-256 against the manifest (sizes are
    always checked); a mismatch raises ``DatasetFileError`` naming the file.
    """
    entry = prepare_dataset(name, ogb_root=ogb_root, progress=progress)
    return load_entry(entry, regenerate_hint(name, ogb_root), verify=verify, progress=progress)

