"""GNS: degree-sampled cache, a sampler biased towards it with unbiased weights, exact features."""

import numpy as np
import pytest
import torch

from baselines.gns import GNSLoader
from suite.training.trainer import Trainer, majority_accuracy
from tiering.graph.csr import CSRGraph
from tiering.sampling.neighbors import NeighborSampler


def star_graph():
    """Node 0's list holds nodes 1..40; nodes 1..40 hold random others; 41..199 filler."""
    rng = np.random.default_rng(0)
    n = 200
    src = list(range(1, 41)) + rng.integers(0, n, 3000).tolist()
    dst = [0] * 40 + rng.integers(1, n, 3000).tolist()
    return CSRGraph.from_edges(src, dst, n).coalesce()


def loader_for(graph, capacity, **options):
    features = torch.arange(graph.num_nodes, dtype=torch.float32)[:, None].repeat(1, 4)
    return GNSLoader(features, graph.appearances(), capacity, **options), features


def test_the_cache_is_drawn_proportionally_to_degree_and_refreshed(tiny):
    loader, _ = loader_for(tiny.graph, 400, refresh_every=2)
    counts = tiny.graph.appearances()
    first = loader.cached_mask.copy()
    assert first.sum() == 400
    assert counts[torch.from_numpy(first)].float().mean() > 2 * counts.float().mean()  # high-degree nodes favoured
    loader.start_epoch(1)
    assert (loader.cached_mask == first).all()  # not a refresh epoch
    loader.start_epoch(2)
    assert not (loader.cached_mask == first).all() and loader.cached_mask.sum() == 400


def test_gns_gathers_exact_rows(tiny):
    loader = GNSLoader(tiny.features, tiny.graph.appearances(), 500)
    ids = torch.randint(0, tiny.num_nodes, (1000,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(loader.gather(ids), tiny.features[ids])
    stats = loader.stats()
    assert stats.hits == int(torch.from_numpy(loader.cached_mask)[ids].sum())
    assert stats.pcie_payload_bytes == (1000 - stats.hits) * tiny.feature_dim * 4


def test_gns_samples_cached_neighbours_far_more_often_than_uniform_sampling(tiny):
    loader, _ = loader_for(tiny.graph, tiny.num_nodes // 10)
    seeds = tiny.splits["train"][:512]
    cached = torch.from_numpy(loader.cached_mask)

    def cached_share(sampler):
        batch = sampler.sample(seeds, torch.Generator().manual_seed(3))
        block = batch.blocks[-1]  # the seeds' own hop
        return cached[batch.input_nodes[block.edge_index[0]]].float().mean().item()

    uniform = cached_share(NeighborSampler(tiny.graph, (5,)))
    gns = cached_share(loader.make_sampler(tiny.graph, (5,)))
    # stated threshold: with bias 8, at least 1.5x the uniform share of cached neighbours
    assert gns > 1.5 * uniform, (gns, uniform)


def test_importance_weights_keep_the_neighbour_mean_unbiased():
    graph = star_graph()
    loader, features = loader_for(graph, 60)
    sampler = loader.make_sampler(graph, (5,))
    nodes = torch.zeros(20_000, dtype=torch.int64)  # node 0, 20,000 times
    counts, neighbors, weights = sampler.hop(nodes, 5, torch.Generator().manual_seed(9))
    assert (counts == 5).all()
    estimates = (weights * features[neighbors.long(), 0]).view(-1, 5).sum(dim=1)
    true_mean = features[1:41, 0].mean().item()  # node 0's list is 1..40
    in_cache = loader.cached_mask[1:41].mean()
    assert 0 < in_cache < 1  # the test needs both kinds in the list
    assert abs(estimates.mean().item() - true_mean) < 0.01 * true_mean
    # and the sampler really is biased: cached entries are drawn more often than their share
    assert loader.cached_mask[neighbors.numpy()].mean() > in_cache + 0.2


def test_gns_trains_through_the_weighted_layer(tiny):
    loader = GNSLoader(tiny.features, tiny.graph.appearances(), 400)
    trainer = Trainer(tiny, loader, (10, 5), batch_size=256, seed=0)
    assert trainer.model.weighted
    results = [trainer.train_epoch(e, progress=False) for e in range(4)]
    assert results[-1].loss < results[0].loss * 0.8
    assert results[-1].valid_accuracy > majority_accuracy(tiny) + 0.1
    assert 0 < results[0].hit_ratio < 1


def test_bad_gns_settings_are_refused(tiny):
    with pytest.raises(ValueError, match="refresh_every and bias"):
        GNSLoader(tiny.features, tiny.graph.appearances(), 10, bias=0.5)
    with pytest.raises(ValueError, match=r"capacity must be in"):
        GNSLoader(tiny.features, tiny.graph.appearances(), 10**6)
