"""Link prediction over edge buckets through Marius's partition buffer (Marius §3-§4).

Marius trains on a graph whose node data do not fit in memory by splitting
the nodes into p partitions and the edges into the p x p buckets they fall
in; the partition buffer holds c partitions at a time and walks the buffer
states of an edge-bucket ordering, and in each state the buckets whose two
partitions are buffered are trained.  Here the node data are the dataset's
feature table (read-only, in its ``.npy`` file, partition k being the rows
``boundaries[k]`` to ``boundaries[k + 1]``), and the model learns a map of
features to embeddings:

* ``bucket_edges`` draws a share of the graph's edges for an epoch and sorts
  them by bucket, shuffled within each (Marius shuffles a bucket's edges);
  a disjoint sample is held out for evaluation;
* ``DistMultOverFeatures``: a linear encoder of the features and DistMult's
  score ``<h_s, r * h_d>`` with one relation (the graphs are homogeneous);
* ``train_over_buckets``: one epoch in the ordering's states.  Each batch of a
  bucket's edges is scored against ``negatives`` destinations drawn uniformly
  from the buffered partitions' rows, shared by the batch (Marius samples
  negatives from the buffer), with the softmax loss; the rows come from the
  buffer's ``gather``, which refuses any row not buffered.  The epoch's time
  is split into waiting for the buffer (the first read and each
  ``advance()``) and the rest;
* ``mean_reciprocal_rank``: the rank of each held-out edge's destination
  among uniform negatives, features read from the whole table (not timed).

Everything random is fixed by one seed, so an ordering trained with and
without prefetching ends with the same parameters.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from baselines.marius.partition_buffer import PartitionBuffer
from tiering.graph.csr import CSRGraph


@dataclasses.dataclass(frozen=True)
class EdgeBuckets:
    """An epoch's edges sorted by bucket: bucket (i, j) is ``src[offsets[i * p + j]:offsets[i * p + j + 1]]`` and
    the same slice of ``dst``; ``held_out_src``/``held_out_dst`` are edges kept out of training."""

    num_partitions: int
    src: np.ndarray
    dst: np.ndarray
    offsets: np.ndarray
    held_out_src: np.ndarray
    held_out_dst: np.ndarray

    def bucket(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        k = i * self.num_partitions + j
        return self.src[self.offsets[k]:self.offsets[k + 1]], self.dst[self.offsets[k]:self.offsets[k + 1]]

    @property
    def num_edges(self) -> int:
        return len(self.src)


def bucket_edges(graph: CSRGraph, boundaries, fraction: float, *, held_out: int = 10_000, seed: int = 0
                 ) -> EdgeBuckets:
    """A ``fraction`` of ``graph``'s edges (each drawn independently), sorted by the bucket of (source partition,
    destination partition) under ``boundaries``, and up to ``held_out`` other edges for evaluation."""
    if not 0 < fraction <= 1:
        raise ValueError(f"the share of edges trained per epoch must be in (0, 1], got {fraction}")
    boundaries = np.asarray(boundaries, dtype=np.int64)
    p = len(boundaries) - 1
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    rng = np.random.default_rng(seed)
    drawn = rng.random(len(indices)) < fraction
    trained = rng.permutation(np.flatnonzero(drawn))
    others = np.flatnonzero(~drawn)
    kept_out = others[rng.choice(len(others), size=min(held_out, len(others)), replace=False)]

    def endpoints(positions):  # CSR lists hold the sources u of edges u -> v (tiering.graph.csr)
        return indices[positions].astype(np.int64), np.searchsorted(indptr, positions, side="right") - 1

    src, dst = endpoints(trained)
    def partition(nodes):
        return np.searchsorted(boundaries, nodes, side="right") - 1

    bucket = partition(src) * p + partition(dst)
    by_bucket = np.argsort(bucket, kind="stable")
    offsets = np.zeros(p * p + 1, dtype=np.int64)
    np.cumsum(np.bincount(bucket, minlength=p * p), out=offsets[1:])
    held_src, held_dst = endpoints(kept_out)
    return EdgeBuckets(p, src[by_bucket], dst[by_bucket], offsets, held_src, held_dst)


class DistMultOverFeatures(torch.nn.Module):
    """A linear encoder of node features into ``dim`` and DistMult's score with one learned relation vector."""

    def __init__(self, in_dim: int, dim: int):
        super().__init__()
        self.encoder = torch.nn.Linear(in_dim, dim, bias=False)
        self.relation = torch.nn.Parameter(torch.ones(dim))

    def forward(self, src_x, dst_x, negative_x) -> torch.Tensor:
        """Scores: column 0 each edge's own destination, then the shared negatives."""
        src, dst, negative = self.encoder(src_x) * self.relation, self.encoder(dst_x), self.encoder(negative_x)
        return torch.cat([(src * dst).sum(1, keepdim=True), src @ negative.T], dim=1)


