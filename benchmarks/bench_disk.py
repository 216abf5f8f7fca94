"""Read speed of the disk tier (Marius), each as a ratio to the disk's own ceiling measured in the same run.

A 256 MiB ``.npy`` table (2**19 rows of 128 float32) in asv's cache
directory, dropped from the page cache before every timing:

* ``PartitionBufferSwaps``: one epoch of a partition buffer's reads (p = 16,
  c = 4, BETA: the first four partitions and every swap) without training, with
  the reader thread ahead or synchronous, against a cold sequential read of the
  whole file in 64 MiB reads (``suite.measure.disk_ceilings``);
* ``OnDemandRows``: ``disk-tiered`` with nothing in memory gathering 20,000
  rows spread over the file, 32 reads in flight, against random single-block
  reads at the same concurrency.

The ``track_`` ratios are what to watch: the disk's speed moves between
machines and runs, the share of it the loader reaches should not.  asv reads
every number as lower-is-better; for the ratios a drop is the regression.
"""

import os
import tempfile

import numpy as np
import torch

from baselines.marius.bucket_order import beta_order
from baselines.marius.partition_buffer import PartitionBuffer
from suite.measure.disk_ceilings import random_ceiling, sequential_ceiling
from suite.measure.timing import best_wall_seconds
from tiering.disk.table import BLOCK, DiskTable
from tiering.disk.tiered import DiskTieredLoader

ROWS, DIM = 1 << 19, 128
PARTITIONS, CAPACITY = 16, 4
IN_FLIGHT = 32


def _table_file() -> str:
    directory = tempfile.mkdtemp(prefix="tierbench-disk-", dir=os.getcwd())
    path = os.path.join(directory, "features.npy")
    table = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(ROWS, DIM))
    table[:] = np.random.default_rng(0).standard_normal((ROWS, DIM), dtype=np.float32)
    table.flush()
    del table
    return path


class PartitionBufferSwaps:
    params = [0, 1]
    param_names = ["prefetch"]
    timeout = 300

    def setup_cache(self):
        return _table_file()

    def setup(self, path, prefetch):
        self.path, self.prefetch = path, prefetch
        self.order = beta_order(PARTITIONS, CAPACITY)
        self.boundaries = np.linspace(0, ROWS, PARTITIONS + 1).astype(np.int64)

    def epoch(self) -> int:
        table = DiskTable(self.path)
        table.drop_cache()
        buffer = PartitionBuffer(table, self.boundaries, self.order, prefetch=self.prefetch)
        buffer.start()
        for _ in self.order.states[1:]:
            buffer.advance()
        read = buffer.stats().disk_bytes_read
        buffer.close()
        return read

    def time_epoch_of_swaps(self, path, prefetch):
        self.epoch()

    def track_of_sequential_ceiling(self, path, prefetch):
        (read, seconds) = best_wall_seconds(self.epoch)
        return read / seconds / sequential_ceiling(self.path)[0]

    track_of_sequential_ceiling.unit = "ratio"


class OnDemandRows:
    timeout = 300

    def setup_cache(self):
        return _table_file()

    def setup(self, path):
        self.path = path
        stride = -(-BLOCK // (DIM * 4)) * 2  # rows a block apart or more: one read each, as the ceiling's
        rows = np.random.default_rng(1).permutation(np.arange(0, ROWS, stride))[:20_000]
        self.ids = torch.from_numpy(rows)

    def gather(self) -> int:
        table = DiskTable(self.path)
        table.drop_cache()
        loader = DiskTieredLoader(table, hot_rows=0, host_rows=0, in_flight=IN_FLIGHT)
        loader.gather(self.ids)
        read = loader.stats().disk_bytes_read
        loader.close()
        return read

    def time_gather(self, path):
        self.gather()

    def track_of_random_read_ceiling(self, path):
        (read, seconds) = best_wall_seconds(self.gather)
        return read / BLOCK / seconds / random_ceiling(self.path, IN_FLIGHT)

    track_of_random_read_ceiling.unit = "ratio"
