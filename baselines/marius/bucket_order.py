"""Edge-bucket orderings for a partition buffer: BETA against Hilbert and row-major (Marius §4, Marius).

The nodes are split into p partitions; the edges into p x p buckets, bucket
(i, j) holding the edges from partition i to partition j.  A buffer in host
memory holds c partitions (2 <= c < p); a bucket can be processed only while
both of its partitions are in the buffer, and bringing a partition in from
disk, in place of another, is a *swap*.  An ordering is the sequence of
buffer states together with the buckets processed in each: every bucket
exactly once.  The swaps are what an epoch reads from disk beyond the first
c partitions, and Marius bounds them from below by

    ceil((p (p - 1) / 2 - c (c - 1) / 2) / (c - 1))

(each swap brings in one partition, which meets at most c - 1 others for
the first time; the first buffer state covers c (c - 1) / 2 pairs).

* ``beta_order``: the Buffer-aware Edge Traversal Algorithm.  Start with
  partitions 0..c-1; then, in rounds, swap every partition still on disk in
  turn into the buffer's last slot (each meets the c - 1 fixed ones), and
  replace the c - 1 fixed partitions, one swap each, by c - 1 partitions from
  disk, which are done with; until no partition is left on disk.  Marius
  shuffles the partitions at every round; here the order is deterministic.
* ``curve_order``: the buckets in Hilbert-curve or row-major order, with the
  buffer loading partitions as the buckets need them and evicting the
  partition needed again farthest ahead (Belady's rule: the fewest swaps any
  buffer can make for that bucket order).

In each buffer state the buckets newly possible are processed (both
partitions in the buffer, not processed before), which covers every bucket
exactly once.
"""

from __future__ import annotations

import dataclasses
import math

ORDERS = ("beta", "hilbert", "row-major")


@dataclasses.dataclass(frozen=True)
class BucketOrder:
    """Buffer states (each a tuple of c partitions) and the buckets processed in each; ``swaps`` partitions read
    after the first state."""

    name: str
    num_partitions: int
    capacity: int
    states: list[tuple[int, ...]]
    buckets: list[list[tuple[int, int]]]

    @property
    def swaps(self) -> int:
        return sum(len(set(b) - set(a)) for a, b in zip(self.states, self.states[1:]))


def check_buffer(num_partitions: int, capacity: int) -> None:
    if not 2 <= capacity < num_partitions:
        raise ValueError(f"a buffer of c partitions needs 2 <= c < p; got c = {capacity}, p = {num_partitions}")


def swap_lower_bound(num_partitions: int, capacity: int) -> int:
    """Marius's lower bound on the swaps of any ordering."""
    check_buffer(num_partitions, capacity)
    p, c = num_partitions, capacity
    return math.ceil((p * (p - 1) // 2 - c * (c - 1) // 2) / (c - 1))


def assign_buckets(states: list[tuple[int, ...]], num_partitions: int) -> list[list[tuple[int, int]]]:
    """For each buffer state in turn, the buckets whose partitions are both in it and were not processed yet."""
    done = [[False] * num_partitions for _ in range(num_partitions)]
    per_state = []
    for state in states:
        newly = []
        for i in state:
            for j in state:
                if not done[i][j]:
                    done[i][j] = True
                    newly.append((i, j))
        per_state.append(sorted(newly))
    return per_state


def beta_order(num_partitions: int, capacity: int) -> BucketOrder:
    """BETA's buffer states (Marius §4), deterministic, and the buckets processed in each."""
    check_buffer(num_partitions, capacity)
    buffer = list(range(capacity))
    on_disk = list(range(capacity, num_partitions))
    states = [tuple(buffer)]
    while on_disk:
        for k in range(len(on_disk)):  # every partition on disk meets the c - 1 fixed ones in the last slot
            on_disk[k], buffer[-1] = buffer[-1], on_disk[k]
            states.append(tuple(buffer))
        replaced = min(capacity - 1, len(on_disk))
        for k in range(replaced):  # the fixed partitions have met everyone: new ones take their places
            buffer[k] = on_disk[k]
            states.append(tuple(buffer))
        on_disk = on_disk[replaced:]
    return BucketOrder("beta", num_partitions, capacity, states, assign_buckets(states, num_partitions))


def _hilbert_index(side: int, i: int, j: int) -> int:
    """Position of cell (i, j) along the Hilbert curve over a ``side`` x ``side`` grid (side a power of two)."""
    index, s = 0, side // 2
    while s > 0:
        ri, rj = int(i & s > 0), int(j & s > 0)
        index += s * s * ((3 * ri) ^ rj)
        if rj == 0:  # rotate the quadrant
            if ri == 1:
                i, j = s - 1 - i, s - 1 - j
            i, j = j, i
        s //= 2
    return index


def curve_sequence(name: str, num_partitions: int) -> list[tuple[int, int]]:
    """All p x p buckets in row-major or Hilbert-curve order (the grid padded to a power of two)."""
    buckets = [(i, j) for i in range(num_partitions) for j in range(num_partitions)]
    if name == "row-major":
        return buckets
    side = 1 << max(0, (num_partitions - 1).bit_length())
    return sorted(buckets, key=lambda b: _hilbert_index(side, *b))


def curve_order(name: str, num_partitions: int, capacity: int) -> BucketOrder:
    """Buckets in ``hilbert`` or ``row-major`` order through a buffer that evicts the partition needed farthest
    ahead; a new buffer state starts whenever a bucket needs a partition that is not in the buffer."""
    if name not in ("hilbert", "row-major"):
        raise ValueError(f"a curve order is hilbert or row-major, got {name!r}")
    check_buffer(num_partitions, capacity)
    sequence = curve_sequence(name, num_partitions)
    needs = [partition for bucket in sequence for partition in dict.fromkeys(bucket)]
    upcoming = {}  # for each position in needs, the next position needing the same partition
    following = [math.inf] * len(needs)
    for position in range(len(needs) - 1, -1, -1):
        following[position] = upcoming.get(needs[position], math.inf)
        upcoming[needs[position]] = position
    buffer: list[int] = []
    next_use: dict[int, float] = {}
    states: list[tuple[int, ...]] = []
    position = 0
    for bucket in sequence:
        changed = False
        for partition in dict.fromkeys(bucket):
            if partition not in buffer:
                if len(buffer) == capacity:
                    victim = max((p for p in buffer if p not in bucket), key=lambda p: next_use[p])
                    buffer[buffer.index(victim)] = partition
                else:  # the first c partitions fill the buffer
                    buffer.append(partition)
                changed = True
            next_use[partition] = following[position]
            position += 1
        if len(buffer) == capacity and (changed or not states):
            states.append(tuple(buffer))
    return BucketOrder(name, num_partitions, capacity, states, assign_buckets(states, num_partitions))


def bucket_order(name: str, num_partitions: int, capacity: int) -> BucketOrder:
    """The ordering ``name`` (one of ``ORDERS``) for p partitions and a buffer of c."""
    if name == "beta":
        return beta_order(num_partitions, capacity)
    if name in ORDERS:
        return curve_order(name, num_partitions, capacity)
    raise ValueError(f"ordering must be one of {ORDERS}, got {name!r}")
