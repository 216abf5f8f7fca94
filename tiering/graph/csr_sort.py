"""The coalesced CSR of edges drawn in chunks, built by sorting on a torch device (a GPU, or the CPU).

``CSRGraph.from_edge_chunks`` builds the graph on the host with numba: a
counting sort that places every entry, then a sort of each list where it
lies.  This module builds the same arrays with whole-tensor torch
operations, so that the edges of a paper-scale graph can be drawn and sorted
on one GPU and only the finished lists cross to the host:

1. Draw every chunk once and count each list's drawn length
   (``torch.bincount`` of the owners: ``dst``, and ``src`` too when every edge
   goes both ways).
2. Split the list owners into contiguous ranges ``[lo, hi)`` whose drawn
   entries fit a budget of entries per part (a list longer than the budget is
   a part of its own).
3. For each part, draw every chunk again and keep the edges whose owner is in
   the range (self-loops dropped here already), as int64 keys
   ``(owner - lo) * num_nodes + entry``.  One ``torch.unique`` orders the
   part by owner and then by entry and drops the duplicates, and the part's list lengths (``bincount`` of ``owner - lo``)
   and entries (``key % num_nodes``, in the index dtype) are copied into their
   slices of the host arrays; parts come in owner order, so each part's
   entries follow the last one's.

Nothing scatters into shared positions and the sort is of distinct-or-equal
integers, so the result does not depend on the device or on thread timing.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from tiering.graph.csr import CSRGraph, index_dtype_for, indptr_from_counts

CPU_PART_ENTRIES = 1 << 25
"""List entries sorted at once on the CPU (32M: about 1 GB of keys, sort output and permutation)."""
BYTES_PER_PART_ENTRY = 32
"""Device bytes one entry of a part takes: its key, the sorted copy, the radix sort's scratch and the distinct
keys (``torch.unique`` without an inverse sorts the keys alone on CUDA, with no int64 permutation beside them)."""
MAX_PART_ENTRIES = 1 << 30
"""Most entries one ``torch.unique`` is given (below the 2**31 - 1 its CUDA sort takes)."""


def default_part_entries(device: torch.device | str) -> int:
    """List entries per part: on CUDA a quarter of the free device memory over ``BYTES_PER_PART_ENTRY``,
    elsewhere ``CPU_PART_ENTRIES``."""
    device = torch.device(device)
    if device.type != "cuda":
        return CPU_PART_ENTRIES
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(MAX_PART_ENTRIES, free // 4 // BYTES_PER_PART_ENTRY))


def owner_parts(indptr: np.ndarray, part_entries: int, max_owners: int) -> list[tuple[int, int]]:
    """Contiguous owner ranges ``[lo, hi)`` covering every list of the offsets ``indptr``, each holding at most
    ``part_entries`` entries (a longer list is a range of its own) and at most ``max_owners`` lists."""
    num_lists = len(indptr) - 1
    parts = []
    lo = 0
    while lo < num_lists:
        hi = int(np.searchsorted(indptr, indptr[lo] + part_entries, side="right")) - 1
        hi = min(max(hi, lo + 1), lo + max_owners, num_lists)
        parts.append((lo, hi))
        lo = hi
    return parts


def _device_ids(src, dst, num_nodes: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A chunk's edges as int64 tensors on ``device``, checked as ``csr._edge_ids`` checks them."""
    out = []
    for name, ids in (("src", src), ("dst", dst)):
        ids = torch.as_tensor(ids)
        if ids.dim() != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {tuple(ids.shape)}")
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got dtype {ids.dtype}")
        out.append(ids.to(device=device, dtype=torch.int64))
    src, dst = out
    if len(src) != len(dst):
        raise ValueError(f"src has {len(src)} entries but dst has {len(dst)}")
    for name, ids in (("src", src), ("dst", dst)):
        bad = (ids < 0) | (ids >= num_nodes)
        if bool(bad.any()):
            p = int(torch.nonzero(bad)[0, 0])
            raise ValueError(f"{name}[{p}] = {int(ids[p])} of a chunk is not a node id in [0, {num_nodes})")
    return src, dst


