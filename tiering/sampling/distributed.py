"""Neighbour sampling over a CSR split across processes: shuffle, sample, reshuffle (DSP §4; Data Tiering §5.5).

With G training processes (one per GPU), no process needs the whole graph:
``GraphPartition`` keeps the neighbour lists of the nodes a rank *owns*:

* ``interleaved`` (default): node v belongs to rank v mod G, matching the
  interleaved feature tier (``tiering.features.placement``).  After reordering, ids
  are sorted by hotness, so this spreads the hubs, and the sampling work,
  evenly;
* ``contiguous``: rank r owns the id range [r N / G, (r + 1) N / G).

Each layer of a minibatch is sampled collectively by all ranks at once
(``DistributedNeighborSampler.hop``):

1. **shuffle**: every rank sorts its frontier by owner and sends each owner
   its ids (``all_to_all``), with its hop seed beside the counts;
2. **sample**: every owner samples the lists it received with the
   single-process primitive (``tiering.sampling.neighbors.sample_rows``), each
   requester's ids with that requester's seed and the node id as stream;
3. **reshuffle**: the counts and sampled neighbours go back
   (``all_to_all``) and are put back in frontier order.

Because a node's draws depend only on (hop seed, node id), a rank gets
exactly the minibatch ``NeighborSampler`` would have drawn from the whole
graph with the same generator: the tests check this with 2 and 4 gloo
processes.  Four collectives per hop; every rank must call ``sample`` the
same number of times (the training loop gives every rank the same number of
minibatches).  Collectives run on the process group's device: CPU tensors
for gloo, the current GPU for NCCL.  Collectives on one group must be issued
in the same order on every rank, so a sampler that runs beside other
collectives (a pipeline's sampler thread beside DDP's gradient all-reduce,
DSP §5) needs a group of its own: ``dist.new_group`` over the same
ranks.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from tiering.graph.csr import CSRGraph
from tiering.sampling.neighbors import NeighborSampler, check_nodes, sample_rows, seed_from

PARTITIONS = ("interleaved", "contiguous")


@dataclasses.dataclass
class GraphPartition:
    """The neighbour lists of the nodes one rank owns; ``indices`` hold global node ids."""

    indptr: torch.Tensor  # int64, one entry per owned node + 1
    indices: torch.Tensor
    num_nodes: int  # of the whole graph
    rank: int
    world: int
    scheme: str

    @classmethod
    def of(cls, graph: CSRGraph, rank: int, world: int, scheme: str = "interleaved") -> "GraphPartition":
        """Rank ``rank``'s part of ``graph`` out of ``world``."""
        if scheme not in PARTITIONS:
            raise ValueError(f"scheme must be one of {PARTITIONS}, got {scheme!r}")
        if not 0 <= rank < world:
            raise ValueError(f"rank must be in [0, {world}), got {rank}")
        n = graph.num_nodes
        if scheme == "interleaved":
            owned = torch.arange(rank, n, world, device=graph.indptr.device)
        else:
            owned = torch.arange(rank * n // world, (rank + 1) * n // world, device=graph.indptr.device)
        starts = graph.indptr[owned]
        degrees = graph.indptr[owned + 1] - starts
        indptr = torch.zeros(len(owned) + 1, dtype=torch.int64, device=owned.device)
        torch.cumsum(degrees, 0, out=indptr[1:])
        # entry k of owned list i sits at starts[i] + k in the whole CSR
        within = torch.arange(int(indptr[-1]), device=owned.device) - torch.repeat_interleave(indptr[:-1], degrees)
        indices = graph.indices[torch.repeat_interleave(starts, degrees) + within]
        return cls(indptr, indices, n, rank, world, scheme)

    def owner(self, nodes: torch.Tensor) -> torch.Tensor:
        if self.scheme == "interleaved":
            return nodes % self.world
        # the largest r with r * N // G <= v, i.e. floor(((v + 1) * G - 1) / N)
        return torch.div((nodes + 1) * self.world - 1, self.num_nodes, rounding_mode="floor")

    def local_rows(self, nodes: torch.Tensor) -> torch.Tensor:
        """Rows of this partition's CSR for nodes it owns."""
        if self.scheme == "interleaved":
            return torch.div(nodes, self.world, rounding_mode="floor")
        return nodes - self.rank * self.num_nodes // self.world

    def to(self, device) -> "GraphPartition":
        return dataclasses.replace(self, indptr=self.indptr.to(device), indices=self.indices.to(device))


def _exclusive_cumsum(values: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(values)
    torch.cumsum(values[:-1], 0, out=out[1:])
    return out


class DistributedNeighborSampler(NeighborSampler):
    """``NeighborSampler`` whose hops are sampled collectively over a ``GraphPartition``.

    ``backend`` picks the local sampling primitive (``cpu``: numba; ``torch``:
    where the partition lives, a GPU for distributed GPU sampling).
    ``group`` is the process group of its collectives: one of its own when
    sampling runs beside other collectives.
    """

    def __init__(self, partition: GraphPartition, fanouts, backend: str = "cpu", group=None):
        super().__init__(partition, fanouts, backend)
        self.group = group
        if dist.get_world_size(group) != partition.world:
            raise ValueError(f"the partition is for {partition.world} ranks but the group has {dist.get_world_size(group)}")
        nccl = dist.get_backend(group) == "nccl"
        self.comm_device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")

    def _exchange(self, tensor: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> torch.Tensor:
        out = torch.empty(sum(out_splits), dtype=tensor.dtype, device=self.comm_device)
        dist.all_to_all_single(out, tensor.to(self.comm_device), out_splits, in_splits, group=self.group)
        return out

    def hop(self, nodes: torch.Tensor, fanout: int, generator):
        part = self.graph
        check_nodes(part, nodes, fanout)
        world, device = part.world, nodes.device
        nodes = nodes.to(torch.int64)
        owner = part.owner(nodes)
        order = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=world)
        # 1. shuffle: counts with this rank's hop seed beside each, then the ids
        header = torch.stack([send_counts, torch.full_like(send_counts, seed_from(generator))], dim=1).flatten()
        received = self._exchange(header, [2] * world, [2] * world).cpu()
        send_split, recv_split = send_counts.tolist(), received[0::2].tolist()
        requests = self._exchange(nodes[order], recv_split, send_split).to(part.indptr.device)
        # 2. sample each requester's ids with its seed, the node ids as streams
        counts, neighbors = [], []
        for ids, seed in zip(requests.split(recv_split), received[1::2].tolist()):
            c, nb = sample_rows(part.indptr, part.indices, part.local_rows(ids), fanout, seed, ids, self.backend)
            counts.append(c.to(torch.int64))
            neighbors.append(nb.to(part.indices.dtype))
        # 3. reshuffle: counts, then neighbours, back to the requesters
        back_counts = self._exchange(torch.cat(counts), send_split, recv_split).to(device)
        reply_split = [int(c.sum()) for c in counts]
        expect_split = [int(c.sum()) for c in back_counts.split(send_split)]
        back = self._exchange(torch.cat(neighbors), expect_split, reply_split).to(device)
        # undo the sort by owner: frontier position order[i] got back_counts[i] neighbours at starts[i]
        result_counts = torch.empty_like(back_counts)
        result_counts[order] = back_counts
        starts = torch.empty_like(back_counts)
        starts[order] = _exclusive_cumsum(back_counts)
        within = torch.arange(len(back), device=device) - torch.repeat_interleave(_exclusive_cumsum(result_counts), result_counts)
        return result_counts, back[torch.repeat_interleave(starts, result_counts) + within], None
