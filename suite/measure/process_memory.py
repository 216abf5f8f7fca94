"""A process's peak resident memory over a stretch of work, from Linux's own accounting (seeds/002 Figure 1's metric).

``PeakMemory`` resets the kernel's high-water mark of the process's resident
set (``VmHWM``, by writing 5 to ``/proc/self/clear_refs``) when it starts
and reads it when it stops: the most memory the process held at any moment
in between, tensors from torch's allocator, NumPy arrays and Python objects
alike (``tracemalloc`` sees only Python's own allocations).  ``added_bytes``
is that peak over the resident set at the start: what the work itself added.
"""

from __future__ import annotations

import re
from pathlib import Path

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{STATUS} has no {field} line: peak memory needs Linux")
    return int(match.group(1))


def resident_bytes() -> int:
    return _status_kib("VmRSS") << 10


class PeakMemory:
    """``with PeakMemory() as peak: work()``; then ``peak.peak_bytes`` and ``peak.added_bytes``."""

    def __enter__(self) -> PeakMemory:
        CLEAR_REFS.write_text("5")
        self.start_bytes = resident_bytes()
        return self

    def __exit__(self, *exc) -> None:
        self.peak_bytes = _status_kib("VmHWM") << 10

    @property
    def added_bytes(self) -> int:
        return max(0, self.peak_bytes - self.start_bytes)
