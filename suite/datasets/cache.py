"""Where prepared datasets live, how an entry is built and published, and how its integrity is checked.

The cache root is ``$TIERBENCH_DATA`` when set, otherwise the user's cache
directory (``~/.cache/tierbench`` on Linux).  Each prepared dataset is one
entry directory named ``<dataset>-<key>``; the key hashes everything the
content depends on (a preset's parameters, or a real dataset's location and
file sizes), so changing a preset never silently reuses old data.

An entry is complete exactly when its ``manifest.json`` exists.  Building one
(``build_entry``) holds a per-entry lock (``.<entry>.lock`` in the root), so
a second process asking for the same entry waits and then uses the first
one's result.  A complete entry is read without the lock, so a cache that
cannot be written (a shared one, or ``chmod -R a-w``) serves every entry it
holds; one that needs building there is refused in one line.  The build writes into a hidden ``.<entry>.partial-<pid>-<tag>``
directory, writes the manifest (generating parameters, statistics, and the
size and SHA-256 of every file) last, and is published by two renames: the
old entry to ``.<entry>.old-<pid>``, the new one into place.  A process killed
between them leaves no entry but a complete ``.old``; the next build or open
of the entry restores it.  Leftovers are removed only by the lock holder, and
only when the process named in them is gone.

Loading checks the manifest's shape and file names (confined to the entry),
the size of every file and, by default, the checksum of every array it
loads; a mismatch names the file and the command that rebuilds it.
``entry_problem`` is the same check without loading (sizes only, or every
checksum), for ``tierbench datasets list`` and ``datasets verify``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import secrets
import shutil
from pathlib import Path, PurePosixPath

import filelock
import numpy as np
from tqdm.auto import tqdm

from suite.datasets.errors import DatasetFileError
from suite.errors import BadValue
from suite.io import atomic

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
MANIFEST_FIELDS = {
    "format": int,
    "name": str,
    "created": str,
    "source": dict,
    "num_nodes": int,
    "num_edges": int,
    "feature_dim": int,
    "num_classes": int,
    "split_sizes": dict,
    "stats": dict,
    "files": dict,
}
"""The keys every manifest holds, with their JSON types."""
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
        raise BadValue("platformdirs is not installed: install it, or set TIERBENCH_DATA to the dataset cache "
                       "directory") from None
    return Path(platformdirs.user_cache_dir("tierbench"))


def describe_root() -> str:
    """The cache root and where the choice came from, for the CLI's output."""
    how = "from $TIERBENCH_DATA" if os.environ.get("TIERBENCH_DATA") else "the default; set TIERBENCH_DATA to move it"
    return f"{cache_root()} ({how})"


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


def write_npy_chunks(path: Path, dtype, shape: tuple, chunks) -> dict:
    """Write a ``.npy`` array of ``shape`` from ``chunks`` (its rows, in order), hashing it as it is written.

    Returns the file's record, as ``describe_files`` would give it, without
    reading the file back.  The bytes are those ``np.save`` writes for the
    whole array (the same header), and only one chunk is in memory at a time:
    the file is written, not memory-mapped, so its pages never count in the
    process's resident memory.  Crash-safe (``suite.io.atomic``).
    """
    dtype = np.dtype(dtype)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    )
    digest = hashlib.sha256(header.getvalue())
    rows = 0
    with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(header.getvalue())
        for chunk in chunks:
            if chunk.dtype != dtype or chunk.shape[1:] != tuple(shape[1:]):
                raise ValueError(f"{path.name}: a chunk of shape {chunk.shape} and type {chunk.dtype} does not "
                                 f"fit an array of shape {tuple(shape)} and type {dtype}")
            data = memoryview(np.ascontiguousarray(chunk)).cast("B")
            f.write(data)
            digest.update(data)
            rows += len(chunk)
        if rows != shape[0]:
            raise ValueError(f"{path.name}: the chunks hold {rows} rows, not {shape[0]}")
        size = f.tell()
    return {"bytes": size, "sha256": digest.hexdigest()}


def entry_bytes(entry: Path) -> int:
    """Bytes the files of an entry take on disk (its real size, whatever the manifest says)."""
    return sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())


# ------------------------------------------------------------------ manifest
def write_manifest(entry: Path, manifest: dict) -> None:
    atomic.write_json(entry / MANIFEST, {"format": MANIFEST_FORMAT, **manifest})


