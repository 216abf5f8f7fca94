"""The operators of each stage: top-level operators per profiler range, none counted twice, times per minibatch."""

import math
from types import SimpleNamespace

import pytest
import torch

from torch.autograd.profiler_util import Interval

from suite.measure.operators import OUTSIDE_OPERATORS, RANGE_PREFIX, operator_table, profiled, stage_range

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA


def event(name, start, end, *, thread=1, children=(), kernels=0, device_us=0.0, device_type=CPU, annotation=False):
    """A stand-in for torch's ``FunctionEvent`` with the fields the table reads."""
    made = SimpleNamespace(name=name, thread=thread, time_range=Interval(start, end), cpu_time_total=float(end - start),
                           device_time_total=device_us, kernels=[None] * kernels, cpu_children=list(children),
                           cpu_parent=None, device_type=device_type, is_user_annotation=annotation)
    for child in children:
        child.cpu_parent = made
    return made


def test_each_operator_counts_once_under_the_stage_that_issued_it_and_the_rest_is_outside():
    inner = event("aten::empty", 12, 14, kernels=0)
    linear = event("aten::linear", 10, 30, children=[inner], kernels=2, device_us=7.0)
    relu = event("aten::relu", 40, 45, kernels=1, device_us=1.0)
    train = event(RANGE_PREFIX + "train", 0, 100, children=[linear, relu])
    backward = event("autograd::engine::evaluate_function: MmBackward0", 50, 90, thread=2, kernels=3,
                     device_us=5.0)  # the autograd engine's thread, while the range's thread waits
    other_thread_child = event("aten::mm", 55, 60, thread=2)
    backward.cpu_children, other_thread_child.cpu_parent = [other_thread_child], backward
    elsewhere = event("aten::add", 150, 160, thread=2)  # after the range ended: no stage's
    gather = event(RANGE_PREFIX + "gather", 200, 210, children=[event("aten::index_select", 201, 205, kernels=1,
                                                                      device_us=2.0)])
    device_work = [event("gemm", 20, 27, device_type=CUDA), event("relu", 44, 45, device_type=CUDA),
                   event("mm_backward", 60, 65, device_type=CUDA),  # the ops' own, correlated to them
                   event("index_select", 205, 207, device_type=CUDA),
                   event("cupy gather", 207, 210, device_type=CUDA),  # launched where no operator was correlated
                   event(RANGE_PREFIX + "gather", 201, 210, device_type=CUDA, annotation=True)]  # the range's span
    events = [train, linear, inner, relu, backward, other_thread_child, elsewhere, gather, *gather.cpu_children,
              *device_work]
    table = operator_table(events, minibatches=2, on_device=True).set_index(["stage", "operator"])
    assert list(dict.fromkeys(table.index.get_level_values("stage"))) == ["train", "gather"]
    assert table.loc[("train", "aten::linear")].to_dict() == {"calls": 0.5, "host_us": 10.0, "device_us": 3.5,
                                                               "kernels": 1.0}
    assert table.loc[("train", backward.name), "host_us"] == 20.0  # its child aten::mm is not a row of its own
    assert ("train", "aten::empty") not in table.index and ("train", "aten::mm") not in table.index
    assert ("train", "aten::add") not in table.index and ("gather", "aten::add") not in table.index
    assert table.loc[("train", OUTSIDE_OPERATORS), "host_us"] == (100 - 20 - 5 - 40) / 2
    train_rows = table.loc["train"]
    assert train_rows["host_us"].sum() == 100 / 2  # the stage's host times add up to its range
    assert table.loc[("gather", OUTSIDE_OPERATORS), "host_us"] == (10 - 4) / 2
    assert table.loc[("gather", OUTSIDE_OPERATORS), ["device_us", "kernels"]].tolist() == [3 / 2, 1 / 2]
    assert table.loc[("train", OUTSIDE_OPERATORS), ["device_us", "kernels"]].tolist() == [0.0, 0.0]  # all correlated
    assert table.loc["gather", "device_us"].sum() == (2 + 3) / 2  # the device work within the range, once


def test_without_a_device_profiled_device_time_and_kernels_are_empty_not_zero():
    stage = event(RANGE_PREFIX + "sample", 0, 10, children=[event("aten::randint", 1, 3)])
    table = operator_table([stage, *stage.cpu_children], minibatches=1, on_device=False)
    assert table["device_us"].isna().all() and table["kernels"].isna().all()
    with pytest.raises(ValueError, match="minibatches must be positive"):
        operator_table([stage], minibatches=0, on_device=False)


def test_a_real_profile_on_the_cpu_finds_the_operators_of_each_range():
    weight = torch.randn(64, 64, requires_grad=True)
    with profiled("cpu") as trace:
        for _ in range(3):
            with stage_range("gather"):
                x = torch.randn(32, 64)
            with stage_range("train"):
                (x @ weight).relu().sum().backward()
    table = operator_table(trace.events(), minibatches=3, on_device=False)
    rows = table.set_index(["stage", "operator"])
    assert set(table["stage"]) == {"gather", "train"}
    assert rows.loc[("gather", "aten::randn"), "calls"] == 1
    assert rows.loc[("train", "aten::matmul"), "calls"] == 1 and rows.loc[("train", "aten::relu"), "calls"] == 1
    assert any(name.startswith("autograd::engine::evaluate_function") for name in rows.loc["train"].index)
    assert not any(name == "aten::mm" for name in rows.loc["train"].index)  # inside aten::matmul, counted there
    assert (table["host_us"] >= 0).all() and not math.isnan(table["host_us"].sum())
