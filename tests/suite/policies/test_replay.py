"""Replaying policies: Belady's MIN against brute force, the dynamic caches against plain-Python references, and the
orders between policies that must hold on any trace."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from suite.policies.belady import replay_belady
from suite.policies.dynamic import KERNELS, replay_dynamic
from suite.policies.static import order_by, replay_static
from suite.policies.trace import AccessTrace


def random_trace(rng, num_nodes, batches, largest, epochs=1) -> AccessTrace:
    parts = [np.sort(rng.choice(num_nodes, size=rng.integers(0, largest + 1), replace=False)) for _ in range(batches)]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    cuts = np.linspace(0, batches, epochs + 1).round().astype(np.int64)
    ids = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return AccessTrace(num_nodes, ids, offsets, cuts, {})


def batches_of(trace):
    return [trace.ids[trace.batch_offsets[b]:trace.batch_offsets[b + 1]].tolist() for b in range(trace.num_batches)]


def brute_force_best(trace, capacity) -> int:
    """The most hits of any cache of ``capacity`` rows, any start: after each minibatch it may keep any
    ``capacity`` rows among those it held and those the minibatch read (dynamic programming over every set)."""
    rows = range(trace.num_nodes)
    states = [frozenset(s) for k in range(capacity + 1) for s in itertools.combinations(rows, k)]
    best = {s: 0 for s in states}
    for batch in batches_of(trace):
        read = set(batch)
        following = {}
        for s, hits in best.items():
            gained = hits + len(s & read)
            pool = sorted(s | read)
            for k in range(min(capacity, len(pool)) + 1):
                for kept in itertools.combinations(pool, k):
                    kept = frozenset(kept)
                    if following.get(kept, -1) < gained:
                        following[kept] = gained
        best = following
    return max(best.values())


def cost(n):
    return np.full(n, 7, dtype=np.int64)


@pytest.mark.parametrize("case", range(40))
def test_belady_has_the_most_hits_brute_force_finds(case):
    rng = np.random.default_rng(case)
    trace = random_trace(rng, num_nodes=int(rng.integers(3, 7)), batches=int(rng.integers(1, 8)), largest=3)
    capacity = int(rng.integers(1, min(3, trace.num_nodes) + 1))
    assert replay_belady(trace, capacity, cost(trace.num_nodes)).hits.sum() == brute_force_best(trace, capacity)


# ---------------------------------------------------------------- plain-Python references of the dynamic caches


def reference_lru(trace, capacity):
    cache, hits = collections.OrderedDict(), 0
    for batch in batches_of(trace):
        found = [v for v in batch if v in cache]
        hits += len(found)
        for v in found:
            cache.move_to_end(v)
        in_use = set(batch)
        for v in batch:
            if v in cache:
                continue
            if len(cache) == capacity:
                oldest = next(iter(cache))
                if oldest in in_use:
                    continue
                del cache[oldest]
            cache[v] = True
    return hits


def reference_clock(trace, capacity):
    queue, referenced, hits = collections.deque(), {}, 0
    for batch in batches_of(trace):
        in_use = set(batch)
        for v in batch:
            if v in referenced:
                hits += 1
                referenced[v] = True
        busy = sum(v in referenced for v in batch)
        for v in batch:
            if v in referenced:
                continue
            if len(queue) == capacity:
                if busy == capacity:
                    continue
                while referenced[queue[0]] or queue[0] in in_use:
                    referenced[queue[0]] = False
                    queue.rotate(-1)
                del referenced[queue.popleft()]
            queue.append(v)
            referenced[v] = False
            busy += 1
    return hits


def reference_s3fifo(trace, capacity):
    """GraphBolt's ghost FIFO is a ring of ids: an id readmitted leaves its entry behind, still taking a place."""
    target, ghost_size = max(1, capacity // 10), max(1, capacity - capacity // 10)
    small, main, ghost = collections.deque(), collections.deque(), collections.deque(maxlen=ghost_size)
    count, live, hits, tokens = {}, {}, 0, itertools.count()

    def to_ghost(v):
        entry = (v, next(tokens))
        ghost.append(entry)
        live[v] = entry

    for batch in batches_of(trace):
        in_use = set(batch)
        for v in batch:
            if v in count:
                hits += 1
                count[v] = min(count[v] + 1, 3)
        busy = sum(v in count for v in batch)
        for v in batch:
            if v in count:
                continue
            if len(small) + len(main) == capacity:
                if busy == capacity:
                    continue
                freed = False
                while len(small) > target and not freed:
                    t = small.popleft()
                    if count[t] > 0 or t in in_use:
                        count[t] = 0
                        main.append(t)
                    else:
                        del count[t]
                        to_ghost(t)
                        freed = True
                if not freed and main and not all(t in in_use for t in main):
                    while True:
                        t = main.popleft()
                        if count[t] > 0 or t in in_use:
                            count[t] = max(count[t] - 1, 0)
                            main.append(t)
                        else:
                            del count[t]
                            freed = True
                            break
                if not freed:
                    while small[0] in in_use:
                        small.rotate(-1)
                    t = small.popleft()
                    del count[t]
                    to_ghost(t)
            if v in live and live[v] in ghost:
                del live[v]
                main.append(v)
            else:
                small.append(v)
            count[v] = 0
            busy += 1
    return hits


REFERENCES = {"lru": reference_lru, "clock": reference_clock, "s3-fifo": reference_s3fifo}


@pytest.mark.parametrize("policy", sorted(KERNELS))
@pytest.mark.parametrize("case", range(25))
def test_each_dynamic_cache_matches_its_reference(policy, case):
    rng = np.random.default_rng(1000 + case)
    num_nodes = int(rng.integers(5, 60))
    trace = random_trace(rng, num_nodes, batches=int(rng.integers(1, 60)), largest=int(rng.integers(1, 12)))
    capacity = int(rng.integers(1, num_nodes + 1))
    replay = replay_dynamic(policy, trace, capacity, cost(num_nodes))
    assert replay.hits.sum() == REFERENCES[policy](trace, capacity)
    assert (replay.miss_bytes == 7 * (replay.accesses - replay.hits)).all()


def test_the_ghost_fifo_sends_a_returning_row_to_the_main_fifo():
    """Capacity 10: a small FIFO of 1 row, a ghost FIFO of 9.  Row 0 leaves the small FIFO unread, into the ghost
    FIFO; read again, it enters the main FIFO, and a scan of 15 new rows then passes through the small FIFO without
    touching it.  LRU loses row 0 to the scan."""
    batches = [[0]] + [[v] for v in range(1, 11)] + [[0]] + [[v] for v in range(11, 26)] + [[0]]
    ids = np.concatenate([np.array(b) for b in batches])
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in batches])])
    trace = AccessTrace(30, ids, offsets, np.array([0, len(batches)]), {})
    assert replay_dynamic("s3-fifo", trace, 10, cost(30)).hits.sum() == reference_s3fifo(trace, 10) == 1
    assert replay_dynamic("lru", trace, 10, cost(30)).hits.sum() == 0


# ---------------------------------------------------------------- what must hold between policies


@pytest.mark.parametrize("case", range(10))
def test_no_policy_beats_belady_and_no_static_order_beats_the_optimum(case):
    rng = np.random.default_rng(2000 + case)
    num_nodes = int(rng.integers(20, 200))
    trace = random_trace(rng, num_nodes, batches=int(rng.integers(10, 80)), largest=int(rng.integers(2, 20)), epochs=2)
    counts = trace.counts()
    capacities = sorted({int(c) for c in rng.integers(1, num_nodes + 1, size=4)})
    optimum = replay_static("optimum", counts, order_by(counts.sum(axis=0)), capacities, cost(num_nodes))
    for capacity, best_static in zip(capacities, optimum):
        bound = replay_belady(trace, capacity, cost(num_nodes)).hits.sum()
        for _ in range(5):
            other = replay_static("random", counts, rng.permutation(num_nodes), [capacity], cost(num_nodes))[0]
            assert other.hits.sum() <= best_static.hits.sum()
        assert best_static.hits.sum() <= bound
        for policy in KERNELS:
            assert replay_dynamic(policy, trace, capacity, cost(num_nodes)).hits.sum() <= bound


def test_counters_are_kept_per_epoch():
    rng = np.random.default_rng(5)
    trace = random_trace(rng, 50, batches=40, largest=10, epochs=4)
    replay = replay_dynamic("lru", trace, 10, cost(50))
    assert replay.hits.shape == (4,) and (replay.accesses == trace.epoch_accesses()).all()
    assert replay.fills.sum() <= (replay.accesses - replay.hits).sum()
    static = replay_static("s", trace.counts(), np.arange(50), [10], cost(50))[0]
    assert (static.accesses == trace.epoch_accesses()).all() and (static.fills == 0).all()


def test_a_bad_capacity_or_order_is_refused():
    trace = random_trace(np.random.default_rng(1), 10, batches=3, largest=3)
    with pytest.raises(ValueError, match="capacity must be between 1 and"):
        replay_dynamic("lru", trace, 0, cost(10))
    with pytest.raises(ValueError, match="capacity must be between 1 and"):
        replay_belady(trace, 11, cost(10))
    with pytest.raises(ValueError, match="dynamic policy must be one of"):
        replay_dynamic("fifo", trace, 2, cost(10))
    with pytest.raises(ValueError, match="every one of the 10 rows once"):
        replay_static("x", trace.counts(), np.zeros(10, np.int64), [2], cost(10))
