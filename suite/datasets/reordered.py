"""Reordered datasets: a prepared dataset renumbered by a scorer, cached beside it (Data Tiering §3).

``prepare_reordered("papers-s", "wrpr")`` loads the base dataset (checking
its checksums), scores its nodes, reorders the graph, permutes features and
labels, renames the splits, and writes the result as a cache entry of its
own with ``old_to_new``, ``new_to_old`` and the scores.  The entry's key
hashes the base dataset's content checksums, the scorer and its parameters,
so a changed dataset or parameter makes a new entry, and an existing one is
reused.

Features are permuted file to file without holding either table: the new
table is made in parts of ``PERMUTE_PART_BYTES`` or more (at most
``PERMUTE_MAX_PARTS`` of them), each filled by one sequential read of the
old table, and written and hashed part by part (``write_npy_chunks``).
Neither file is memory-mapped: pages of a mapped file count in the process's
resident memory, and a random row read through a mapping maps the whole
cached folio around it, so a mapped gather would take the entire old table
into resident memory however small its chunks.  Memory: one part and one
read block, besides the graph and the permutation.

A paper-scale entry (``suite.datasets.generated``) has no feature table to permute: the reordered entry records
that its table is generated too, and opening it makes the table straight in the new order.

The weighted scorer takes the training split as its labelled set: training
minibatches start there (Data Tiering §3.1).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from pathlib import Path

import numba
import numpy as np
import torch
from tqdm.auto import tqdm

from suite.datasets import cache
from suite.datasets.build import entry_path, prepare_dataset, regenerate_hint
from suite.datasets.dataset import (
    Dataset,
    array_file,
    dataset_arrays,
    load_entry,
    save_arrays,
)
from suite.datasets.errors import DatasetFileError
from suite.datasets.generated import FIELD, is_generated
from suite.datasets.stats import graph_stats, top_share
from suite.io.progress import Steps
from tiering.graph.reorder import map_ids, permute_rows, reorder_graph
from tiering.graph.scores import get_scorer

PERMUTE_PART_BYTES = 256 << 20
"""Smallest part of the new feature table made per sequential read of the old one."""
PERMUTE_MAX_PARTS = 8
"""Most sequential reads of the old feature table (larger tables get larger parts)."""
_READ_BLOCK_BYTES = 64 << 20


@numba.njit(parallel=True, cache=True)
def _place_rows(block, first, old_to_new, lo, part):
    """Row ``first + i`` of the old table (``block[i]``) goes to row ``old_to_new[first + i] - lo`` of ``part``, if any."""
    for i in numba.prange(block.shape[0]):
        row = old_to_new[first + i] - lo
        if 0 <= row < part.shape[0]:
            part[row] = block[i]


def _read_exactly(f, view: memoryview, path: Path) -> None:
    done = 0
    while done < len(view):
        got = f.readinto(view[done:])
        if not got:
            raise DatasetFileError(f"{path} ends early: it is shorter than its header says")
        done += got


def permuted_rows(path: Path, old_to_new: np.ndarray, progress: bool = False):
    """The rows of the ``.npy`` table at ``path`` in the new order (new row ``old_to_new[v]`` is old row v), a part
    at a time, in order; each part is filled by one sequential read of the file and overwritten by the next."""
    header = np.load(path, mmap_mode="r")  # only the header is read: shape, type and where the rows start
    shape, dtype, offset = header.shape, header.dtype, header.offset
    del header
    n = shape[0]
    row_bytes = max(1, int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize)
    part_rows = max(1, PERMUTE_PART_BYTES // row_bytes, -(-n // PERMUTE_MAX_PARTS))
    block_rows = max(1, _READ_BLOCK_BYTES // row_bytes)
    part = np.empty((min(part_rows, n), *shape[1:]), dtype=dtype)
    block = np.empty((min(block_rows, n), *shape[1:]), dtype=dtype)
    los = range(0, n, part_rows)
    with tqdm(total=len(los) * n * row_bytes, unit="B", unit_scale=True, desc="permuting rows", leave=False,
              disable=not progress or len(los) * n * row_bytes < (1 << 30)) as bar:
        for lo in los:
            rows = part[: min(part_rows, n - lo)]
            with open(path, "rb") as f:
                f.seek(offset)
                for first in range(0, n, block_rows):
                    chunk = block[: min(block_rows, n - first)]
                    _read_exactly(f, memoryview(chunk).cast("B"), path)
                    _place_rows(chunk, first, old_to_new, lo, rows)
                    bar.update(chunk.nbytes)
            yield rows


def score_nodes(dataset: Dataset, scorer: str, params: dict) -> torch.Tensor:
    """Scores of ``dataset``'s nodes by ``scorer``; a scorer that needs labels gets the training split."""
    return get_scorer(scorer).score(dataset.graph, dataset.splits["train"], **params)


