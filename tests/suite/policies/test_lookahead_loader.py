"""The lookahead loader against the lab's replay of the same trace: the same hits, PCIe bytes and rows admitted, and
the rows it returns are the table's."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from suite.policies.lookahead import replay_lookahead
from tests.suite.policies.test_replay import batches_of, random_trace
from tiering.features.lookahead import BEYOND, LookaheadLoader
from tiering.features.traffic import zero_copy_row_payload
from tiering.heap import above


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


def as_minibatches(lists):
    """Each list of ids as a minibatch the loader's ``announce`` takes (its ``input_nodes``)."""
    return (types.SimpleNamespace(input_nodes=torch.tensor(ids, dtype=torch.int64)) for ids in lists)


def interrupted_then(loader, cut, then):
    """An epoch of ``cut``'s two lists of minibatches through ``loader.announce``, stopped after gathering the first
    (the second's first ``window`` announced, never gathered), then the next epoch, ``then``: ``epoch_counts`` of
    it."""
    gathered, announced = cut
    batches = loader.announce(as_minibatches(gathered + announced))
    for _ in gathered:
        loader.gather(next(batches).input_nodes)
    batches.close()  # an exception in training, or a break
    loader.start_epoch(1)
    return epoch_counts(loader, then)


def epoch_counts(loader, batches):
    """Run ``batches`` through ``loader.announce``: each minibatch's rows and hits, and the rows admitted."""
    admitted, counts = loader.rows_admitted, []
    for batch in loader.announce(as_minibatches(batches)):
        hits = loader.stats().hits
        counts.append((loader.gather(batch.input_nodes), loader.stats().hits - hits))
    return counts, loader.rows_admitted - admitted


@pytest.mark.parametrize("seed", range(6))
def test_an_epoch_after_one_cut_short_goes_as_after_one_that_ended(seed):
    """Rows 0-39 are read by the first epoch's gathered minibatches and by the next epoch; 40-59 only by the
    minibatches the cut epoch announced and never gathered, which are never cached (placement and admissions take
    rows 0-39 here), so the cache stands as after an epoch that ended with its last gather: the next epoch must go
    as it goes then."""
    rng = np.random.default_rng(seed)
    features = torch.randn(60, 4)
    gathered = batches_of(random_trace(rng, 40, batches=20, largest=10))
    forgotten = [[v + 40 for v in ids] for ids in batches_of(random_trace(rng, 20, batches=8, largest=6))]
    then = batches_of(random_trace(rng, 60, batches=25, largest=12))
    for window in (0, 1, 3, 6):
        cut = LookaheadLoader(features, 12, window=window)
        ended = LookaheadLoader(features, 12, window=window)
        epoch_counts(ended, gathered)
        ended.start_epoch(1)
        after_cut, after_end = interrupted_then(cut, (gathered, forgotten), then), epoch_counts(ended, then)
        for (rows, hits), (expected_rows, expected_hits), ids in zip(after_cut[0], after_end[0], then):
            assert torch.equal(rows, features[ids]) and torch.equal(expected_rows, features[ids])
            assert hits == expected_hits, window
        assert after_cut[1] == after_end[1] and (window == 0 or after_cut[1] > 0), window
        assert torch.equal(cut.cache, ended.cache)


def test_an_epoch_cut_short_leaves_no_cached_row_kept_for_a_minibatch_that_will_not_come():
    """After the cut, nothing is announced: every cached row is ranked by the static order alone, the heap in order
    (the rows kept for the forgotten minibatches would otherwise outlive every other)."""
    rng = np.random.default_rng(11)
    features = torch.randn(50, 4)
    trace = batches_of(random_trace(rng, 50, batches=30, largest=10))
    loader = LookaheadLoader(features, 15, order=rng.permutation(50), window=5)
    interrupted_then(loader, (trace[:12], trace[12:]), [])
    cached = loader._heap[:loader._size]
    assert len(cached) == 15 and (loader._key[cached] == BEYOND + loader.rank[cached]).all()
    assert all(not above(loader._key, cached[i], cached[(i - 1) // 2]) for i in range(1, len(cached)))
    assert (loader._where[cached] == np.arange(len(cached))).all()


def test_an_epoch_cut_before_the_cache_was_placed_places_it_from_the_next_epochs_window():
    rng = np.random.default_rng(5)
    features = torch.randn(40, 4)
    trace = random_trace(rng, 40, batches=20, largest=10)
    cut = LookaheadLoader(features, 10, window=6)
    for ids in batches_of(random_trace(rng, 40, batches=4, largest=10)):  # fewer than the window: nothing placed
        cut.look_ahead(torch.tensor(ids, dtype=torch.int64))
    cut.start_epoch(1)
    counts, admitted = epoch_counts(cut, batches_of(trace))
    [replay] = replay_lookahead(trace, [10], zero_copy_row_payload(torch.arange(40), 16).numpy(), 6, np.arange(40))
    assert (sum(hits for _, hits in counts), admitted) == (int(replay.hits.sum()), int(replay.fills.sum()))
