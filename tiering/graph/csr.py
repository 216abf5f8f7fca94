"""Compressed sparse row graph: the one graph structure tierbench samples from.

Convention (used by every scorer, sampler and reorder in tierbench)::

    indices[indptr[v]:indptr[v+1]]  ==  the nodes neighbour sampling may pick for v

i.e. the *sources* u of the edges u -> v.  A node is fetched during training
when it appears in the list of a frontier node, so the number of lists a node
appears in is its "degree" in the sense of Data Tiering §3.1 (the out-degree in
the direction sampling walks).  ``transpose()`` gives the other direction.

Storage: ``indptr`` is always int64 (ogbn-papers100M has 3.2 billion list
entries, which overflow int32); ``indices`` is int32 when the graph has fewer
than 2**31 nodes and int64 otherwise, stated by ``index_dtype``.  Both are CPU
torch tensors; numba kernels work on zero-copy numpy views of them.

Construction is a stable counting sort done by numba kernels: no Python loop
over nodes or edges, and no temporaries beyond one int64 cursor per node, so a
100M-edge graph builds in a few seconds with its final size plus ``8 * N``
bytes of extra memory.  ``from_edge_chunks`` builds the coalesced graph of
edges that can be drawn twice, a chunk at a time, without the edge list.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

INT32_LIMIT = 2**31
"""Node ids and list offsets at or above this do not fit in int32."""

_NUMPY_INDEX_DTYPE = {torch.int32: np.int32, torch.int64: np.int64}


def index_dtype_for(num_nodes: int) -> torch.dtype:
    """The dtype of ``indices`` for a graph of ``num_nodes`` nodes."""
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be non-negative, got {num_nodes}")
    return torch.int32 if num_nodes < INT32_LIMIT else torch.int64


def indptr_from_counts(counts) -> np.ndarray:
    """``[0, c0, c0+c1, ...]`` as int64, whatever the dtype of ``counts``.

    The sum is always taken in int64, so list lengths held in int32 cannot
    overflow the offsets of a graph with more than 2**31 - 1 entries.
    """
    counts = np.asarray(counts)
    indptr = np.empty(len(counts) + 1, dtype=np.int64)
    indptr[0] = 0
    np.cumsum(counts, dtype=np.int64, out=indptr[1:])
    return indptr


def _as_numpy(array, name: str) -> np.ndarray:
    """A zero-copy numpy view of a 1-D integer CPU tensor or array."""
    if isinstance(array, torch.Tensor):
        if array.device.type != "cpu":
            raise ValueError(f"{name} must be on the CPU, got device {array.device}")
        array = array.detach().numpy()
    array = np.asarray(array)
    if array.size == 0:
        array = array.astype(np.int64)  # [] is a float array to numpy
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(array.shape)}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {array.dtype}")
    return array


@numba.njit(parallel=True, cache=True)
def _first_out_of_range(values, upper):
    """Smallest position p with values[p] outside [0, upper), or -1."""
    n = len(values)
    chunk = 1 << 16
    nchunks = (n + chunk - 1) // chunk
    first = np.full(nchunks, -1, dtype=np.int64)
    for c in numba.prange(nchunks):
        end = min(n, (c + 1) * chunk)
        for p in range(c * chunk, end):
            if values[p] < 0 or values[p] >= upper:
                first[c] = p
                break
    for c in range(nchunks):
        if first[c] >= 0:
            return first[c]
    return -1


@numba.njit(cache=True)
def _first_decrease(indptr):
    """Smallest p with indptr[p + 1] < indptr[p], or -1."""
    for p in range(len(indptr) - 1):
        if indptr[p + 1] < indptr[p]:
            return p
    return -1


@numba.njit(cache=True)
def _count(values, counts):
    for p in range(len(values)):
        counts[values[p]] += 1


@numba.njit(cache=True)
def _scatter_edges(src, dst, indptr, out):
    """Place src[i] in the list of dst[i], keeping the input order (stable)."""
    cursor = indptr[:-1].copy()
    for i in range(len(src)):
        v = dst[i]
        out[cursor[v]] = src[i]
        cursor[v] += 1


@numba.njit(parallel=True, cache=True)
def _scatter_transpose(bounds, indptr, indices, new_indptr, out):
    """Entry u in the list of v becomes entry v in the list of u; thread part t owns the new lists [bounds[t],
    bounds[t+1]) and reads every list in order, so each new list holds its entries by ascending v, as one
    sequential pass would place them."""
    for t in numba.prange(len(bounds) - 1):
        lo, hi = bounds[t], bounds[t + 1]
        cursor = new_indptr[lo:hi].copy()
        for v in range(len(indptr) - 1):
            for p in range(indptr[v], indptr[v + 1]):
                u = indices[p]
                if lo <= u < hi:
                    out[cursor[u - lo]] = v
                    cursor[u - lo] += 1


@numba.njit(parallel=True, cache=True)
def _sort_unique_lists(indptr, indices, drop_self_loops, work, kept):
    """Sort each list into ``work`` and count its distinct entries into ``kept``."""
    for v in numba.prange(len(indptr) - 1):
        start, end = indptr[v], indptr[v + 1]
        if end == start:
            kept[v] = 0
            continue
        seg = np.sort(indices[start:end])
        count = 0
        previous = -1
        for value in seg:
            if value == previous or (drop_self_loops and value == v):
                continue
            work[start + count] = value
            count += 1
            previous = value
        kept[v] = count


@numba.njit(parallel=True, cache=True)
def _count_owned(bounds, targets, counts):
    """counts[v] += 1 for every v in ``targets``; thread part t owns the nodes [bounds[t], bounds[t+1])."""
    for t in numba.prange(len(bounds) - 1):
        lo, hi = bounds[t], bounds[t + 1]
        for i in range(len(targets)):
            v = targets[i]
            if lo <= v < hi:
                counts[v] += 1


@numba.njit(parallel=True, cache=True)
def _place_owned(bounds, src, dst, indptr, cursor, out):
    """Append src[i] to the list of dst[i] at ``cursor``; thread part t owns the lists [bounds[t], bounds[t+1]).

    Returns False, having stopped, when a list would overflow its ``indptr`` range.
    """
    overflow = np.zeros(len(bounds) - 1, dtype=np.bool_)
    for t in numba.prange(len(bounds) - 1):
        lo, hi = bounds[t], bounds[t + 1]
        for i in range(len(dst)):
            v = dst[i]
            if lo <= v < hi:
                if cursor[v] >= indptr[v + 1]:
                    overflow[t] = True
                    break
                out[cursor[v]] = src[i]
                cursor[v] += 1
    return not overflow.any()


@numba.njit(parallel=True, cache=True)
def _sort_unique_lists_in_place(indptr, indices, drop_self_loops, kept):
    """Sort each list in place and move its distinct entries to its front; their count goes to ``kept``."""
    for v in numba.prange(len(indptr) - 1):
        start, end = indptr[v], indptr[v + 1]
        seg = indices[start:end]
        seg.sort()
        count = 0
        previous = -1
        for k in range(end - start):
            value = seg[k]
            if value == previous or (drop_self_loops and value == v):
                continue
            seg[count] = value
            count += 1
            previous = value
        kept[v] = count


@numba.njit(cache=True)
def _compact(indptr, new_indptr, indices):
    """Move the front ``new_indptr[v+1] - new_indptr[v]`` entries of every list down to ``new_indptr[v]`` (in order:
    a list only ever moves towards the start, over entries already moved or dropped)."""
    for v in range(len(indptr) - 1):
        start, base = indptr[v], new_indptr[v]
        if start != base:
            for k in range(new_indptr[v + 1] - base):
                indices[base + k] = indices[start + k]


def thread_parts(upper: int, offsets=None) -> np.ndarray:
    """Bounds of one part of [0, upper) per numba thread: equal node ranges, or equal shares of
    ``offsets``'s entries."""
    parts = numba.get_num_threads()
    if offsets is None:
        bounds = np.linspace(0, upper, parts + 1).astype(np.int64)
    else:
        bounds = np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1), side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, upper
    return bounds


