"""Splitting a graph's nodes into parts for domain-parallel full-batch training (SAR: each worker holds one).

METIS (Karypis and Kumar, 1998), through the ``pymetis`` bindings: multilevel
k-way partitioning of the graph's symmetrised adjacency (each edge both
ways, self-loops dropped, duplicate pairs merged) into parts of equal node
count within METIS's default 3% imbalance, cutting as few edges as it
finds.  A part's workers exchange rows only across cut edges, so the cut is
the communication of one layer and the balance its slowest worker.

``Partition.edge_cut`` counts the graph's own list entries (edges u -> v)
whose two ends lie in different parts: the rows one layer of aggregation
fetches from other workers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pymetis
import scipy.sparse as sp

from tiering.graph.csr import CSRGraph


@dataclasses.dataclass(frozen=True)
class Partition:
    """``parts[v]``: the part of node v, each in ``range(num_parts)``."""

    parts: np.ndarray
    num_parts: int

    def __post_init__(self):
        if self.num_parts < 1:
            raise ValueError(f"a partition has at least one part, got {self.num_parts}")
        if self.parts.ndim != 1 or (len(self.parts) and not 0 <= self.parts.min() <= self.parts.max() < self.num_parts):
            raise ValueError(f"every node's part must be in [0, {self.num_parts})")

    def sizes(self) -> np.ndarray:
        return np.bincount(self.parts, minlength=self.num_parts)

    def balance(self) -> float:
        """The largest part over the mean part: 1 is perfect balance."""
        sizes = self.sizes()
        return float(sizes.max() / sizes.mean())

    def edge_cut(self, graph: CSRGraph) -> int:
        """The graph's edges whose ends are in different parts."""
        indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
        owner_of_list = np.repeat(self.parts, np.diff(indptr))
        return int(np.count_nonzero(owner_of_list != self.parts[indices]))

    def nodes_of(self, part: int) -> np.ndarray:
        """Part ``part``'s nodes, in increasing id."""
        return np.flatnonzero(self.parts == part)


def metis_partition(graph: CSRGraph, num_parts: int, seed: int = 0) -> Partition:
    """METIS's k-way partition of ``graph`` (symmetrised) into ``num_parts`` parts; one part is the whole graph."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"the number of parts must be an integer of at least 1, got {num_parts!r}")
    n = graph.num_nodes
    if num_parts > max(n, 1):
        raise ValueError(f"cannot split {n:,} nodes into {num_parts} non-empty parts")
    if num_parts == 1:
        return Partition(np.zeros(n, dtype=np.int32), 1)
    adjacency = sp.csr_matrix((np.ones(graph.num_edges, dtype=np.int8), graph.indices.numpy(), graph.indptr.numpy()),
                              shape=(n, n))
    symmetric = (adjacency + adjacency.T).tocsr()
    symmetric.setdiag(0)
    symmetric.eliminate_zeros()
    options = pymetis.Options(seed=seed)
    adjacency = pymetis.CSRAdjacency(symmetric.indptr, symmetric.indices)
    _, membership = pymetis.part_graph(num_parts, adjacency, options=options)
    return Partition(np.asarray(membership, dtype=np.int32), num_parts)
