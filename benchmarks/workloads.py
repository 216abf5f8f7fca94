"""The data the benchmarks run on, built one way for asv's ``bench_*`` modules, pytest-benchmark's ``microbench``
and the DGL comparison (``benchmarks.peers``).

Most graphs are papers-like: the ``papers-s`` preset's shape at a given number
of nodes.  Graph kernels are also measured on the two shapes at either end of
it (``GRAPH_SHAPES``): a uniform random graph, whose short lists of equal
length expose per-node overhead, and a Chung-Lu power-law graph, whose hubs
expose per-edge work.  The loader workload is such a graph reordered by weighted reverse
PageRank, with a random feature table and the input nodes of sampled
minibatches as the ids to gather.
"""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import torch

from suite.datasets import PRESETS
from suite.datasets.build import generate_graph
from suite.datasets.dataset import Dataset
from suite.datasets.dcsbm import block_model
from suite.datasets.rmat import rmat_edges
from tiering.graph.csr import CSRGraph
from tiering.graph.reorder import reorder_graph
from tiering.graph.scores import weighted_reverse_pagerank
from tiering.sampling.neighbors import NeighborSampler, sample_neighbors

NODES = 1 << 18
"""Size of the papers-like graph that benchmarks not parametrised by size run on."""
SIZES = [1 << 16, NODES]
"""Sizes of the papers-like graphs ``make_graphs`` writes."""
PAPER_BATCH = 8
"""Data Tiering §5.4's batch for papers (the paper's regime), the lookahead sweep's."""


def papers_like_graph(num_nodes: int) -> CSRGraph:
    graph, _ = generate_graph(dataclasses.replace(PRESETS["papers-s"], num_nodes=num_nodes))
    return graph


def uniform_graph(num_nodes: int, avg_degree: float = 10.0, seed: int = 0) -> CSRGraph:
    """Every list entry drawn uniformly from all nodes (R-MAT with four equal quadrants is exactly that), then
    coalesced; ``num_nodes`` a power of two."""
    src, dst = rmat_edges(num_nodes.bit_length() - 1, int(num_nodes * avg_degree), seed, params=(0.25, 0.25, 0.25))
    return CSRGraph.from_edges(src, dst, num_nodes).coalesce()


def power_law_graph(num_nodes: int, avg_degree: float = 21.0, exponent: float = 2.3, seed: int = 0) -> CSRGraph:
    """Chung-Lu (Chung and Lu, PNAS 2002): each entry's owner and value drawn in proportion to power-law weights
    with the given degree exponent (a one-class degree-corrected block model), then coalesced.

    At 2M nodes the top 1% of lists hold about a third of the entries, as in ogbn-papers100M (Data Tiering §3.1).
    """
    model = block_model(num_nodes, 1, exponent, 1.0, 0.0, False, seed)
    src, dst = model.draw(0, int(num_nodes * avg_degree))
    return CSRGraph.from_edges(src, dst, num_nodes).coalesce()


GRAPH_SHAPES = {"uniform": uniform_graph, "power-law": power_law_graph, "papers-like": papers_like_graph}
"""The graph shapes graph kernels are measured on, by name: ``GRAPH_SHAPES[name](num_nodes)``."""


def make_graphs() -> str:
    """The papers-like graphs of every size in SIZES and the other shapes at NODES, saved as .npy files; returns
    their directory (for setup_cache)."""
    root = Path(tempfile.mkdtemp(prefix="tierbench-asv-"))
    wanted = [("papers-like", n) for n in SIZES] + [(shape, NODES) for shape in GRAPH_SHAPES if shape != "papers-like"]
    for shape, n in wanted:
        graph = GRAPH_SHAPES[shape](n)
        np.save(root / f"{shape}-indptr-{n}.npy", graph.indptr.numpy())
        np.save(root / f"{shape}-indices-{n}.npy", graph.indices.numpy())
    return str(root)


def load_graph(root, n, shape: str = "papers-like") -> CSRGraph:
    indptr = torch.from_numpy(np.load(f"{root}/{shape}-indptr-{n}.npy"))
    indices = torch.from_numpy(np.load(f"{root}/{shape}-indices-{n}.npy"))
    return CSRGraph(indptr, indices)


def loader_workload(graph: CSRGraph, batches: int | None, seed: int,
                    batch_size: int = 64) -> tuple[Dataset, list[torch.Tensor]]:
    """The dataset the loader benchmarks gather from and the ids they gather.

    ``graph`` is reordered by weighted reverse PageRank of every 97th node (the
    training split) and given 128 random float32 features per node; the ids are
    the input nodes of ``batches`` consecutive minibatches of ``batch_size``
    training seeds (``None``: an epoch, every minibatch of the split), sampled
    with fanouts 12,12,12 from a generator seeded with ``seed``.
    """
    n = graph.num_nodes
    train = torch.arange(0, n, 97)
    graph, old_to_new, _ = reorder_graph(graph, weighted_reverse_pagerank(graph, train))
    features = torch.randn(n, 128, generator=torch.Generator().manual_seed(0))
    dataset = Dataset("bench", graph, features, torch.zeros(n, dtype=torch.int64), {"train": old_to_new[train]},
                      num_classes=1, scorer="wrpr")
    sampler = NeighborSampler(graph, (12, 12, 12))
    generator = torch.Generator().manual_seed(seed)
    seeds = dataset.splits["train"]
    batches = -(-len(seeds) // batch_size) if batches is None else batches
    return dataset, [sampler.sample(seeds[i * batch_size : (i + 1) * batch_size], generator).input_nodes
                     for i in range(batches)]


def relabel_workload(graph: CSRGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """``(frontier, neighbors)`` of the last hop of a (15,10,5) minibatch of 1024 seeds: the input nodes of its
    first two hops and the fanout-5 sample of them, what ``append_new_nodes`` relabels last."""
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:1024]
    frontier = NeighborSampler(graph, (15, 10)).sample(seeds, torch.Generator().manual_seed(1)).input_nodes
    _, neighbors = sample_neighbors(graph, frontier, 5, torch.Generator().manual_seed(2))
    return frontier, neighbors


class OnPapersLikeGraphs:
    """Base of asv benchmark classes parametrised over the papers-like graphs of SIZES."""

    params = SIZES
    param_names = ["num_nodes"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()
