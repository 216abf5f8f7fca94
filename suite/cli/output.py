"""Where a command's files go: checked before it starts, and printed when it is done."""

from __future__ import annotations

import os
from pathlib import Path

from suite.errors import BadValue

DESTINATIONS = ("out", "runs")
"""The options that name a folder a command writes into."""


def check_destinations(args) -> None:
    """Refuse, before any work, a folder option that names a file, or a folder (or the nearest one that exists
    above it) this process cannot write into; nothing is created here."""
    for option in DESTINATIONS:
        value = getattr(args, option, None)
        if value is None:
            continue
        path = Path(value)
        if path.exists() and not path.is_dir():
            raise BadValue(f"--{option} {path} is a file, not a folder: give a folder for the command's files")
        existing = next(p for p in (path, *path.parents) if p.exists())
        if not existing.is_dir():
            raise BadValue(f"--{option} {path} is below {existing}, which is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise BadValue(f"--{option} {path}: {existing} is not writable")


def show(paths) -> None:
    """Print a report's table (its first file) and where every file of it went."""
    print(paths[0].read_text())
    for path in paths:
        print(f"wrote {path}")
