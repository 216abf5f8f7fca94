"""The multi-GPU combined tensor (Data Tiering §4.2): exact rows and per-tier counts on every rank of a real process group.

Each test spawns G processes that form a gloo group through a file store
(no ports) and build a ``MultiGPUCombinedTensor`` together; they save what
they gathered and counted, and the assertions run here, in the parent.
"""

import errno
import os
import pathlib
import shutil
import time
import uuid

import pytest
import torch
import torch.distributed as dist

from suite.datasets.host_copy import read_into_memory
from tests.gloo import run_gloo
from tiering.features import multi_gpu
from tiering.features.combined import CombinedTensor
from tiering.features.multi_gpu import MultiGPUCombinedTensor
from tiering.features.placement import INTERLEAVED, REPLICATED, locate, plan_placement
from tiering.features.traffic import zero_copy_traffic

N, D = 203, 100  # 400-byte rows: most rows straddle 128-byte lines
ROW_BYTES = 4 * D


def table() -> torch.Tensor:
    return torch.randn(N, D, generator=torch.Generator().manual_seed(0))


def page_aligned_table() -> torch.Tensor:
    """``table()`` starting on a page boundary, as the host segment does: both count host rows at the same offsets."""
    return read_into_memory(table(), progress=False)


def id_sets() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "random": torch.randint(0, N, (600,), generator=g),
        "int32": torch.randint(0, N, (100,), generator=g).int(),
        "hand": torch.tensor([0, 5, 6, 45, 45]),
        "empty": torch.tensor([], dtype=torch.int64),
    }


@pytest.fixture
def shm_dir(tmp_path):
    """A private directory in /dev/shm (tmpfs, where the segments normally live), so leaks are visible."""
    root = pathlib.Path("/dev/shm")
    path = (root if root.is_dir() else tmp_path) / f"tierbench-test-{uuid.uuid4().hex}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def gather_all(rank, world, configs, shm_dir, device="cpu"):
    """Build one tensor per (replicated, interleaved, peer_access) and gather every id set through it."""
    results = []
    for replicated, interleaved, peer_access in configs:
        placement = plan_placement(N, ROW_BYTES, world, replicated, interleaved)
        loader = MultiGPUCombinedTensor(table(), placement, device, peer_access=peer_access, shm_dir=shm_dir)
        dist.barrier()  # every rank has finished constructing, so every rank has unlinked its files
        result = {"peer_access": loader.peer_access, "host_from": loader.host_from,
                  "segments_while_open": sorted(os.listdir(shm_dir))}
        for name, ids in id_sets().items():
            loader.reset_stats()
            out = loader.gather(ids.to(device))
            result[name] = {"out": out.cpu(), "stats": loader.stats().as_dict()}
        result["range errors"] = []
        for bad in ([0, N], [-1]):
            try:
                loader.gather(torch.tensor(bad))
            except IndexError as error:
                result["range errors"].append(str(error))
        loader.close()
        loader.close()
        result["segments_after_close"] = sorted(os.listdir(shm_dir))
        results.append(result)
    return results


def wrong_world_size(rank, world, shm_dir):
    placement = plan_placement(N, ROW_BYTES, gpus=world + 1, interleaved=0.5)
    try:
        MultiGPUCombinedTensor(table(), placement, shm_dir=shm_dir)
    except ValueError as error:
        return str(error)
    return "no error"


def expected_counts(ids, placement, rank, peers_mapped):
    """(hits, peer rows, payload, requests) as ``locate`` and the traffic model predict them."""
    tier, gpu, _ = locate(ids, placement, rank)
    own = (tier == REPLICATED) | ((tier == INTERLEAVED) & (gpu == rank))
    peer = (tier == INTERLEAVED) & ~own & peers_mapped
    host_from = placement.host_start if peers_mapped else placement.replicated
    payload, requests = zero_copy_traffic(ids[~(own | peer)].long() - host_from, ROW_BYTES)
    return int((own | peer).sum()), int(peer.sum()), payload, requests


