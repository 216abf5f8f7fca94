"""The lookahead cache: Belady's rule within the minibatches already sampled ahead, a static order beyond them.

A training pipeline samples minibatches before it trains on them, and the
counter-based sampler (``tiering.rng``) can compute any future minibatch in
advance.  With a window of W minibatches sampled ahead, the cache knows,
after minibatch b, every row that minibatches b+1 .. b+W will read.  Ginex
(Park et al., VLDB 2022, §4) runs Belady's rule over such a "superbatch" for
an SSD-to-host cache; here the same rule serves a GPU feature cache:

* rows needed within the window are kept, the one needed soonest first
  (Belady's rule, ``suite.policies.belady``);
* the rest are ordered by a static order (a scorer's, Data Tiering §3.1),
  and evicted lowest-ranked first, before any row needed within the window;
* a row is admitted only when the minibatch read it from host memory anyway
  (a miss) and it is needed again within the window: an admission costs a
  device write and no extra PCIe read;
* the cache starts, for free as a static placement does, with the rows the
  first W minibatches need, by first use, then the static order's first rows.

The cache is updated after each minibatch's gather, so every row that
minibatch reads is in place while it is gathered (the rows in use are
pinned, as the dynamic caches pin theirs, ``suite.policies.replay``).

With W = 0 nothing is ever admitted and the cache is the static placement
it starts with; with W at least the trace's length it is Belady's MIN: the
tests check both.  Rows enter the window as it slides: after minibatch b,
the rows minibatch b+W reads that nothing read since b-1 are promoted from
their static rank to their next use.  One numba pass, O(log C) per access.
"""

from __future__ import annotations

import numba
import numpy as np

from suite.policies.belady import next_use
from suite.policies.replay import Replay, check_capacity, counters, epoch_of_batch
from tiering.features.placement import order_ranks
from tiering.heap import offer, push, sift_down, sift_up

WINDOWS = (1, 4, 16, 64, 256)
"""The windows, in minibatches sampled ahead, that the policy lab replays."""


@numba.njit(cache=True, nogil=True)
def previous_use(ids, offsets, num_nodes):
    """For every access, the last earlier minibatch that read the same row (-1: none)."""
    preceding = np.empty(len(ids), np.int64)
    last = np.full(num_nodes, -1, np.int64)
    for b in range(len(offsets) - 1):
        for a in range(offsets[b], offsets[b + 1]):
            preceding[a] = last[ids[a]]
            last[ids[a]] = b
    return preceding


@numba.njit(cache=True, nogil=True)
def _lookahead(ids, offsets, epoch_of, num_epochs, num_nodes, capacity, cost, window, rank, following, preceding,
               start_rows, start_keys):
    hits, miss_bytes, fills = counters(num_epochs)
    num_batches = len(offsets) - 1
    heap = np.empty(capacity, np.int64)  # cached rows, the one to evict first on top
    where = np.full(num_nodes, -1, np.int64)
    key = np.empty(num_nodes, np.int64)  # a next use within the window, else num_batches + static rank
    hit_in = np.full(num_nodes, -1, np.int64)
    size = 0
    for i in range(len(start_rows)):
        size = push(heap, key, where, size, start_rows[i], start_keys[i])
    for b in range(num_batches):
        e = epoch_of[b]
        horizon = b + window  # the window after minibatch b: minibatches b+1 .. horizon
        if window > 0 and horizon < num_batches:  # rows of minibatch `horizon` enter the window
            for a in range(offsets[horizon], offsets[horizon + 1]):
                v = ids[a]
                if where[v] >= 0 and preceding[a] < b:
                    key[v] = horizon
                    sift_down(heap, key, where, where[v], size)
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if where[v] >= 0:
                hits[e] += 1
                hit_in[v] = b
                key[v] = following[a] if following[a] <= horizon else num_batches + rank[v]
                sift_up(heap, key, where, where[v])
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if hit_in[v] == b:
                continue
            miss_bytes[e] += cost[v]
            upcoming = following[a]
            if upcoming > horizon:  # not needed within the window (or never again): read by zero-copy only
                continue
            size, admitted, _ = offer(heap, key, where, size, capacity, v, upcoming)
            fills[e] += admitted
    return hits, miss_bytes, fills


def start_placement(first: np.ndarray, order: np.ndarray, rank: np.ndarray, capacity: int, window: int,
                    num_batches: int):
    """The rows the cache starts with and their keys: those the first ``window`` minibatches read, by first use
    (``first``: each row's first minibatch), then ``order``'s first rows ranked after them (``rank``: each row's
    place in ``order``)."""
    ahead = np.flatnonzero(first < min(window, num_batches))
    ahead = ahead[np.argsort(first[ahead], kind="stable")][:capacity]
    taken = np.zeros(len(order), bool)
    taken[ahead] = True
    rest = order[~taken[order]][:capacity - len(ahead)]
    return np.concatenate([ahead, rest]), np.concatenate([first[ahead], num_batches + rank[rest]])


def replay_lookahead(trace, capacities, row_cost: np.ndarray, window: int, order: np.ndarray) -> list[Replay]:
    """The lookahead cache over ``trace`` at every one of ``capacities`` (rows), seeing ``window`` minibatches ahead,
    with rows beyond the window ranked by ``order`` (row ids, the first kept longest)."""
    capacities = [check_capacity(c, trace.num_nodes) for c in capacities]
    name = policy_name(int(window))
    if int(window) < 0:
        raise ValueError(f"the lookahead window must be at least 0 minibatches, got {window}")
    order, rank = order_ranks(order, trace.num_nodes, "the lookahead's static order")
    window = min(int(window), trace.num_batches)
    following, first = next_use(trace.ids, trace.batch_offsets, trace.num_nodes)
    preceding = previous_use(trace.ids, trace.batch_offsets, trace.num_nodes)
    epoch_of = epoch_of_batch(trace.epoch_batches)
    cost = np.asarray(row_cost, dtype=np.int64)
    replays = []
    for capacity in capacities:
        start, keys = start_placement(first, order, rank, capacity, window, trace.num_batches)
        hits, miss_bytes, fills = _lookahead(trace.ids, trace.batch_offsets, epoch_of, trace.num_epochs,
                                             trace.num_nodes, capacity, cost, window, rank, following, preceding,
                                             start, keys)
        replays.append(Replay(name, capacity, trace.epoch_accesses(), hits, miss_bytes, fills))
    return replays


def policy_name(window: int) -> str:
    """The lab's name of the lookahead cache with ``window`` minibatches ahead."""
    return f"lookahead-{window}"
