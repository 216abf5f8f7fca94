"""Renumbering a graph and its node data so the hottest nodes come first (seeds/000 §3.2).

After reordering, node id = feature row = hotness rank, so the hot tier is
simply rows [0, H) and no id -> row map is needed at training time (the paper
chose this over a mapping table, which costs GBs at 100M nodes).

``reorder_graph`` is seeds/000 Algorithm 2:

1. ``new_to_old`` = node ids sorted by score, descending; ties go to the
   smaller old id (a stable sort), so the result is deterministic.
   ``old_to_new`` is its inverse (paper example: scores [0.1, 0.4, 0.2, 0.3]
   give old_to_new [3, 0, 2, 1]).
2. New list lengths = old lengths in new order; new indptr = their prefix sum.
3. Every list moves as one block to its new place, keeps its order, and each
   entry is renamed through ``old_to_new`` — parallel over nodes (numba
   ``prange``), with no race since blocks do not overlap.

``permute_rows`` applies the same renumbering to features and labels, in
chunks, so a feature table larger than RAM can go from one memory-mapped file
into another; ``map_ids`` renames id lists such as the training split.
"""

from __future__ import annotations

import warnings

import numba
import numpy as np
import torch
from tqdm.auto import tqdm

from .graph import CSRGraph, indptr_from_counts


def order_by_score(scores) -> tuple[np.ndarray, np.ndarray]:
    """``(new_to_old, old_to_new)``: ids by descending score, ties by ascending id."""
    scores = scores.numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    if scores.ndim != 1:
        raise ValueError(f"scores must be one-dimensional, got shape {scores.shape}")
    if scores.dtype.kind not in "fiu":
        raise TypeError(f"scores must be numbers, got dtype {scores.dtype}")
    if scores.dtype.kind == "f":
        bad = np.flatnonzero(np.isnan(scores))
        if len(bad):
            raise ValueError(f"scores[{bad[0]}] is NaN; every node needs a comparable score")
        keys = -scores.astype(np.float64)
    else:
        keys = -scores.astype(np.int64)
    new_to_old = np.argsort(keys, kind="stable")
    return new_to_old, invert_permutation(new_to_old)


@numba.njit(parallel=True, cache=True)
def _invert(perm, out):
    for i in numba.prange(len(perm)):
        out[perm[i]] = i


def invert_permutation(perm: np.ndarray) -> np.ndarray:
    out = np.empty(len(perm), dtype=np.int64)
    _invert(perm, out)
    return out


@numba.njit(parallel=True, cache=True)
def _move_lists(indptr, indices, new_to_old, old_to_new, new_indptr, out):
    for new in numba.prange(len(new_to_old)):
        old = new_to_old[new]
        start = indptr[old]
        base = new_indptr[new]
        for k in range(indptr[old + 1] - start):
            out[base + k] = old_to_new[indices[start + k]]


def reorder_graph(graph: CSRGraph, scores) -> tuple[CSRGraph, torch.Tensor, torch.Tensor]:
    """``(new_graph, old_to_new, new_to_old)`` with nodes renumbered by descending score."""
    if len(scores) != graph.num_nodes:
        raise ValueError(f"scores has {len(scores)} entries but the graph has {graph.num_nodes} nodes")
    new_to_old, old_to_new = order_by_score(scores)
    indptr = graph.indptr.numpy()
    new_indptr = indptr_from_counts(graph.degrees().numpy()[new_to_old])
    indices = graph.indices.numpy()
    out = np.empty_like(indices)
    _move_lists(indptr, indices, new_to_old, old_to_new, new_indptr, out)
    new_graph = CSRGraph(torch.from_numpy(new_indptr), torch.from_numpy(out), validate=False)
    return new_graph, torch.from_numpy(old_to_new), torch.from_numpy(new_to_old)


def map_ids(ids, old_to_new) -> torch.Tensor:
    """Rename node ids (a split, a batch) through ``old_to_new``; order is kept."""
    ids = torch.as_tensor(ids)
    old_to_new = torch.as_tensor(old_to_new)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(old_to_new)):
        bad = int(torch.nonzero((ids < 0) | (ids >= len(old_to_new)))[0, 0])
        raise ValueError(f"ids[{bad}] = {int(ids[bad])} is not a node id in [0, {len(old_to_new)})")
    return old_to_new[ids.long()]


def _as_tensor(array):
    """A zero-copy torch view of a tensor, a numpy array or a memory map."""
    if isinstance(array, torch.Tensor):
        return array
    with warnings.catch_warnings():  # a read-only source (mmap_mode="r") is only read from
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(np.asarray(array))


def permute_rows(array, new_to_old, out=None, chunk_rows: int | None = None, progress: bool = False):
    """``out[i] = array[new_to_old[i]]``, ``chunk_rows`` rows at a time.

    ``array`` and ``out`` may be torch tensors, numpy arrays or numpy memory
    maps (``out`` must then be writable, e.g. ``np.lib.format.open_memmap``);
    only one chunk of rows is in memory at once, so a table larger than RAM
    can be permuted file to file.  The default chunk is about 64 MB.
    Returns ``out``.
    """
    source = _as_tensor(array)
    perm = torch.as_tensor(new_to_old, dtype=torch.int64)
    if len(perm) != source.shape[0]:
        raise ValueError(f"new_to_old has {len(perm)} entries but the array has {source.shape[0]} rows")
    if len(perm) and (int(perm.min()) < 0 or int(perm.max()) >= len(perm)):
        bad = int(torch.nonzero((perm < 0) | (perm >= len(perm)))[0, 0])
        raise ValueError(f"new_to_old[{bad}] = {int(perm[bad])} is not a row of an array with {len(perm)} rows")
    if out is None:
        out = torch.empty_like(source)
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise ValueError("out is read-only; open a memory-mapped output with mode 'w+' or 'r+'")
    target = _as_tensor(out)
    if target.shape != source.shape or target.dtype != source.dtype:
        raise ValueError(
            f"out must match the array: got {tuple(target.shape)} {target.dtype}, "
            f"expected {tuple(source.shape)} {source.dtype}"
        )
    row_bytes = max(1, source[0].numel() * source.element_size()) if len(source) else 1
    chunk_rows = chunk_rows or max(1, (64 << 20) // row_bytes)
    starts = range(0, len(perm), chunk_rows)
    for start in tqdm(starts, desc="permuting rows", unit="chunk", disable=not progress or len(starts) < 2):
        end = min(start + chunk_rows, len(perm))
        torch.index_select(source, 0, perm[start:end], out=target[start:end])
    return out
