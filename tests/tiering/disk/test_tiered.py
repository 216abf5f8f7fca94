"""Three tiers (GPU, host, disk) and the page-cache baseline: exact rows, each tier counted, disk bytes measured at
the file and equal to the traffic model's, reads in flight bounded."""

from __future__ import annotations

import mmap
import os
import threading

import numpy as np
import pytest
import torch

from baselines.page_cache import MmapLoader, storage_bytes_read
from tiering.disk import table as disk_table
from tiering.disk.table import BLOCK, DiskTable
from tiering.disk.tiered import DiskTieredLoader

ROWS, DIM = 4000, 128  # 512-byte rows: 8 to a block


@pytest.fixture
def table_file(tmp_path):
    features = np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)
    path = tmp_path / "features.npy"
    np.save(path, features)
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    return path, features


@pytest.mark.parametrize("direct", [True, False])
def test_each_tier_serves_its_rows_exactly_and_is_counted(table_file, direct):
    path, features = table_file
    loader = DiskTieredLoader(DiskTable(path, direct=direct), hot_rows=400, host_rows=1000, in_flight=4)
    ids = torch.from_numpy(np.random.default_rng(1).choice(ROWS - 8, 900, replace=False))  # not the last block
    assert torch.equal(loader.gather(ids), torch.from_numpy(features[ids.numpy()]))
    stats = loader.stats()
    hot, host = int((ids < 400).sum()), int(((ids >= 400) & (ids < 1400)).sum())
    assert stats.accesses == 900 and stats.hits == hot
    assert stats.host_bytes_touched == (900 - hot) * DIM * 4
    assert stats.disk_bytes_read == loader.modelled_disk_bytes > 0
    if direct:
        start = loader.table.offset + ids[ids >= 1400].numpy() * DIM * 4  # the npy header shifts rows off blocks
        blocks = np.unique(np.concatenate([start // BLOCK, (start + DIM * 4 - 1) // BLOCK]))
        assert stats.disk_bytes_read == len(blocks) * BLOCK
    else:
        assert stats.disk_bytes_read == (900 - hot - host) * DIM * 4
    loader.reset_stats()
    loader.gather(torch.arange(0, 1400, 7))  # nothing below the host tier
    assert loader.stats().disk_bytes_read == 0 == loader.modelled_disk_bytes
    loader.close()


def test_reads_in_flight_never_exceed_the_bound(table_file, monkeypatch):
    path, features = table_file
    loader = DiskTieredLoader(DiskTable(path), hot_rows=0, host_rows=0, in_flight=3)
    now, most, lock = [0], [0], threading.Lock()
    preadv = os.preadv

    def counting(*args):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            threading.Event().wait(0.002)
            return preadv(*args)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(disk_table.os, "preadv", counting)
    ids = torch.arange(0, ROWS, 40)  # 100 rows, each in its own block
    assert torch.equal(loader.gather(ids), torch.from_numpy(features[ids.numpy()]))
    assert 1 < most[0] <= 3
    loader.close()


def test_tiers_that_do_not_fit_are_refused(table_file):
    path, _ = table_file
    with pytest.raises(ValueError, match="must fit in the table's 4,000 rows"):
        DiskTieredLoader(DiskTable(path), hot_rows=3000, host_rows=1001)
    with pytest.raises(ValueError, match="in_flight must be at least 1"):
        DiskTieredLoader(DiskTable(path), hot_rows=0, host_rows=0, in_flight=0)


def reads_after_a_drop_are_counted(path) -> bool:
    """Whether this process's read of ``path``, dropped from the page cache first, shows in ``/proc/self/io``."""
    if storage_bytes_read() is None:
        return False
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        before = storage_bytes_read()
        f.read()
        return storage_bytes_read() > before


def test_the_page_cache_loader_returns_rows_and_counts_storage_reads_after_a_drop(table_file):
    path, features = table_file
    counted = reads_after_a_drop_are_counted(path)  # before the loader maps the file, which keeps its pages cached
    loader = MmapLoader(path)
    ids = torch.from_numpy(np.random.default_rng(2).choice(ROWS, 500, replace=False))
    assert torch.equal(loader.gather(ids), torch.from_numpy(features[ids.numpy()]))
    assert loader.stats().accesses == 500 and loader.stats().hits == 0
    if not counted:
        pytest.skip("this kernel counts no per-process storage reads here (no /proc/self/io, or a container hides them)")
    loader.drop_cache()
    loader.reset_stats()
    before = storage_bytes_read()
    loader.gather(torch.arange(ROWS))
    seen = storage_bytes_read() - before
    # every row came from storage (the header's page may stay cached), and nothing the process read outside the gather
    assert ROWS * DIM * 4 - mmap.PAGESIZE <= loader.stats().disk_bytes_read <= seen
    loader.close()
    with pytest.raises(ValueError, match="cannot be mapped"):
        MmapLoader(path.parent / "missing.npy")


def test_tierbench_disk_measures_every_loader_and_setting_on_a_traced_epoch(tiny, tmp_path):
    import pandas as pd

    from suite.cli import main
    from suite.measure.memory_limit import MemoryLimitUnavailable, memory_cgroup_root

    assert main(["disk", "--dataset", "tiny", "--out", str(tmp_path), "-q"]) == 0
    table = pd.read_csv(tmp_path / "disk.csv")
    try:
        memory_cgroup_root()
        enforced = True
    except MemoryLimitUnavailable:
        enforced = False
    per_budget = ["mmap"] * (1 + 2 * enforced) + ["disk-tiered", "disk-tiered"]
    assert table["loader"].tolist() == ["in-memory", "mmap", "mmap"] + per_budget * 3
    limited = table[table["setting"].str.contains("enforced")]
    assert len(limited) == 3 * enforced
    assert (limited["cgroup_peak_bytes"] <= limited["cgroup_limit_bytes"]).all()
    few = min(5, table.loc[0, "minibatches"])
    assert (limited["minibatches"] == few).all()
    if enforced:  # each enforced row follows its emulated pair on the same minibatches
        pairs = table.loc[limited.index - 1]
        assert (pairs["minibatches"] == few).all() and pairs["setting"].str.contains("emulated").all()
        assert (pairs["rows"].to_numpy() == limited["rows"].to_numpy()).all()
    whole = table.drop(index=[*limited.index, *(limited.index - 1)])
    assert (whole["rows"] == table["rows"].iloc[0]).all() and (whole["minibatches"] == table.loc[0, "minibatches"]).all()
    assert table["rows"].nunique() == 1 and table["rows"].iloc[0] > 0
    tiered = table[table["loader"] == "disk-tiered"]
    assert (tiered["disk_bytes"] == tiered["modelled_disk_bytes"]).all()
    plain = tiered[~tiered["setting"].str.contains("gaps")]
    assert len(plain) == 3 and plain["disk_bytes"].is_monotonic_decreasing and plain["disk_bytes"].iloc[0] > 0
    assert table.loc[0, "disk_bytes"] == 0
    text = (tmp_path / "disk.md").read_text()
    assert "emulated" in text and "sequential read of the file" in text and "device cpu" in text
    assert ("memory cgroup limited to the budget" if enforced else "no budget could be enforced") in text


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("max_gap", [4096, 3 * 4096, 64 * 1024])
def test_reading_through_short_gaps_returns_the_same_rows_and_the_modelled_bytes(table_file, direct, max_gap):
    path, features = table_file
    ids = torch.from_numpy(np.random.default_rng(3).choice(ROWS - 8, 300, replace=False))
    plain = DiskTieredLoader(DiskTable(path, direct=direct), hot_rows=0, host_rows=0)
    merged = DiskTieredLoader(DiskTable(path, direct=direct), hot_rows=0, host_rows=0, max_gap_bytes=max_gap)
    for loader in (plain, merged):
        assert torch.equal(loader.gather(ids), torch.from_numpy(features[ids.numpy()]))
        assert loader.stats().disk_bytes_read == loader.modelled_disk_bytes
    assert merged.stats().disk_bytes_read > plain.stats().disk_bytes_read
    assert len(merged.table.runs(np.sort(ids.numpy()), max_gap)) < len(plain.table.runs(np.sort(ids.numpy())))
    with pytest.raises(ValueError, match="max_gap_bytes must be 0 or more"):
        DiskTieredLoader(DiskTable(path), hot_rows=0, host_rows=0, max_gap_bytes=-1)


def test_a_page_cache_budget_keeps_only_the_first_rows_mapped(table_file):
    path, features = table_file
    loader = MmapLoader(path, budget_rows=1000)
    ids = torch.arange(0, ROWS, 3)
    assert torch.equal(loader.gather(ids), torch.from_numpy(features[ids.numpy()]))
    loader.close()
    with pytest.raises(ValueError, match="budget_rows must be between 0 and the table's 4,000 rows"):
        MmapLoader(path, budget_rows=4001)
