"""``memory_limit``: a memory cgroup bounds the page cache of a file read inside the block, and leaves nothing behind.

The tests that need a writable memory cgroup skip, with the reason, where there is none.
"""

import contextlib
import mmap
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from suite.measure import memory_limit as module
from suite.measure.memory_limit import MemoryLimitUnavailable, memory_cgroup_root, memory_limit

MiB = 1 << 20
LIMIT = 32 * MiB
FILE_BYTES = 96 * MiB
CHUNK = 4 * MiB
PROC_CGROUP = Path("/proc/self/cgroup")


@pytest.fixture
def cgroup():
    try:
        return memory_cgroup_root()
    except MemoryLimitUnavailable as err:
        pytest.skip(str(err))


def _on_tmpfs(path: Path) -> bool:
    """Whether ``path`` lies on tmpfs or ramfs, whose pages are not reclaimable page cache."""
    path, best, fstype = os.path.realpath(path), "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount, kind = line.split()[:3]
        if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, fstype = mount, kind
    return fstype in ("tmpfs", "ramfs")


@pytest.fixture
def disk_file(tmp_path):
    """A 96 MiB file on a disk, written and synced, in tmp_path or else in a directory under ~/.cache."""
    with tempfile.TemporaryDirectory(dir=_disk_dir(tmp_path)) as directory:
        path = Path(directory) / "features.bin"
        block = os.urandom(CHUNK)
        with open(path, "wb") as file:
            for _ in range(FILE_BYTES // CHUNK):
                file.write(block)
            file.flush()
            os.fsync(file.fileno())
        yield path


def _disk_dir(tmp_path: Path) -> Path:
    if not _on_tmpfs(tmp_path):
        return tmp_path
    directory = Path.home() / ".cache" / "tierbench-tests"
    directory.mkdir(parents=True, exist_ok=True)
    if _on_tmpfs(directory):
        pytest.skip("no directory on a disk for the test file: both tmp_path and ~/.cache are on tmpfs")
    return directory


def _drop(path: Path) -> None:
    """Drop the (clean) pages of ``path`` from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read_then_map(path: Path, group) -> tuple[int, int]:
    """Read ``path`` in 4 MiB chunks, then touch each of its pages through mmap; the bytes seen, the highest usage."""
    seen, highest = 0, 0
    with open(path, "rb", buffering=0) as file:
        while chunk := file.read(CHUNK):
            seen += len(chunk)
            highest = max(highest, group.usage_bytes())
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            for offset in range(0, len(mapped), mmap.PAGESIZE):
                seen += len(mapped[offset:offset + mmap.PAGESIZE])
                if offset % CHUNK == 0:
                    highest = max(highest, group.usage_bytes())
    return seen, highest


def test_the_limit_bounds_the_page_cache_of_a_file_read_inside(cgroup, disk_file):
    _drop(disk_file)
    with memory_limit(1 << 30) as roomy:
        _read_then_map(disk_file, roomy)
        unbounded = roomy.page_cache_bytes()
    assert unbounded > 64 * MiB, "the control: with room, the file's pages stay in the page cache"

    _drop(disk_file)
    with memory_limit(LIMIT) as group:
        seen, highest = _read_then_map(disk_file, group)
        cache, peak = group.page_cache_bytes(), group.peak_bytes()
    assert seen == 2 * FILE_BYTES
    assert highest <= LIMIT
    assert peak is None or peak <= LIMIT
    assert cache <= LIMIT


def test_charges_from_before_the_block_stay_behind(cgroup):
    held = b"\x01" * (2 * LIMIT)
    with memory_limit(LIMIT) as group:
        usage = group.usage_bytes()
        assert held[-1] == 1
    assert usage < LIMIT // 4


@pytest.mark.parametrize("body_raises", [False, True])
def test_the_process_returns_and_the_group_goes(cgroup, body_raises):
    before = PROC_CGROUP.read_text()
    with pytest.raises(KeyError) if body_raises else contextlib.nullcontext():
        with memory_limit(LIMIT, name_hint="tierbench-test") as group:
            inside = PROC_CGROUP.read_text()
            assert group.path.parent == cgroup[1]
            assert group.path.name.startswith(f"tierbench-test-{os.getpid()}-")
            assert (group.limit_bytes, group.version) == (LIMIT, cgroup[0])
            if body_raises:
                raise KeyError("the body")
    assert inside != before
    assert PROC_CGROUP.read_text() == before
    assert not group.path.exists()


def test_threads_move_with_the_process(cgroup):
    started, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), done.wait()))
    thread.start()
    started.wait()
    thread_cgroup = Path(f"/proc/self/task/{thread.native_id}/cgroup")
    try:
        with memory_limit(LIMIT):
            inside = PROC_CGROUP.read_text()
            assert thread_cgroup.read_text() == inside
        assert thread_cgroup.read_text() == PROC_CGROUP.read_text() != inside
    finally:
        done.set()
        thread.join()


@pytest.mark.parametrize("limit", [0, -1, 1.5])
def test_a_limit_that_is_not_a_positive_int_is_refused(limit):
    with pytest.raises(ValueError, match="positive int"):
        with memory_limit(limit):
            pass


def test_no_controller_is_unavailable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "CGROUP_ROOT", tmp_path)
    with pytest.raises(MemoryLimitUnavailable, match=f"no memory cgroup controller under {tmp_path}"):
        memory_cgroup_root()
    with pytest.raises(MemoryLimitUnavailable):
        with memory_limit(LIMIT):
            pass


def test_a_v1_controller_that_is_not_writable_is_unavailable(tmp_path, monkeypatch):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    monkeypatch.setattr(module, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(MemoryLimitUnavailable, match="is not writable"):
        memory_cgroup_root()


@pytest.mark.parametrize("own, parent", [("/", ""), ("/session/job", "session")])
def test_v2_creates_the_group_beside_the_process_group(tmp_path, monkeypatch, own, parent):
    """A v2 group holding processes cannot enable controllers for children: the group is its sibling, or under root."""
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (tmp_path / own.lstrip("/")).mkdir(parents=True, exist_ok=True)
    subtree = tmp_path / parent / "cgroup.subtree_control"
    subtree.write_text("cpu\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n")
    monkeypatch.setattr(module, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(module, "PROC_CGROUP", proc)
    assert memory_cgroup_root() == ("v2", tmp_path / parent)
    assert subtree.read_text() == "+memory", "the memory controller is enabled where it was not"


def test_groups_left_by_killed_processes_are_removed(cgroup):
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = cgroup[1] / f"tierbench-test-{dead.pid}-0"
    orphan.mkdir()
    alive = cgroup[1] / f"tierbench-test-{os.getpid()}-99"  # this process's: never touched
    alive.mkdir()
    try:
        with memory_limit(LIMIT, name_hint="tierbench-test"):
            assert not orphan.exists() and alive.exists()
    finally:
        for group in (orphan, alive):
            if group.exists():
                group.rmdir()
