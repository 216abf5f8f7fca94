"""A feature table read from disk: rows of a ``.npy`` file by large sequential reads, bypassing the page cache
where the filesystem allows (the disk tier of Marius, §3-4).

``DiskTable(path)`` reads the ``.npy`` header (a C-ordered 2-D table of a
fixed-size dtype) and opens the file for reading.  ``read_rows(start, stop,
out)`` fills ``out`` with rows [start, stop) in one read per call.

I/O mode.  With ``direct=True`` (the default) the file is opened with
``O_DIRECT``, so reads come from the device, not the page cache, and cost
what a first epoch costs.  ``O_DIRECT`` needs the file offset, the length
and the buffer aligned to the device's block size; a read is widened to
whole 4 KiB blocks into an aligned bounce buffer and the rows are copied
out.  Filesystems that refuse ``O_DIRECT`` (tmpfs, some overlay and network
filesystems answer ``EINVAL``) fall back to plain reads; ``io_mode`` says
which is in use and ``io_note`` why.  ``drop_cache()`` asks the kernel to
drop the file from the page cache (``posix_fadvise(DONTNEED)``), the way to
make a plain-read run cold.

``read_scattered(rows, out, in_flight)`` reads rows anywhere in the table
on demand: the rows sorted, neighbours that share a block read together
(and, with ``max_gap_bytes``, neighbours that far apart: on a disk whose
random reads cost far more than sequential bytes, reading a short gap
is cheaper than a second read), at most ``in_flight`` reads outstanding (a pool of that many threads, each
blocking in ``preadv``, which releases the GIL).  With ``O_DIRECT`` each read
covers whole blocks, so a 512-byte row costs a 4 KiB read
(``tiering.features.traffic.disk_traffic`` models it).

``bytes_read`` counts what was read from the file, alignment padding
included: what crossed from the disk.
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

BLOCK = 4096
"""Alignment of ``O_DIRECT`` reads: the largest logical block size of common devices."""
_CHUNK = 64 << 20
"""The largest single read of ``read_rows`` with ``O_DIRECT`` (a multiple of ``BLOCK``): its staging buffer's bound."""


def npy_layout(path: Path) -> tuple[int, tuple[int, int], np.dtype]:
    """``(data offset, shape, dtype)`` of a 2-D C-ordered ``.npy`` file."""
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                raise ValueError(f"format version {version}")
            shape, fortran, dtype = read_header[version](f)
        except ValueError as err:
            raise ValueError(f"{path} is not a .npy file ({err})") from None
        offset = f.tell()
    if fortran or len(shape) != 2 or dtype.hasobject:
        raise ValueError(f"{path} must hold a C-ordered 2-D table of numbers, not shape {shape} of {dtype}"
                         f"{' in Fortran order' if fortran else ''}")
    expected = offset + shape[0] * shape[1] * dtype.itemsize
    if path.stat().st_size < expected:
        raise ValueError(f"{path} is truncated: {path.stat().st_size:,} bytes, its header promises {expected:,}")
    return offset, shape, dtype


