"""Running a test body in G gloo processes on the CPU (what the multi-GPU code does with NCCL, one process per GPU)."""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, world, store, out_dir, body, args):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        result = body(rank, world, *args)
    finally:
        dist.destroy_process_group()
    torch.save(result, f"{out_dir}/gloo-rank{rank}.pt")


def run_gloo(body, world: int, tmp_path, *args) -> list:
    """``body(rank, world, *args)`` in ``world`` spawned processes joined by a gloo group; what each returned, by rank.

    The group meets through a file store under ``tmp_path`` (no ports); a
    failing assertion in any process fails the calling test.  Return values
    travel back with ``torch.save`` and come back through the
    ``weights_only`` loader: tensors, numbers, strings, lists and dicts.
    """
    store = tmp_path / f"gloo-store-{world}"
    mp.spawn(_worker, args=(world, str(store), str(tmp_path), body, args), nprocs=world, join=True)
    return [torch.load(tmp_path / f"gloo-rank{rank}.pt", weights_only=True) for rank in range(world)]