def check(results, configs, world):
    features = table()
    for rank, per_config in enumerate(results):
        for (replicated, interleaved, peer_access), result in zip(configs, per_config):
            placement = plan_placement(N, ROW_BYTES, world, replicated, interleaved)
            mapped = peer_access is not False
            assert result["peer_access"] is (mapped or world == 1)
            assert result["host_from"] == (placement.host_start if mapped else replicated)
            for name, ids in id_sets().items():
                got = result[name]
                assert torch.equal(got["out"], features[ids.long()]), (rank, name)
                stats = got["stats"]
                counts = (stats["hits"], stats["peer_rows"], stats["pcie_payload_bytes"], stats["pcie_requests"])
                assert counts == expected_counts(ids, placement, rank, mapped), (rank, name)
                assert stats["accesses"] == len(ids) and stats["host_bytes_touched"] == stats["pcie_payload_bytes"]
                assert stats["gpu_bytes_resident"] == placement.bytes_per_gpu()[rank]
            assert result["range errors"] == ["ids[1] = 203 is not a row of the 203-row feature table",
                                              "ids[0] = -1 is not a row of the 203-row feature table"]
            assert result["segments_while_open"] == [] and result["segments_after_close"] == []


def test_two_ranks_gather_exact_rows_with_and_without_peer_access(tmp_path, shm_dir):
    configs = [(5, 40, None), (5, 40, False), (5, 40, True)]
    results = run_gloo(gather_all, 2, tmp_path, configs, str(shm_dir))
    check(results, configs, world=2)
    # by hand, ids [0, 5, 6, 45, 45] with R = 5, M = 40: row 0 replicated, row 5 on GPU 0, row 6 on GPU 1, row 45 on the
    # host; a host row of 400 bytes at a 128-byte multiple costs 13 sectors and 4 lines, at offset 400 the same
    peer, fallback, _ = results[0]
    assert (peer["hand"]["stats"]["hits"], peer["hand"]["stats"]["peer_rows"]) == (3, 1)  # rows 0, 5 local, 6 a peer's
    assert (peer["hand"]["stats"]["pcie_payload_bytes"], peer["hand"]["stats"]["pcie_requests"]) == (2 * 13 * 32, 8)
    # without peer access row 6 is host row 1 (the segment starts at R) and row 45 is host row 40
    assert (fallback["hand"]["stats"]["hits"], fallback["hand"]["stats"]["peer_rows"]) == (2, 0)
    assert (fallback["hand"]["stats"]["pcie_payload_bytes"], fallback["hand"]["stats"]["pcie_requests"]) == (3 * 13 * 32, 12)
    assert (results[1][0]["hand"]["stats"]["hits"], results[1][0]["hand"]["stats"]["peer_rows"]) == (3, 1)  # 5 is rank 0's


def test_four_ranks_with_an_uneven_interleaved_tier_and_an_empty_shard(tmp_path, shm_dir):
    # M = 41 leaves GPU 0 one row more; R = 0, M = 3 leaves GPU 3 nothing at all
    configs = [(7, 41, None), (0, 3, None), (0, 3, False)]
    check(run_gloo(gather_all, 4, tmp_path, configs, str(shm_dir)), configs, world=4)


def test_one_rank_counts_what_the_single_gpu_combined_tensor_counts(tmp_path, shm_dir):
    # R + M = 32 rows of 400 bytes = 100 lines, so host row r - 32 of the segment lines up as row r of the table does
    [[result]] = run_gloo(gather_all, 1, tmp_path, [(10, 22, None)], str(shm_dir))
    single = CombinedTensor(page_aligned_table(), hot_rows=32)
    ids = id_sets()["random"]
    assert torch.equal(result["random"]["out"], single.gather(ids))
    mine, theirs = result["random"]["stats"], single.stats().as_dict()
    for key in ("accesses", "hits", "pcie_payload_bytes", "pcie_requests", "host_bytes_touched", "gpu_bytes_resident"):
        assert mine[key] == theirs[key], key
    assert mine["peer_rows"] == 0


