"""Marius's partition buffer (Marius §4): c partitions of an on-disk feature table in host memory, swapped in
the order of an edge-bucket ordering, the next partition read in the background.

The table's rows are in partition order in one ``.npy`` file (partition k
is rows ``boundaries[k]`` to ``boundaries[k + 1]``), read by
``tiering.disk.table.DiskTable``: one large sequential read per partition.
The buffer walks the buffer states of a ``baselines.marius.bucket_order.BucketOrder``:
``start()`` reads the first state's c partitions; each ``advance()`` moves to
the next state, putting each partition that enters in the slot of one that
leaves.  A reader thread reads the partitions of the coming states ahead, at
most ``prefetch`` of them (each into a spare slot, so the bound is also the
memory it adds), while the current state's buckets train.  With
``prefetch=0`` there is no reader: ``advance()`` reads each entering
partition itself, into the slot of the one leaving, and training waits for
it (synchronous swaps, as in PyTorch-BigGraph, against which Marius
measures Marius's pipeline).

``gather(ids)`` serves rows of buffered partitions through the
``FeatureLoader`` interface and refuses rows of any other partition with an
error that names it.  The counters: rows served (all hits: host memory is
this loader's top tier), ``disk_bytes_read`` (the reader's reads, read-ahead
included) and ``swaps``.
"""

from __future__ import annotations

import queue
import threading

import numpy as np
import torch

from baselines.marius.bucket_order import BucketOrder
from tiering.disk.table import CountsDiskReads, DiskTable
from tiering.features.loader import FeatureLoader


class PartitionNotBuffered(ValueError):
    """``gather`` asked for rows of a partition that is on disk."""


def check_prefetch(num_partitions: int, capacity: int, prefetch: int) -> None:
    """Refuse a read-ahead that is negative or larger than the partitions outside the buffer, ``p - c``: each
    partition read ahead takes a spare slot, and with more than ``p - c`` of them the buffer would hold more than
    the whole table, which a partition buffer exists not to hold (Marius §4)."""
    if not 0 <= prefetch <= num_partitions - capacity:
        raise ValueError(f"prefetch must be 0 (synchronous swaps) or more partitions, and at most the p - c = "
                         f"{num_partitions} - {capacity} = {num_partitions - capacity} partitions outside the buffer, "
                         f"got {prefetch}")


class PartitionBuffer(CountsDiskReads, FeatureLoader):
    def __init__(self, table: DiskTable, boundaries, order: BucketOrder, *, prefetch: int = 1, device="cpu"):
        boundaries = np.asarray(boundaries, dtype=np.int64)
        if (boundaries.ndim != 1 or len(boundaries) != order.num_partitions + 1 or boundaries[0] != 0
                or boundaries[-1] != table.num_rows or np.any(np.diff(boundaries) < 0)):
            raise ValueError(f"boundaries must cut the table's {table.num_rows:,} rows into the ordering's "
                             f"{order.num_partitions} partitions, in order")
        check_prefetch(order.num_partitions, len(order.states[0]), prefetch)
        super().__init__(table.num_rows, table.feature_dim, device)
        self.table, self.boundaries, self.order, self.prefetch = table, boundaries, order, prefetch
        self._slots = {}  # partition -> its rows in host memory
        self._spares: queue.Queue = queue.Queue()
        for _ in range(prefetch):
            self._spares.put(self._slot())
        self._ready: queue.Queue = queue.Queue(maxsize=prefetch)
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self.state = -1
        self.swaps = 0

    @property
    def buffered(self) -> tuple[int, ...]:
        return self.order.states[self.state] if self.state >= 0 else ()

    def _slot(self) -> np.ndarray:
        """Host memory for the largest partition."""
        largest = int(np.diff(self.boundaries).max())
        return np.empty((largest, self.feature_dim), dtype=self.table.dtype)

    def _read(self, partition: int, into: np.ndarray) -> np.ndarray:
        start, stop = self.boundaries[partition], self.boundaries[partition + 1]
        rows = into[: stop - start]
        self.table.read_rows(int(start), int(stop), rows)
        return rows

    def _entering(self):
        """Every (state, partition) that enters the buffer after the first state, in order."""
        for k in range(1, len(self.order.states)):
            for partition in self.order.states[k]:
                if partition not in self.order.states[k - 1]:
                    yield k, partition

    def _read_ahead(self) -> None:
        try:
            for _, partition in self._entering():
                while not self._stop.is_set():
                    try:
                        spare = self._spares.get(timeout=0.1)
                        break
                    except queue.Empty:
                        continue
                if self._stop.is_set():
                    return
                self._put(("rows", partition, self._read(partition, spare), spare))
        except BaseException as err:  # the training thread raises it at its next advance
            self._put(("error", err, None, None))

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def start(self) -> None:
        """Read the first buffer state's partitions and start reading ahead."""
        if self.state >= 0:
            raise RuntimeError("the partition buffer has started already")
        for partition in self.order.states[0]:
            self._slots[partition] = self._read(partition, self._slot())
        self.state = 0
        if not self.prefetch:
            return
        self._reader = threading.Thread(target=self._read_ahead, name="partition-reader", daemon=True)
        self._reader.start()

    def advance(self) -> tuple[int, ...]:
        """Move to the next buffer state; returns it."""
        if self.state < 0:
            raise RuntimeError("start() the partition buffer before advancing it")
        if self.state + 1 >= len(self.order.states):
            raise RuntimeError(f"the ordering has {len(self.order.states)} buffer states; all have been visited")
        current, following = self.order.states[self.state], self.order.states[self.state + 1]
        leaving = [p for p in current if p not in following]
        for partition in (p for p in following if p not in current):
            gone = self._slots.pop(leaving.pop())
            freed = gone.base if gone.base is not None else gone  # the whole slot, not the partition's rows in it
            if self.prefetch:
                kind, got, rows, _ = self._next_read()
                if kind == "error":
                    raise got
                if got != partition:
                    raise RuntimeError(f"the reader read partition {got}, partition {partition} was due")
                self._spares.put(freed)
            else:
                rows = self._read(partition, freed)
            self._slots[partition] = rows
            self.swaps += 1
        self.state += 1
        return self.buffered

    def _next_read(self):
        while True:
            try:
                return self._ready.get(timeout=1.0)
            except queue.Empty:
                if self._reader is None or not self._reader.is_alive():
                    raise RuntimeError("the partition reader has stopped") from None

    def buckets(self) -> list[tuple[int, int]]:
        """The edge buckets to process in the current buffer state."""
        return self.order.buckets[self.state]

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        ids_np = ids.cpu().numpy().astype(np.int64, copy=False)
        partition = np.searchsorted(self.boundaries, ids_np, side="right") - 1
        missing = np.setdiff1d(np.unique(partition), np.fromiter(self._slots, dtype=np.int64, count=len(self._slots)))
        if len(missing):
            raise PartitionNotBuffered(
                f"rows of partition {int(missing[0])} (e.g. row {int(ids_np[partition == missing[0]][0])}) are not in "
                f"the buffer, which holds partitions {sorted(self._slots)}")
        out = np.empty((len(ids_np), self.feature_dim), dtype=self.table.dtype)
        for p in np.unique(partition):
            where = partition == p
            out[where] = self._slots[int(p)][ids_np[where] - self.boundaries[p]]
        self._stats.accesses += len(ids_np)
        self._stats.hits += len(ids_np)
        self._stats.host_bytes_touched += out.nbytes
        return torch.from_numpy(out).to(self.device)

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join()
            self._reader = None
        self._slots.clear()
        self.table.close()
