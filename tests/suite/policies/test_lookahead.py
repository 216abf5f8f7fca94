"""The lookahead cache against a plain-Python reference of its rule, and at its two ends: the static placement it
falls back on (no window) and Belady's MIN (a window over the whole trace)."""

from __future__ import annotations

import numpy as np
import pytest

from suite.policies.belady import replay_belady
from suite.policies.lookahead import replay_lookahead
from suite.policies.static import replay_static
from tests.suite.policies.test_replay import batches_of, random_trace


def reference_lookahead(trace, capacity, window, order, cost):
    """The rule as the lookahead module states it, on Python sets, minibatch by minibatch."""
    batches = [set(b) for b in batches_of(trace)]
    num_batches = len(batches)
    rank = {int(v): i for i, v in enumerate(order)}

    def next_use(v, after):
        return next((m for m in range(after + 1, num_batches) if v in batches[m]), None)

    def key(v, b):  # after minibatch b the window is b+1 .. b+window; beyond it, the static rank
        m = next_use(v, b)
        return m if m is not None and m <= b + window else num_batches + rank[v]

    first = {v: next_use(v, -1) for v in range(trace.num_nodes)}
    ahead = sorted((v for v in first if first[v] is not None and first[v] < window), key=lambda v: (first[v], v))
    cache = ahead[:capacity]
    cache += [int(v) for v in order if v not in cache][:capacity - len(cache)]
    cache = set(cache)
    hits, miss_bytes, fills = [], [], []
    for b, batch in enumerate(batches):
        hit = cache & batch
        hits.append(len(hit))
        miss_bytes.append(sum(int(cost[v]) for v in batch - hit))
        filled = 0
        for v in sorted(batch - hit):
            if key(v, b) >= num_batches or key(v, b) > b + window:
                continue
            if len(cache) < capacity:
                cache.add(v)
            else:
                top = max(cache, key=lambda u: (key(u, b), u))
                if not key(v, b) < key(top, b):
                    continue
                cache.remove(top)
                cache.add(v)
            filled += 1
        fills.append(filled)
    return sum(hits), sum(miss_bytes), sum(fills)


def case_of(seed):
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(5, 60))
    trace = random_trace(rng, num_nodes, batches=int(rng.integers(1, 40)), largest=int(rng.integers(1, min(15, num_nodes) + 1)),
                         epochs=int(rng.integers(1, 3)))
    capacity = int(rng.integers(1, num_nodes + 1))
    cost = rng.integers(1, 100, size=num_nodes)
    return rng, trace, capacity, cost, rng.permutation(num_nodes)


def totals(replay):
    return int(replay.hits.sum()), int(replay.miss_bytes.sum()), int(replay.fills.sum())


@pytest.mark.parametrize("seed", range(60))
def test_the_lookahead_cache_follows_its_rule(seed):
    rng, trace, capacity, cost, order = case_of(seed)
    for window in (0, 1, 2, int(rng.integers(3, 50))):
        [replay] = replay_lookahead(trace, [capacity], cost, window, order)
        assert totals(replay) == reference_lookahead(trace, capacity, window, order, cost), window


@pytest.mark.parametrize("seed", range(40))
def test_a_window_over_the_whole_trace_is_belady(seed):
    _, trace, capacity, cost, order = case_of(100 + seed)
    belady = replay_belady(trace, capacity, cost)
    for window in (trace.num_batches, trace.num_batches + 7):
        [lookahead] = replay_lookahead(trace, [capacity], cost, window, order)
        for counter in ("hits", "miss_bytes", "fills"):
            assert (getattr(lookahead, counter) == getattr(belady, counter)).all(), counter


@pytest.mark.parametrize("seed", range(40))
def test_no_window_is_the_static_order_and_no_window_beats_belady(seed):
    _, trace, capacity, cost, order = case_of(200 + seed)
    static = replay_static("s", trace.counts(), order, [capacity], cost)[0]
    [lookahead] = replay_lookahead(trace, [capacity], cost, 0, order)
    assert totals(lookahead) == totals(static)
    bound = replay_belady(trace, capacity, cost).hits.sum()
    for window in (0, 1, 3, 8, 30):
        assert replay_lookahead(trace, [capacity], cost, window, order)[0].hits.sum() <= bound


def test_a_bad_window_or_order_is_refused():
    trace = random_trace(np.random.default_rng(1), 10, batches=3, largest=3)
    cost = np.ones(10, np.int64)
    with pytest.raises(ValueError, match="at least 0 minibatches"):
        replay_lookahead(trace, [2], cost, -1, np.arange(10))
    with pytest.raises(ValueError, match="every one of the 10 rows once"):
        replay_lookahead(trace, [2], cost, 4, np.zeros(10, np.int64))
    assert replay_lookahead(trace, [2], cost, 256, np.arange(10))[0].policy == "lookahead-256"