def test_a_placement_for_another_number_of_gpus_is_refused_on_every_rank(tmp_path, shm_dir):
    messages = run_gloo(wrong_world_size, 2, tmp_path, str(shm_dir))
    assert messages == ["the placement is for 3 GPUs but the process group has 2 ranks"] * 2


def test_bad_input_is_refused_before_any_collective():
    placement = plan_placement(N, ROW_BYTES, gpus=2, interleaved=0.5)
    with pytest.raises(TypeError, match="float32"):
        MultiGPUCombinedTensor(table().double(), placement)
    with pytest.raises(ValueError, match="contiguous CPU tensor"):
        MultiGPUCombinedTensor(table().t(), placement)
    with pytest.raises(ValueError, match="placement is for 203 rows but features has 202"):
        MultiGPUCombinedTensor(table()[:202], placement)
    with pytest.raises(ValueError, match="400-byte rows but features' rows are 396 bytes"):
        MultiGPUCombinedTensor(table()[:, :99].contiguous(), placement)
    with pytest.raises(RuntimeError, match="needs an initialised torch.distributed process group"):
        MultiGPUCombinedTensor(table(), placement)


def count_barriers() -> list:
    """Make ``dist.barrier`` record each call (in a spawned process: the patch dies with it)."""
    calls, barrier = [], dist.barrier

    def counted(*args, **kwargs):
        calls.append(time.time())
        return barrier(*args, **kwargs)

    dist.barrier = counted
    return calls


def close_twice(rank, world, shm_dir):
    loader = MultiGPUCombinedTensor(table(), plan_placement(N, ROW_BYTES, world, 5, 40), shm_dir=shm_dir)
    loader.gather(torch.arange(N))
    barriers = count_barriers()
    if rank == 0:
        time.sleep(0.5)  # rank 1 must not free its shard before rank 0 has stopped reading it
    entered = time.time()
    loader.close()
    left = time.time()
    in_first_close = len(barriers)
    loader.close()
    ranks = [None] * world
    dist.all_gather_object(ranks, rank)  # the group is still in step: no rank waits in a second close()
    return {"entered": entered, "left": left, "first": in_first_close, "second": len(barriers) - in_first_close,
            "ranks": ranks, "segments": sorted(os.listdir(shm_dir))}


def test_close_waits_for_every_rank_once_and_a_second_close_does_nothing(tmp_path, shm_dir):
    first, second = run_gloo(close_twice, 2, tmp_path, str(shm_dir))
    assert second["left"] >= first["entered"]  # rank 1's close() returned only once rank 0 had called its own
    for result in (first, second):
        assert (result["first"], result["second"]) == (2, 0)  # stop reading; closed every mapping of a peer's shard
        assert result["ranks"] == [0, 1] and result["segments"] == []


class TinyTmpfs:
    """``os.statvfs`` of a filesystem with ``free`` bytes left."""

    def __init__(self, free: int):
        self.f_bavail, self.f_frsize = free, 1


def host_segment_refused(rank, world, shm_dir):
    os.statvfs = lambda path: TinyTmpfs(32 * 1024)  # room for each rank's 10,000-byte shard, not the host rows
    barriers = count_barriers()
    try:
        MultiGPUCombinedTensor(table(), plan_placement(N, ROW_BYTES, world, 5, 40), shm_dir=shm_dir)
    except ValueError as error:
        return {"error": str(error), "barriers": len(barriers)}
    return {"error": None}


