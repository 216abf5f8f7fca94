"""The lookahead loader against the lab's replay of the same trace: the same hits, PCIe bytes and rows admitted, and
the rows it returns are the table's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suite.policies.lookahead import replay_lookahead
from tests.suite.policies.test_replay import batches_of, random_trace
from tiering.features.lookahead import LookaheadLoader
from tiering.features.traffic import zero_copy_row_payload


def drive(loader, batches, window, lead=lambda b: 0):
    """Gather every minibatch, each announced ``window`` minibatches ahead, as ``LookaheadLoader.announce`` does, or
    ``lead(b)`` more before minibatch b is gathered (a pipeline's sampler running ahead)."""
    announced = 0
    for b, ids in enumerate(batches):
        while announced < len(batches) and announced <= b + window + lead(b):
            loader.look_ahead(torch.tensor(batches[announced], dtype=torch.int64))
            announced += 1
        yield torch.tensor(ids, dtype=torch.int64), loader.gather(torch.tensor(ids, dtype=torch.int64))


@pytest.mark.parametrize("seed", range(25))
def test_the_loader_counts_what_the_lab_replays_and_returns_the_tables_rows(seed):
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(5, 80))
    trace = random_trace(rng, num_nodes, batches=int(rng.integers(1, 40)),
                         largest=int(rng.integers(1, min(20, num_nodes) + 1)))
    features = torch.randn(num_nodes, int(rng.choice([3, 16, 33])))
    capacity = int(rng.integers(0, num_nodes + 1))
    order = rng.permutation(num_nodes)
    batches = batches_of(trace)
    for window in (0, 1, 3, int(rng.integers(4, 60))):
        loader = LookaheadLoader(features, capacity, order=order, window=window)
        for ids, rows in drive(loader, batches, window):
            assert torch.equal(rows, features[ids])
        stats = loader.stats()
        assert stats.accesses == trace.num_accesses
        if capacity == 0:
            assert stats.hits == 0
            continue
        cost = zero_copy_row_payload(torch.arange(num_nodes), loader.row_bytes, loader.host.host_offset,
                                     loader.host.variant).numpy()
        [replay] = replay_lookahead(trace, [capacity], cost, window, order)
        assert (stats.hits, stats.pcie_payload_bytes, loader.rows_admitted) == (
            int(replay.hits.sum()), int(replay.miss_bytes.sum()), int(replay.fills.sum())), window


@pytest.mark.parametrize("seed", range(10))
def test_minibatches_announced_further_ahead_than_the_window_change_nothing_the_cache_does(seed):
    """A pipeline's sampler announces minibatches as it samples them, a varying number ahead of the window: the rule
    still sees each one only ``window`` minibatches ahead, so the counts are the lab's replay of that window."""
    rng = np.random.default_rng(seed)
    trace = random_trace(rng, 50, batches=40, largest=15)
    features = torch.randn(50, 4)
    batches = batches_of(trace)
    leads = rng.integers(0, 6, len(batches))
    for window in (0, 1, 3):
        for lead in (lambda b: len(batches), lambda b: int(leads[b])):  # all at once, or a varying lead
            loader = LookaheadLoader(features, 12, window=window)
            for ids, rows in drive(loader, batches, window, lead):
                assert torch.equal(rows, features[ids])
            [replay] = replay_lookahead(trace, [12], zero_copy_row_payload(torch.arange(50), 16).numpy(), window,
                                        np.arange(50))
            assert (loader.stats().hits, loader.rows_admitted) == (int(replay.hits.sum()), int(replay.fills.sum()))


def test_the_pending_ids_take_room_for_the_window_not_for_every_minibatch_announced():
    """Announcing appends a minibatch's ids to buffers that a gather moves past: over a long epoch they stay within a
    few windows' ids (announcing costs a minibatch's ids, not the window's), and the counts still agree with the
    lab's replay."""
    rng = np.random.default_rng(7)
    trace = random_trace(rng, 60, batches=400, largest=12)
    features = torch.randn(60, 4)
    batches = batches_of(trace)
    window = 3
    loader = LookaheadLoader(features, 15, window=window)
    widest = max(len(ids) for ids in batches)
    for ids, rows in drive(loader, batches, window):
        assert torch.equal(rows, features[ids])
        assert len(loader._id_buffer) <= 4 * (window + 2) * widest
    [replay] = replay_lookahead(trace, [15], zero_copy_row_payload(torch.arange(60), 16).numpy(), window, np.arange(60))
    assert (loader.stats().hits, loader.rows_admitted) == (int(replay.hits.sum()), int(replay.fills.sum()))


def test_announce_looks_ahead_for_the_caller_and_unannounced_gathers_change_nothing():
    rng = np.random.default_rng(3)
    trace = random_trace(rng, 40, batches=30, largest=12)
    features = torch.randn(40, 8)

    class Batch:
        def __init__(self, ids):
            self.input_nodes = torch.tensor(ids, dtype=torch.int64)

    batches = [Batch(ids) for ids in batches_of(trace)]
    loader = LookaheadLoader(features, 10, window=4)
    for batch in loader.announce(iter(batches)):
        assert torch.equal(loader.gather(batch.input_nodes), features[batch.input_nodes])
    [replay] = replay_lookahead(trace, [10], zero_copy_row_payload(torch.arange(40), 32).numpy(), 4, np.arange(40))
    assert loader.stats().hits == replay.hits.sum() and loader.rows_admitted == replay.fills.sum()
    cached = loader.cache.clone()
    admitted = loader.rows_admitted
    everything = torch.arange(40)
    assert torch.equal(loader.gather(everything), features)  # an evaluation pass: served, nothing admitted
    assert loader.rows_admitted == admitted and torch.equal(loader.cache, cached)


def test_bad_settings_are_refused():
    features = torch.zeros(10, 4)
    with pytest.raises(ValueError, match="capacity must be in"):
        LookaheadLoader(features, 11)
    with pytest.raises(ValueError, match="at least 0 minibatches"):
        LookaheadLoader(features, 2, window=-1)
    with pytest.raises(ValueError, match="every one of the 10 rows once"):
        LookaheadLoader(features, 2, order=np.zeros(10, np.int64))
