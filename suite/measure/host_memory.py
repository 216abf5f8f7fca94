"""This machine's host memory: all of it, and what a new allocation can still have.

A size the user gives that could never fit (a host tier larger than the RAM, a model or a bucket table larger than the
memory available now) is refused against these numbers before anything is allocated, naming both sizes.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
PROC_STATUS = Path("/proc/self/status")


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
    """The most memory this process may lock or pin: the soft ``RLIMIT_MEMLOCK`` (``ulimit -l``); None when it is
    unlimited or the process holds ``CAP_IPC_LOCK``, which lifts it."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY or _can_lock_any() else soft


CAP_IPC_LOCK = 14


def _can_lock_any() -> bool:
    """Whether the process's effective capabilities (``CapEff`` in ``/proc/self/status``) hold ``CAP_IPC_LOCK``."""
    try:
        for line in PROC_STATUS.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_IPC_LOCK & 1)
    except OSError:
        pass
    return False
