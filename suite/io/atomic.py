"""Crash-safe file writes: write beside the target, flush to disk, rename over it.

A crash or Ctrl-C at any point leaves either the old file or the new one,
never a half-written file under the final name.  ``nearest_existing`` finds the folder a write would land in
before the folders below it are made.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np


def nearest_existing(path) -> Path:
    """``path`` itself if it exists, else the nearest of its parents that does: where a file under ``path`` would be
    made (a relative path ends at ``.``, an absolute one at ``/``)."""
    path = Path(path)
    return next(p for p in (path, *path.parents) if p.exists())


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; the result gets the usual permissions
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_npy(path, array) -> None:
    """``np.save`` through a temporary file; never pickles (``allow_pickle=False``)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(array), allow_pickle=False)


def write_csv(path, frame, **kwargs) -> None:
    """``frame.to_csv`` through a temporary file."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, **kwargs)
