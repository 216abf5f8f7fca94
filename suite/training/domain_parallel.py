"""Domain-parallel neighbour aggregation over a partitioned graph: vanilla, and SAR's sequential aggregation with
rematerialisation (SAR).

Each of W workers holds one part of the graph's nodes (``LocalGraph``): their
rows of the layer input, and the mean-aggregation matrix of their nodes'
in-lists split by the part that owns each neighbour, ``A[q]`` (the worker's
nodes x the rows of part q it needs).  A layer's aggregation of transformed
neighbours, ``sum_q A[q] @ (H_q @ W)``, needs the rows ``H_q`` of every other
part; the two ways of getting them:

* **vanilla** (``fetch_all``): every worker receives all the rows it needs
  from all the others at once (``all_to_all_single``) and aggregates them
  with ordinary autograd, which keeps them for the backward pass (``W``'s
  gradient needs them): a worker's memory grows with its whole halo;
* **SAR** (``sequential_aggregation``): a ``torch.autograd.Function`` that
  takes the other parts one at a time, in W - 1 steps (at step k worker r
  receives from r + k and sends to r - k, mod W), adds ``A[q] @ (H_q @ W)``
  to its sum and frees ``H_q``; the backward pass fetches each ``H_q`` again
  (rematerialisation) to add ``H_q^T A[q]^T G`` to ``W``'s gradient, and sends
  ``A[q]^T G W^T``, the gradient of the rows it used, back to their owner.
  At most one part's rows are held at a time.

Both leave a worker's own rows to the caller (``A[rank] @ (H @ W)``, plain
autograd).  Point-to-point and collective calls go through
``torch.distributed`` (gloo on CPUs, NCCL on GPUs); every worker must call
the same aggregations in the same order, forward and backward.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import torch
import torch.distributed as dist

from baselines.sar.metis import Partition
from tiering.graph.csr import CSRGraph


def _csr(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    """A float32 sparse CSR matrix from coordinates (rows need not be sorted)."""
    order = np.lexsort((cols, rows))
    crow = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=crow[1:])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols[order].astype(np.int64)),
                                       torch.from_numpy(values[order].astype(np.float32)), shape,
                                       check_invariants=False)


@dataclasses.dataclass
class LocalGraph:
    """One worker's share of a partitioned graph.

    ``nodes``: its nodes' global ids (increasing); ``blocks[q]``: the mean
    aggregation of its nodes over their in-neighbours in part q, as a sparse
    matrix (its nodes x ``needs[q]``; ``blocks[rank]`` is over its own rows),
    with ``blocks_t[q]`` its transpose; ``needs[q]``: the rows of part q it
    reads (indices into q's nodes); ``sends[q]``: its own rows part q reads.
    """

    rank: int
    world: int
    nodes: np.ndarray
    blocks: dict[int, torch.Tensor]
    blocks_t: dict[int, torch.Tensor]
    needs: dict[int, np.ndarray]
    sends: dict[int, torch.Tensor]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def halo_rows(self) -> int:
        """Rows of other parts this worker reads per layer."""
        return sum(len(self.needs[q]) for q in self.peers())

    def peers(self) -> list[int]:
        return [q for q in range(self.world) if q != self.rank]

    @classmethod
    def build(cls, graph: CSRGraph, partition: Partition, rank: int, world: int) -> LocalGraph:
        """Worker ``rank``'s share; with ``world`` > 1 every worker calls this together (they tell each other what
        they need)."""
        if partition.num_parts != world:
            raise ValueError(f"the partition has {partition.num_parts} parts for {world} workers")
        if len(partition.parts) != graph.num_nodes:
            raise ValueError(f"the partition covers {len(partition.parts):,} nodes; the graph has {graph.num_nodes:,}")
        parts = partition.parts
        position = np.empty(len(parts), dtype=np.int64)  # a node's index among its part's nodes
        for part in range(world):
            members = partition.nodes_of(part)
            position[members] = np.arange(len(members))
        nodes = partition.nodes_of(rank)
        indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
        starts, degrees = indptr[nodes], indptr[nodes + 1] - indptr[nodes]
        total = int(degrees.sum())
        row = np.repeat(np.arange(len(nodes)), degrees)
        offset = np.arange(total) - np.repeat(np.cumsum(degrees) - degrees, degrees)
        sources = indices[np.repeat(starts, degrees) + offset].astype(np.int64)
        weight = (1.0 / np.repeat(np.maximum(degrees, 1), degrees)).astype(np.float32)
        owner = parts[sources]
        blocks, blocks_t, needs = {}, {}, {}
        for q in range(world):
            mine = owner == q
            columns = position[sources[mine]]
            needs[q] = np.unique(columns)
            if q != rank:
                columns = np.searchsorted(needs[q], columns)
            width = len(needs[q]) if q != rank else len(nodes)
            blocks[q] = _csr(row[mine], columns, weight[mine], (len(nodes), width))
            if q != rank:  # SAR's backward pass multiplies by the transposes of the other parts' blocks
                blocks_t[q] = _csr(columns, row[mine], weight[mine], (width, len(nodes)))
        needs[rank] = np.arange(0)
        sends = cls._exchange_needs(needs, rank, world)
        return cls(rank, world, nodes, blocks, blocks_t, needs, sends)

    @staticmethod
    def _exchange_needs(needs: dict[int, np.ndarray], rank: int, world: int) -> dict[int, torch.Tensor]:
        """What each part reads of this worker's rows, from what each worker needs (two ``all_to_all_single``)."""
        if world == 1:
            return {}
        counts = torch.tensor([len(needs[q]) for q in range(world)], dtype=torch.int64)
        incoming = torch.empty_like(counts)
        dist.all_to_all_single(incoming, counts)
        wanted = torch.from_numpy(np.concatenate([needs[q] for q in range(world)]).astype(np.int64))
        received = torch.empty(int(incoming.sum()), dtype=torch.int64)
        dist.all_to_all_single(received, wanted, incoming.tolist(), counts.tolist())
        pieces = torch.split(received, incoming.tolist())
        return {q: pieces[q] for q in range(world) if q != rank}


