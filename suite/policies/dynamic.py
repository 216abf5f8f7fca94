"""Dynamic GPU feature caches replayed against a trace: LRU, CLOCK and S3-FIFO, as DGL GraphBolt keeps them.

The admission and eviction rules are GraphBolt's CPU cache policies
(``graphbolt/src/cache_policy.h``): every miss is admitted, and

* **LRU**: a hit moves the row to the front; the row at the back is evicted;
* **CLOCK** (FIFO with reinsertion): a hit sets the row's bit; eviction walks
  the queue from its oldest row, clearing set bits and sending those rows to
  the back, and evicts the first row whose bit is clear;
* **S3-FIFO** (Yang et al., SOSP 2023): a small FIFO of C/10 rows, a main
  FIFO and a ghost FIFO of the C - C/10 ids last evicted from the small one.
  A hit raises the row's count (at most 3).  A new row enters the small FIFO,
  or the main one when its id is a ghost.  The small FIFO, while over its
  target, moves its oldest row to the main FIFO (count reset) if it was hit,
  else evicts it into the ghost FIFO; otherwise the main FIFO reinserts rows
  with a count, lowering it, and evicts the first with none.

Rows of the minibatch being gathered are in use and never evicted
(``suite.policies.replay``); GraphBolt reinserts such rows as it would a
referenced one.  Each replay is one sequential numba pass, O(1) per access
(amortised), over arrays of N entries: no hashing.
"""

from __future__ import annotations

import numba
import numpy as np

from suite.policies.replay import Replay, check_capacity, counters, epoch_of_batch

_S3_MAX_COUNT = 3


@numba.njit(cache=True, nogil=True)
def _lru(ids, offsets, epoch_of, num_epochs, num_nodes, capacity, cost):
    hits, miss_bytes, fills = counters(num_epochs)
    newer = np.full(num_nodes, -1, np.int64)  # towards the front (most recent)
    older = np.full(num_nodes, -1, np.int64)
    cached = np.zeros(num_nodes, np.bool_)
    in_use = np.full(num_nodes, -1, np.int64)  # the minibatch that last read the row
    front, back, size = -1, -1, 0
    for b in range(len(offsets) - 1):
        e = epoch_of[b]
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if cached[v]:
                hits[e] += 1
                in_use[v] = b
                if v != front:  # unlink, then link at the front
                    if v == back:
                        back = newer[v]
                    else:
                        newer[older[v]] = newer[v]
                    older[newer[v]] = older[v]
                    newer[v] = -1
                    older[v] = front
                    newer[front] = v
                    front = v
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if in_use[v] == b:
                continue
            miss_bytes[e] += cost[v]
            in_use[v] = b
            if size == capacity:
                if in_use[back] == b:  # rows in use are all at the front: the back one is too, so all are
                    continue
                gone = back
                back = newer[gone]
                if back >= 0:
                    older[back] = -1
                else:
                    front = -1
                cached[gone] = False
                newer[gone] = -1
                size -= 1
            cached[v] = True
            fills[e] += 1
            size += 1
            older[v] = front
            newer[v] = -1
            if front >= 0:
                newer[front] = v
            front = v
            if back < 0:
                back = v
    return hits, miss_bytes, fills


@numba.njit(cache=True, nogil=True)
def _clock(ids, offsets, epoch_of, num_epochs, num_nodes, capacity, cost):
    hits, miss_bytes, fills = counters(num_epochs)
    slots = np.empty(capacity, np.int64)
    referenced = np.zeros(num_nodes, np.bool_)
    cached = np.zeros(num_nodes, np.bool_)
    in_use = np.full(num_nodes, -1, np.int64)
    hand, used = 0, 0
    for b in range(len(offsets) - 1):
        e = epoch_of[b]
        busy = 0  # cached rows in use by this minibatch
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if cached[v]:
                hits[e] += 1
                referenced[v] = True
                in_use[v] = b
                busy += 1
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if in_use[v] == b:
                continue
            miss_bytes[e] += cost[v]
            in_use[v] = b
            if used < capacity:
                slots[used] = v
                used += 1
            elif busy == capacity:
                continue
            else:
                while referenced[slots[hand]] or in_use[slots[hand]] == b:
                    referenced[slots[hand]] = False
                    hand = (hand + 1) % capacity
                cached[slots[hand]] = False
                slots[hand] = v
                hand = (hand + 1) % capacity
            cached[v] = True
            referenced[v] = False
            fills[e] += 1
            busy += 1
    return hits, miss_bytes, fills