def _content_key(base_manifest: dict, scorer: str, params: dict) -> str:
    files = {name: record["sha256"] for name, record in sorted(base_manifest["files"].items()) if name.endswith(".npy")}
    blob = json.dumps({"base": files, "scorer": scorer, "params": params}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def reordered_hint(name: str, scorer: str, ogb_root=None) -> str:
    root = f" --ogb-root {ogb_root}" if ogb_root is not None else ""
    return f"Rebuild it with `tierbench prepare --dataset {name} --scorer {scorer}{root} --force`."


def _build(base_entry: Path, hint: str, name: str, scorer: str, params: dict, partial: Path, progress: bool) -> None:
    """Score, reorder and permute the base entry into the build directory ``partial``."""
    base = load_entry(base_entry, hint, verify=True, progress=progress, make_features=False)
    generated = is_generated(base.manifest)  # no table to permute: it is made in the new order when opened
    steps = Steps(f"{name} by {scorer}", 4 if generated else 5, progress)
    try:
        with steps.step(f"scoring ({scorer})"):
            start = time.perf_counter()
            scores = score_nodes(base, scorer, params)
            score_seconds = time.perf_counter() - start
        with steps.step("reordering the graph"):
            start = time.perf_counter()
            graph, old_to_new, new_to_old = reorder_graph(base.graph, scores)
            reorder_seconds = time.perf_counter() - start
        features = {}
        if not generated:
            with steps.step("permuting features"):
                parts = permuted_rows(array_file(base_entry, "features"), old_to_new.numpy(), progress=progress)
                table = base.features.numpy()  # the memory-mapped old table, for its shape and type (nothing is read)
                features = {"features.npy": cache.write_npy_chunks(array_file(partial, "features"), table.dtype,
                                                                    table.shape, parts)}
                del table
        with steps.step("writing arrays"):
            labels = permute_rows(base.labels, new_to_old)
            splits = {k: map_ids(v, old_to_new) for k, v in base.splits.items()}
            arrays = dataset_arrays(graph, None, labels, splits)
            del arrays["features"]  # written above
            written = save_arrays(partial, **arrays, old_to_new=old_to_new, new_to_old=new_to_old, scores=scores[new_to_old])
        with steps.step("checksums"):
            manifest = {
                "name": name,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "source": {
                    "kind": "reordered",
                    "base_entry": base_entry.name,
                    "base_source": base.manifest["source"],
                    "scorer": scorer,
                    "params": params,
                    "score_seconds": score_seconds,
                    "reorder_seconds": reorder_seconds,
                },
                "num_nodes": graph.num_nodes,
                "num_edges": graph.num_edges,
                "index_dtype": base.manifest["index_dtype"],
                "feature_dim": base.feature_dim,
                "num_classes": base.num_classes,
                "split_sizes": {k: len(v) for k, v in splits.items()},
                "stats": graph_stats(graph, labels.numpy(), splits),
                "score_mass_top10": top_share(scores.numpy(), 0.10),
                "score_mass_top25": top_share(scores.numpy(), 0.25),
                "files": {**cache.describe_files(partial, written, progress), **features},
            }
            if generated:
                manifest[FIELD] = base.manifest[FIELD]
            cache.write_manifest(partial, manifest)
    finally:
        steps.close()


def reordered_entry_path(name: str, scorer: str, params: dict, base_entry: Path, hint: str) -> Path:
    """The entry directory of ``name`` (built in ``base_entry``) reordered by ``scorer`` with ``params`` (it may not
    exist yet)."""
    return cache.cache_root() / f"{name}.{scorer}-{_content_key(cache.read_manifest(base_entry, hint), scorer, params)}"


def is_prepared(name: str, scorer: str, params: dict | None = None) -> bool:
    """Whether the dataset cache holds the generated dataset ``name`` reordered by ``scorer`` with ``params``, complete
    (both its entries' manifests are there); nothing is built, verified or read beyond the base entry's manifest."""
    base_entry = entry_path(name)
    if not cache.is_complete(base_entry):
        return False
    params = get_scorer(scorer).params(**(params or {}))
    return cache.is_complete(reordered_entry_path(name, scorer, params, base_entry, regenerate_hint(name)))


def prepare_reordered(
    name: str, scorer: str, params: dict | None = None, *, ogb_root=None, force: bool = False, progress: bool = True,
    on_reuse=None,
) -> Path:
    """Make sure the reordered entry exists (build it if not, or if ``force``); returns its directory.

    ``on_reuse(entry)`` is called when the reordered entry is there already.
    """
    params = get_scorer(scorer).params(**(params or {}))
    base_entry = prepare_dataset(name, ogb_root=ogb_root, progress=progress)
    hint = regenerate_hint(name, ogb_root)
    entry = reordered_entry_path(name, scorer, params, base_entry, hint)
    return cache.build_entry(
        entry, lambda partial: _build(base_entry, hint, name, scorer, params, partial, progress), force=force,
        on_reuse=on_reuse,
    )


def load_reordered(name: str, scorer: str, params: dict | None = None, *, ogb_root=None, verify=True, progress=True) -> Dataset:
    """The dataset renumbered by ``scorer``, preparing it first when it is not cached."""
    entry = prepare_reordered(name, scorer, params, ogb_root=ogb_root, progress=progress)
    return load_entry(entry, reordered_hint(name, scorer, ogb_root), verify=verify, progress=progress)