class DiskTable:
    """Rows of an on-disk ``.npy`` table, read in large sequential reads (``O_DIRECT`` where allowed)."""

    def __init__(self, path, direct: bool = True):
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"{self.path} does not exist")
        self.offset, (self.num_rows, self.feature_dim), self.dtype = npy_layout(self.path)
        self.row_bytes = self.feature_dim * self.dtype.itemsize
        self.bytes_read = 0
        self.io_mode, self.io_note = "buffered", "plain reads through the page cache (asked for)"
        self._fd = -1
        if direct and hasattr(os, "O_DIRECT"):
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
                self._probe()
                self.io_mode, self.io_note = "direct", "O_DIRECT: every read comes from the device"
            except OSError as err:
                if self._fd >= 0:
                    os.close(self._fd)
                self._fd = -1
                self.io_note = (f"plain reads: this filesystem refuses O_DIRECT ({os.strerror(err.errno)}); "
                                "drop_cache() makes a run cold instead")
        elif direct:
            self.io_note = "plain reads: this platform has no O_DIRECT"
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY)
        self._local = threading.local()  # each reading thread's own page-aligned staging buffer
        self._count = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _probe(self) -> None:
        """One aligned read: some filesystems accept the O_DIRECT open and refuse the read."""
        probe = mmap.mmap(-1, BLOCK)
        try:
            os.preadv(self._fd, [probe], 0)
        finally:
            probe.close()

    def read_rows(self, start: int, stop: int, out: np.ndarray) -> None:
        """Rows [start, stop) into ``out`` (a C-ordered array of ``stop - start`` rows of the table's dtype)."""
        if not 0 <= start <= stop <= self.num_rows:
            raise IndexError(f"rows [{start}, {stop}) are not within the table's {self.num_rows:,} rows")
        if out.shape != (stop - start, self.feature_dim) or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be C-ordered {self.dtype} of shape {(stop - start, self.feature_dim)}")
        begin = self.offset + start * self.row_bytes
        end = self.offset + stop * self.row_bytes
        if begin == end:
            return
        flat = out.reshape(-1).view(np.uint8)
        if self.io_mode != "direct":
            self._read_fully(memoryview(flat), begin, tail_may_end=False)
            return
        for chunk in range(begin - begin % BLOCK, end, _CHUNK):  # aligned chunks: no block is read twice
            low, high = max(chunk, begin), min(chunk + _CHUNK, end)
            flat[low - begin: high - begin] = self._read_bytes(low, high)

    def _staging(self, nbytes: int) -> mmap.mmap:
        """This thread's page-aligned staging buffer, grown to at least ``nbytes``."""
        staging = getattr(self._local, "staging", None)
        if staging is None or len(staging) < nbytes:
            staging = self._local.staging = mmap.mmap(-1, -(-nbytes // BLOCK) * BLOCK)
        return staging

    def _read_bytes(self, begin: int, end: int) -> np.ndarray:
        """The file's bytes [begin, end) in this thread's staging buffer (until its next read); with ``O_DIRECT``
        the read is widened to whole blocks."""
        if self.io_mode == "direct":
            first, last = begin - begin % BLOCK, -(-end // BLOCK) * BLOCK
            staging = self._staging(last - first)
            self._read_fully(memoryview(staging)[: last - first], first, tail_may_end=True)
            return np.frombuffer(staging, np.uint8, end - begin, begin - first)
        staging = self._staging(end - begin)
        self._read_fully(memoryview(staging)[: end - begin], begin, tail_may_end=False)
        return np.frombuffer(staging, np.uint8, end - begin)

    def _read_fully(self, view: memoryview, offset: int, tail_may_end: bool) -> None:
        done = 0
        while done < len(view):
            got = os.preadv(self._fd, [view[done:]], offset + done)
            if got == 0:
                if tail_may_end:  # an aligned read past the end of the file: the rest is padding
                    break
                raise ValueError(f"{self.path} ended early, at byte {offset + done:,}")
            done += got
        with self._count:
            self.bytes_read += done

    def runs(self, rows: np.ndarray, max_gap_bytes: int = 0) -> list[tuple[int, int]]:
        """Sorted distinct ``rows`` cut into runs that one read serves: ``(first, last + 1)`` row ranges whose bytes
        are adjacent or, with ``O_DIRECT``, share a block; or lie at most ``max_gap_bytes`` apart (whole blocks with
        ``O_DIRECT``), whose unwanted bytes one read then takes along."""
        if not len(rows):
            return []
        begin = self.offset + rows * self.row_bytes
        end = begin + self.row_bytes
        gap = max_gap_bytes
        if self.io_mode == "direct":
            begin, end, gap = begin // BLOCK, -(-end // BLOCK), max_gap_bytes // BLOCK  # in blocks
        breaks = np.flatnonzero(begin[1:] - end[:-1] > gap) + 1
        firsts = np.concatenate([[0], breaks])
        lasts = np.concatenate([breaks, [len(rows)]])
        return [(int(rows[f]), int(rows[l - 1]) + 1) for f, l in zip(firsts, lasts)]

    def _read_run(self, start: int, stop: int, rows: np.ndarray, where: np.ndarray, out: np.ndarray) -> None:
        """Rows [start, stop) of the table, of which ``rows`` (with positions ``where`` in ``out``) are wanted."""
        raw = self._read_bytes(self.offset + start * self.row_bytes, self.offset + stop * self.row_bytes)
        out[where] = raw.view(self.dtype).reshape(stop - start, self.feature_dim)[rows - start]

    def read_scattered(self, rows: np.ndarray, out: np.ndarray, in_flight: int = 32, max_gap_bytes: int = 0) -> None:
        """``out[i] = table[rows[i]]`` for distinct ``rows`` anywhere in the table, at most ``in_flight`` reads at a
        time; rows at most ``max_gap_bytes`` apart are read together (``runs``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.num_rows):
            raise IndexError(f"rows must be within the table's {self.num_rows:,} rows")
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {in_flight}")
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        runs = self.runs(ordered, max_gap_bytes)
        bounds = np.searchsorted(ordered, [start for start, _ in runs] + [self.num_rows])
        jobs = [(start, stop, ordered[bounds[k]:bounds[k + 1]], order[bounds[k]:bounds[k + 1]])
                for k, (start, stop) in enumerate(runs)]
        if in_flight == 1 or len(jobs) <= 1:
            for job in jobs:
                self._read_run(*job, out)
            return
        if self._pool is None or self._pool._max_workers != in_flight:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="disk-reader")
        for future in [self._pool.submit(self._read_run, *job, out) for job in jobs]:
            future.result()

    def drop_cache(self) -> None:
        """Drop the file's pages from the page cache, so that the next plain read comes from the device."""
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CountsDiskReads:
    """Mixed into a ``FeatureLoader`` that reads ``self.table`` (a ``DiskTable``): its ``disk_bytes_read`` is what
    the table read from the file since the last ``reset_stats``."""

    _disk_bytes_at_reset = 0

    def stats(self):
        self._stats.disk_bytes_read = self.table.bytes_read - self._disk_bytes_at_reset
        return super().stats()

    def reset_stats(self) -> None:
        super().reset_stats()
        self._disk_bytes_at_reset = self.table.bytes_read
