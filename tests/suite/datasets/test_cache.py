"""The dataset cache: location, manifest, integrity errors, atomic writes, determinism."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.datasets import DatasetFileError, entry_path, load_dataset, prepare_dataset
from suite.datasets.cache import cache_root
from suite.datasets.dataset import ARRAYS, load_entry
from suite.io import atomic
from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment


def test_cache_root_follows_tierbench_data(monkeypatch, tmp_path):
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "x"
    monkeypatch.delenv("TIERBENCH_DATA")
    assert "tierbench" in str(cache_root())


def test_tiny_loads_with_the_documented_shapes(tiny):
    assert tiny.graph.num_nodes == 4096 and tiny.features.shape == (4096, 32)
    assert tiny.features.dtype == torch.float32 and tiny.labels.dtype == torch.int64
    assert tiny.graph.indptr.dtype == torch.int64 and tiny.graph.index_dtype == torch.int32
    assert tiny.num_classes == 8 and int(tiny.labels.max()) == 7
    sizes = {k: len(v) for k, v in tiny.splits.items()}
    assert sizes == {"train": 1229, "valid": 410, "test": 2457}
    m = tiny.manifest
    assert m["source"]["kind"] == "synthetic" and m["source"]["preset"]["name"] == "tiny"
    # the OGB files it was read back from are scratch: the entry keeps only its arrays
    assert set(m["files"]) == {f"{name}.npy" for name in ARRAYS}
    assert sorted(p.name for p in tiny.path.iterdir()) == sorted([*m["files"], "manifest.json"])


def test_loading_again_reads_the_cache_without_rebuilding(tiny):
    again = load_dataset("tiny", progress=False)
    assert again.path == tiny.path and again.manifest["created"] == tiny.manifest["created"]
    assert torch.equal(again.features, tiny.features)


@pytest.fixture
def copy_of_tiny(tiny, tmp_path, monkeypatch):
    """A private cache holding a copy of tiny's entry, to damage freely."""
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))
    target = entry_path("tiny")
    shutil.copytree(tiny.path, target)
    return target


def leftovers(entry):
    """Build and publication directories left beside an entry (its lock file is meant to stay)."""
    return sorted(p.name for p in entry.parent.iterdir() if p.name.startswith(f".{entry.name}.") and p.is_dir())


def test_truncated_file_names_the_file_and_the_command_to_rebuild(copy_of_tiny):
    features = copy_of_tiny / "features.npy"
    with open(features, "r+b") as f:
        f.truncate(features.stat().st_size - 100)
    with pytest.raises(DatasetFileError) as err:
        load_dataset("tiny", progress=False)
    message = str(err.value)
    assert str(features) in message and "truncated" in message
    assert "tierbench datasets generate tiny --force" in message


def test_flipped_byte_is_caught_by_the_checksum(copy_of_tiny):
    indices = copy_of_tiny / "indices.npy"
    data = bytearray(indices.read_bytes())
    data[-7] ^= 0xFF
    indices.write_bytes(bytes(data))
    with pytest.raises(DatasetFileError, match=r"indices.npy is corrupt: its SHA-256 differs"):
        load_dataset("tiny", progress=False)


def test_without_checksums_a_bad_node_id_is_still_caught(copy_of_tiny):
    indices = copy_of_tiny / "indices.npy"
    array = np.load(indices)
    array[5] = 10**6
    with open(indices, "r+b") as f:  # same size, so only the checksum or validation can notice
        np.save(f, array)
    with pytest.raises(DatasetFileError, match=r"indices\[5\] = 1000000 is not a node id"):
        load_dataset("tiny", verify=False, progress=False)


def test_missing_or_corrupt_manifest_is_explained(copy_of_tiny):
    manifest = copy_of_tiny / "manifest.json"
    manifest.write_text("{not json")
    with pytest.raises(DatasetFileError, match="manifest.json is corrupt"):
        load_entry(copy_of_tiny, "hint")
    manifest.unlink()  # an entry without a manifest is an unfinished build: prepare rebuilds it
    rebuilt = load_dataset("tiny", progress=False)
    assert rebuilt.manifest["files"]["features.npy"]["sha256"]


