"""Link prediction over edge buckets through the partition buffer: every drawn edge once, in its bucket, from
buffered rows only; prefetching changes the time, not the training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baselines.marius.bucket_order import bucket_order
from baselines.marius.partition_buffer import PartitionBuffer
from suite.datasets.dataset import array_file
from suite.training.link_prediction import (
    DistMultOverFeatures,
    bucket_edges,
    mean_reciprocal_rank,
    train_over_buckets,
)
from tiering.disk.table import DiskTable


def cuts(num_nodes, p):
    return np.linspace(0, num_nodes, p + 1).round().astype(np.int64)


def all_edges(graph):
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    return indices.astype(np.int64), np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))


def test_each_drawn_edge_is_in_its_bucket_once(tiny):
    p = 5
    boundaries = cuts(tiny.num_nodes, p)
    buckets = bucket_edges(tiny.graph, boundaries, 0.3, held_out=500, seed=3)
    src, dst = all_edges(tiny.graph)
    everything = set(zip(src.tolist(), dst.tolist()))
    drawn = list(zip(buckets.src.tolist(), buckets.dst.tolist()))
    assert 0.25 < len(drawn) / len(src) < 0.35 and set(drawn) <= everything
    assert buckets.offsets[-1] == buckets.num_edges
    part = np.searchsorted(boundaries, np.arange(tiny.num_nodes), side="right") - 1
    for i in range(p):
        for j in range(p):
            s, d = buckets.bucket(i, j)
            assert np.all(part[s] == i) and np.all(part[d] == j)
    held = list(zip(buckets.held_out_src.tolist(), buckets.held_out_dst.tolist()))
    assert len(held) == 500 and set(held) <= everything
    # held-out edges are other list entries than the trained ones (a pair listed twice may be in both)
    assert len(set(held) & set(drawn)) < 10
    with pytest.raises(ValueError, match=r"share of edges .* in \(0, 1\]"):
        bucket_edges(tiny.graph, boundaries, 0.0)


def run(tiny, name, prefetch, *, p=6, c=3, fraction=0.5):
    boundaries = cuts(tiny.num_nodes, p)
    buckets = bucket_edges(tiny.graph, boundaries, fraction, held_out=300, seed=1)
    order = bucket_order(name, p, c)
    buffer = PartitionBuffer(DiskTable(array_file(tiny.path, "features")), boundaries, order, prefetch=prefetch)
    torch.manual_seed(0)
    model = DistMultOverFeatures(tiny.feature_dim, 16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    epoch = train_over_buckets(buffer, buckets, model, optimizer, batch_edges=256, negatives=64, seed=2,
                               progress=False)
    buffer.close()
    return epoch, model, buckets, order


@pytest.mark.parametrize("name", ["beta", "hilbert"])
def test_an_epoch_trains_every_edge_once_and_swaps_as_its_ordering_says(tiny, name):
    epoch, model, buckets, order = run(tiny, name, 1)
    assert epoch.edges == buckets.num_edges
    per_bucket = np.diff(buckets.offsets)
    assert epoch.batches == int(np.sum(-(-per_bucket // 256)))
    assert epoch.swaps == order.swaps
    partition_bytes = np.diff(cuts(tiny.num_nodes, 6)) * tiny.feature_dim * 4
    assert epoch.disk_bytes_read >= partition_bytes[list(order.states[0])].sum()
    assert 0 <= epoch.waiting_s <= epoch.seconds
    assert np.isfinite(epoch.loss)


def test_prefetching_changes_nothing_but_the_waiting(tiny):
    sync, sync_model, _, _ = run(tiny, "beta", 0)
    ahead, ahead_model, _, _ = run(tiny, "beta", 2)
    assert (sync.edges, sync.batches, sync.swaps, sync.loss) == (ahead.edges, ahead.batches, ahead.swaps, ahead.loss)
    for a, b in zip(sync_model.parameters(), ahead_model.parameters()):
        assert torch.equal(a, b)


def test_training_learns_the_graph(tiny):
    p, c = 6, 3
    boundaries = cuts(tiny.num_nodes, p)
    buckets = bucket_edges(tiny.graph, boundaries, 0.9, held_out=300, seed=1)
    features = np.load(array_file(tiny.path, "features"), mmap_mode="r")
    torch.manual_seed(0)
    model = DistMultOverFeatures(tiny.feature_dim, 16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before = mean_reciprocal_rank(model, features, buckets, negatives=200)
    losses = []
    for epoch in range(3):
        buffer = PartitionBuffer(DiskTable(array_file(tiny.path, "features")), boundaries, bucket_order("beta", p, c))
        losses.append(train_over_buckets(buffer, buckets, model, optimizer, batch_edges=256, negatives=64,
                                         seed=epoch, progress=False).loss)
        buffer.close()
    after = mean_reciprocal_rank(model, features, buckets, negatives=200)
    assert losses[2] < losses[0] < np.log(65)  # below the loss of scoring all 1 + 64 candidates alike
    assert after > 1.2 * before


def test_the_buckets_must_match_the_ordering(tiny):
    buckets = bucket_edges(tiny.graph, cuts(tiny.num_nodes, 4), 0.1)
    buffer = PartitionBuffer(DiskTable(array_file(tiny.path, "features")), cuts(tiny.num_nodes, 6),
                             bucket_order("beta", 6, 3))
    model = DistMultOverFeatures(tiny.feature_dim, 8)
    with pytest.raises(ValueError, match="4 x 4 buckets, the ordering is for 6 partitions"):
        train_over_buckets(buffer, buckets, model, torch.optim.SGD(model.parameters(), lr=0.1), batch_edges=8,
                           negatives=4, progress=False)
    buffer.close()


def test_tierbench_bucket_train_writes_every_ordering_and_prefetch_setting(tiny, tmp_path, capsys):
    import pandas as pd

    from suite.cli import main

    # no warm-up epochs (test_bucket_train_times_after_an_untimed_warm_up_and_reports_the_median covers them)
    assert main(["bucket-train", "--dataset", "tiny", "--partitions", "6", "--capacity", "3", "--edge-fraction", "0.05",
                 "0.2", "--repeats", "1", "--warmup", "0", "--out", str(tmp_path), "-q"]) == 0
    table = pd.read_csv(tmp_path / "bucket-training.csv")
    assert len(table) == 2 * 3 * 2  # shares of edges x orderings x prefetch settings
    for (_, name), group in table.groupby(["edge_fraction", "ordering"]):
        assert group["swaps"].iloc[0] == bucket_order(name, 6, 3).swaps and group["swaps"].nunique() == 1
        assert group["loss"].nunique() == 1  # prefetching changes the time, not the training
    assert (table["swaps"] >= table["bound"]).all()
    assert (table["waiting_s"] <= table["epoch_s"]).all()
    text = (tmp_path / "bucket-training.md").read_text()
    assert "--partitions 6 --capacity 3 --edge-fraction 0.05 0.2 --repeats 1 --warmup 0" in text and "3.7x" in text
    assert (tmp_path / "bucket-training.png").stat().st_size > 0
    assert main(["bucket-train", "--dataset", "tiny", "--partitions", "4", "--capacity", "4", "-q"]) == 2
    assert "tierbench: error: a buffer of c partitions needs 2 <= c < p" in capsys.readouterr().err


def test_bucket_train_times_after_an_untimed_warm_up_and_reports_the_median(tiny, tmp_path, monkeypatch):
    """A process's first epoch pays for compiling and first allocations (23.8 s against 1.4 s once): it runs untimed,
    and a setting's time is the median of the timed epochs, with their range."""
    import pandas as pd

    import suite.experiments.bucket_training as experiment
    from suite.figures.bucket_training import render

    seconds = iter([23.8, 1.4, 1.3, 1.5, 9.0])  # the warm-up, then three timed epochs, one of them slow

    def epoch(dataset, path, boundaries, buckets, name, capacity, prefetch, **kwargs):
        return {"ordering": name, "prefetch": prefetch, "io_mode": "buffered", "epoch_s": next(seconds),
                "waiting_s": 0.1, "edges": 10, "batches": 1, "swaps": 3, "disk_bytes": 100, "loss": 1.0, "mrr": 0.1}

    monkeypatch.setattr(experiment, "_epoch", epoch)
    path = experiment.measure("tiny", tmp_path, partitions=4, capacity=2, edge_fractions=(0.1,), orders=("beta",),
                              prefetches=(1,), repeats=4, warmup=1, progress=False)
    runs = pd.read_csv(tmp_path / "bucket-training-runs.csv")
    assert runs["epoch_s"].tolist() == [1.4, 1.3, 1.5, 9.0] and runs["repeat"].tolist() == [0, 1, 2, 3]
    table = pd.read_csv(path)
    assert table[["epoch_s", "epoch_min_s", "epoch_max_s"]].values.tolist() == [[1.45, 1.3, 9.0]]
    text = render(path, tmp_path)[0].read_text()
    assert "epoch s, median (min-max)" in text and "1.45 (1.30-9.00)" in text
    assert "4 times after 1 untimed warm-up epoch, alternating" in text
