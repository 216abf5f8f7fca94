"""Running a test body in G gloo processes on the CPU (what the multi-GPU code does with NCCL, one process per GPU),
forked from the test session's forkserver, or spawned where the body uses a GPU (``tests.processes``)."""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.processes import GPU_START_METHOD, START_METHOD, in_callers_environment


def _start(worker, args, processes: int, start_method: str = START_METHOD) -> None:
    """``worker(rank, *args)`` in ``processes`` processes started by ``start_method`` (forked from the forkserver
    unless told otherwise), in the caller's environment, joined; a failure in any of them fails the caller."""
    mp.start_processes(in_callers_environment(worker), args=args, nprocs=processes, join=True,
                       start_method=start_method)


def _worker(rank, world, store, out_dir, body, args):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        result = body(rank, world, *args)
    finally:
        dist.destroy_process_group()
    torch.save(result, f"{out_dir}/gloo-rank{rank}.pt")


def run_gloo(body, world: int, tmp_path, *args, gpu: bool = False) -> list:
    """``body(rank, world, *args)`` in ``world`` processes (``_start``; spawned where ``gpu`` says the body uses a
    GPU) joined by a gloo group; what each returned, by rank.

    The group meets through a file store under ``tmp_path`` (no ports); a
    failing assertion in any process fails the calling test.  Return values
    travel back with ``torch.save`` and come back through the
    ``weights_only`` loader: tensors, numbers, strings, lists and dicts.
    """
    store = tmp_path / f"gloo-store-{world}"
    _start(_worker, (world, str(store), str(tmp_path), body, args), world,
           GPU_START_METHOD if gpu else START_METHOD)
    return [torch.load(tmp_path / f"gloo-rank{rank}.pt", weights_only=True) for rank in range(world)]


def _groups_in_turn(rank, worlds, out_dir, body, args):
    """Process ``rank`` of ``max(worlds)`` (``run_gloo_groups``)."""
    import numba

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    for world in worlds:
        if rank >= world:
            continue
        dist.init_process_group("gloo", init_method=f"file://{out_dir}/store-{world}", rank=rank, world_size=world)
        try:
            body(rank, world, *args)
        finally:
            dist.destroy_process_group()


def run_gloo_groups(body, worlds, out_dir, *args) -> None:
    """``body(rank, world, *args)`` in a gloo group of each size W of ``worlds`` in turn, all of them in the same
    ``max(worlds)`` processes (``_start``, started once, not once per group): the first W processes join a group of
    their own, met through a file store under ``out_dir``, and leave it before the next.  The bodies write what the test
    reads under ``out_dir``; a failing assertion in any process fails the calling fixture.  One thread per process
    (torch's and numba's): more processes than cores, each spinning on threads of its own, would only wait for each
    other."""
    _start(_groups_in_turn, (tuple(worlds), str(out_dir), body, args), max(worlds))
