"""Running a test body in G gloo processes on the CPU (what the multi-GPU code does with NCCL, one process per GPU)."""

import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, world, store, body, args):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        body(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_gloo(body, world: int, tmp_path, *args) -> None:
    """Call ``body(rank, world, *args)`` in ``world`` spawned processes joined by a gloo group.

    The group meets through a file store under ``tmp_path`` (no ports); a
    failing assertion in any process fails the calling test.
    """
    store = tmp_path / f"gloo-store-{world}"
    mp.spawn(_worker, args=(world, str(store), body, args), nprocs=world, join=True)
