"""Multi-GPU placement (Data Tiering §4.2): replicated, interleaved and host tiers."""

import pytest
import torch

from tiering.features.placement import (
    HOST,
    INTERLEAVED,
    REPLICATED,
    PlacementTooLarge,
    locate,
    plan_placement,
    shard,
)


def test_interleaved_rows_go_round_robin_not_in_blocks():
    p = plan_placement(num_rows=100, row_bytes=8, gpus=4, replicated=10, interleaved=30)
    tier, gpu, local = locate(torch.arange(100), p, rank=2)
    assert (tier[:10] == REPLICATED).all() and (gpu[:10] == 2).all()  # replicated rows are read locally
    assert (tier[10:40] == INTERLEAVED).all() and (tier[40:] == HOST).all()
    assert gpu[10:18].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert local[10:18].tolist() == [10, 10, 10, 10, 11, 11, 11, 11]  # after the replicated rows in each shard
    assert (gpu[40:] == -1).all() and local[40:].tolist() == list(range(60))


def test_sizes_per_gpu_and_on_the_host():
    p = plan_placement(num_rows=1000, row_bytes=512, gpus=3, replicated=0.1, interleaved=0.25)
    assert (p.replicated, p.interleaved) == (100, 250)
    assert p.bytes_per_gpu() == [(100 + 84) * 512, (100 + 83) * 512, (100 + 83) * 512]
    assert sum(p.bytes_per_gpu()) == (3 * 100 + 250) * 512 and p.host_bytes == 650 * 512
    assert "interleaved [100, 350) over 3 GPUs" in p.describe()


def test_a_gather_through_the_placement_returns_exactly_the_rows():
    features = torch.randn(503, 6)
    p = plan_placement(503, 24, gpus=4, replicated=17, interleaved=200)
    shards = [shard(features, p, g) for g in range(4)]
    host = features[p.host_start :]
    ids = torch.randint(0, 503, (2000,), generator=torch.Generator().manual_seed(0))
    for rank in range(4):
        tier, gpu, local = locate(ids, p, rank)
        rows = [host[l] if t == HOST else shards[g][l] for t, g, l in zip(tier.tolist(), gpu.tolist(), local.tolist())]
        assert torch.equal(torch.stack(rows), features[ids])
    assert [len(s) for s in shards] == [17 + 50] * 4


def test_plans_that_do_not_fit_are_refused_with_both_sizes():
    # 2**20 rows of 1 KiB interleaved over 2 GPUs: 0.5 GiB each
    with pytest.raises(PlacementTooLarge, match=r"GPU 0 would hold 0.50 GiB of features but has 0.25 GiB free"):
        plan_placement(2**20, 1024, gpus=2, replicated=0, interleaved=1.0, free_bytes=[2**28, 2**31])
    assert plan_placement(2**20, 1024, gpus=2, interleaved=1.0, free_bytes=[2**29, 2**29]).interleaved == 2**20
    with pytest.raises(ValueError, match="exceed the table's 10 rows"):
        plan_placement(10, 4, gpus=2, replicated=6, interleaved=5)
    with pytest.raises(ValueError, match=r"as a fraction must be in \[0, 1\]"):
        plan_placement(10, 4, gpus=2, interleaved=1.5)
    with pytest.raises(ValueError, match="gpus must be at least 1"):
        plan_placement(10, 4, gpus=0)
