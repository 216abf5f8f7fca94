"""A process's peak resident memory over a stretch of work, from Linux's own accounting (SAR Figure 1's metric).

``PeakMemory`` resets the kernel's high-water mark of the process's resident
set (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``) when it starts
and reads it when it stops: the most memory the process held at any moment
in between, tensors from torch's allocator, NumPy arrays and Python objects
alike (``tracemalloc`` sees only Python's own allocations).  ``added_bytes``
is that peak over the resident set at the start: what the work itself added.

Before the reset, the C library's allocator gives the memory it holds free
back to the kernel (glibc's ``malloc_trim``, where there is one): freed
blocks kept for reuse would otherwise stay resident from earlier work and
count in the next stretch's peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{STATUS} has no {field} line: peak memory needs Linux")
    return int(match.group(1))


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None under another C library."""
    name = ctypes.util.find_library("c")
    library = ctypes.CDLL(name) if name else None
    return getattr(library, "malloc_trim", None)


def release_free_heap() -> None:
    """Give the heap memory the allocator holds free back to the kernel (a no-op without glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def resident_bytes() -> int:
    return _status_kib("VmRSS") << 10


class PeakMemory:
    """``with PeakMemory() as peak: work()``; then ``peak.peak_bytes`` and ``peak.added_bytes``."""

    def __enter__(self) -> PeakMemory:
        release_free_heap()
        CLEAR_REFS.write_text("5")
        self.start_bytes = resident_bytes()
        return self

    def __exit__(self, *exc) -> None:
        self.peak_bytes = _status_kib("VmHWM") << 10

    @property
    def added_bytes(self) -> int:
        return max(0, self.peak_bytes - self.start_bytes)
