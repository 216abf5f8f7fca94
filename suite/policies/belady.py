"""Belady's MIN for minibatches: the most hits any cache of C rows can have on a trace.

Belady (1966) showed that evicting the page whose next use lies farthest
ahead is optimal.  Here a cache serves a minibatch at a time
(``suite.policies.replay``): it may hold any C rows of those it held or
that the minibatch read, so after each minibatch MIN keeps the C of them
whose next minibatch comes soonest, and lets a row pass (bypass) when every
kept row is needed sooner.  Rows never read again are not kept.  It starts
with the C rows first read, for free, as a static placement starts with
its rows: so the bound covers every policy of the lab, the static ones
(which never change their rows) and the dynamic ones (which start empty)
alike, and no policy's hit count can exceed it.

One pass computes every access's next use (O(accesses + N)); the replay
keeps the cached rows in an indexed max-heap on next use
(``tiering.heap``), O(log C) per access.
"""

from __future__ import annotations

import numba
import numpy as np

from suite.policies.replay import Replay, check_capacity, counters, epoch_of_batch
from tiering.heap import offer, push, sift_up

NEVER = np.iinfo(np.int64).max
"""The next use of a row that no later minibatch reads."""


@numba.njit(cache=True, nogil=True)
def next_use(ids, offsets, num_nodes):
    """For every access, the next minibatch that reads the same row (``NEVER``: none); and every row's first."""
    following = np.empty(len(ids), np.int64)
    upcoming = np.full(num_nodes, NEVER, np.int64)
    for b in range(len(offsets) - 2, -1, -1):
        for a in range(offsets[b], offsets[b + 1]):
            following[a] = upcoming[ids[a]]
            upcoming[ids[a]] = b
    return following, upcoming


@numba.njit(cache=True, nogil=True)
def _min(ids, offsets, epoch_of, num_epochs, num_nodes, capacity, cost, following, start_rows, start_keys):
    hits, miss_bytes, fills = counters(num_epochs)
    heap = np.empty(capacity, np.int64)  # cached rows, the one needed last on top
    where = np.full(num_nodes, -1, np.int64)  # a row's place in the heap (-1: not cached)
    key = np.empty(num_nodes, np.int64)  # a cached row's next use
    hit_in = np.full(num_nodes, -1, np.int64)  # the minibatch in which the row last was a hit
    size = 0
    for i in range(len(start_rows)):  # the free start
        size = push(heap, key, where, size, start_rows[i], start_keys[i])
    for b in range(len(offsets) - 1):
        e = epoch_of[b]
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if where[v] >= 0:
                hits[e] += 1
                hit_in[v] = b
                key[v] = following[a]  # later than before: the row rises
                sift_up(heap, key, where, where[v])
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if hit_in[v] == b:
                continue
            miss_bytes[e] += cost[v]
            upcoming = following[a]
            if upcoming == NEVER:
                continue
            size, admitted, _ = offer(heap, key, where, size, capacity, v, upcoming)
            fills[e] += admitted
    return hits, miss_bytes, fills


def replay_belady(trace, capacity: int, row_cost: np.ndarray) -> Replay:
    """Belady's MIN over ``trace`` at ``capacity`` rows, starting with the ``capacity`` rows read first."""
    capacity = check_capacity(capacity, trace.num_nodes)
    following, first = next_use(trace.ids, trace.batch_offsets, trace.num_nodes)
    read = np.flatnonzero(first != NEVER)
    start = read[np.argsort(first[read], kind="stable")[:capacity]]
    hits, miss_bytes, fills = _min(trace.ids, trace.batch_offsets, epoch_of_batch(trace.epoch_batches),
                                   trace.num_epochs, trace.num_nodes, capacity, np.asarray(row_cost, dtype=np.int64),
                                   following, start, first[start])
    return Replay("belady", capacity, trace.epoch_accesses(), hits, miss_bytes, fills)