def test_a_rebuild_is_bit_identical(copy_of_tiny, tiny):
    before = json.loads((copy_of_tiny / "manifest.json").read_text())["files"]
    prepare_dataset("tiny", force=True, progress=False)
    after = json.loads((copy_of_tiny / "manifest.json").read_text())["files"]
    assert {k: v["sha256"] for k, v in before.items()} == {k: v["sha256"] for k, v in after.items()}
    assert leftovers(copy_of_tiny) == []


def test_a_failed_build_leaves_the_previous_entry_intact(copy_of_tiny, monkeypatch):
    import suite.datasets.build as build

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash while writing")

    monkeypatch.setattr(build, "save_arrays", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        prepare_dataset("tiny", force=True, progress=False)
    assert load_dataset("tiny", progress=False).num_nodes == 4096
    assert leftovers(copy_of_tiny) == []


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "result.csv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("half a new fi")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["result.csv"]
    atomic.save_npy(target.with_suffix(".npy"), np.arange(3))
    assert np.load(target.with_suffix(".npy")).tolist() == [0, 1, 2]


def test_unknown_dataset_names_are_explained():
    with pytest.raises(KeyError, match="unknown dataset 'nope'.*tiny"):
        load_dataset("nope")
    with pytest.raises(ValueError, match="--ogb-root"):
        load_dataset("ogbn-arxiv")


def test_atomic_writes_get_the_usual_permissions_not_mkstemps_private_ones(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "x.txt", "x")
    finally:
        os.umask(umask)
    assert (tmp_path / "x.txt").stat().st_mode & 0o777 == 0o644


# ------------------------------------------------------- locks and recovery
def build_tiny_counted(ready: str, builds: str, reported: str) -> None:
    """``prepare_dataset("tiny")`` in one of three processes started together, the graph's build holding the cache's
    lock a second and counted in ``builds``; what the process logs goes to ``reported``, the entry to
    ``reported.entry``."""
    import contextlib
    import time

    from suite.datasets import build

    generate = build.generate_graph

    def counted(preset, progress=False):
        with open(builds, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(1.0)  # hold the lock while the others arrive
        return generate(preset, progress)

    build.generate_graph = counted
    (Path(ready) / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(Path(ready).iterdir())) < 3 and time.monotonic() < deadline:  # start the three builds together
        time.sleep(0.02)
    with open(reported, "w") as err, contextlib.redirect_stderr(err):
        entry = build.prepare_dataset("tiny", progress=False)
    Path(f"{reported}.entry").write_text(str(entry))


def test_three_processes_building_one_entry_build_it_once(tmp_path, monkeypatch):
    cache, ready, builds = tmp_path / "cache", tmp_path / "ready", tmp_path / "builds"
    ready.mkdir()
    monkeypatch.setenv("TIERBENCH_DATA", str(cache))
    context = forkserver_context()
    reported = [tmp_path / f"reported-{k}.txt" for k in range(3)]
    procs = [context.Process(target=in_callers_environment(build_tiny_counted), args=(str(ready), str(builds),
                                                                                      str(path)))
             for path in reported]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(600)
    assert [p.exitcode for p in procs] == [0, 0, 0], [path.read_text() for path in reported if path.exists()]
    entries = {Path(f"{path}.entry").read_text() for path in reported}
    assert len(entries) == 1
    assert len(builds.read_text().split()) == 1  # the build ran once
    # the builder holds the lock for a second after the three start together: the others wait for it (a late one
    # may instead find the entry complete, which is as good)
    assert sum("waiting for another tierbench process that is building" in path.read_text() for path in reported) >= 1
    entry = Path(entries.pop())
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [entry.name]  # one entry, no partial left
    assert load_entry(entry, "hint").num_nodes == 4096


def dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def refuse_to_build(monkeypatch):
    import suite.datasets.build as build

    monkeypatch.setattr(build, "generate_graph", lambda *args: pytest.fail("the entry was rebuilt"))


def test_a_publication_killed_between_its_two_renames_is_restored(copy_of_tiny, monkeypatch):
    # what a kill after publish() moved the old entry aside, before it moved the new one in, leaves:
    old = copy_of_tiny.parent / f".{copy_of_tiny.name}.old-{dead_pid()}"
    os.replace(copy_of_tiny, old)
    partial = copy_of_tiny.parent / f".{copy_of_tiny.name}.partial-{dead_pid()}-0bad"
    partial.mkdir()
    (partial / "features.npy").write_bytes(b"half a build")
    refuse_to_build(monkeypatch)
    assert load_dataset("tiny", progress=False).num_nodes == 4096  # the old entry is back, nothing rebuilt
    assert leftovers(copy_of_tiny) == []


def test_an_old_entry_beside_a_complete_one_is_removed_on_open(copy_of_tiny, monkeypatch):
    shutil.copytree(copy_of_tiny, copy_of_tiny.parent / f".{copy_of_tiny.name}.old-{dead_pid()}")
    refuse_to_build(monkeypatch)
    load_dataset("tiny", progress=False)
    assert leftovers(copy_of_tiny) == []


def test_only_partial_builds_of_ended_processes_are_removed(copy_of_tiny):
    live = copy_of_tiny.parent / f".{copy_of_tiny.name}.partial-{os.getppid()}-live"  # a running process, not this one
    dead = copy_of_tiny.parent / f".{copy_of_tiny.name}.partial-{dead_pid()}-dead"
    live.mkdir()
    dead.mkdir()
    prepare_dataset("tiny", force=True, progress=False)
    assert leftovers(copy_of_tiny) == [live.name]


def test_a_cache_that_cannot_be_created_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    from suite.cli import main

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "file" / "cache"))
    assert main(["datasets", "generate", "tiny", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot create the dataset cache" in err and "TIERBENCH_DATA" in err


def test_the_cli_says_which_cache_it_uses_and_the_real_size(tiny, capsys):
    from suite.cli import main

    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"dataset cache: {tiny.path.parent} (from $TIERBENCH_DATA)")
    real = sum(p.stat().st_size for p in tiny.path.iterdir())
    row = next(line for line in out.splitlines() if line.split()[:1] == ["tiny"])
    assert f"{real / 1000:.1f} KB" in row and "True" in row
    assert "(est.)" in next(line for line in out.splitlines() if line.split()[:1] == ["papers-l"])
    assert main(["datasets", "generate", "tiny", "-q"]) == 0
    assert f"tiny: {tiny.path} ({real / 1000:.1f} KB)" in capsys.readouterr().out


def test_list_and_info_check_every_files_size_and_verify_every_checksum(copy_of_tiny, capsys):
    from suite.cli import main

    assert main(["datasets", "verify", "tiny", "-q"]) == 0
    assert f"{copy_of_tiny.name}: ok" in capsys.readouterr().out
    labels = copy_of_tiny / "labels.npy"
    data = bytearray(labels.read_bytes())
    data[-1] ^= 1
    labels.write_bytes(bytes(data))  # the same size: only the checksum tells
    assert main(["datasets", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["tiny"])
    assert row.split()[-1] == "True"  # the "cached" column
    assert main(["datasets", "verify", "tiny", "-q"]) == 2
    out, err = capsys.readouterr()
    assert f"{labels} is corrupt: its SHA-256 differs" in out and "generate tiny --force" in out
    assert err.count("\n") == 1 and "1 of 1 entries are damaged" in err
    for damage in ("truncate", "delete"):
        labels.write_bytes(bytes(data[:-8])) if damage == "truncate" else labels.unlink()
        assert main(["datasets", "list"]) == 0
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if line.split()[:1] == ["tiny"])
        assert row.split()[-1] == "damaged", damage
        assert f"damaged: {labels} is {'truncated' if damage == 'truncate' else 'missing'}" in out
        assert main(["datasets", "info", "tiny"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(labels) in err, damage


def test_generate_verifies_an_entry_it_reuses_and_says_so(copy_of_tiny, capsys):
    from suite.cli import main

    assert main(["datasets", "generate", "tiny", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"tiny: {copy_of_tiny} (" in out and "; reused cached entry, checksums verified" in out
    features = copy_of_tiny / "features.npy"
    data = bytearray(features.read_bytes())
    data[-1] ^= 1
    features.write_bytes(bytes(data))
    assert main(["datasets", "generate", "tiny", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{features} is corrupt" in err


@pytest.fixture
def read_only(monkeypatch):
    """``chmod -R a-w`` on a folder, undone afterwards; for root, whom permissions do not stop, ``os.access`` answers
    as it would for anyone else (what tierbench consults before it writes)."""
    made = []

    def chmod(folder: Path):
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        made.append(folder)

    if os.geteuid() == 0:
        real = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: real(path, mode, **kw) and not (
            mode & os.W_OK and not os.stat(path).st_mode & 0o222))
    yield chmod
    for folder in made:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_a_read_only_cache_is_read_by_policies_disk_and_plan_without_writing(tiny, tmp_path, monkeypatch, read_only,
                                                                            capsys):
    from suite.cli import main
    from suite.datasets.reordered import prepare_reordered

    prepare_reordered("tiny", "wrpr", progress=False)  # in the session's cache, then copied
    cache = tmp_path / "cache"
    shutil.copytree(tiny.path.parent, cache, ignore=shutil.ignore_patterns("traces", "partitions", ".*"))
    monkeypatch.setenv("TIERBENCH_DATA", str(cache))
    commands = [
        ["policies", "--dataset", "tiny", "--epochs", "1", "--out", str(tmp_path / "policies")],
        ["disk", "--dataset", "tiny", "--batches", "2", "--out", str(tmp_path / "disk")],
        ["plan", "--dataset", "tiny", "--gpu-memory", "8GB", "--epochs", "1",
         "--out", str(tmp_path / "plan")],
    ]
    for command in commands:  # records their traces in the cache
        assert main([*command, "-q"]) == 0, capsys.readouterr().err
    for lock in cache.rglob("*.lock"):  # the lock files of that recording: reading must not make them again
        lock.unlink()
    before = _snapshot(cache)
    read_only(cache)
    for command in commands:
        assert main([*command, "-q"]) == 0, capsys.readouterr().err
    assert _snapshot(cache) == before  # not even a lock file
    capsys.readouterr()
    assert main(["policies", "--dataset", "tiny", "--epochs", "2", "--out", str(tmp_path / "policies"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs building in" in err and "cannot be written" in err and "--trace-dir" in err
    assert main(["datasets", "generate", "tiny-rmat", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tiny-rmat-" in err and "cannot be written" in err and "TIERBENCH_DATA" in err
    assert _snapshot(cache) == before


def test_an_interrupted_generate_is_one_line_and_keeps_the_entries_it_finished(copy_of_tiny, capsys, monkeypatch):
    import suite.datasets.build as build
    from suite.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "generate_graph", interrupted)
    assert main(["datasets", "generate", "tiny", "tiny-rmat", "-q"]) == 130
    out, err = capsys.readouterr()
    assert err == ("tierbench: interrupted: generating tiny-rmat; its partial build was removed and the cache holds "
                   "what it held before; tiny ready\n")
    assert f"tiny: {copy_of_tiny}" in out
    assert not entry_path("tiny-rmat").exists() and leftovers(entry_path("tiny-rmat")) == []