def coalesced_csr(chunks, num_nodes: int, *, device: torch.device | str = "cpu", both_ways: bool = False,
                  drop_self_loops: bool = True, part_entries: int | None = None,
                  progress: bool = False) -> CSRGraph:
    """The host ``CSRGraph`` that ``CSRGraph.from_edge_chunks`` builds from the same edges, sorted on ``device``.

    ``chunks()`` returns an iterable of ``(src, dst)`` integer tensors (edges
    ``src[i] -> dst[i]``, on any device; they are moved to ``device``) and must
    give the same edges each time it is called.  ``src[i]`` joins the list of
    ``dst[i]`` (and, with ``both_ways``, ``dst[i]`` the list of ``src[i]``);
    every list comes out sorted ascending, without duplicates, and without
    self-loops when ``drop_self_loops``.  ``indptr`` is int64, ``indices``
    int32 below 2**31 nodes (``index_dtype_for``).  The method is in the
    module docstring.

    ``part_entries`` is the most drawn list entries sorted at once (default
    ``default_part_entries(device)``).  Draw passes: the parts plus one.
    Peak device memory: a part's keys, their sorted copy, the sort's scratch
    and the distinct keys (``BYTES_PER_PART_ENTRY`` in all), one chunk with
    its filter, and, in the first draw, two int64
    counts per node (the running sum and a chunk's ``bincount``).  Host memory: ``indptr``, an int64 count per node, and
    ``indices`` sized for every drawn entry, of which the returned graph
    views the front (as ``from_edge_chunks`` does).

    Raises ``ValueError`` for an id outside ``[0, num_nodes)``, chunks of
    unequal lengths, or ``chunks()`` giving a different number of edges to a
    part than the first draw counted.
    """
    device = torch.device(device)
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be non-negative, got {num_nodes}")
    part_entries = default_part_entries(device) if part_entries is None else int(part_entries)
    if part_entries < 1:
        raise ValueError(f"part_entries must be at least 1, got {part_entries}")
    index_dtype = index_dtype_for(num_nodes)
    # keys (owner - lo) * num_nodes + entry stay below 2**63
    max_owners = (2**63 - 1) // num_nodes if num_nodes else 1

    with tqdm(desc="sorting edges into lists (parts + 1 draws)", unit="draw", leave=False,
              disable=not progress) as bar:
        drawn = torch.zeros(num_nodes, dtype=torch.int64, device=device)
        for src, dst in chunks():
            src, dst = _device_ids(src, dst, num_nodes, device)
            drawn += torch.bincount(dst, minlength=num_nodes)
            if both_ways:
                drawn += torch.bincount(src, minlength=num_nodes)
        drawn_indptr = indptr_from_counts(drawn.cpu().numpy())
        del drawn
        parts = owner_parts(drawn_indptr, part_entries, max_owners)
        bar.total = len(parts) + 1
        bar.update(1)

        counts = torch.zeros(num_nodes, dtype=torch.int64)
        indices = torch.empty(int(drawn_indptr[-1]), dtype=index_dtype)
        filled = 0
        for lo, hi in parts:
            keys = _sorted_part(chunks, num_nodes, lo, hi, int(drawn_indptr[hi] - drawn_indptr[lo]), both_ways,
                                drop_self_loops, device)
            counts[lo:hi].copy_(torch.bincount(torch.div(keys, num_nodes, rounding_mode="floor"), minlength=hi - lo))
            indices[filled: filled + len(keys)].copy_(keys.remainder_(num_nodes).to(index_dtype))
            filled += len(keys)
            del keys
            bar.update(1)
    indptr = indptr_from_counts(counts.numpy())
    return CSRGraph(torch.from_numpy(indptr), indices[:filled], validate=False)


def _sorted_part(chunks, num_nodes: int, lo: int, hi: int, expected: int, both_ways: bool, drop_self_loops: bool,
                 device: torch.device) -> torch.Tensor:
    """The distinct keys ``(owner - lo) * num_nodes + entry`` of the lists ``[lo, hi)``, ascending, from a new
    draw of every chunk that must give those lists the ``expected`` entries the first draw counted."""
    keys = torch.empty(expected, dtype=torch.int64, device=device)
    arrived = 0  # entries owned by the part, self-loops included
    kept = 0  # of them, the keys written
    for src, dst in chunks():
        src, dst = _device_ids(src, dst, num_nodes, device)
        for owner, entry in ((dst, src), (src, dst)) if both_ways else ((dst, src),):
            mine = (owner >= lo) & (owner < hi)
            arrived += int(mine.sum())
            if arrived > expected:
                raise ValueError(f"chunks() gave the lists [{lo}, {hi}) more edges the second time than the first")
            if drop_self_loops:
                mine &= owner != entry
            part_keys = (owner[mine] - lo) * num_nodes + entry[mine]
            keys[kept: kept + len(part_keys)] = part_keys
            kept += len(part_keys)
    if arrived < expected:
        raise ValueError(f"chunks() gave the lists [{lo}, {hi}) fewer edges the second time than the first")
    return torch.unique(keys[:kept], sorted=True)  # on CUDA a radix sort of the keys alone: no permutation
