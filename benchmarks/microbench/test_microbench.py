"""Microbenchmarks (pytest-benchmark): ``tox -e microbench`` saves their JSON under results/microbench/.

Each records in ``extra_info`` the metric that matters beside the time:
edges per second, and for the loaders the miss ratio and modelled PCIe
bytes per gather, with the same-run time of the peer (SciPy or
``torch.index_select``) so a ratio can be read from one file.
"""

import pytest
import torch

from benchmarks.workloads import loader_workload, relabel_workload
from suite.measure.peers import adjacency, scipy_permute
from suite.measure.timing import best_wall_seconds
from suite.registry import LOADERS, create_loader
from tiering.graph.reorder import order_by_score, reorder_graph
from tiering.graph.scores import degree
from tiering.sampling.neighbors import (
    NeighborSampler,
    append_new_nodes,
    append_new_nodes_by_sorting,
    sample_neighbors,
)


def test_reorder_graph(benchmark, papers_like_graph):
    graph = papers_like_graph
    scores = degree(graph)
    benchmark(reorder_graph, graph, scores)
    new_to_old, _ = order_by_score(scores)
    matrix = adjacency(graph)
    if benchmark.stats:  # None when run with --benchmark-disable
        benchmark.extra_info["edges_per_second"] = graph.num_edges / benchmark.stats.stats.min
    _, scipy_seconds = best_wall_seconds(lambda: scipy_permute(matrix, new_to_old))
    benchmark.extra_info["scipy_permutation_seconds"] = scipy_seconds


def test_sample_neighbors(benchmark, papers_like_graph):
    graph = papers_like_graph
    frontier = torch.randint(0, graph.num_nodes, (100_000,), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    counts, _ = benchmark(sample_neighbors, graph, frontier, 12, generator)
    if benchmark.stats:  # None when run with --benchmark-disable
        benchmark.extra_info["sampled_edges_per_second"] = int(counts.sum()) / benchmark.stats.stats.min


def test_sample_minibatch(benchmark, papers_like_graph):
    """A (15,10,5) minibatch of 1024 seeds, relabelling included."""
    sampler = NeighborSampler(papers_like_graph, (15, 10, 5))
    seeds = torch.randperm(papers_like_graph.num_nodes, generator=torch.Generator().manual_seed(0))[:1024]
    batch = benchmark(sampler.sample, seeds, torch.Generator().manual_seed(1))
    if benchmark.stats:  # None when run with --benchmark-disable
        benchmark.extra_info["sampled_edges_per_second"] = batch.num_sampled_edges / benchmark.stats.stats.min


def test_relabel(benchmark, papers_like_graph):
    """The last hop's relabelling of that minibatch: one pass over a node map against sorting (its peer)."""
    frontier, neighbors = relabel_workload(papers_like_graph)
    benchmark(append_new_nodes, frontier, neighbors)
    _, sorting_seconds = best_wall_seconds(lambda: append_new_nodes_by_sorting(frontier, neighbors))
    benchmark.extra_info["sorting_seconds"] = sorting_seconds
    if benchmark.stats:
        benchmark.extra_info["sorting_time_ratio"] = sorting_seconds / benchmark.stats.stats.min


@pytest.fixture(scope="module")
def reordered(papers_like_graph):
    """The loader workload with one minibatch's input nodes."""
    dataset, (ids,) = loader_workload(papers_like_graph, batches=1, seed=2)
    return dataset, ids


IN_MEMORY = [name for name, spec in LOADERS.items() if not spec.disk]
"""The loaders that gather from memory; those that read the table's file are timed against the disk's own ceilings
(asv's ``bench_disk``)."""


@pytest.mark.parametrize("name", IN_MEMORY)
def test_gather(benchmark, reordered, name):
    dataset, ids = reordered
    device = "cuda" if torch.cuda.is_available() else "cpu"
    loader = create_loader(name, dataset, 0.1, device)
    ids = ids.to(device)
    benchmark(loader.gather, ids)
    stats = loader.stats()
    gathers = stats.accesses // len(ids)
    table = dataset.features.to(device)
    _, index_select_seconds = best_wall_seconds(lambda: torch.index_select(table, 0, ids))
    benchmark.extra_info.update(
        device=device,
        miss_ratio=1.0 - stats.hit_ratio,
        pcie_payload_bytes_per_gather=stats.pcie_payload_bytes / gathers,
        pcie_requests_per_gather=stats.pcie_requests / gathers,
        index_select_seconds=index_select_seconds,
    )
    loader.close()