def _is_json_type(value, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _check_file_names(entry: Path, path: Path, files: dict, hint: str) -> None:
    """Every name in ``files`` is a relative path inside ``entry`` with a size and a checksum."""
    root = entry.resolve()
    for name, record in files.items():
        parts = PurePosixPath(name).parts
        if not name or PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
            raise DatasetFileError(f"{path} names the file {name!r}, outside its entry; refusing to read it. {hint}")
        if not (entry / name).resolve().is_relative_to(root):
            raise DatasetFileError(f"{path}: {entry / name} leads outside the entry; refusing to read it. {hint}")
        if not (isinstance(record, dict) and _is_json_type(record.get("bytes"), int) and record["bytes"] >= 0
                and isinstance(record.get("sha256"), str) and len(record["sha256"]) == 64):
            raise DatasetFileError(f"{path}: the record of {name!r} needs a byte count and a SHA-256. {hint}")


def read_manifest(entry: Path, hint: str) -> dict:
    """The manifest of ``entry``, with its keys, their types and its file names checked."""
    path = entry / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetFileError(f"{path} is missing: the dataset was never completed. {hint}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetFileError(f"{path} is corrupt ({err}). {hint}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise DatasetFileError(f"{path} is not a tierbench manifest of format {MANIFEST_FORMAT}. {hint}")
    wrong = [f"{key} ({kind.__name__})" for key, kind in MANIFEST_FIELDS.items()
             if not _is_json_type(manifest.get(key), kind)]
    if wrong:
        raise DatasetFileError(f"{path} lacks or mistypes {', '.join(wrong)}. {hint}")
    _check_file_names(entry, path, manifest["files"], hint)
    return manifest


def verify_files(entry: Path, manifest: dict, hint: str, checksums: bool = True, progress: bool = True) -> None:
    """Raise ``DatasetFileError`` naming the first missing, truncated or corrupt file."""
    for name, record in manifest["files"].items():
        path = entry / name
        if not path.is_file():
            raise DatasetFileError(f"{path} is missing. {hint}")
        size = path.stat().st_size
        if size != record["bytes"]:
            what = "truncated" if size < record["bytes"] else "longer than recorded"
            raise DatasetFileError(f"{path} is {what}: {size} bytes, expected {record['bytes']}. {hint}")
        if checksums and sha256_file(path, progress) != record["sha256"]:
            raise DatasetFileError(f"{path} is corrupt: its SHA-256 differs from the manifest. {hint}")


def entry_problem(entry: Path, hint: str, checksums: bool, progress: bool = True) -> str | None:
    """What is wrong with the complete entry ``entry`` (its manifest, a file's size, with ``checksums`` a file's
    SHA-256), in one line that ends with ``hint``; None when nothing is."""
    try:
        verify_files(entry, read_manifest(entry, hint), hint, checksums=checksums, progress=progress)
    except DatasetFileError as err:
        return str(err)
    return None


# --------------------------------------------------------- build and publish
def is_complete(entry: Path) -> bool:
    return (entry / MANIFEST).is_file()


def writable(directory: Path) -> bool:
    """Whether files can be made in ``directory``, or, if it does not exist yet, in the folder that would hold it."""
    path = atomic.nearest_existing(Path(directory).absolute())
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def check_writable(directory: Path, what: str,
                   remedy: str = "make it writable, or set TIERBENCH_DATA to a writable dataset cache") -> None:
    """Refuse, in one line, to build ``what`` in a cache folder that cannot be written."""
    if not writable(directory):
        raise BadValue(f"{what} needs building in {directory}, which cannot be written: {remedy}")


def _leftovers(entry: Path, kind: str) -> list[Path]:
    """``.<entry>.<kind>-<pid>...`` directories beside ``entry`` (kind: ``partial`` or ``old``)."""
    return sorted(entry.parent.glob(f".{entry.name}.{kind}-*"))


def _owner_gone(leftover: Path) -> bool:
    """Whether the process named in a leftover's name has ended (or is this one, which holds the lock now)."""
    suffix = leftover.name.rsplit(".", 1)[1]  # "partial-<pid>-<tag>" or "old-<pid>"
    try:
        pid = int(suffix.split("-")[1])
    except (IndexError, ValueError):
        return True  # not a name tierbench makes
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, under another user
    return False


def recover(entry: Path) -> None:
    """Undo what a killed build left of ``entry``; call it holding the entry's lock.

    A complete ``.old`` with no complete entry is a publication cut between
    its two renames: it is put back.  Other ``.old`` and ``.partial``
    directories are removed once the process that made them is gone.
    """
    olds = _leftovers(entry, "old")
    if olds and not is_complete(entry):
        restorable = [old for old in olds if is_complete(old)]
        if restorable:
            if entry.exists():
                shutil.rmtree(entry)
            os.replace(restorable[-1], entry)
            log.warning("restored %s from %s, left by a build killed while publishing", entry, restorable[-1].name)
    for leftover in _leftovers(entry, "old") + _leftovers(entry, "partial"):
        if _owner_gone(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            log.info("leaving %s: the process that made it is still running", leftover)


@contextlib.contextmanager
def entry_lock(entry: Path, wait: bool = True):
    """Hold ``entry``'s build lock (yields False instead of waiting when ``wait`` is False and it is taken)."""
    root = entry.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BadValue(f"cannot create the dataset cache {root} ({err.strerror}): set TIERBENCH_DATA to a "
                       f"writable directory") from None
    check_writable(root, entry.name)
    lock = filelock.FileLock(str(root / f".{entry.name}.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if not wait:
            yield False
            return
        log.warning("waiting for another tierbench process that is building %s (it holds %s)", entry.name,
                    lock.lock_file)
        lock.acquire()
    try:
        yield True
    finally:
        lock.release()


def build_entry(entry: Path, build, force: bool = False, on_reuse=None) -> Path:
    """Return ``entry``, complete: built by ``build(partial_dir)`` unless it exists (or ``force``).

    ``build`` writes every file and the manifest (last) into the directory it
    is given.  The entry's lock is held from the check to the publication, so
    concurrent callers build it once; leftovers of killed builds are
    recovered first (``recover``).  A complete entry is returned without
    taking the lock (a cache that cannot be written is only read), after
    ``on_reuse(entry)`` when that is given.
    """
    if is_complete(entry) and not force:
        if (_leftovers(entry, "old") or _leftovers(entry, "partial")) and writable(entry.parent):
            with entry_lock(entry, wait=False) as locked:
                if locked:
                    recover(entry)
        if on_reuse is not None:
            on_reuse(entry)
        return entry
    with entry_lock(entry):
        recover(entry)
        if is_complete(entry) and not force:  # another process built it while this one waited
            if on_reuse is not None:
                on_reuse(entry)
            return entry
        partial = entry.parent / f".{entry.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
        partial.mkdir()
        try:
            build(partial)
            publish(partial, entry)
        finally:
            discard(partial)
    return entry


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
