"""Enforce a host-memory budget on the current process with a Linux memory cgroup.

The disk-backed loaders are measured under a host-memory budget smaller than
the feature file.  ``ulimit -v`` (``RLIMIT_AS``) cannot enforce that budget:
it bounds the address space, not resident memory, and the page cache of an
``mmap``-ed or ``read`` file is not charged to it at all.  A memory cgroup
charges both anonymous memory and the page cache a process faults in or reads,
and the kernel reclaims that cache to keep the group under its limit.

``memory_limit`` creates a fresh group, moves the process into it and back
out when the ``with`` block ends.  Moving a process does not move its existing
charges (cgroup v1 with ``memory.move_charge_at_immigrate`` 0, the value of a
new group; cgroup v2 never moves them): they stay with the group the process came
from.  The limit therefore bounds only what the process allocates, reads or
faults in inside the block.  A file's pages already in the page cache are not
charged again, so drop them first (``os.posix_fadvise`` with
``POSIX_FADV_DONTNEED`` after an ``fsync``).  Page cache beyond the limit is
reclaimed; anonymous memory beyond it gets the process OOM-killed, so leave
slack for the allocations of the block.

The process moves as a whole, all of its threads (those in other groups of
cgroup v1 included), and threads it starts inside the block start in the group.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from suite.errors import UserError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
_groups = itertools.count()


class MemoryLimitUnavailable(UserError, RuntimeError):
    """No memory cgroup this process can create a group in and move itself into; the message says why and what
    to change (a machine or container that gives the process a writable memory cgroup)."""


def _proc_cgroup_path(version: str) -> str:
    """The process's group in ``/proc/self/cgroup``, relative to its hierarchy's root ("" when absent)."""
    for line in PROC_CGROUP.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (version == "v2" and controllers == "") or (version == "v1" and "memory" in controllers.split(",")):
            return path.lstrip("/")
    return ""


def _locate() -> tuple[str, Path, Path]:
    """The version, the directory to create the group in, and the group the process is in now."""
    if sys.platform != "linux":
        raise MemoryLimitUnavailable(f"memory limits need Linux cgroups, and this is {sys.platform}")
    v1 = CGROUP_ROOT / "memory"
    if (v1 / "memory.limit_in_bytes").exists():
        current = v1 / _proc_cgroup_path("v1")
        for parent in (current, v1):
            if os.access(parent, os.W_OK):
                return "v1", parent, current
        raise MemoryLimitUnavailable(f"no writable memory cgroup: {v1} is not writable "
                                     "(run as root, or with a delegated cgroup)")
    for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "memory" in controllers.read_text().split():
            current = root / _proc_cgroup_path("v2")
            # A non-root v2 group holding processes cannot give controllers to children: use a sibling.
            parent = current if current == root else current.parent
            subtree = parent / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                try:
                    subtree.write_text("+memory")
                except OSError as err:
                    raise MemoryLimitUnavailable(
                        f"cannot enable the memory controller in {subtree}: {err.strerror} "
                        "(run as root, or in a delegated cgroup whose parent enables memory)") from err
            if not os.access(parent, os.W_OK):
                raise MemoryLimitUnavailable(f"no writable memory cgroup: {parent} is not writable "
                                             "(run as root, or with a delegated cgroup)")
            return "v2", parent, current
    raise MemoryLimitUnavailable(f"no memory cgroup controller under {CGROUP_ROOT} "
                                 "(mount cgroup v1's memory controller, or enable memory in cgroup v2)")


def memory_cgroup_root() -> tuple[str, Path]:
    """``("v1" | "v2", directory)``: the cgroup version and where ``memory_limit`` creates its group.

    Raises ``MemoryLimitUnavailable`` with the reason when there is none.
    """
    version, parent, _ = _locate()
    return version, parent


@dataclass(frozen=True)
class MemoryLimit:
    """The group a ``memory_limit`` block runs in, and what it is charged."""

    limit_bytes: int
    version: str
    path: Path

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def _stat(self, field: str) -> int:
        return int(dict(line.split() for line in self._read("memory.stat").splitlines())[field])

    def usage_bytes(self) -> int:
        """Memory charged to the group now: page cache and anonymous memory."""
        return int(self._read("memory.usage_in_bytes" if self.version == "v1" else "memory.current"))

    def peak_bytes(self) -> int | None:
        """The most ever charged to the group, or None where the kernel does not record it (v2 before 5.19)."""
        if self.version == "v1":
            return int(self._read("memory.max_usage_in_bytes"))
        peak = self.path / "memory.peak"
        return int(peak.read_text()) if peak.exists() else None

    def page_cache_bytes(self) -> int:
        """The page cache charged to the group now."""
        return self._stat("cache" if self.version == "v1" else "file")


def _remove_orphans(parent: Path, name_hint: str) -> None:
    """Remove the groups ``memory_limit`` made for processes that no longer run (killed before they left them)."""
    for group in parent.glob(f"{name_hint}-*-*"):
        pid = group.name[len(name_hint) + 1:].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):  # a group still holding a process cannot go: leave it
                group.rmdir()


@contextlib.contextmanager
def memory_limit(limit_bytes: int, name_hint: str = "tierbench") -> Iterator[MemoryLimit]:
    """Run the ``with`` block in a fresh memory cgroup limited to ``limit_bytes`` (on cgroup v2 without swap).

    The group is ``<name_hint>-<pid>-<counter>``; on leaving the block, also by an
    exception, the process moves back to the group it came from and the group is
    removed (what is still charged to it passes to its parent).
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes <= 0:
        raise ValueError(f"limit_bytes must be a positive int of bytes, got {limit_bytes!r}")
    version, parent, origin = _locate()
    _remove_orphans(parent, name_hint)
    pid = str(os.getpid())
    group = parent / f"{name_hint}-{pid}-{next(_groups)}"
    group.mkdir()
    try:
        if version == "v1":
            (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        else:
            (group / "memory.max").write_text(str(limit_bytes))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
        (group / "cgroup.procs").write_text(pid)
        try:
            yield MemoryLimit(limit_bytes, version, group)
        finally:
            (origin / "cgroup.procs").write_text(pid)
    finally:
        group.rmdir()
