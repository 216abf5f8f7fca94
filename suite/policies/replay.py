"""What a replay of a trace reports, and the batch semantics every policy is replayed under.

A cache of C rows serves a trace (``suite.policies.trace``) one minibatch at
a time, as a GPU feature cache serves a gather: a row is a hit when it is in
the cache as the minibatch starts; the minibatch's misses are read from host
memory (their bytes cross PCIe) and then, by a dynamic policy, admitted.
While a minibatch is gathered its rows are in use and cannot be evicted (DGL
GraphBolt's caches count readers and writers per entry the same way); a miss
that finds every cached row in use bypasses the cache.  A minibatch's misses
are admitted in ascending id order, so a minibatch with more rows than the
cache fills it with its smallest missing ids (GraphBolt refuses such a batch:
"larger cache capacity is needed").  A policy's counters are kept per epoch.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np


@dataclasses.dataclass(frozen=True)
class Replay:
    """One policy at one capacity over a trace, per epoch: hits, bytes of the misses, rows admitted."""

    policy: str
    capacity: int
    accesses: np.ndarray  # (E,) rows read
    hits: np.ndarray  # (E,) rows found in the cache
    miss_bytes: np.ndarray  # (E,) bytes the misses move over PCIe (traffic model)
    fills: np.ndarray  # (E,) rows written into the cache (a static policy: 0; it is filled once, before training)

    @property
    def hit_ratio(self) -> np.ndarray:
        return self.hits / np.maximum(self.accesses, 1)

    @property
    def overall_hit_ratio(self) -> float:
        return float(self.hits.sum() / max(int(self.accesses.sum()), 1))


@numba.njit(cache=True, nogil=True)
def counters(num_epochs):
    """A replay kernel's per-epoch counters, zeroed: hits, miss bytes, rows admitted."""
    return np.zeros(num_epochs, np.int64), np.zeros(num_epochs, np.int64), np.zeros(num_epochs, np.int64)


def epoch_of_batch(epoch_batches: np.ndarray) -> np.ndarray:
    """For every minibatch of a trace, its epoch."""
    return np.repeat(np.arange(len(epoch_batches) - 1, dtype=np.int64), np.diff(epoch_batches))


def check_capacity(capacity: int, num_nodes: int) -> int:
    capacity = int(capacity)
    if not 1 <= capacity <= num_nodes:
        raise ValueError(f"capacity must be between 1 and the {num_nodes:,} rows, got {capacity:,}")
    return capacity
