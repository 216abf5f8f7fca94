"""The lookahead cache as a feature loader: a GPU slot table run by Belady's rule over the minibatches sampled ahead.

Ginex (Park et al., VLDB 2022, §4) samples a superbatch of minibatches
ahead and runs Belady's rule within it; here the rule keeps a GPU feature
cache of C rows.  The loader is told each minibatch as it is sampled
(``look_ahead``), up to ``window`` ahead of the one being gathered, and
after each gather it keeps the rows needed soonest within the window, the
rest ranked by a static order (the dataset's scorer: on a dataset reordered
hottest-first, its row order).  It admits only rows the gather read from
host memory anyway, and only those needed again within the window; it
starts, before training, with the rows the first ``window`` minibatches
need, by first use, then the static order's first rows.  The policy lab
replays the same rule over a whole trace (``suite.policies.lookahead``), and
the tests check the two agree exactly.

Layout: ``cache`` holds C rows in GPU memory; the node -> slot map and the
rule's bookkeeping (an indexed max-heap on each cached row's next use,
``tiering.heap``, each row's last announced minibatch, and the pending
minibatches' ids with their next uses, in buffers an announcement appends to
and a gather moves past, so that announcing costs the minibatch's ids and not
the window's) live in host memory, where the sampler
produces the ids, and a gather copies the minibatch's slots to the device.
A gather serves hits from ``cache`` and misses by zero-copy from the pinned
host table (``tiering.features.combined``, with no hot tier), then writes the
admitted misses into their slots: one host decision per minibatch.  That
decision needs the ids in host memory, so with ids on the GPU (a GPU sampler's)
``look_ahead`` and the gather each wait for the GPU to copy them out: the two
synchronisations per minibatch this loader keeps.  Everything after the
decision is queued without waiting: the hits, misses and admissions are
positions computed on the host, copied to the device in one copy (with the
ids, where they are in host memory: a CPU sampler's), and the PCIe counters
stay on the device (``tiering.features.device_counters``) until ``stats()``;
on a GPU the misses' gather kernel adds their traffic to them as it copies.

The rule sees each minibatch ``window`` minibatches ahead of its gather and
no further, however far ahead it was announced: a pipeline's sampler thread
(``suite.training.pipeline``) announces minibatches as it samples them, up to
its queues' length beyond the window, and the cache must not keep other rows
for that (its hits and PCIe bytes would vary with the threads' timing).  A
minibatch announced early records its rows' next uses only for the reads
within its window, and its promotions of cached rows wait, as a list of rows,
for the gather after which the window reaches it.

A gather of ids that were not announced (an evaluation pass, or a caller
that never looks ahead) is served from the cache as it stands, and changes
nothing.  An epoch cut short (an exception in training, a break) leaves
minibatches announced and never gathered; ``start_epoch`` forgets them, so
that the next epoch's announcements are the next gathered, and ranks every
cached row by the static order again, as nothing is announced then (without
it, every later gather would be taken for one that was not announced).
``announce`` wraps an epoch's minibatch iterator so that it looks ahead
``window`` minibatches for the caller (the trainer uses it, and calls
``start_epoch`` before each epoch).
"""

from __future__ import annotations

import collections
import threading

import numba
import numpy as np
import torch

from tiering.features.combined import CombinedTensor
from tiering.features.device_counters import DeviceCounters
from tiering.features.loader import FeatureLoader
from tiering.features.placement import order_ranks
from tiering.features.traffic import zero_copy_traffic_tensors
from tiering.features.zero_copy import DEFAULT_VARIANT
from tiering.heap import offer, push, sift_down, sift_up

BEYOND = np.int64(2**62)
"""The key of a row not needed within the window: ``BEYOND`` plus its static rank, above any minibatch number."""
_UNSET = np.int64(-1)


@numba.njit(cache=True, nogil=True)
def _fill(rows, keys, slot_of, heap, key, where):
    """Cache ``rows`` in slots 0, 1, ... of an empty cache, each in the heap with its key; the cache's size."""
    for slot in range(len(rows)):
        slot_of[rows[slot]] = slot
        push(heap, key, where, slot, rows[slot], keys[slot])
    return len(rows)


@numba.njit(cache=True, nogil=True, inline="always")
def _promote_row(v, batch, where, heap, key, size):
    """Row ``v``, if cached, is needed next by minibatch ``batch``."""
    if where[v] >= 0:
        key[v] = batch
        sift_down(heap, key, where, where[v], size)