def softmax_loss(scores: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(scores, torch.zeros(len(scores), dtype=torch.long))


@dataclasses.dataclass
class BucketEpoch:
    seconds: float
    waiting_s: float  # for the buffer: its first read and each advance()
    edges: int
    batches: int
    loss: float  # mean over the epoch's batches
    swaps: int
    disk_bytes_read: int


def _uniform_rows(buffered, boundaries: np.ndarray, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` row ids drawn uniformly from the rows of the ``buffered`` partitions."""
    starts = torch.tensor([int(boundaries[k]) for k in buffered])
    sizes = torch.tensor([int(boundaries[k + 1] - boundaries[k]) for k in buffered])
    ends = torch.cumsum(sizes, 0)
    draws = torch.randint(int(ends[-1]), (count,), generator=generator)
    which = torch.searchsorted(ends, draws, right=True)
    return starts[which] + draws - (ends[which] - sizes[which])


def train_over_buckets(buffer: PartitionBuffer, buckets: EdgeBuckets, model: torch.nn.Module,
                       optimizer: torch.optim.Optimizer, *, batch_edges: int, negatives: int, seed: int = 0,
                       progress: bool = True, label: str = "buckets") -> BucketEpoch:
    """One epoch over every bucket of ``buckets`` in the states of ``buffer``'s ordering (the buffer not started)."""
    if buckets.num_partitions != buffer.order.num_partitions:
        raise ValueError(f"the edges are in {buckets.num_partitions} x {buckets.num_partitions} buckets, the "
                         f"ordering is for {buffer.order.num_partitions} partitions")
    generator = torch.Generator().manual_seed(seed)
    model.train()
    edges = batches = 0
    loss_sum = 0.0
    start = time.perf_counter()
    buffer.start()
    waiting = time.perf_counter() - start
    states = range(len(buffer.order.states))
    for state in tqdm(states, desc=label, unit="state", disable=not progress, leave=False):
        if state:
            before = time.perf_counter()
            buffer.advance()
            waiting += time.perf_counter() - before
        for i, j in buffer.buckets():
            src, dst = buckets.bucket(i, j)
            for first in range(0, len(src), batch_edges):
                ids_src = torch.from_numpy(src[first:first + batch_edges])
                ids_dst = torch.from_numpy(dst[first:first + batch_edges])
                ids_negative = _uniform_rows(buffer.buffered, buffer.boundaries, negatives, generator)
                x = buffer.gather(torch.cat([ids_src, ids_dst, ids_negative]))
                n = len(ids_src)
                loss = softmax_loss(model(x[:n], x[n:2 * n], x[2 * n:]))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                edges, batches, loss_sum = edges + n, batches + 1, loss_sum + loss.item()
    seconds = time.perf_counter() - start
    stats = buffer.stats()
    return BucketEpoch(seconds, waiting, edges, batches, loss_sum / max(batches, 1), buffer.swaps,
                       stats.disk_bytes_read)


@torch.no_grad()
def mean_reciprocal_rank(model: torch.nn.Module, features, buckets: EdgeBuckets, *, negatives: int = 1000,
                         seed: int = 0) -> float:
    """MRR of the held-out edges' destinations among ``negatives`` uniform nodes (ties counted against)."""
    if not len(buckets.held_out_src):
        return float("nan")
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    negative = torch.randint(len(features), (negatives,), generator=generator)

    def rows(ids):
        return torch.as_tensor(np.asarray(features[np.asarray(ids)]))

    scores = model(rows(buckets.held_out_src), rows(buckets.held_out_dst), rows(negative.numpy()))
    rank = 1 + (scores[:, 1:] >= scores[:, :1]).sum(1)
    return float((1.0 / rank).mean())