@numba.njit(cache=True, nogil=True)
def _s3fifo(ids, offsets, epoch_of, num_epochs, num_nodes, capacity, cost):
    hits, miss_bytes, fills = counters(num_epochs)
    small_target = max(1, capacity // 10)
    ghost_capacity = max(1, capacity - capacity // 10)
    # two ring buffers of `capacity` ids each: [head, head + size) in order, oldest first
    small = np.empty(capacity, np.int64)
    main = np.empty(capacity, np.int64)
    small_head, small_size, main_head, main_size = 0, 0, 0, 0
    count = np.zeros(num_nodes, np.int8)
    cached = np.zeros(num_nodes, np.bool_)
    in_main = np.zeros(num_nodes, np.bool_)
    ghost_since = np.full(num_nodes, -1, np.int64)  # when the id entered the ghost FIFO (-1: not there)
    ghosts = 0  # ids ever sent to the ghost FIFO: an id is a ghost while fewer than ghost_capacity came after it
    in_use = np.full(num_nodes, -1, np.int64)
    used = 0
    for b in range(len(offsets) - 1):
        e = epoch_of[b]
        busy, busy_main = 0, 0  # cached rows in use by this minibatch, and those of them in the main FIFO
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if cached[v]:
                hits[e] += 1
                count[v] = min(count[v] + 1, _S3_MAX_COUNT)
                in_use[v] = b
                busy += 1
                busy_main += in_main[v]
        for a in range(offsets[b], offsets[b + 1]):
            v = ids[a]
            if in_use[v] == b:
                continue
            miss_bytes[e] += cost[v]
            in_use[v] = b
            if used < capacity:
                used += 1
            elif busy == capacity:
                continue
            else:
                freed = False
                while small_size > small_target and not freed:  # the small FIFO over its target
                    t = small[small_head]
                    small_head = (small_head + 1) % capacity
                    small_size -= 1
                    if count[t] > 0 or in_use[t] == b:
                        count[t] = 0
                        main[(main_head + main_size) % capacity] = t
                        main_size += 1
                        in_main[t] = True
                        busy_main += in_use[t] == b
                    else:
                        cached[t] = False
                        ghost_since[t] = ghosts
                        ghosts += 1
                        freed = True
                while not freed and main_size > busy_main:  # a free row is there: counts fall until one has none
                    t = main[main_head]
                    main_head = (main_head + 1) % capacity
                    if count[t] > 0 or in_use[t] == b:
                        count[t] = max(count[t] - 1, 0)
                        main[(main_head + main_size - 1) % capacity] = t
                    else:
                        main_size -= 1
                        cached[t] = False
                        in_main[t] = False
                        freed = True
                while not freed:  # every main row in use: the oldest free row of the small FIFO goes
                    t = small[small_head]
                    small_head = (small_head + 1) % capacity
                    if in_use[t] == b:
                        small[(small_head + small_size - 1) % capacity] = t
                    else:
                        small_size -= 1
                        cached[t] = False
                        ghost_since[t] = ghosts
                        ghosts += 1
                        freed = True
            if ghost_since[v] >= 0 and ghosts - ghost_since[v] <= ghost_capacity:
                main[(main_head + main_size) % capacity] = v
                main_size += 1
                in_main[v] = True
                busy_main += 1
            else:
                small[(small_head + small_size) % capacity] = v
                small_size += 1
            ghost_since[v] = -1
            cached[v] = True
            count[v] = 0
            fills[e] += 1
            busy += 1
    return hits, miss_bytes, fills


KERNELS = {"lru": _lru, "clock": _clock, "s3-fifo": _s3fifo}
"""The dynamic policies by name."""


def replay_dynamic(policy: str, trace, capacity: int, row_cost: np.ndarray) -> Replay:
    """Replay ``trace`` through a dynamic cache of ``capacity`` rows that starts empty; ``row_cost[v]``: the PCIe
    bytes of reading row v."""
    if policy not in KERNELS:
        raise ValueError(f"dynamic policy must be one of {sorted(KERNELS)}, got {policy!r}")
    capacity = check_capacity(capacity, trace.num_nodes)
    hits, miss_bytes, fills = KERNELS[policy](trace.ids, trace.batch_offsets, epoch_of_batch(trace.epoch_batches),
                                              trace.num_epochs, trace.num_nodes, capacity,
                                              np.asarray(row_cost, dtype=np.int64))
    return Replay(policy, capacity, trace.epoch_accesses(), hits, miss_bytes, fills)