@numba.njit(cache=True, nogil=True)
def _announce(ids, batch, gathered, window, start, following, base, last_seen, last_pos, where, heap, key, size):
    """Minibatch ``batch`` (its ids at absolute positions ``start``...) enters the window: earlier announced reads of
    the same rows within ``window`` minibatches learn their next use, and cached rows that no minibatch of the window
    reads are promoted to it.  Announced before minibatch ``batch - window - 1`` is gathered (a sampler running
    ahead), the promotions wait for that gather: the rows to promote then (``_promote``)."""
    ahead = gathered < batch - window
    deferred = np.empty(len(ids) if ahead else 0, np.int64)
    count = 0
    for i in range(len(ids)):
        v = ids[i]
        seen = last_seen[v]
        if seen >= max(gathered, batch - window):  # a minibatch of the window reads v before this one
            following[last_pos[v] - base] = batch
        elif ahead:
            deferred[count] = v
            count += 1
        else:  # not needed within the window until now
            _promote_row(v, batch, where, heap, key, size)
        last_seen[v] = batch
        last_pos[v] = start + i
    return deferred[:count]


@numba.njit(cache=True, nogil=True)
def _promote(rows, batch, where, heap, key, size):
    """The cached ones of ``rows``, needed next by minibatch ``batch``, are kept for it."""
    for v in rows:
        _promote_row(v, batch, where, heap, key, size)