@numba.njit(parallel=True, cache=True)
def _gather_kept(indptr, work, new_indptr, out):
    for v in numba.prange(len(indptr) - 1):
        start = indptr[v]
        for k in range(new_indptr[v + 1] - new_indptr[v]):
            out[new_indptr[v] + k] = work[start + k]


def _edge_ids(src, dst, num_nodes: int, where: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Edges as two integer arrays of equal length, every id in [0, num_nodes); ``where`` (" of a chunk") goes
    into the error."""
    src = _as_numpy(src, "src")
    dst = _as_numpy(dst, "dst")
    if len(src) != len(dst):
        raise ValueError(f"src has {len(src)} entries but dst has {len(dst)}")
    for name, ids in (("src", src), ("dst", dst)):
        p = _first_out_of_range(ids, num_nodes)
        if p >= 0:
            raise ValueError(f"{name}[{p}] = {ids[p]}{where} is not a node id in [0, {num_nodes})")
    return src, dst


class CSRGraph:
    """A directed graph in CSR form; see the module docstring for the convention.

    Parameters
    ----------
    indptr : int64 tensor of length N + 1
    indices : int32 or int64 tensor of length ``indptr[-1]``

    The constructor checks shapes and dtypes, and then every offset and id
    (``validate``, a parallel linear scan: ~40 ms per 100M entries): the numba
    kernels that read a graph do not bounds-check, so a graph with a bad id
    must never exist.  Operations whose output is valid by construction build
    it with ``validate=False``.
    """

    __slots__ = ("indptr", "indices")

    def __init__(self, indptr, indices, *, validate: bool = True):
        indptr = torch.as_tensor(indptr)
        indices = torch.as_tensor(indices)
        if indptr.dim() != 1 or indptr.numel() < 1:
            raise ValueError(
                f"indptr must be a 1-D tensor of length num_nodes + 1, got shape {tuple(indptr.shape)}"
            )
        if indptr.dtype != torch.int64:
            raise TypeError(
                f"indptr must be int64 (list offsets of graphs with 2**31 or more "
                f"entries overflow int32), got {indptr.dtype}"
            )
        if indices.dim() != 1:
            raise ValueError(f"indices must be a 1-D tensor, got shape {tuple(indices.shape)}")
        if indices.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"indices must be int32 or int64, got {indices.dtype}")
        num_nodes = indptr.numel() - 1
        if indices.dtype == torch.int32 and num_nodes >= INT32_LIMIT:
            raise TypeError(
                f"indices is int32 but the graph has {num_nodes} nodes; ids of 2**31 and "
                f"above need int64"
            )
        self.indptr = indptr
        self.indices = indices
        if validate:
            self.validate()

    # ------------------------------------------------------------------ sizes
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @property
    def index_dtype(self) -> torch.dtype:
        """dtype of ``indices``: int32 below 2**31 nodes, int64 otherwise."""
        return self.indices.dtype

    @property
    def nbytes(self) -> int:
        return self.indptr.numel() * 8 + self.indices.numel() * self.indices.element_size()

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    def to(self, device) -> "CSRGraph":
        """The same graph with its tensors on ``device`` (e.g. for the torch sampler on a GPU).

        The numba-backed methods (``appearances``, ``transpose``, ``coalesce``,
        construction) work on CPU graphs only.
        """
        return CSRGraph(self.indptr.to(device), self.indices.to(device), validate=False)

    def degrees(self) -> torch.Tensor:
        """Length of every neighbour list (int64, length N)."""
        return self.indptr[1:] - self.indptr[:-1]

    def appearances(self) -> torch.Tensor:
        """How many neighbour lists every node appears in (int64, length N), counted on every numba thread, each
        owning a range of the nodes (papers-100m has 1.6 G entries)."""
        counts = np.zeros(self.num_nodes, dtype=np.int64)
        _count_owned(thread_parts(self.num_nodes), self.indices.numpy(), counts)
        return torch.from_numpy(counts)

    def __repr__(self) -> str:
        return (
            f"CSRGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
            f"index_dtype={self.index_dtype})"
        )

    # ------------------------------------------------------------ validation
    def validate(self) -> "CSRGraph":
        """Check offsets and ids; raise ``ValueError`` naming the first bad position.

        Run by the constructor; call it again after changing the tensors in place.
        """
        indptr = self.indptr.cpu().numpy()
        if indptr[0] != 0:
            raise ValueError(f"indptr[0] must be 0, got {indptr[0]}")
        p = _first_decrease(indptr)
        if p >= 0:
            raise ValueError(
                f"indptr must be non-decreasing: indptr[{p + 1}] = {indptr[p + 1]} < "
                f"indptr[{p}] = {indptr[p]}"
            )
        if indptr[-1] != self.num_edges:
            raise ValueError(
                f"indptr[-1] = {indptr[-1]} but indices has {self.num_edges} entries"
            )
        indices = self.indices.cpu().numpy()
        p = _first_out_of_range(indices, self.num_nodes)
        if p >= 0:
            owner = int(np.searchsorted(indptr, p, side="right")) - 1
            raise ValueError(
                f"indices[{p}] = {indices[p]} is not a node id in [0, {self.num_nodes}) "
                f"(it is in the neighbour list of node {owner})"
            )
        return self

    # ---------------------------------------------------------- construction
    @classmethod
    def from_edges(cls, src, dst, num_nodes: int, index_dtype: torch.dtype | None = None) -> "CSRGraph":
        """Build the graph of edges ``src[i] -> dst[i]``: ``src[i]`` joins the list of ``dst[i]``.

        Lists keep the order in which their edges are given (stable counting
        sort). Duplicate edges and self-loops are kept; see ``coalesce``.
        """
        src, dst = _edge_ids(src, dst, num_nodes)
        index_dtype = index_dtype or index_dtype_for(num_nodes)
        if index_dtype not in _NUMPY_INDEX_DTYPE:
            raise TypeError(f"index_dtype must be torch.int32 or torch.int64, got {index_dtype}")
        if index_dtype == torch.int32 and num_nodes >= INT32_LIMIT:
            raise TypeError(f"int32 indices cannot hold ids of a graph with {num_nodes} nodes")
        counts = np.zeros(num_nodes, dtype=np.int64)
        _count(dst, counts)
        indptr = indptr_from_counts(counts)
        del counts
        indices = np.empty(len(src), dtype=_NUMPY_INDEX_DTYPE[index_dtype])
        _scatter_edges(src, dst, indptr, indices)
        return cls(torch.from_numpy(indptr), torch.from_numpy(indices), validate=False)

    @classmethod
    def from_edge_chunks(cls, chunks, num_nodes: int, *, both_ways: bool = False,
                         drop_self_loops: bool = True) -> "CSRGraph":
        """The coalesced graph of edges that arrive in chunks and can be drawn twice.

        ``chunks()`` returns an iterable of ``(src, dst)`` pairs (edges
        ``src[i] -> dst[i]``) and must give the same edges each time it is
        called.  The result equals ``from_edges(src, dst, num_nodes).coalesce(drop_self_loops)``
        of all the chunks concatenated, with ``both_ways`` of every edge in
        both directions (``src + dst, dst + src``), but the edge list never
        exists whole: pass 1 counts every list's length, pass 2 draws the
        chunks again and places each entry, then each list is sorted and
        deduplicated where it lies and the lists are moved together.  Memory:
        the uncoalesced ``indices`` (int32 below 2**31 nodes), ``indptr``, one
        int64 cursor per node and one chunk.  Counting and placing are
        parallel over thread-owned node ranges, so no two threads write one list.
        """
        counts = np.zeros(num_nodes, dtype=np.int64)
        bounds = thread_parts(num_nodes)
        for src, dst in chunks():
            src, dst = _edge_ids(src, dst, num_nodes, " of a chunk")
            _count_owned(bounds, dst, counts)
            if both_ways:
                _count_owned(bounds, src, counts)
        indptr = indptr_from_counts(counts)
        cursor = counts  # reused: the next free slot of every list
        cursor[:] = indptr[:-1]
        indices = np.empty(indptr[-1], dtype=_NUMPY_INDEX_DTYPE[index_dtype_for(num_nodes)])
        bounds = thread_parts(num_nodes, indptr)
        for src, dst in chunks():
            src, dst = _edge_ids(src, dst, num_nodes, " of a chunk")
            placed = _place_owned(bounds, src, dst, indptr, cursor, indices)
            if both_ways:
                placed = placed and _place_owned(bounds, dst, src, indptr, cursor, indices)
            if not placed:
                raise ValueError("chunks() gave more edges the second time than the first")
        if not np.array_equal(cursor, indptr[1:]):
            raise ValueError("chunks() gave fewer edges the second time than the first")
        kept = cursor  # reused again
        _sort_unique_lists_in_place(indptr, indices, drop_self_loops, kept)
        new_indptr = indptr_from_counts(kept)
        del cursor, kept, counts
        _compact(indptr, new_indptr, indices)
        # a view of the front of the array: copying it out would need both at once
        return cls(torch.from_numpy(new_indptr), torch.from_numpy(indices[: new_indptr[-1]]), validate=False)

    @classmethod
    def from_ogb(cls, edge_index, num_nodes: int) -> "CSRGraph":
        """From OGB's ``graph['edge_index']`` (shape (2, E), row 0 sources, row 1 targets)."""
        edge_index = np.asarray(edge_index)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ValueError(
                f"an OGB edge_index has shape (2, num_edges), got {tuple(edge_index.shape)}"
            )
        return cls.from_edges(edge_index[0], edge_index[1], int(num_nodes))

    def to_edge_index(self) -> np.ndarray:
        """OGB's ``edge_index`` (int64, shape (2, E)) such that ``from_ogb`` rebuilds this graph."""
        edge_index = np.empty((2, self.num_edges), dtype=np.int64)
        edge_index[0] = self.indices.numpy()
        edge_index[1] = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.degrees().numpy())
        return edge_index

    # ------------------------------------------------------------ transforms
    def transpose(self) -> "CSRGraph":
        """The graph with every edge reversed: v is in the list of u iff u was in the list of v."""
        indices = self.indices.numpy()
        counts = np.zeros(self.num_nodes, dtype=np.int64)
        _count_owned(thread_parts(self.num_nodes), indices, counts)
        new_indptr = indptr_from_counts(counts)
        del counts
        out = np.empty_like(indices)
        _scatter_transpose(thread_parts(self.num_nodes, new_indptr), self.indptr.numpy(), indices, new_indptr, out)
        return CSRGraph(torch.from_numpy(new_indptr), torch.from_numpy(out), validate=False)

    def coalesce(self, drop_self_loops: bool = True) -> "CSRGraph":
        """Sort every list and remove duplicate entries (and self-loops, by default)."""
        indptr = self.indptr.numpy()
        indices = self.indices.numpy()
        work = np.empty_like(indices)
        kept = np.empty(self.num_nodes, dtype=np.int64)
        _sort_unique_lists(indptr, indices, drop_self_loops, work, kept)
        new_indptr = indptr_from_counts(kept)
        out = np.empty(new_indptr[-1], dtype=indices.dtype)
        _gather_kept(indptr, work, new_indptr, out)
        return CSRGraph(torch.from_numpy(new_indptr), torch.from_numpy(out), validate=False)