def _swap(send: torch.Tensor, to: int, receive: torch.Tensor, source: int) -> None:
    """Send ``send`` to worker ``to`` while receiving ``receive`` from worker ``source``."""
    payload = send.contiguous()  # held until the send completes
    requests = [dist.isend(payload, to), dist.irecv(receive, source)]
    for request in requests:
        request.wait()


def _steps(graph: LocalGraph):
    """SAR's W - 1 steps: ``(the part read from, the part sending to)``."""
    for k in range(1, graph.world):
        yield (graph.rank + k) % graph.world, (graph.rank - k) % graph.world


def _fetch(graph: LocalGraph, h: torch.Tensor, source: int, to: int) -> torch.Tensor:
    """Rows ``needs[source]`` of part ``source``'s input, while sending ours that part ``to`` reads."""
    rows = h.new_empty((len(graph.needs[source]), h.shape[1]))
    _swap(h[graph.sends[to]], to, rows, source)
    return rows


class SequentialAggregation(torch.autograd.Function):
    """SAR: ``sum_q A[q] @ (H_q @ weight)`` over the other parts, one part at a time, rematerialised backward."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        total = h.new_zeros((graph.num_nodes, weight.shape[1]))
        for source, to in _steps(graph):
            rows = _fetch(graph, h, source, to)
            total += graph.blocks[source] @ (rows @ weight)
            del rows  # the next part's rows take their place
        ctx.save_for_backward(h, weight)
        ctx.graph = graph
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, weight = ctx.saved_tensors
        graph = ctx.graph
        grad_h, grad_weight = torch.zeros_like(h), torch.zeros_like(weight)
        for source, to in _steps(graph):
            rows = _fetch(graph, h, source, to)  # rematerialised: fetched again rather than kept
            spread = graph.blocks_t[source] @ grad
            grad_weight += rows.T @ spread
            del rows
            theirs = h.new_empty((len(graph.sends[to]), h.shape[1]))
            _swap(spread @ weight.T, source, theirs, to)  # gradients go back to the rows' owner
            grad_h.index_add_(0, graph.sends[to], theirs)
        return grad_h, grad_weight, None


class FetchAll(torch.autograd.Function):
    """Vanilla domain parallelism's exchange: every row this worker needs from every other part, at once; backward,
    their gradients back to their owners."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        peers = graph.peers()
        out_counts = [len(graph.sends[q]) if q != graph.rank else 0 for q in range(graph.world)]
        in_counts = [len(graph.needs[q]) for q in range(graph.world)]
        send = h[torch.cat([graph.sends[q] for q in peers])] if peers else h[:0]
        halo = h.new_empty((sum(in_counts), h.shape[1]))
        dist.all_to_all_single(halo, send.contiguous(), in_counts, out_counts)
        ctx.graph, ctx.counts, ctx.rows = graph, (in_counts, out_counts), h.shape[0]
        return halo

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        graph, (in_counts, out_counts) = ctx.graph, ctx.counts
        back = grad.new_empty((sum(out_counts), grad.shape[1]))
        dist.all_to_all_single(back, grad.contiguous(), out_counts, in_counts)
        grad_h = grad.new_zeros((ctx.rows, grad.shape[1]))
        peers = graph.peers()
        if peers:
            grad_h.index_add_(0, torch.cat([graph.sends[q] for q in peers]), back)
        return grad_h, None


def fetch_all(h: torch.Tensor, weight: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
    """Vanilla: ``sum_q A[q] @ (H_q @ weight)`` over the other parts, all fetched at once and kept for backward."""
    if graph.world == 1:
        return h.new_zeros((graph.num_nodes, weight.shape[1]))
    halo = FetchAll.apply(h, graph)
    transformed = halo @ weight
    pieces = torch.split(transformed, [len(graph.needs[q]) for q in graph.peers()])
    return sum(graph.blocks[q] @ piece for q, piece in zip(graph.peers(), pieces))


def sequential_aggregation(h: torch.Tensor, weight: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
    """SAR: the same sum as ``fetch_all``, one part at a time, rematerialised in the backward pass."""
    if graph.world == 1:
        return h.new_zeros((graph.num_nodes, weight.shape[1]))
    return SequentialAggregation.apply(h, weight, graph)


AGGREGATIONS = {"vanilla": fetch_all, "sar": sequential_aggregation}
"""The ways to aggregate the other parts' rows, by the name tables use."""
