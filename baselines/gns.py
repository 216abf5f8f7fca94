"""GNS, Global Neighbour Sampling (Dong et al., KDD 2021): a degree-sampled global cache and a sampler biased towards it.

* **Cache.** ``capacity`` nodes are drawn without replacement with probability
  proportional to how many neighbour lists they appear in (Efraimidis and
  Spirakis's weighted sampling: the ``capacity`` largest ``log(u) / weight``),
  their features copied to GPU memory behind a node -> slot map, and the set
  is drawn again every ``refresh_every`` epochs.
* **Sampler.** For a node whose list is longer than the fanout, each of the
  ``fanout`` draws (with replacement) picks a cached entry with probability
  ``bias`` times that of an uncached one.  Draw ``e`` with probability ``q_e``
  gets the importance weight ``1 / (deg * q_e * fanout)``, so the weighted sum
  of the sampled neighbours is an unbiased estimate of the mean over the whole
  list, which is what GraphSAGE's mean aggregation estimates.  Short lists are
  taken whole with weight ``1 / deg``.  The model then aggregates with these
  weights (``suite.training.model.GraphSAGE(weighted=True)``).  ``bias`` is this
  implementation's parameter for GNS's preference; 8 by default.

Unlike data tiering, GNS changes the sampling distribution and so the model's
training signal (Data Tiering §6 makes this point): its validation accuracy is
recorded beside the others'.  Misses are gathered by the CPU and copied by DMA,
as in ``baselines.cpu_gather``; statistics are those of every loader.

The draws are counter-based (``tiering.rng``), so a seed gives the same
minibatches on any number of threads.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from tiering.graph.csr import CSRGraph
from tiering.rng import uniform
from tiering.sampling.neighbors import NeighborSampler, check_nodes, hop_layout, seed_from

from .degree_cache import CachedRowsLoader


@numba.njit(parallel=True, cache=True)
def _partition_lists(indptr, indices, cached, out, cached_count):
    """Copy every list with its cached entries first (order otherwise kept); count them."""
    for v in numba.prange(len(indptr) - 1):
        k = indptr[v]
        for p in range(indptr[v], indptr[v + 1]):
            if cached[indices[p]]:
                out[k] = indices[p]
                k += 1
        cached_count[v] = k - indptr[v]
        for p in range(indptr[v], indptr[v + 1]):
            if not cached[indices[p]]:
                out[k] = indices[p]
                k += 1


@numba.njit(parallel=True, cache=True, nogil=True)
def _gns_kernel(indptr, partitioned, cached_count, nodes, fanout, bias, seed, offsets, out, weight):
    for i in numba.prange(len(nodes)):
        start = indptr[nodes[i]]
        degree = indptr[nodes[i] + 1] - start
        base = offsets[i]
        if degree <= fanout:
            for k in range(degree):
                out[base + k] = partitioned[start + k]
                weight[base + k] = 1.0 / degree
            continue
        cached = cached_count[nodes[i]]
        total = cached * bias + (degree - cached)
        for r in range(fanout):
            if uniform(seed, i, 2 * r) * total < cached * bias:
                position = start + min(int(uniform(seed, i, 2 * r + 1) * cached), cached - 1)
                probability = bias / total
            else:
                uncached = degree - cached
                position = start + cached + min(int(uniform(seed, i, 2 * r + 1) * uncached), uncached - 1)
                probability = 1.0 / total
            out[base + r] = partitioned[position]
            weight[base + r] = 1.0 / (degree * probability * fanout)


class GNSSampler(NeighborSampler):
    """``NeighborSampler`` whose hops prefer the nodes cached by a ``GNSLoader``, with importance weights."""

    def __init__(self, graph: CSRGraph, fanouts, loader: "GNSLoader"):
        super().__init__(graph, fanouts, backend="cpu")
        self.loader = loader
        self._version = None

    def _partition(self):
        if self._version != self.loader.version:
            indptr, indices = self.graph.indptr.numpy(), self.graph.indices.numpy()
            self.partitioned = np.empty_like(indices)
            self.cached_count = np.empty(self.graph.num_nodes, dtype=np.int64)
            _partition_lists(indptr, indices, self.loader.cached_mask, self.partitioned, self.cached_count)
            self._version = self.loader.version

    def hop(self, nodes: torch.Tensor, fanout: int, generator):
        check_nodes(self.graph, nodes, fanout)
        self._partition()
        indptr = self.graph.indptr.numpy()
        ids = nodes.cpu().numpy()
        counts, offsets = hop_layout(indptr, ids, fanout)
        out = np.empty(offsets[-1], dtype=self.partitioned.dtype)
        weight = np.empty(offsets[-1], dtype=np.float32)
        seed = np.uint64(seed_from(generator))
        _gns_kernel(indptr, self.partitioned, self.cached_count, ids, fanout, float(self.loader.bias), seed, offsets, out, weight)
        return torch.from_numpy(counts), torch.from_numpy(out), torch.from_numpy(weight)


class GNSLoader(CachedRowsLoader):
    def __init__(self, features: torch.Tensor, appearances: torch.Tensor, capacity: int, device="cpu", *,
                 refresh_every: int = 1, bias: float = 8.0, seed: int = 0):
        super().__init__(features, capacity, device)
        if refresh_every < 1 or bias < 1:
            raise ValueError(f"refresh_every and bias must be at least 1, got {refresh_every} and {bias}")
        if len(appearances) != self.num_rows:
            raise ValueError(f"appearances has {len(appearances)} entries for {self.num_rows} rows")
        self.refresh_every = refresh_every
        self.bias = bias
        self.seed = seed
        self._weight = appearances.to(torch.float64)
        self.version = None
        self.refresh(0)

    def refresh(self, epoch: int) -> None:
        """Draw the global node set again, proportionally to degree and without replacement, and reload the cache."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        # exponential races: node v finishes at -log(u)/w_v; the first ``capacity`` to finish are a weighted sample
        race = -torch.log(torch.rand(self.num_rows, dtype=torch.float64, generator=generator)) / self._weight
        self.load(torch.topk(race, self.capacity, largest=False).indices)
        self.version = epoch

    def start_epoch(self, epoch: int) -> None:
        if epoch % self.refresh_every == 0 and epoch != self.version:
            self.refresh(epoch)

    def make_sampler(self, graph: CSRGraph, fanouts) -> GNSSampler:
        return GNSSampler(graph, fanouts, self)
