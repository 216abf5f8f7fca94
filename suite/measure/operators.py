"""What each stage of a minibatch issues: the operators under a profiler range per stage, with their calls, host time,
device time and kernels (the fixed costs of PyTorch-Direct §3.3 taken apart operator by operator).

A stage run inside ``stage_range(name)`` while ``profiled(device)`` records
is one range of torch's profiler; ``operator_table`` reads the profile back
into one row per stage and *top-level* operator: an operator called by no
other operator of that stage, so that no time is counted twice.  These are
the operators the stage's Python called itself, on its own thread, and the
ones that start on another thread without a parent while the stage runs: on
a GPU, the autograd engine runs the backward pass on a thread of its own
while the host thread that called ``backward`` waits.  An operator's times
are inclusive: its host time spans the operators it calls, and its device
time sums the kernels that it and they launched (CUDA runtime calls, such as
a kernel launched by a CuPy or NVRTC kernel outside torch, are operators of
their own, named by the call).  Each stage also gets a row
``OUTSIDE_OPERATORS``: the range's host time that no top-level operator
spans (Python, a numba sampler, a wait), and on a device the work that ran
on it within the range but that the profiler ties to none of them (a kernel
whose launch it could not correlate), so that a stage's host times add up to
its range and its device times to the device work within it.  Device work is
counted within a range when it starts there: the caller waits for the device
before a range ends (``suite.experiments.costs`` does).  Times are per
minibatch: sums over the profiled minibatches divided by their number.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
import torch

RANGE_PREFIX = "tierbench.stage:"
"""The profiler range names of the stages: this prefix and the stage's name."""
OUTSIDE_OPERATORS = "(outside operators)"
"""The row of a stage's host time that no top-level operator spans, and of its device work that none launched."""
COLUMNS = ("stage", "operator", "calls", "host_us", "device_us", "kernels")


def stage_range(stage: str):
    """A profiler range named for ``stage``: the operators issued inside it are that stage's."""
    return torch.profiler.record_function(RANGE_PREFIX + stage)


def profiled(device):
    """torch's profiler recording host operators, and on CUDA the device's kernels and the runtime's calls."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities)


def _kernels(event) -> int:
    """The kernels ``event`` and the operators it called launched."""
    return len(event.kernels) + sum(_kernels(child) for child in event.cpu_children)


_CPU = torch.autograd.DeviceType.CPU


def _is_range(event) -> bool:
    return event.name.startswith(RANGE_PREFIX)


def _top_level(ranges, events) -> list[list]:
    """The top-level operators of each range: its children on its own thread, and the operators with no parent on
    other threads that start within it."""
    tops = [[child for child in stage.cpu_children if not _is_range(child)] for stage in ranges]
    for event in events:
        if event.cpu_parent is not None or _is_range(event) or event.device_type != _CPU:
            continue
        for stage, operators in zip(ranges, tops):
            if event.thread != stage.thread and stage.time_range.start <= event.time_range.start \
                    < stage.time_range.end:
                operators.append(event)
                break
    return tops


def operator_table(events, minibatches: int, on_device: bool) -> pd.DataFrame:
    """One row per stage and top-level operator of the profiler's ``events`` (``profile.events()``), its calls and
    times per minibatch over ``minibatches``: ``calls``, ``host_us`` and ``device_us`` (inclusive) and ``kernels``,
    the last two empty unless the profile recorded a device (``on_device``); and a row ``OUTSIDE_OPERATORS`` per
    stage.  Rows by stage in the order the stages first ran, then host time."""
    if minibatches < 1:
        raise ValueError(f"minibatches must be positive, got {minibatches}")
    ranges = [event for event in events if _is_range(event) and event.device_type == _CPU]
    device_work = [event for event in events  # kernels, copies, sets: not the device's spans of the ranges
                   if event.device_type != _CPU and not event.is_user_annotation and not _is_range(event)]
    totals = defaultdict(lambda: [0, 0.0, 0.0, 0])
    stage_host, stage_device, stage_work = defaultdict(float), defaultdict(float), defaultdict(int)  # in run order
    for stage, operators in zip(ranges, _top_level(ranges, events)):
        name = stage.name[len(RANGE_PREFIX):]
        stage_host[name] += stage.cpu_time_total
        start, end = stage.time_range.start, stage.time_range.end
        within = [work for work in device_work if start <= work.time_range.start < end]
        stage_device[name] += sum(work.time_range.elapsed_us() for work in within)
        stage_work[name] += len(within)
        for operator in operators:
            total = totals[(name, operator.name)]
            total[0] += 1
            total[1] += operator.cpu_time_total
            total[2] += operator.device_time_total
            total[3] += _kernels(operator)
    rows = [{"stage": stage, "operator": operator, "calls": calls / minibatches, "host_us": host / minibatches,
             "device_us": device / minibatches, "kernels": kernels / minibatches}
            for (stage, operator), (calls, host, device, kernels) in totals.items()]
    for stage, host in stage_host.items():
        host_in, device_in, work_in = (sum(total[i] for (name, _), total in totals.items() if name == stage)
                                       for i in (1, 2, 3))
        rows.append({"stage": stage, "operator": OUTSIDE_OPERATORS, "calls": 0.0,
                     "host_us": max(host - host_in, 0.0) / minibatches,
                     "device_us": max(stage_device[stage] - device_in, 0.0) / minibatches,
                     "kernels": max(stage_work[stage] - work_in, 0) / minibatches})
    order = {stage: i for i, stage in enumerate(stage_host)}
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    if not on_device:
        table[["device_us", "kernels"]] = float("nan")
    table = table.assign(_order=table["stage"].map(order)).sort_values(["_order", "host_us"], ascending=[True, False])
    return table.drop(columns="_order").reset_index(drop=True)

