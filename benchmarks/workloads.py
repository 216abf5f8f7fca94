"""The data the benchmarks run on, built one way for asv's ``bench_*`` modules and pytest-benchmark's ``microbench``.

Graphs are papers-like: the ``papers-s`` preset's shape at a given number of
nodes.  The loader workload is such a graph reordered by weighted reverse
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
from tiering.graph import CSRGraph
from tiering.reorder import reorder_graph
from tiering.sampling import NeighborSampler, sample_neighbors
from tiering.scores import weighted_reverse_pagerank

NODES = 1 << 18
"""Size of the papers-like graph that benchmarks not parametrised by size run on."""
SIZES = [1 << 16, NODES]
"""Sizes of the papers-like graphs ``make_graphs`` writes."""


def papers_like_graph(num_nodes: int) -> CSRGraph:
    graph, _ = generate_graph(dataclasses.replace(PRESETS["papers-s"], num_nodes=num_nodes))
    return graph


def make_graphs() -> str:
    """Papers-like graphs of each size in SIZES, saved as .npy files; returns their directory (for setup_cache)."""
    root = Path(tempfile.mkdtemp(prefix="tierbench-asv-"))
    for n in SIZES:
        graph = papers_like_graph(n)
        np.save(root / f"indptr-{n}.npy", graph.indptr.numpy())
        np.save(root / f"indices-{n}.npy", graph.indices.numpy())
    return str(root)


def load_graph(root, n) -> CSRGraph:
    indptr = torch.from_numpy(np.load(f"{root}/indptr-{n}.npy"))
    indices = torch.from_numpy(np.load(f"{root}/indices-{n}.npy"))
    return CSRGraph(indptr, indices)


def loader_workload(graph: CSRGraph, batches: int, seed: int) -> tuple[Dataset, list[torch.Tensor]]:
    """The dataset the loader benchmarks gather from and the ids they gather.

    ``graph`` is reordered by weighted reverse PageRank of every 97th node (the
    training split) and given 128 random float32 features per node; the ids are
    the input nodes of ``batches`` consecutive minibatches of 64 training seeds,
    sampled with fanouts 12,12,12 from a generator seeded with ``seed``.
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
    return dataset, [sampler.sample(seeds[i * 64 : (i + 1) * 64], generator).input_nodes for i in range(batches)]


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
