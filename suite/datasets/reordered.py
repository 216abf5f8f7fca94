"""Reordered datasets: a prepared dataset renumbered by a scorer, cached beside it (seeds/000 §3).

``prepare_reordered("papers-s", "wrpr")`` loads the base dataset (checking
its checksums), scores its nodes, reorders the graph, permutes features and
labels, renames the splits, and writes the result as a cache entry of its
own with ``old_to_new``, ``new_to_old`` and the scores.  The entry's key
hashes the base dataset's content checksums, the scorer and its parameters,
so a changed dataset or parameter makes a new entry, and an existing one is
reused.  Features are permuted straight into the new memory-mapped file, a
chunk of rows at a time, so tables larger than RAM can be reordered.

The weighted scorer takes the training split as its labelled set: training
minibatches start there (seeds/000 §3.1).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from suite.datasets import cache
from suite.datasets.build import prepare_dataset, regenerate_hint
from suite.datasets.dataset import (
    Dataset,
    array_file,
    dataset_arrays,
    load_entry,
    save_arrays,
)
from suite.datasets.stats import graph_stats, top_share
from suite.io.progress import Steps
from tiering.reorder import map_ids, permute_rows, reorder_graph
from tiering.scores import get_scorer


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
    base = load_entry(base_entry, hint, verify=True, progress=progress)
    steps = Steps(f"{name} by {scorer}", 5, progress)
    try:
        with steps.step(f"scoring ({scorer})"):
            start = time.perf_counter()
            scores = score_nodes(base, scorer, params)
            score_seconds = time.perf_counter() - start
        with steps.step("reordering the graph"):
            start = time.perf_counter()
            graph, old_to_new, new_to_old = reorder_graph(base.graph, scores)
            reorder_seconds = time.perf_counter() - start
        with steps.step("permuting features"):
            features = np.lib.format.open_memmap(
                array_file(partial, "features"), mode="w+", dtype=np.float32, shape=tuple(base.features.shape)
            )
            permute_rows(base.features, new_to_old, out=features, progress=progress)
            features.flush()
            del features
        with steps.step("writing arrays"):
            labels = permute_rows(base.labels, new_to_old)
            splits = {k: map_ids(v, old_to_new) for k, v in base.splits.items()}
            arrays = dataset_arrays(graph, None, labels, splits)
            del arrays["features"]  # already written in place
            written = save_arrays(partial, **arrays, old_to_new=old_to_new, new_to_old=new_to_old, scores=scores[new_to_old])
            written.append(array_file(partial, "features"))
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
                "files": cache.describe_files(partial, written, progress),
            }
            cache.write_manifest(partial, manifest)
    finally:
        steps.close()


def prepare_reordered(
    name: str, scorer: str, params: dict | None = None, *, ogb_root=None, force: bool = False, progress: bool = True
) -> Path:
    """Make sure the reordered entry exists (build it if not, or if ``force``); returns its directory."""
    params = get_scorer(scorer).params(**(params or {}))
    base_entry = prepare_dataset(name, ogb_root=ogb_root, progress=progress)
    hint = regenerate_hint(name, ogb_root)
    entry = cache.cache_root() / f"{name}.{scorer}-{_content_key(cache.read_manifest(base_entry, hint), scorer, params)}"
    return cache.build_entry(
        entry, lambda partial: _build(base_entry, hint, name, scorer, params, partial, progress), force=force
    )


def load_reordered(name: str, scorer: str, params: dict | None = None, *, ogb_root=None, verify=True, progress=True) -> Dataset:
    """The dataset renumbered by ``scorer``, preparing it first when it is not cached."""
    entry = prepare_reordered(name, scorer, params, ogb_root=ogb_root, progress=progress)
    return load_entry(entry, reordered_hint(name, scorer, ogb_root), verify=verify, progress=progress)
