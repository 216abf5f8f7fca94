"""Where a command's files go: checked before it starts, locked while it writes, and printed when it is done."""

from __future__ import annotations

import contextlib
import hashlib
import sys
import tempfile
from pathlib import Path

import filelock

from suite.errors import BadValue
from suite.io.atomic import nearest_existing


DESTINATIONS = {"out": "files", "runs": "records"}
"""The options that name a folder a command writes into, and what it writes there."""


def check_destinations(args) -> None:
    """Refuse, before any work, a folder option that names a file, lies below one, or names a folder (or the nearest
    one that exists above it) this process cannot write into; nothing is left behind."""
    for option, what in DESTINATIONS.items():
        value = getattr(args, option, None)
        if value is None:
            continue
        path = Path(value)
        existing = nearest_existing(path)
        why = None
        if not existing.is_dir():
            why = "it is a file, not a folder" if existing == path else f"{existing} is a file, not a folder"
        else:
            try:
                with tempfile.TemporaryFile(dir=existing):
                    pass
            except OSError as err:
                why = f"{existing}: {err.strerror or err}"
        if why:
            raise BadValue(f"cannot write {what} into {path}: {why}; give a writable directory (--{option} DIR)")


def lock_path(out) -> Path:
    """The lock of the folder ``out``: in the temporary directory, named by the folder's absolute path, so that it
    leaves nothing in the folder and needs no folder to exist."""
    digest = hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"tierbench-out-{digest}.lock"


@contextlib.contextmanager
def writing_into(args):
    """Hold the lock of the command's --out folder while it runs, so that two commands writing into one folder take
    turns and each prints what it wrote itself; the second says it waits."""
    out = getattr(args, "out", None)
    if out is None:
        yield
        return
    lock = filelock.FileLock(str(lock_path(out)), mode=0o666)  # any user's command may wait on it
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        print(f"tierbench: waiting for another tierbench command writing into {out}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def show(paths) -> None:
    """Print a report's table (its first file) and where every file of it went."""
    print(paths[0].read_text())
    for path in paths:
        print(f"wrote {path}")
