"""This machine's host memory: all of it, and what a new allocation can still have.

A size the user gives that could never fit (a host tier larger than the RAM, a model or a bucket table larger than the
memory available now) is refused against these numbers before anything is allocated, naming both sizes.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")


def physical_bytes() -> int:
    """This machine's RAM."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def available_bytes() -> int:
    """The memory a new allocation can have without swapping: Linux's ``MemAvailable``, else all the RAM."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return physical_bytes()


def gib(n: float) -> str:
    """``n`` bytes in GiB, for a message."""
    return f"{n / 2**30:.1f} GiB"


def memlock_bytes() -> int | None:
    """The soft ``RLIMIT_MEMLOCK`` (``ulimit -l``): the most memory this process may lock or pin; None when
    unlimited."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft
