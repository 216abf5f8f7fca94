"""Timing: the best of several runs, by the host clock or by CUDA events, and one run by either.

Every speed tierbench reports outside a training epoch (scorer and reorder
times, asv and pytest-benchmark ratios, samplerbench's rates, gpubench and the doctor's ceilings)
is the fastest of a few repeated runs: the run least disturbed by the rest of
the machine.
"""

from __future__ import annotations

import time

import torch


def wait_for(device) -> None:
    """Wait until ``device`` has done the work enqueued on it (nothing to wait for on a CPU): a host-clock timing of
    work on a GPU ends here."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def best_wall_seconds(fn, repeat: int = 3):
    """``(result, seconds)``: the last result of ``fn()`` and the fastest of ``repeat`` host-clock timings of it."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def best_cuda_seconds(run, device: torch.device, repeats: int, batch: int = 1) -> float:
    """Seconds per ``run()``: the best of ``repeats`` CUDA-event timings on the current stream, after an untimed run.

    Each timing spans ``batch`` runs enqueued back to back (with several, the
    launch of one overlaps the previous one and the GPU never waits for the CPU).
    """
    run()
    best = float("inf")
    stream = torch.cuda.current_stream(device)
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(batch):
            run()
        end.record(stream)
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / batch)
    return best


def stage_seconds(fn, device: torch.device):
    """``(result, seconds)`` of one ``fn()``: by CUDA events on the current stream, waiting for the second, on CUDA
    (the GPU's time for the work ``fn`` enqueued); by the host clock elsewhere."""
    if device.type != "cuda":
        start = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - start
    stream = torch.cuda.current_stream(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    result = fn()
    end.record(stream)
    end.synchronize()
    return result, start.elapsed_time(end) / 1e3
