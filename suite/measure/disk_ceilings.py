"""The disk's ceilings, measured on the file being read: what a disk-backed loader is judged against (Marius).

* ``sequential_ceiling``: the whole file read cold (dropped from the page
  cache first) in ``SEQUENTIAL_CHUNK`` reads, ``O_DIRECT`` where the
  filesystem allows it: ``dd``'s way, the best a loader that reads large
  contiguous pieces (Marius's partition buffer) can do;
* ``random_ceiling``: single-block reads at random places, ``in_flight`` at
  a time: the best a loader reading rows on demand can do per block;
* ``worth_reading``: from the two, the gap between wanted blocks that costs
  less to read through than to skip.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tiering.disk.table import BLOCK, DiskTable

SEQUENTIAL_CHUNK = 64 << 20


def sequential_ceiling(path: Path) -> tuple[float, str]:
    """``(bytes/s, I/O mode)`` of reading the whole file cold, in ``SEQUENTIAL_CHUNK`` reads."""
    table = DiskTable(path)
    table.drop_cache()
    rows_per_chunk = max(1, SEQUENTIAL_CHUNK // table.row_bytes)
    out = np.empty((rows_per_chunk, table.feature_dim), table.dtype)
    start = time.perf_counter()
    for first in range(0, table.num_rows, rows_per_chunk):
        last = min(table.num_rows, first + rows_per_chunk)
        table.read_rows(first, last, out[: last - first])
    seconds = time.perf_counter() - start
    rate, mode = table.bytes_read / seconds, table.io_mode
    table.close()
    return rate, mode


def random_ceiling(path: Path, in_flight: int, reads: int = 20_000) -> float:
    """Blocks per second of random single-block reads, ``in_flight`` at a time (rows a block apart or more)."""
    table = DiskTable(path)
    table.drop_cache()
    stride = max(1, -(-BLOCK // table.row_bytes) * 2)
    rows = np.random.default_rng(0).permutation(np.arange(0, table.num_rows, stride))[:reads]
    out = np.empty((len(rows), table.feature_dim), table.dtype)
    start = time.perf_counter()
    table.read_scattered(rows, out, in_flight)
    seconds = time.perf_counter() - start
    blocks = table.bytes_read / BLOCK
    table.close()
    return blocks / seconds


def worth_reading(sequential: float, random_rate: float) -> int:
    """The gap between wanted blocks (bytes, whole blocks) that costs less to read through than to skip with a
    second read: what the disk moves sequentially in the time one random read takes."""
    return max(0, int(sequential / random_rate) // BLOCK * BLOCK)
