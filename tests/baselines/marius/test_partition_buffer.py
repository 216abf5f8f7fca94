"""Marius's partition buffer over an on-disk table: exact rows for buffered partitions, a clear refusal for others,
swaps and disk bytes counted, the reader's failures surfaced."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baselines.marius.bucket_order import beta_order, bucket_order
from baselines.marius.partition_buffer import PartitionBuffer, PartitionNotBuffered
from tiering.disk.table import DiskTable

ROWS, DIM = 1000, 24


@pytest.fixture
def table_file(tmp_path):
    features = np.random.default_rng(0).standard_normal((ROWS, DIM)).astype(np.float32)
    path = tmp_path / "features.npy"
    np.save(path, features)
    return path, features


def boundaries(p):
    return np.linspace(0, ROWS, p + 1).round().astype(np.int64)


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("name, p, c, prefetch", [("beta", 6, 3, 1), ("beta", 8, 2, 2), ("hilbert", 5, 3, 1), ("beta", 7, 3, 0), ("row-major", 5, 2, 0)])
def test_every_state_serves_exactly_its_partitions_rows(table_file, direct, name, p, c, prefetch):
    path, features = table_file
    order = bucket_order(name, p, c)
    cuts = boundaries(p)
    buffer = PartitionBuffer(DiskTable(path, direct=direct), cuts, order, prefetch=prefetch)
    buffer.start()
    rng = np.random.default_rng(1)
    for state in range(len(order.states)):
        if state:
            assert buffer.advance() == order.states[state]
        assert buffer.buckets() == order.buckets[state]
        assert all(i in buffer.buffered and j in buffer.buffered for i, j in buffer.buckets())
        held = np.concatenate([np.arange(cuts[k], cuts[k + 1]) for k in buffer.buffered])
        ids = torch.from_numpy(rng.permutation(held)[:200])
        assert torch.equal(buffer.gather(ids), torch.from_numpy(features[ids.numpy()]))
        away = sorted(set(range(p)) - set(buffer.buffered))
        with pytest.raises(PartitionNotBuffered, match=f"rows of partition {away[0]} .* not in the buffer"):
            buffer.gather(torch.tensor([int(cuts[away[0]])]))
    assert buffer.swaps == order.swaps
    partition_bytes = np.diff(cuts) * DIM * 4
    loaded = sum(partition_bytes[k] for k in order.states[0]) + sum(
        partition_bytes[k] for a, b in zip(order.states, order.states[1:]) for k in set(b) - set(a))
    assert loaded <= buffer.stats().disk_bytes_read <= loaded + (c + order.swaps) * 2 * 4096
    with pytest.raises(RuntimeError, match="all have been visited"):
        buffer.advance()
    buffer.close()


def test_the_reader_reads_ahead_at_most_the_prefetch_bound(table_file):
    path, _ = table_file
    order = beta_order(8, 3)
    buffer = PartitionBuffer(DiskTable(path), boundaries(8), order, prefetch=1)
    buffer.start()
    import time

    time.sleep(0.3)  # the reader has had time to read as far as it may
    per_partition = ROWS // 8 * DIM * 4
    assert buffer.stats().disk_bytes_read <= (3 + 1) * (per_partition + 2 * 4096)
    buffer.close()


def test_a_failing_read_surfaces_in_the_training_thread(table_file, monkeypatch):
    """The first state's three partitions read, the reader's first read fails: the next advance raises it."""
    path, _ = table_file
    table = DiskTable(path)
    read_rows, calls = table.read_rows, []

    def failing_after_three(*args):
        calls.append(args)
        if len(calls) > 3:
            raise OSError(5, "Input/output error")
        return read_rows(*args)

    monkeypatch.setattr(table, "read_rows", failing_after_three)
    buffer = PartitionBuffer(table, boundaries(6), beta_order(6, 3))
    buffer.start()
    with pytest.raises(OSError, match="Input/output error"):
        buffer.advance()
    buffer.close()


def test_bad_settings_are_refused(table_file):
    path, _ = table_file
    with pytest.raises(ValueError, match="boundaries must cut the table's 1,000 rows"):
        PartitionBuffer(DiskTable(path), [0, 10, 999], beta_order(2 + 1, 2))
    with pytest.raises(ValueError, match="prefetch must be 0 .synchronous swaps. or more"):
        PartitionBuffer(DiskTable(path), boundaries(4), beta_order(4, 2), prefetch=-1)
    with pytest.raises(ValueError, match="at most the p - c = 4 - 2 = 2 partitions outside the buffer, got 3"):
        PartitionBuffer(DiskTable(path), boundaries(4), beta_order(4, 2), prefetch=3)
    buffer = PartitionBuffer(DiskTable(path), boundaries(4), beta_order(4, 2))
    with pytest.raises(RuntimeError, match="start"):
        buffer.advance()
    buffer.close()


def test_a_file_that_is_not_a_table_is_refused(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="is not a .npy file"):
        DiskTable(tmp_path / "x.npy")
    np.save(tmp_path / "v.npy", np.zeros(5))
    with pytest.raises(ValueError, match="2-D table"):
        DiskTable(tmp_path / "v.npy")
    np.save(tmp_path / "t.npy", np.zeros((100, 8), np.float32))
    with open(tmp_path / "t.npy", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(ValueError, match="truncated"):
        DiskTable(tmp_path / "t.npy")
