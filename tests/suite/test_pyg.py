"""PyG's NodeLoader over suite.pyg: for every loader, the trainer's minibatches and features, and the loader's counters."""

import re
from pathlib import Path

import pytest
import torch
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from suite.datasets.reordered import load_reordered
from suite.pyg import CSRGraphStore, EpochOrder, LoaderFeatureStore, TierbenchNodeSampler
from suite.registry import LOADERS, create_loader
from suite.training.trainer import Trainer

FANOUTS = (10, 5)
BATCH = 300  # the last batch of tiny's 1229 training nodes is short
SEED = 3
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def reordered_tiny(tiny):
    return load_reordered("tiny", "wrpr", progress=False)  # every loader accepts it, ``tiered`` needs it


def pyg_batches(dataset, loader, epoch):
    sampler = TierbenchNodeSampler(dataset.graph, FANOUTS, loader=loader, seed=SEED)
    ids = dataset.splits["train"]
    batches = NodeLoader((LoaderFeatureStore(loader, dataset.labels), CSRGraphStore(dataset.graph)),
                         node_sampler=sampler, input_nodes=ids, batch_size=BATCH,
                         sampler=EpochOrder(sampler, len(ids)))
    loader.start_epoch(epoch)
    loader.reset_stats()
    sampler.set_epoch(epoch)
    return list(batches)


def trainer_batches(dataset, loader, epoch):
    """The trainer's minibatches of ``epoch`` and the features its gather stage brings for them."""
    trainer = Trainer(dataset, loader, FANOUTS, batch_size=BATCH, seed=SEED)
    loader.start_epoch(epoch)
    loader.reset_stats()
    batches, _, _ = trainer._batches("train", epoch, shuffle=True)
    return [(batch, loader.gather(batch.input_nodes)) for batch in batches]


@pytest.mark.parametrize("name", LOADERS)
def test_pyg_batches_are_the_trainers_minibatches_with_the_loaders_features_and_counters(name, reordered_tiny):
    dataset = reordered_tiny
    for epoch in (0, 1):  # each built afresh: a page cache or a refreshed GNS cache starts as the trainer's did
        reference = create_loader(name, dataset, hot_fraction=0.2)
        expected = trainer_batches(dataset, reference, epoch)
        expected_stats = reference.stats()
        loader = create_loader(name, dataset, hot_fraction=0.2)
        got = pyg_batches(dataset, loader, epoch)
        assert len(got) == len(expected) == 5
        for batch, (mini, x) in zip(got, expected):
            assert batch.batch_size == len(mini.seeds)
            assert torch.equal(batch.n_id, mini.input_nodes) and torch.equal(batch.n_id[: batch.batch_size], mini.seeds)
            hops = mini.blocks[::-1]
            assert batch.num_sampled_edges == [b.edge_index.shape[1] for b in hops]
            assert batch.num_sampled_nodes == [len(mini.seeds)] + [b.num_src - b.num_dst for b in hops]
            assert torch.equal(batch.edge_index, torch.cat([b.edge_index for b in hops], dim=1))
            assert torch.equal(batch.x, x)
            assert torch.equal(batch.y, dataset.labels[mini.input_nodes])
        stats = loader.stats()
        assert stats.accesses == sum(len(batch.n_id) for batch in got) > 0
        assert stats == expected_stats, name
        loader.close()
        reference.close()
