"""Node-wise neighbour sampling (GraphSAGE, Hamilton et al. 2017; Data Tiering §2.2).

One hop, ``sample_neighbors(graph, nodes, fanout, generator)``: for every
node, ``fanout`` distinct *entries* of its list, chosen uniformly without
replacement, or the whole list when it is shorter.  Returns ``(counts,
neighbors)``: ``counts[i]`` entries for ``nodes[i]``, concatenated in
``neighbors``.

Both implementations draw a uniform k-subset with Floyd's algorithm (Bentley
and Floyd, CACM 1987): for j = d-k, ..., d-1 pick t uniform in [0, j]; take
t unless it was already taken, else take j.  It needs k draws and no O(d)
scratch, so a hub with 370,000 entries costs what a leaf does.

* ``cpu``: numba, parallel over batches of nodes.
* ``torch``: the same algorithm vectorised over nodes with torch ops, k rounds
  of batched draws and comparisons; it runs wherever the CSR tensors live: GPU
  memory, or host memory mapped into the GPU's address space (UVA sampling,
  ``tiering.features.zero_copy.mapped_graph``).

Both draw the same random numbers: draw r for node i is the counter-based
hash of (hop seed, stream i, r) (``tiering.rng``; the torch backend computes
the same SplitMix64 with int64 tensor arithmetic), so the two backends, on
any number of threads and on any device, return identical samples.  The
stream of a node is its position in ``nodes`` unless ``streams`` says
otherwise; ``NeighborSampler`` passes the node ids themselves (a frontier has
no repeats), which makes a node's sample independent of where it sits in the
frontier and of which process samples it: the distributed sampler
(``tiering.sampling.distributed``) returns exactly what this one does.

``NeighborSampler`` chains the hops into a minibatch: the seeds' lists are
sampled, the new nodes join the frontier, and so on for each fanout.  Node
lists keep a prefix property (layer l+1's nodes start with layer l's), which
is what PyG's ``SAGEConv`` expects for bipartite message passing: a block is
an ``edge_index`` with sources indexing the larger node list and targets its
prefix.  ``input_nodes`` (the nodes whose features the minibatch needs) starts
with the seeds.  With the ``cpu`` backend, a hop from a frontier of fewer than
``SERIAL_HOP_BELOW`` nodes (every hop of a minibatch of the paper's 8 seeds)
is drawn, relabelled and laid out as a block in one serial numba call: there
the staged path's parallel regions and Python steps cost more than the work
(0.4-0.65 of the staged path's time for minibatches of 8 seeds, fanouts
(12, 12, 12), on this project's 2-core CPU machine: asv's ``SmallMinibatch``
in ``benchmarks/bench_sampling.py``).  Both paths draw the same minibatches.
"""

from __future__ import annotations

import copy
import dataclasses
import threading

import numba
import numpy as np
import torch

from tiering.graph.csr import CSRGraph
from tiering.prefetch import prefetch
from tiering.rng import stream_hashes, uniform, uniform_from_hashes

BACKENDS = ("cpu", "torch")


def seed_from(generator: torch.Generator | None) -> int:
    """A 62-bit seed drawn from ``generator`` (advancing it; a CPU or CUDA one), or from torch's default one."""
    device = generator.device if generator is not None else "cpu"
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=device).item())


def check_nodes(graph, nodes: torch.Tensor, fanout: int) -> None:
    """Refuse a bad fanout and nodes that are not 1-D integer ids of ``graph`` (anything with ``num_nodes``)."""
    if fanout < 1:
        raise ValueError(f"fanout must be at least 1, got {fanout}")
    if nodes.dim() != 1:
        raise ValueError(f"nodes must be one-dimensional, got shape {tuple(nodes.shape)}")
    if nodes.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"nodes must be int32 or int64, got {nodes.dtype}")
    if nodes.numel():
        low, high = int(nodes.min()), int(nodes.max())
        if low < 0 or high >= graph.num_nodes:
            bad = int(torch.nonzero((nodes < 0) | (nodes >= graph.num_nodes))[0, 0])
            raise ValueError(f"nodes[{bad}] = {int(nodes[bad])} is not a node id in [0, {graph.num_nodes})")


def check_fanouts(fanouts) -> tuple[int, ...]:
    """``fanouts`` as a tuple of ints, refused when empty or when one is below 1."""
    fanouts = tuple(int(f) for f in fanouts)
    if not fanouts or min(fanouts) < 1:
        raise ValueError(f"fanouts must be one or more positive numbers, got {fanouts}")
    return fanouts


def check_distinct(seeds: torch.Tensor) -> None:
    """Refuse seeds that repeat a node: a minibatch's seeds, like every frontier, are distinct (a node's stream is
    its id)."""
    if len(torch.unique(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct node ids")


_BATCH = 64  # nodes whose memory reads are issued together


@numba.njit(cache=True, nogil=True, inline="always")  # nogil: a sampler thread runs beside training
def _sample_batch(indptr, indices, rows, streams, fanout, seed, offsets, out, batch):
    """Batch ``batch`` of ``_BATCH`` nodes, in three stages: their list starts, then the positions drawn in each list
    (kept in ``out`` meanwhile, each entry's read prefetched as it is drawn), then the entries at those positions, so
    that the batch's cache misses overlap."""
    first = batch * _BATCH
    size = min(_BATCH, len(rows) - first)
    starts = np.empty(size, dtype=np.int64)
    for b in range(size):
        starts[b] = indptr[rows[first + b]]
    for b in range(size):
        i = first + b
        base = offsets[i]
        degree = indptr[rows[i] + 1] - starts[b]
        if degree <= fanout:
            for k in range(degree):
                out[base + k] = k
            prefetch(indices, starts[b])
            continue
        for r in range(fanout):  # Floyd
            j = degree - fanout + r
            t = min(int(uniform(seed, streams[i], r) * (j + 1)), j)
            for q in range(r):
                if out[base + q] == t:
                    t = j
                    break
            out[base + r] = t
            prefetch(indices, starts[b] + t)
    for b in range(size):
        start = starts[b]
        for p in range(offsets[first + b], offsets[first + b + 1]):
            out[p] = indices[start + out[p]]


@numba.njit(parallel=True, cache=True, nogil=True)
def _sample_kernel(indptr, indices, rows, streams, fanout, seed, offsets, out):
    """Every node's draws into ``out`` (at ``offsets``), the batches of ``_BATCH`` nodes in parallel."""
    for batch in numba.prange((len(rows) + _BATCH - 1) // _BATCH):
        _sample_batch(indptr, indices, rows, streams, fanout, seed, offsets, out, batch)


@numba.njit(parallel=True, cache=True, nogil=True)
def _counts(indptr, ids, fanout, counts):
    for i in numba.prange(len(ids)):
        counts[i] = min(indptr[ids[i] + 1] - indptr[ids[i]], fanout)


def hop_layout(indptr: np.ndarray, ids: np.ndarray, fanout: int) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, offsets)`` of one hop: ``min(degree, fanout)`` samples per node, and where each node's start."""
    counts = np.empty(len(ids), dtype=np.int64)
    _counts(indptr, ids, fanout, counts)
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return counts, offsets


def _sample_cpu(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, streams: torch.Tensor, fanout: int,
                seed: int):
    indptr_np, rows_np = indptr.numpy(), rows.numpy()
    counts, offsets = hop_layout(indptr_np, rows_np, fanout)
    out = np.empty(offsets[-1], dtype=indices.numpy().dtype)
    _sample_kernel(indptr_np, indices.numpy(), rows_np, streams.numpy(), fanout, np.uint64(seed), offsets, out)
    return torch.from_numpy(counts), torch.from_numpy(out)


def _sample_torch(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, streams: torch.Tensor, fanout: int,
                  seed: int):
    device = indptr.device
    rows = rows.to(device=device, dtype=torch.int64)
    start = indptr[rows]
    degree = indptr[rows + 1] - start
    counts = degree.clamp(max=fanout)
    # positions within each list: whole lists for short ones, Floyd's k-subset for long ones
    positions = torch.arange(fanout, device=device).expand(len(rows), fanout).clone()
    long = degree > fanout
    if bool(long.any()):
        d = degree[long]
        hashes = stream_hashes(seed, streams.to(device)[long])
        chosen = torch.empty((len(d), fanout), dtype=torch.int64, device=device)
        for r in range(fanout):
            j = d - fanout + r
            t = torch.minimum((uniform_from_hashes(hashes, r) * (j + 1)).long(), j)
            taken = (chosen[:, :r] == t[:, None]).any(dim=1)
            chosen[:, r] = torch.where(taken, j, t)
        positions[long] = chosen
    keep = torch.arange(fanout, device=device)[None, :] < counts[:, None]
    neighbors = indices[(start[:, None] + positions)[keep]]
    return counts, neighbors


def sample_rows(indptr: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor, fanout: int, seed: int,
                streams: torch.Tensor, backend: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The sampling primitive on raw CSR arrays: ``fanout`` entries of each list ``rows[i]``, drawn with stream ``streams[i]``.

    No checks: callers validate (``sample_neighbors`` for a whole graph, the
    distributed sampler for its local rows).  ``cpu`` needs CPU tensors;
    ``torch`` runs where ``indptr`` is.
    """
    if backend == "cpu":
        return _sample_cpu(indptr, indices, rows.cpu(), streams.cpu().to(torch.int64), fanout, seed)
    if backend == "torch":
        return _sample_torch(indptr, indices, rows, streams, fanout, seed)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def sample_neighbors(
    graph: CSRGraph, nodes, fanout: int, generator: torch.Generator | None = None, backend: str = "cpu",
    streams: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``fanout`` distinct entries of each node's list, uniformly; ``(counts, neighbors)``.

    ``backend="cpu"`` needs the graph in CPU memory; ``"torch"`` runs on the
    device the graph's tensors are on; both return the same sample.
    ``generator`` (CPU or CUDA) gives the hop's 62-bit seed.  ``streams``
    (default: positions 0..n-1) names each node's random stream; give distinct
    streams to distinct draws.
    """
    nodes = torch.as_tensor(nodes)
    check_nodes(graph, nodes, fanout)
    if streams is None:
        streams = torch.arange(len(nodes), device=nodes.device)
    elif streams.shape != nodes.shape:
        raise ValueError(f"streams has shape {tuple(streams.shape)}, nodes {tuple(nodes.shape)}")
    return sample_rows(graph.indptr, graph.indices, nodes, fanout, seed_from(generator), streams, backend)


@dataclasses.dataclass
class Block:
    """One bipartite layer: messages flow from ``num_src`` nodes to the first ``num_dst`` of them.

    ``edge_index[0]`` indexes the source nodes and ``edge_index[1]`` the
    destination nodes, both local to the minibatch, as ``SAGEConv((x_src,
    x_dst), edge_index)`` takes them.  ``edge_weight`` is set by samplers that
    do not sample uniformly (importance weights that keep the neighbour mean
    unbiased); uniform sampling leaves it ``None``: a plain mean.
    """

    edge_index: torch.Tensor
    num_src: int
    num_dst: int
    edge_weight: torch.Tensor | None = None

    def to(self, device) -> "Block":
        weight = None if self.edge_weight is None else self.edge_weight.to(device, non_blocking=True)
        return Block(self.edge_index.to(device, non_blocking=True), self.num_src, self.num_dst, weight)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the block holds (what a consumer on another CUDA stream must mark as in use)."""
        return [self.edge_index] if self.edge_weight is None else [self.edge_index, self.edge_weight]


@dataclasses.dataclass
class MiniBatch:
    seeds: torch.Tensor  # global ids of the nodes the loss is computed on
    input_nodes: torch.Tensor  # global ids of every node whose features are needed; seeds first
    blocks: list[Block]  # from the input layer to the seeds: blocks[0] feeds the first GNN layer

    @property
    def num_sampled_edges(self) -> int:
        return sum(int(b.edge_index.shape[1]) for b in self.blocks)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the minibatch holds, its blocks' included."""
        return [self.seeds, self.input_nodes] + [t for block in self.blocks for t in block.tensors()]


_AHEAD = 16  # how far ahead _append_kernel prefetches its map
SERIAL_HOP_BELOW = 2048
"""Frontiers of fewer nodes are sampled and relabelled by ``NeighborSampler`` in one serial numba call: every hop of a
minibatch of the paper's 8 seeds, where parallel regions and a Python step per stage cost more than the work."""


@numba.njit(cache=True, nogil=True)
def _append_kernel(frontier, neighbors, slot, nodes, local) -> int:
    """``append_new_nodes`` in one pass: ``slot[v]`` is v's position in ``nodes`` (-1: not there yet).

    Every entry of ``slot`` is -1 on entry and again on return; returns how many of ``nodes`` were filled.
    The map is read at random, so each pass prefetches the entry it will read ``_AHEAD`` steps later.
    """
    count = 0
    for i in range(len(frontier)):
        if i + _AHEAD < len(frontier):
            prefetch(slot, frontier[i + _AHEAD])
        v = frontier[i]
        if slot[v] < 0:
            slot[v] = count
            nodes[count] = v
            count += 1
    for i in range(len(neighbors)):
        if i + _AHEAD < len(neighbors):
            prefetch(slot, neighbors[i + _AHEAD])
        v = neighbors[i]
        position = slot[v]
        if position < 0:
            position = count
            slot[v] = count
            nodes[count] = v
            count += 1
        local[i] = position
    for i in range(count):
        if i + _AHEAD < count:
            prefetch(slot, nodes[i + _AHEAD])
        slot[nodes[i]] = -1
    return count


class _Slots(threading.local):
    """Each thread's node -> position map for ``_append_kernel``: all -1 between calls, grown as ids require.

    int32 while positions fit (half the cache footprint of int64: the map is read at random once per neighbour).
    """

    int32 = np.empty(0, dtype=np.int32)
    int64 = np.empty(0, dtype=np.int64)

    def at_least(self, size: int, positions: int) -> np.ndarray:
        name = "int32" if positions < 2**31 else "int64"
        table = getattr(self, name)
        if len(table) < size:
            table = np.full(max(size, 2 * len(table)), -1, dtype=table.dtype)
            setattr(self, name, table)
        return table


_SLOTS = _Slots()


def append_new_nodes(frontier: torch.Tensor, neighbors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(nodes, local)``: frontier followed by the neighbours not yet in it, in order of first
    appearance, and every neighbour's position in that list.

    On the CPU one sequential pass over a per-thread map of node ids (what DGL's and PyG's samplers
    do with a hash table); elsewhere sorting (``torch.unique``), with the same result.
    """
    if frontier.device.type == "cpu" and neighbors.device.type == "cpu":
        frontier_np, neighbors_np = frontier.numpy(), neighbors.numpy()
        largest = max(int(frontier_np.max(initial=-1)), int(neighbors_np.max(initial=-1)))
        nodes = np.empty(len(frontier_np) + len(neighbors_np), dtype=frontier_np.dtype)
        local = np.empty(len(neighbors_np), dtype=np.int64)
        count = _append_kernel(frontier_np, neighbors_np, _SLOTS.at_least(largest + 1, len(nodes)), nodes, local)
        return torch.from_numpy(nodes[:count]), torch.from_numpy(local)
    return append_new_nodes_by_sorting(frontier, neighbors)


@numba.njit(cache=True, nogil=True)
def _serial_hop(indptr, indices, frontier, fanout, seed, slot):
    """A whole hop of ``NeighborSampler`` in one serial pass: each frontier node's draws (its id as its stream), the
    new nodes appended (``_append_kernel``, over ``slot``) and the block's edges; ``(nodes, edge_index)``, the
    staged path's arrays."""
    n = len(frontier)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + min(indptr[frontier[i] + 1] - indptr[frontier[i]], fanout)
    neighbors = np.empty(offsets[n], indices.dtype)
    for batch in range((n + _BATCH - 1) // _BATCH):
        _sample_batch(indptr, indices, frontier, frontier, fanout, seed, offsets, neighbors, batch)
    nodes = np.empty(n + len(neighbors), frontier.dtype)
    edge_index = np.empty((2, len(neighbors)), np.int64)
    count = _append_kernel(frontier, neighbors, slot, nodes, edge_index[0])
    for i in range(n):
        for p in range(offsets[i], offsets[i + 1]):
            edge_index[1, p] = i
    return nodes[:count], edge_index


@numba.njit(parallel=True, cache=True, nogil=True)
def _fill_destinations(offsets, out):
    for i in numba.prange(len(offsets) - 1):
        for p in range(offsets[i], offsets[i + 1]):
            out[p] = i


def destinations(counts: torch.Tensor) -> torch.Tensor:
    """``counts[i]`` copies of i for every i, in order: the local destination of each sampled edge of a hop."""
    if counts.device.type != "cpu":
        return torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts.numpy(), out=offsets[1:])
    out = np.empty(offsets[-1], dtype=np.int64)
    _fill_destinations(offsets, out)
    return torch.from_numpy(out)


def append_new_nodes_by_sorting(frontier: torch.Tensor,
                                neighbors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``append_new_nodes`` by sorting (``torch.unique``), on any device: the GPU path and the CPU path's
    reference."""
    both = torch.cat([frontier, neighbors.to(frontier.dtype)])
    unique, inverse = torch.unique(both, return_inverse=True)
    first = torch.full((len(unique),), len(both), dtype=torch.int64, device=both.device)
    first.scatter_reduce_(0, inverse, torch.arange(len(both), device=both.device), reduce="amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order), device=order.device)
    return unique[order], rank[inverse[len(frontier) :]]


class NeighborSampler:
    """Multi-layer node-wise sampling: ``sampler.sample(seeds, generator) -> MiniBatch``.

    ``fanouts`` lists the neighbours per node from the seeds outward, as the
    papers write them: (12, 12, 12) samples 12 neighbours of each seed, 12 of
    each of those, and 12 again.  Subclasses change how one hop is drawn by
    overriding ``hop`` (GNS does, ``baselines.gns``).
    """

    def __init__(self, graph: CSRGraph, fanouts, backend: str = "cpu", serial_hop_below: int = SERIAL_HOP_BELOW):
        fanouts = check_fanouts(fanouts)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if serial_hop_below < 0:
            raise ValueError(f"serial_hop_below must be at least 0, got {serial_hop_below}")
        self.graph = graph
        self.fanouts = fanouts
        self.backend = backend
        self.serial_hop_below = serial_hop_below  # 0: every hop staged (parallel regions, a Python step per stage)

    def with_fanouts(self, fanouts) -> NeighborSampler:
        """This sampler over the same graph with other ``fanouts``."""
        other = copy.copy(self)
        other.fanouts = check_fanouts(fanouts)
        return other

    def sample(self, seeds, generator: torch.Generator | None = None) -> MiniBatch:
        device = self.graph.indptr.device
        seeds = torch.as_tensor(seeds).to(device=device, dtype=torch.int64)
        check_distinct(seeds)
        check_nodes(self.graph, seeds, 1)  # the seeds; every later frontier is made of the graph's own lists
        nodes = seeds
        blocks = []
        for fanout in self.fanouts:
            if self._in_one_call(nodes):
                next_nodes, block = self._serial_hop(nodes, fanout, generator)
            else:
                counts, neighbors, weights = self.hop(nodes, fanout, generator)
                counts, neighbors = counts.to(device), neighbors.to(device)
                next_nodes, src = append_new_nodes(nodes, neighbors)
                block = Block(torch.stack([src, destinations(counts)]), len(next_nodes), len(nodes), weights)
            blocks.append(block)
            nodes = next_nodes
        return MiniBatch(seeds=seeds, input_nodes=nodes, blocks=blocks[::-1])

    def _in_one_call(self, frontier: torch.Tensor) -> bool:
        """Whether a hop from ``frontier`` goes in one serial call (below ``serial_hop_below`` nodes): uniform draws
        (this class's ``hop``, not a subclass's) by the ``cpu`` backend over a CSR in host memory, from a small
        frontier."""
        return (len(frontier) < self.serial_hop_below and self.backend == "cpu"
                and type(self).hop is NeighborSampler.hop and self.graph.indptr.device.type == "cpu")

    def _serial_hop(self, frontier: torch.Tensor, fanout: int, generator) -> tuple[torch.Tensor, Block]:
        """``hop`` and the relabelling after it in one call (``_serial_hop``): the next frontier and the block."""
        slot = _SLOTS.at_least(self.graph.num_nodes, len(frontier) * (1 + fanout))
        nodes, edge_index = _serial_hop(self.graph.indptr.numpy(), self.graph.indices.numpy(), frontier.numpy(),
                                        fanout, np.uint64(seed_from(generator)), slot)
        return torch.from_numpy(nodes), Block(torch.from_numpy(edge_index), len(nodes), len(frontier))

    def hop(self, nodes: torch.Tensor, fanout: int, generator):
        """``(counts, neighbors, edge_weight or None)`` for one layer: uniform, without replacement."""
        counts, neighbors = sample_neighbors(self.graph, nodes, fanout, generator, self.backend, streams=nodes)
        return counts, neighbors, None


def epoch_generator(seed: int, epoch: int, stream: int) -> torch.Generator:
    """The generator of ``stream`` in epoch ``epoch`` of a run seeded ``seed``: stream 0 orders the seeds
    (``epoch_order``), stream 1 (one per process in a distributed run: 1 + rank) gives the hops' seeds, one draw per
    hop of each minibatch in turn (``minibatches``)."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch * 7_919 + stream)


def epoch_order(ids: torch.Tensor, seed: int, epoch: int) -> torch.Tensor:
    """``ids`` in the epoch's shuffled order, the same in every process for (seed, epoch)."""
    return ids[torch.randperm(len(ids), generator=epoch_generator(seed, epoch, 0))]


def minibatches(sampler: NeighborSampler, ids: torch.Tensor, batch_size: int, seed: int, epoch: int, shuffle: bool,
                stream: int = 1):
    """The sampled minibatches of one epoch over ``ids``, in a fixed order for (seed, epoch).

    ``stream`` selects the sampling generator (processes of a distributed run
    sample with different ones).  The generator is a CPU one whatever device
    samples: a GPU sampler then draws the same hop seeds, so the same
    minibatches, as the CPU sampler, and drawing one never waits for the GPU.
    """
    if shuffle:
        ids = epoch_order(ids, seed, epoch)
    sampling = epoch_generator(seed, epoch, stream)
    for start in range(0, len(ids), batch_size):
        yield sampler.sample(ids[start : start + batch_size], sampling)