@numba.njit(cache=True, nogil=True)
def _rank_statically(heap, key, where, size, rank):
    """Every cached row keyed by its static rank alone, none by a next use, and the heap rebuilt."""
    for i in range(size):
        key[heap[i]] = BEYOND + rank[heap[i]]
    for i in range(size // 2 - 1, -1, -1):
        sift_down(heap, key, where, i, size)


@numba.njit(cache=True, nogil=True)
def _serve(ids, following, batch, rank, heap, where, key, slot_of, hit_in, capacity, size):
    """One announced minibatch: its hits' slots (-1: a miss), and the misses it admits, by position in ``ids`` with
    their slots (only the admissions still cached at the end); the heap's new size."""
    slots = np.full(len(ids), -1, np.int64)
    for i in range(len(ids)):
        v = ids[i]
        if where[v] >= 0:
            slots[i] = slot_of[v]
            hit_in[v] = batch
            key[v] = following[i] if following[i] != _UNSET else BEYOND + rank[v]
            sift_up(heap, key, where, where[v])
    admitted = np.empty(len(ids), np.int64)
    admitted_slots = np.empty(len(ids), np.int64)
    count = 0
    for i in range(len(ids)):
        v = ids[i]
        if hit_in[v] == batch or following[i] == _UNSET:
            continue
        free = size  # the next free slot, if there is one
        size, taken, evicted = offer(heap, key, where, size, capacity, v, following[i])
        if not taken:
            continue
        if evicted < 0:
            slot = free
        else:
            slot = slot_of[evicted]  # the admitted row takes the evicted row's slot
            slot_of[evicted] = -1
        slot_of[v] = slot
        admitted[count] = i
        admitted_slots[count] = slot
        count += 1
    kept = np.zeros(count, np.bool_)
    for j in range(count):
        kept[j] = slot_of[ids[admitted[j]]] == admitted_slots[j]
    return slots, admitted[:count][kept], admitted_slots[:count][kept], count, size


class LookaheadLoader(FeatureLoader):
    """A GPU cache of ``capacity`` rows kept by Belady's rule over the next ``window`` announced minibatches.

    Parameters
    ----------
    features : the (N, D) host table, read by zero-copy on a GPU (pinned in place)
    capacity : C, rows of the GPU slot table
    order : the static order beyond the window (row ids, the first kept longest); default: the row order
    window : how many minibatches ahead ``announce`` looks
    variant : the zero-copy kernel's access pattern for the misses

    ``rows_admitted`` counts the rows written into the cache since the last ``reset_stats``.
    """

    def __init__(self, features: torch.Tensor, capacity: int, device="cpu", *, order=None, window: int = 16,
                 variant: str = DEFAULT_VARIANT, max_blocks: int | None = None):
        super().__init__(features.shape[0], features.shape[1], device)
        if not 0 <= capacity <= self.num_rows:
            raise ValueError(f"capacity must be in [0, {self.num_rows}], got {capacity}")
        if window < 0:
            raise ValueError(f"the window must be at least 0 minibatches, got {window}")
        self.order, self.rank = order_ranks(np.arange(self.num_rows) if order is None else order, self.num_rows,
                                            "the static order")
        self.capacity, self.window = capacity, window
        self.host = CombinedTensor(features, 0, self.device, variant=variant, max_blocks=max_blocks)
        self.row_bytes = self.host.row_bytes
        self.cache = torch.empty((capacity, self.feature_dim), dtype=features.dtype, device=self.device)
        self._stats.gpu_bytes_resident = capacity * self.row_bytes
        self.rows_admitted = 0
        self._counters = DeviceCounters(3, self.device)  # rows from a GPU tier (none: its table has no hot rows),
        # and the PCIe payload and requests of the misses
        self._heap = np.empty(max(capacity, 1), np.int64)
        self._where = np.full(self.num_rows, -1, np.int64)
        self._key = np.empty(self.num_rows, np.int64)
        self._slot_of = np.full(self.num_rows, -1, np.int64)
        self._hit_in = np.full(self.num_rows, -1, np.int64)
        self._last_seen = np.full(self.num_rows, -1, np.int64)
        self._last_pos = np.zeros(self.num_rows, np.int64)
        self._size = 0
        self._placed = False
        self._announced = 0  # minibatches announced so far
        self._gathered = 0  # the next announced minibatch to gather (those before it: gathered or forgotten)
        self._pending = collections.deque()  # the id counts of announced minibatches not yet gathered, in order
        self._promotions = collections.deque()  # (minibatch, cached rows it promotes) announced ahead of the window
        self._base = 0  # the absolute position of the first pending id
        # the pending minibatches' ids, concatenated, and each one's next announced use (-1: none yet), in
        # buffers[head:tail] that new minibatches append to: ``_append`` moves them to the front only when the
        # buffers are full, so announcing costs the minibatch's ids, not the window's
        self._id_buffer = np.zeros(0, np.int64)
        self._following_buffer = np.zeros(0, np.int64)
        self._head = self._tail = 0
        self._lock = threading.Lock()  # a pipeline announces from its sampling thread while another gathers

    def look_ahead(self, ids) -> None:
        """Announce the next minibatch's input nodes (distinct ids), sampled ahead of its gather (any number of
        minibatches ahead: the rule sees it ``window`` ahead)."""
        ids = np.ascontiguousarray(torch.as_tensor(ids).cpu().numpy(), dtype=np.int64)
        with self._lock:
            if not self._placed and self._announced - self._gathered == self.window:
                self._place()
            start = self._base + self._tail - self._head
            self._append(ids)
            deferred = _announce(ids, self._announced, self._gathered, self.window, start, self._following,
                                 self._base, self._last_seen, self._last_pos, self._where, self._heap, self._key,
                                 self._size)
            if len(deferred):
                self._promotions.append((self._announced, deferred))
            self._pending.append(len(ids))
            self._announced += 1

    @property
    def _ids(self) -> np.ndarray:
        """The pending minibatches' ids, concatenated (a view of the buffer)."""
        return self._id_buffer[self._head:self._tail]

    @property
    def _following(self) -> np.ndarray:
        """Each pending id's next announced use (-1: none yet), beside ``_ids`` (a view of the buffer)."""
        return self._following_buffer[self._head:self._tail]

    def _append(self, ids: np.ndarray) -> None:
        """Add a minibatch's ids after the pending ones, with no next use yet: moving the pending ones to the front
        of the buffers when there is no room after them, into buffers twice what they then need where the front
        has no room either (amortised, each id is moved a constant number of times)."""
        pending = self._tail - self._head
        if self._tail + len(ids) > len(self._id_buffer):
            size = len(self._id_buffer)
            if pending + len(ids) > size // 2:
                size = 2 * (pending + len(ids))
            for name in ("_id_buffer", "_following_buffer"):
                old = getattr(self, name)
                new = old if size == len(old) else np.empty(size, np.int64)
                new[:pending] = old[self._head:self._tail]  # numpy copies overlapping ranges as if through a copy
                setattr(self, name, new)
            self._head, self._tail = 0, pending
        self._id_buffer[self._tail:self._tail + len(ids)] = ids
        self._following_buffer[self._tail:self._tail + len(ids)] = _UNSET
        self._tail += len(ids)

    def _place(self) -> None:
        """Fill the cache before training: the rows the announced minibatches read, by first use, then the static
        order's first rows (the free start of a static placement)."""
        first = np.full(self.num_rows, np.iinfo(np.int64).max, np.int64)
        seen = np.zeros(self.num_rows, bool)
        ahead, offset = [], 0
        for batch, count in enumerate(self._pending):
            ids = self._ids[offset:offset + count]
            offset += count
            new = ids[~seen[ids]]
            seen[new] = True
            first[new] = self._gathered + batch
            ahead.append(new)
        ahead = np.concatenate(ahead) if ahead else np.zeros(0, np.int64)
        ahead = ahead[np.lexsort((ahead, first[ahead]))][:self.capacity]
        rest = self.order[~np.isin(self.order, ahead)][:self.capacity - len(ahead)]
        rows = np.concatenate([ahead, rest])
        keys = np.concatenate([first[ahead], BEYOND + self.rank[rest]])
        self._size = _fill(rows, keys, self._slot_of, self._heap, self._key, self._where)
        if len(rows):
            self.host.launch_kernel(torch.as_tensor(rows).to(self.device), self.cache[:len(rows)])
        self._placed = True

    def start_epoch(self, epoch: int) -> None:
        """Forget the minibatches announced and not gathered by an epoch cut short (module docstring)."""
        with self._lock:
            if not self._pending:
                return
            self._base += self._tail - self._head
            self._head = self._tail = 0
            self._pending.clear()
            self._promotions.clear()
            self._gathered = self._announced  # the forgotten minibatches' numbers are skipped, never gathered
            _rank_statically(self._heap, self._key, self._where, self._size, self.rank)

    def announce(self, batches):
        """``batches`` (an iterator of minibatches with ``input_nodes``), each announced ``window`` minibatches
        before it is yielded."""
        queue = collections.deque()
        for batch in batches:
            self.look_ahead(batch.input_nodes)
            queue.append(batch)
            if len(queue) > self.window:
                yield queue.popleft()
        while queue:
            yield queue.popleft()

    def _next_announced(self, ids: np.ndarray):
        """The pending minibatch ``ids`` is, with its ids' next uses, or None if it was not announced next."""
        if not self._pending:
            return None
        count = self._pending[0]
        if count != len(ids) or not np.array_equal(self._ids[:count], ids):
            return None
        following = self._following[:count]  # a view: read before the next announcement, under the same lock
        self._pending.popleft()
        self._head += count
        self._base += count
        return following

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        host_ids = np.ascontiguousarray(ids.cpu().numpy(), dtype=np.int64)
        with self._lock:
            if not self._placed:
                self._place()
            following = self._next_announced(host_ids)
            if following is None:  # not announced: served as the cache stands
                slots = self._slot_of[host_ids]
                admitted = admitted_slots = np.zeros(0, np.int64)
            else:
                slots, admitted, admitted_slots, count, self._size = _serve(
                    host_ids, following, self._gathered, self.rank, self._heap, self._where, self._key,
                    self._slot_of, self._hit_in, self.capacity, self._size)
                self._gathered += 1
                self.rows_admitted += count
                while self._promotions and self._promotions[0][0] - self.window <= self._gathered:
                    batch, rows = self._promotions.popleft()
                    _promote(rows, batch, self._where, self._heap, self._key, self._size)
        hits_at, misses_at = np.flatnonzero(slots >= 0), np.flatnonzero(slots < 0)
        self._stats.accesses += len(ids)
        self._stats.hits += len(hits_at)
        # the decision, and the ids where they are not on the device yet, in one copy
        parts = [slots, hits_at, slots[hits_at], misses_at, admitted, admitted_slots]
        if ids.device.type != self.device.type:
            parts.append(host_ids)
        on_device = torch.split(self._to_device(np.concatenate(parts)), [len(part) for part in parts])
        slots, hits_at, hit_slots, misses_at, admitted, admitted_slots = on_device[:6]
        ids = on_device[6] if len(on_device) > 6 else ids.to(self.device, dtype=torch.int64)
        out = torch.empty((len(ids), self.feature_dim), dtype=self.cache.dtype, device=self.device)
        out.index_copy_(0, hits_at, torch.index_select(self.cache, 0, hit_slots))
        cold = torch.empty((len(misses_at), self.feature_dim), dtype=self.cache.dtype, device=self.device)
        if self.device.type == "cuda":  # the kernel adds the misses' traffic as it copies them
            with self._counters.in_order():
                self.host.launch_kernel(ids[misses_at], cold, counters=self._counters.values)
        else:
            payload, requests = zero_copy_traffic_tensors(ids, self.row_bytes, self.host.host_offset,
                                                          self.host.variant, counted=slots < 0)
            self._counters.add(torch.stack([torch.zeros_like(payload), payload, requests]))
            self.host.launch_kernel(ids[misses_at], cold)
        out.index_copy_(0, misses_at, cold)
        if len(admitted):
            self.cache[admitted_slots] = out[admitted]
        return out

    def _to_device(self, values: np.ndarray) -> torch.Tensor:
        """A host array of the rule's, on the device without waiting for it (copied out before this returns)."""
        return torch.from_numpy(values).to(self.device, non_blocking=True)

    def stats(self):
        _, payload, requests = self._counters.read()
        stats = super().stats()
        stats.pcie_payload_bytes, stats.pcie_requests, stats.host_bytes_touched = payload, requests, payload
        return stats

    def reset_stats(self) -> None:
        super().reset_stats()
        self.rows_admitted = 0
        self._counters.zero()

    def close(self) -> None:
        self.host.close()
        self.cache = None
