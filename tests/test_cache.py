"""The dataset cache: location, manifest, integrity errors, atomic writes, determinism."""

import json
import os

import numpy as np
import pytest
import torch

from suite import atomic
from suite.datasets import DatasetFileError, entry_path, load_dataset, prepare_dataset
from suite.datasets.cache import cache_root


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
    assert set(m["files"]) >= {"features.npy", "indices.npy", "ogb/tiny/raw/data.npz", "ogb/tiny/RELEASE_v1.txt"}
    assert not (tiny.path / "ogb" / "tiny" / "processed").exists()  # ogb's pickle is not kept


def test_loading_again_reads_the_cache_without_rebuilding(tiny):
    again = load_dataset("tiny", progress=False)
    assert again.path == tiny.path and again.manifest["created"] == tiny.manifest["created"]
    assert torch.equal(again.features, tiny.features)


@pytest.fixture
def copy_of_tiny(tiny, tmp_path, monkeypatch):
    """A private cache holding a copy of tiny's entry, to damage freely."""
    import shutil

    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))
    target = entry_path("tiny")
    shutil.copytree(tiny.path, target)
    return target


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
        from suite.datasets.dataset import load_entry

        load_entry(copy_of_tiny, "hint")
    manifest.unlink()  # an entry without a manifest is an unfinished build: prepare rebuilds it
    rebuilt = load_dataset("tiny", progress=False)
    assert rebuilt.manifest["files"]["features.npy"]["sha256"]


def test_a_rebuild_is_bit_identical(copy_of_tiny, tiny):
    before = json.loads((copy_of_tiny / "manifest.json").read_text())["files"]
    prepare_dataset("tiny", force=True, progress=False)
    after = json.loads((copy_of_tiny / "manifest.json").read_text())["files"]
    assert {k: v["sha256"] for k, v in before.items()} == {k: v["sha256"] for k, v in after.items()}
    assert not [p for p in copy_of_tiny.parent.iterdir() if p.name.startswith(".")]  # no partial dirs left


def test_a_failed_build_leaves_the_previous_entry_intact(copy_of_tiny, monkeypatch):
    import suite.datasets.build as build

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash while writing")

    monkeypatch.setattr(build, "save_arrays", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        prepare_dataset("tiny", force=True, progress=False)
    assert load_dataset("tiny", progress=False).num_nodes == 4096
    assert not [p for p in copy_of_tiny.parent.iterdir() if p.name.startswith(".")]


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
