"""Where prepared datasets live, and how their integrity is checked.

The cache root is ``$TIERBENCH_DATA`` when set, otherwise the user's cache
directory (``~/.cache/tierbench`` on Linux).  Each prepared dataset is one
entry directory named ``<dataset>-<key>``; the key hashes everything the
content depends on (a preset's parameters, or a real dataset's location and
file sizes), so changing a preset never silently reuses old data.

An entry is complete exactly when its ``manifest.json`` exists: entries are
built in a hidden ``.partial`` directory and renamed into place, and the
manifest (generating parameters, statistics, and the size and SHA-256 of
every file) is written last.  Loading checks the size of every file and, by
default, the checksum of every array it loads; a mismatch names the file and
the command that rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from tqdm.auto import tqdm

from .. import atomic
from .errors import DatasetFileError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
_HASH_CHUNK = 16 << 20
_PROGRESS_BYTES = 256 << 20  # show a progress bar when hashing more than this


def cache_root() -> Path:
    """``$TIERBENCH_DATA`` or the per-user cache directory."""
    env = os.environ.get("TIERBENCH_DATA")
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs  # only here: with $TIERBENCH_DATA set, an offline install does without it
    except ImportError:
        raise ValueError("platformdirs is not installed: install it, or set TIERBENCH_DATA to the dataset cache "
                         "directory") from None
    return Path(platformdirs.user_cache_dir("tierbench"))


def sha256_file(path: Path, progress: bool = True) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as f, tqdm(
        total=size, unit="B", unit_scale=True, desc=f"sha256 {path.name}", disable=not progress or size < _PROGRESS_BYTES, leave=False
    ) as bar:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def describe_files(entry: Path, paths, progress: bool = True) -> dict:
    """``{relative path: {"bytes": size, "sha256": digest}}`` for files under ``entry``."""
    return {
        str(Path(p).relative_to(entry)): {"bytes": Path(p).stat().st_size, "sha256": sha256_file(Path(p), progress)}
        for p in paths
    }


def write_manifest(entry: Path, manifest: dict) -> None:
    atomic.write_json(entry / MANIFEST, {"format": MANIFEST_FORMAT, **manifest})


def read_manifest(entry: Path, hint: str) -> dict:
    path = entry / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetFileError(f"{path} is missing: the dataset was never completed. {hint}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetFileError(f"{path} is corrupt ({err}). {hint}") from None
    if manifest.get("format") != MANIFEST_FORMAT or "files" not in manifest:
        raise DatasetFileError(f"{path} is not a tierbench manifest of format {MANIFEST_FORMAT}. {hint}")
    return manifest


def verify_files(entry: Path, manifest: dict, hint: str, checksums: bool = True, progress: bool = True) -> None:
    """Raise ``DatasetFileError`` naming the first missing, truncated or corrupt file."""
    for name, record in manifest["files"].items():
        path = entry / name
        if not path.exists():
            raise DatasetFileError(f"{path} is missing. {hint}")
        size = path.stat().st_size
        if size != record["bytes"]:
            what = "truncated" if size < record["bytes"] else "longer than recorded"
            raise DatasetFileError(f"{path} is {what}: {size} bytes, expected {record['bytes']}. {hint}")
        if checksums and sha256_file(path, progress) != record["sha256"]:
            raise DatasetFileError(f"{path} is corrupt: its SHA-256 differs from the manifest. {hint}")


def partial_dir(entry: Path) -> Path:
    """A fresh hidden directory to build ``entry`` in; stale ones of crashed builds are removed."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    for stale in entry.parent.glob(f".{entry.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    path = entry.parent / f".{entry.name}.partial-{os.getpid()}"
    path.mkdir()
    return path


def publish(partial: Path, entry: Path) -> None:
    """Move a finished build into place, replacing an older entry only once the new one is whole."""
    old = None
    if entry.exists():
        old = entry.parent / f".{entry.name}.old-{os.getpid()}"
        os.replace(entry, old)
    os.replace(partial, entry)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def discard(partial: Path) -> None:
    """Remove what is left of a build that did not reach ``publish`` (nothing if it did)."""
    shutil.rmtree(partial, ignore_errors=True)