def test_a_host_segment_larger_than_the_free_shared_memory_is_refused_on_every_rank(tmp_path, shm_dir):
    results = run_gloo(host_segment_refused, 2, tmp_path, str(shm_dir))
    need = (N - 45) * ROW_BYTES  # rows [R + M, N) of 400 bytes
    for result in results:
        assert result["error"] == results[0]["error"]  # rank 1 raises rank 0's refusal instead of waiting for it
        assert f"needs 0.00 GiB ({need:,} bytes)" in result["error"]
        assert "has 0.00 GiB (32,768 bytes) free" in result["error"] and "--shm-dir" in result["error"]
        assert result["barriers"] == 0  # the failed constructor's close() waited for no one
    assert list(shm_dir.iterdir()) == []  # every shard file and the refused segment are gone


def test_a_segment_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda path: TinyTmpfs(1000))
    refusal = rf"needs 0.00 GiB \(4,000 bytes\) but {tmp_path} has 0.00 GiB \(1,000 bytes\)"
    with pytest.raises(ValueError, match=refusal):
        multi_gpu._create_segment(str(tmp_path / "segment"), torch.zeros(10, 100))
    assert list(tmp_path.iterdir()) == []


def test_a_tmpfs_filled_by_another_process_refuses_with_enospc_instead_of_sigbus(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(ValueError, match=r"needs 0.00 GiB \(4,000 bytes\) but .* free: pass --shm-dir DIR"):
        multi_gpu._create_segment(str(tmp_path / "segment"), torch.zeros(10, 100))
    assert list(tmp_path.iterdir()) == []  # the file is removed, never left half-sized


def test_a_segment_gets_its_blocks_before_the_copy(tmp_path):
    rows = torch.randn(10, 100)
    mapped = multi_gpu._create_segment(str(tmp_path / "segment"), rows)
    assert torch.equal(mapped, rows)
    assert os.stat(tmp_path / "segment").st_blocks * 512 >= rows.numel() * 4  # allocated, not a sparse file


def test_a_shared_memory_directory_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is not a directory: pass --shm-dir DIR"):
        multi_gpu.check_shm_dir(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="file is not a directory"):
        multi_gpu.check_shm_dir(str(tmp_path / "file"))
    multi_gpu.check_shm_dir(str(tmp_path))




def gpu_child(rank, world, configs, shm_dir):
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return gather_all(rank, world, configs, shm_dir, device)


def too_large(rank, world, shm_dir):
    torch.cuda.mem_get_info = lambda device=None: (1024, 2**30)
    placement = plan_placement(N, ROW_BYTES, gpus=world, replicated=10)
    try:
        MultiGPUCombinedTensor(table(), placement, "cuda", shm_dir=shm_dir)
    except MemoryError as error:
        return type(error).__name__ + ": " + str(error)
    return "no error"


@pytest.mark.gpu
def test_gpu_one_rank_matches_the_combined_tensor(tmp_path, shm_dir):
    [[result]] = run_gloo(gpu_child, 1, tmp_path, [(10, 22, None)], str(shm_dir), gpu=True)
    check([[result]], [(10, 22, None)], world=1)
    single = CombinedTensor(page_aligned_table(), hot_rows=32, device="cuda")
    ids = id_sets()["random"]
    assert torch.equal(result["random"]["out"], single.gather(ids.cuda()).cpu())
    theirs = single.stats().as_dict()
    for key in ("hits", "pcie_payload_bytes", "pcie_requests"):
        assert result["random"]["stats"][key] == theirs[key], key
    single.close()


@pytest.mark.gpu
def test_gpu_two_ranks_read_peers_by_ipc_or_fall_back_to_the_host(tmp_path, shm_dir):
    # on one GPU both ranks share it: IPC still maps the other process's allocation
    configs = [(5, 40, None), (5, 40, False)]
    check(run_gloo(gpu_child, 2, tmp_path, configs, str(shm_dir), gpu=True), configs, world=2)


@pytest.mark.gpu
def test_gpu_a_plan_larger_than_free_memory_is_refused(tmp_path, shm_dir):
    [message] = run_gloo(too_large, 1, tmp_path, str(shm_dir), gpu=True)
    assert message.startswith("PlacementTooLarge: GPU 0 would hold")
