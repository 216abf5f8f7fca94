"""PyG's NodeLoader over suite.pyg: for every loader, the trainer's minibatches and features, and the loader's counters;
its LinkLoader over the same sampler."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling, NodeSamplerInput

from suite.datasets.reordered import load_reordered
from suite.pyg import (
    CSRGraphStore,
    EpochOrder,
    LoaderFeatureStore,
    TierbenchNodeSampler,
)
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


def test_gns_importance_weights_are_the_sampler_outputs_metadata(reordered_tiny):
    dataset = reordered_tiny
    loader = create_loader("gns", dataset, hot_fraction=0.2)
    (mini, _), *_ = trainer_batches(dataset, loader, 0)
    sampler = TierbenchNodeSampler(dataset.graph, FANOUTS, loader=loader, seed=SEED)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, mini.seeds))  # the epoch's first batch, its first draws
    assert torch.equal(out.metadata[2], torch.cat([b.edge_weight for b in mini.blocks[::-1]]))


def test_the_graph_store_is_the_csr_as_pygs_csc_layout(tiny):
    store = CSRGraphStore(tiny.graph)
    (attr,) = store.get_all_edge_attrs()
    row, colptr = store[attr]
    assert row is tiny.graph.indices and colptr is tiny.graph.indptr  # no copy
    src, dst, _ = store.coo()
    assert torch.equal(torch.stack([src.long(), dst.long()]), torch.from_numpy(tiny.graph.to_edge_index()).long())
    with pytest.raises(KeyError, match="not found"):
        store.get_edge_index(("paper", "cites", "paper"), "csc")


def test_the_feature_store_serves_x_through_the_loader_and_y_from_the_labels(tiny):
    loader = create_loader("in-memory", tiny)
    store = LoaderFeatureStore(loader, tiny.labels)
    ids = torch.tensor([5, 0, 5])
    assert torch.equal(store[None, "x", ids], tiny.features[ids]) and loader.stats().accesses == 3
    assert torch.equal(store[None, "y", ids], tiny.labels[ids])
    assert store.get_tensor_size(None, "x") == (tiny.num_nodes, tiny.feature_dim)
    with pytest.raises(KeyError, match="homogeneous node attributes x, y"):
        store["paper", "x", ids]


def test_work_outside_tierbenchs_sampler_is_refused(tiny):
    loader = create_loader("in-memory", tiny)
    sampler = TierbenchNodeSampler(tiny.graph, FANOUTS, loader=loader)
    seeds = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="homogeneous"):
        sampler.sample_from_nodes(NodeSamplerInput(None, seeds, input_type="paper"))
    with pytest.raises(ValueError, match="not temporal"):
        sampler.sample_from_nodes(NodeSamplerInput(None, seeds, time=torch.zeros(2)))
    batches = NodeLoader((LoaderFeatureStore(loader), CSRGraphStore(tiny.graph)), node_sampler=sampler,
                         input_nodes=seeds, batch_size=2, num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(batches))


def test_the_readmes_pyg_example_runs_as_written(tiny):
    """In a fresh interpreter, on the tiny dataset the session has built (the cache is the test's)."""
    readme = README.read_text()
    section = readme[readme.index("## Training a PyG model through tierbench's loaders"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    run = subprocess.run([sys.executable, "-c", code], cwd=README.parent, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    printed = run.stdout
    assert re.search(r"epoch 1: loss [\d.]+, \d+ rows gathered, hit ratio 0\.\d\d", printed), printed


@pytest.mark.parametrize("negatives", [None, NegativeSampling("binary", amount=2)])
def test_a_link_loader_samples_from_the_endpoints_of_its_edges(tiny, negatives):
    loader = create_loader("uva", tiny)
    sampler = TierbenchNodeSampler(tiny.graph, FANOUTS, loader=loader, seed=SEED)
    edges = torch.stack([tiny.graph.indices[:40].long(),
                         torch.repeat_interleave(torch.arange(tiny.num_nodes), tiny.graph.degrees())[:40]])
    batches = list(LinkLoader((LoaderFeatureStore(loader), CSRGraphStore(tiny.graph)), link_sampler=sampler,
                              edge_label_index=(None, edges), neg_sampling=negatives, batch_size=16))
    assert [len(batch.input_id) for batch in batches] == [16, 16, 8]
    for batch in batches:
        labelled = batch.n_id[batch.edge_label_index]
        positives = len(batch.input_id)
        assert torch.equal(labelled[:, :positives], edges[:, batch.input_id])
        if negatives is not None:  # PyG's negatives follow, labelled 0, also sampled around
            assert labelled.shape[1] == 3 * positives and (batch.edge_label[positives:] == 0).all()
        ends = torch.unique(labelled)
        assert torch.equal(batch.n_id[: len(ends)].sort().values, ends)  # the distinct endpoints are the seeds
        assert torch.equal(batch.x, tiny.features[batch.n_id])  # through the loader
