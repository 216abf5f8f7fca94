"""Collective sampling over a distributed CSR (DSP §4) with 2 and 4 gloo processes."""

import numpy as np
import pytest
import torch

from tests.gloo import run_gloo_groups
from tiering.graph.csr import CSRGraph
from tiering.sampling.distributed import DistributedNeighborSampler, GraphPartition
from tiering.sampling.neighbors import NeighborSampler

HUBS = torch.arange(200, 240)  # each one's list: nodes 100..159


def hubby_graph() -> CSRGraph:
    """300 nodes with random lists, 40 hubs with the same 60 distinct entries, node 7 with none."""
    rng = np.random.default_rng(1)
    src = rng.integers(0, 300, 3000)
    dst = rng.integers(0, 300, 3000)
    keep = ((dst < 200) | (dst >= 240)) & (dst != 7)
    src = np.concatenate([src[keep], np.tile(np.arange(100, 160), 40)])
    dst = np.concatenate([dst[keep], np.repeat(HUBS.numpy(), 60)])
    return CSRGraph.from_edges(src, dst, 300).coalesce()


@pytest.mark.parametrize("scheme", ["interleaved", "contiguous"])
def test_a_partition_holds_exactly_its_nodes_lists(scheme):
    graph = hubby_graph()
    indptr, indices = graph.indptr, graph.indices
    seen = torch.zeros(graph.num_nodes, dtype=torch.int64)
    for rank in range(3):
        part = GraphPartition.of(graph, rank, 3, scheme)
        nodes = torch.arange(graph.num_nodes)
        mine = nodes[part.owner(nodes) == rank]
        seen[mine] += 1
        rows = part.local_rows(mine)
        assert torch.equal(rows, torch.arange(len(mine)))
        for v, row in zip(mine.tolist(), rows.tolist()):
            assert torch.equal(part.indices[part.indptr[row] : part.indptr[row + 1]], indices[indptr[v] : indptr[v + 1]])
    assert (seen == 1).all()


def sample_like_one_process(rank, world, scheme):
    graph = hubby_graph()
    sampler = DistributedNeighborSampler(GraphPartition.of(graph, rank, world, scheme), (6, 4, 3))
    whole = NeighborSampler(graph, (6, 4, 3))
    owners = np.repeat(np.arange(300), np.diff(graph.indptr.numpy()))
    edges = set(zip(graph.indices.tolist(), owners.tolist()))  # (u, v): u is in v's list
    for batch in range(4):
        # ranks sample different seeds, of different sizes (rank 0 once asks for nothing)
        seeds = torch.randperm(300, generator=torch.Generator().manual_seed(10 * batch + rank))[: (batch + 1) * rank * 3]
        got = sampler.sample(seeds, torch.Generator().manual_seed(100 * batch + rank))
        want = whole.sample(seeds, torch.Generator().manual_seed(100 * batch + rank))
        assert torch.equal(got.input_nodes, want.input_nodes)
        for a, b in zip(got.blocks, want.blocks, strict=True):
            assert torch.equal(a.edge_index, b.edge_index) and (a.num_src, a.num_dst) == (b.num_src, b.num_dst)
            # only real edges: source node u is in the list of destination node v
            src, dst = got.input_nodes[a.edge_index[0]], got.input_nodes[a.edge_index[1]]
            assert all((u, v) in edges for u, v in zip(src.tolist(), dst.tolist()))
    with pytest.raises(ValueError, match=r"nodes\[0\] = 300 is not a node id in \[0, 300\)"):
        sampler.sample(torch.tensor([300]))


def sample_like_one_process_in_each_scheme(rank, world, schemes):
    """``sample_like_one_process`` for each of ``schemes`` in one process group (a group per scheme would start its
    processes again)."""
    for scheme in schemes:
        sample_like_one_process(rank, world, scheme)


SCHEMES = {4: ("interleaved",), 2: ("interleaved", "contiguous")}
"""The partition schemes ``sample_like_one_process`` samples over on each number of processes."""


def sample_in_each_scheme(rank, world, out_dir):
    """In a gloo group of ``world`` processes: ``sample_like_one_process`` over each of the world's schemes
    (``SCHEMES``; ``<W>-rank<rank>.done`` marks it finished without an error), then, in the group of 2,
    ``sample_the_hubs_uniformly``."""
    sample_like_one_process_in_each_scheme(rank, world, SCHEMES[world])
    (out_dir / f"{world}-rank{rank}.done").touch()
    if world == 2:
        sample_the_hubs_uniformly(rank, world, out_dir)


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    """``sample_in_each_scheme`` in a group of 4 processes and then of 2, started once for all this module's tests
    (a launch per test would start its processes again); the folder they wrote to."""
    out = tmp_path_factory.mktemp("distributed-sampling")
    run_gloo_groups(sample_in_each_scheme, SCHEMES, out, out)
    return out


@pytest.mark.parametrize("world", [2, 4], ids=["2-interleaved-contiguous", "4-interleaved"])
def test_the_distributed_sampler_draws_what_the_single_process_sampler_draws(groups, world):
    # sample_like_one_process asserts in every process (a failure there fails the fixture); each one marked its end
    assert sorted(p.name for p in groups.glob(f"{world}-rank*.done")) == [f"{world}-rank{r}.done" for r in range(world)]


def sample_the_hubs_uniformly(rank, world, out_dir):
    graph = hubby_graph()
    sampler = DistributedNeighborSampler(GraphPartition.of(graph, rank, world), (5,))
    generator = torch.Generator().manual_seed(rank)
    counts = np.zeros(300, dtype=np.int64)
    for _ in range(10):  # every rank asks its peers for their hubs' lists
        batch = sampler.sample(HUBS, generator)
        sampled = batch.input_nodes[batch.blocks[0].edge_index[0]]
        counts += np.bincount(sampled.numpy(), minlength=300)
    np.save(out_dir / f"rank{rank}.npy", counts)


def test_the_distributed_sampler_is_uniform_over_a_peers_list(groups):
    import scipy.stats  # here, not at the top: the processes of ``groups`` import this module and need none of it

    for rank in range(2):
        counts = np.load(groups / f"rank{rank}.npy")
        assert counts[100:160].sum() == 10 * 40 * 5 and counts[:100].sum() + counts[160:].sum() == 0
        assert scipy.stats.chisquare(counts[100:160]).pvalue > 0.001


def test_bad_partitions_are_refused():
    with pytest.raises(ValueError, match="scheme"):
        GraphPartition.of(hubby_graph(), 0, 2, "blocked")
    with pytest.raises(ValueError, match="rank"):
        GraphPartition.of(hubby_graph(), 2, 2)
