"""Renumbering a graph and its node data so the hottest nodes come first (Data Tiering §3.2).

After reordering, node id = feature row = hotness rank, so the hot tier is
simply rows [0, H) and no id -> row map is needed at training time (the paper
chose this over a mapping table, which costs GBs at 100M nodes).

``reorder_graph`` is Data Tiering Algorithm 2:

1. ``new_to_old`` = node ids sorted by score, descending; ties go to the
   smaller old id (a stable sort), so the result is deterministic.
   ``old_to_new`` is its inverse (paper example: scores [0.1, 0.4, 0.2, 0.3]
   give old_to_new [3, 0, 2, 1]).  The sort is a parallel least-significant-
   digit radix sort of the scores' bit patterns, 8 bits a pass, skipping the
   passes whose digit every score shares (degrees, as float64, have empty low
   mantissas): 4x numpy's stable argsort on 2M random doubles.
2. New list lengths = old lengths in new order; new indptr = their prefix sum.
3. Every list moves as one block to its new place, keeps its order, and each
   entry is renamed through ``old_to_new``: parallel over nodes (numba
   ``prange``), with no race since blocks do not overlap.  Lists are copied
   first, a batch of nodes at a time whose list starts are read together (on
   a sparse graph a list is a cache line or two, so the cost is the random
   reads that find it, and a batch overlaps them); then the entries are
   renamed in one sequential pass, whose reads of ``old_to_new`` (int32 when
   the ids fit) stay in the last-level cache.

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

from tiering.graph.csr import CSRGraph, indptr_from_counts, thread_parts


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
        keys = _descending_keys(scores.astype(np.float64))
    else:
        keys = _descending_keys(scores.astype(np.int64))
    new_to_old = _radix_argsort(keys, thread_parts(len(keys)))
    return new_to_old, invert_permutation(new_to_old)


_SIGN = np.uint64(1 << 63)


@numba.njit(parallel=True, cache=True)
def _descending_float_keys(bits, out):
    for i in numba.prange(len(bits)):
        b = bits[i]
        if b == _SIGN:  # -0.0 ties with 0.0
            b = np.uint64(0)
        ascending = ~b if b & _SIGN else b | _SIGN
        out[i] = ~ascending


def _descending_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys whose ascending order is ``values``' descending order (float64 or int64, no NaN)."""
    if values.dtype == np.float64:
        keys = np.empty(len(values), dtype=np.uint64)
        _descending_float_keys(values.view(np.uint64), keys)
        return keys
    return ~(values.view(np.uint64) ^ _SIGN)


_DIGIT_BITS = 8


@numba.njit(parallel=True, cache=True)
def _radix_argsort(keys, parts):
    """The stable ascending order of uint64 ``keys``: LSD radix, each thread scattering its part
    ``parts[t]:parts[t + 1]`` of the previous pass's order to its own running offsets."""
    n = len(keys)
    threads = len(parts) - 1
    buckets = 1 << _DIGIT_BITS
    mask = np.uint64(buckets - 1)
    ids = np.arange(n)
    keys = keys.copy()
    next_keys = np.empty_like(keys)
    next_ids = np.empty_like(ids)
    offsets = np.zeros((threads, buckets), dtype=np.int64)
    for shift in range(0, 64, _DIGIT_BITS):
        s = np.uint64(shift)
        for t in numba.prange(threads):
            offsets[t, :] = 0
            for i in range(parts[t], parts[t + 1]):
                offsets[t, (keys[i] >> s) & mask] += 1
        if n == 0 or offsets[:, (keys[0] >> s) & mask].sum() == n:
            continue  # every key has this digit: the pass would not move anything
        run = 0
        for b in range(buckets):
            for t in range(threads):
                count = offsets[t, b]
                offsets[t, b] = run
                run += count
        for t in numba.prange(threads):
            for i in range(parts[t], parts[t + 1]):
                digit = (keys[i] >> s) & mask
                p = offsets[t, digit]
                offsets[t, digit] = p + 1
                next_keys[p] = keys[i]
                next_ids[p] = ids[i]
        keys, next_keys = next_keys, keys
        ids, next_ids = next_ids, ids
    return ids


@numba.njit(parallel=True, cache=True)
def _invert(perm, out):
    for i in numba.prange(len(perm)):
        out[perm[i]] = i


def invert_permutation(perm: np.ndarray) -> np.ndarray:
    out = np.empty(len(perm), dtype=np.int64)
    _invert(perm, out)
    return out


_BATCH = 64  # nodes whose list starts are read together


@numba.njit(parallel=True, cache=True)
def _move_lists(indptr, indices, new_to_old, new_indptr, out):
    """``out``'s list ``new`` = ``indices``' list ``new_to_old[new]``, unrenamed."""
    n = len(new_to_old)
    for batch in numba.prange((n + _BATCH - 1) // _BATCH):
        first = batch * _BATCH
        size = min(_BATCH, n - first)
        starts = np.empty(size, dtype=np.int64)
        for b in range(size):
            starts[b] = indptr[new_to_old[first + b]]
        for b in range(size):
            base = new_indptr[first + b]
            start = starts[b]
            for k in range(new_indptr[first + b + 1] - base):
                out[base + k] = indices[start + k]


@numba.njit(parallel=True, cache=True)
def _rename(ids, old_to_new):
    for i in numba.prange(len(ids)):
        ids[i] = old_to_new[ids[i]]


def reorder_graph(graph: CSRGraph, scores) -> tuple[CSRGraph, torch.Tensor, torch.Tensor]:
    """``(new_graph, old_to_new, new_to_old)`` with nodes renumbered by descending score."""
    if len(scores) != graph.num_nodes:
        raise ValueError(f"scores has {len(scores)} entries but the graph has {graph.num_nodes} nodes")
    new_to_old, old_to_new = order_by_score(scores)
    indptr = graph.indptr.numpy()
    new_indptr = indptr_from_counts(graph.degrees().numpy()[new_to_old])
    indices = graph.indices.numpy()
    out = np.empty_like(indices)
    _move_lists(indptr, indices, new_to_old, new_indptr, out)
    _rename(out, old_to_new.astype(indices.dtype))
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
