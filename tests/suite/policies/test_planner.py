"""The planner's parts: memory sizes, ceilings from a profile or nominal ones, and the overhead fit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from suite.policies import planner


@pytest.mark.parametrize("text, value", [("40GB", 40 * 10**9), ("24GiB", 24 * 2**30), ("512 MB", 512 * 10**6),
                                         ("1.5gb", 1_500_000_000), ("100", 100)])
def test_memory_sizes_read_as_people_write_them(text, value):
    assert planner.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["lots", "40 GX", "-1GB", ""])
def test_a_memory_size_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="a memory size is a number and a unit"):
        planner.parse_bytes(text)


def test_without_a_profile_the_ceilings_are_nominal_and_say_so(tmp_path):
    machine = planner.machine(machines=tmp_path)
    assert not machine.measured and "NOMINAL" in machine.source
    assert machine.ceilings == planner.NOMINAL


def test_the_newest_measured_profile_is_taken_and_a_cpu_one_is_not(tmp_path):
    def write(name, time, ceilings):
        (tmp_path / name).write_text(json.dumps({"device": name, "time": time, "ceilings": ceilings}))

    both = {planner.ZERO_COPY: 40e9, planner.D2D: 900e9}
    write("old.json", "2026-01-01", both)
    write("new.json", "2026-06-01", {**both, planner.ZERO_COPY: 50e9})
    write("cpu.json", "2026-12-01", {})
    machine = planner.machine(machines=tmp_path)
    assert machine.measured and machine.device == "new.json" and machine.ceilings[planner.ZERO_COPY] == 50e9
    with pytest.raises(ValueError, match="holds no measured zero-copy and D2D ceilings"):
        planner.machine(tmp_path / "cpu.json")
    nominal = planner.machine("none", machines=tmp_path)  # plan --machine none, as its help says
    assert not nominal.measured and nominal.ceilings == planner.NOMINAL
    assert planner.machine(tmp_path, machines=[]).device == "new.json"  # plan --machine FOLDER: its newest
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no machine profile with measured zero-copy and D2D ceilings"):
        planner.machine(tmp_path / "empty")


def test_the_overhead_fit_recovers_a_cost_per_minibatch_and_per_row():
    ceilings = {planner.ZERO_COPY: 50e9, planner.D2D: 1500e9}
    epochs = pd.DataFrame({"batches": [12, 1442, 182, 20], "rows_gathered": [3.6e6, 1.0e7, 1.1e7, 5e6],
                           "hit_ratio": [0.3, 0.6, 0.2, 0.0], "row_bytes": [512, 512, 400, 400],
                           "pcie_payload_bytes": [1.3e9, 2.0e9, 3.5e9, 2.0e9]})
    epochs["gather_s"] = planner.record_bound(epochs, ceilings) + 0.9e-3 * epochs["batches"] + 7e-9 * epochs[
        "rows_gathered"]
    a, b = planner.fit_overhead(epochs, ceilings)
    assert a == pytest.approx(0.9e-3, rel=1e-9) and b == pytest.approx(7e-9, rel=1e-9)
    one_shape = epochs.assign(batches=10, rows_gathered=1e6)
    assert planner.fit_overhead(one_shape, ceilings) is None


def test_the_projection_charges_misses_to_the_link_and_hits_and_fills_to_gpu_memory():
    ceilings = {planner.ZERO_COPY: 50e9, planner.D2D: 1000e9}
    assert planner.projected_seconds(50e9, 1e9, 1e9, 500, ceilings) == pytest.approx(1.0 + 1.0)


def test_the_fixed_cost_of_a_minibatch_is_taken_only_where_fitted_above_the_ceilings_bound(tmp_path):
    ceilings = {planner.ZERO_COPY: 40e9, planner.D2D: 900e9}
    stages = {"gather": {"a_s": 1e-3, "b_s": 5e-9, "per": "input row"}}
    above = {"gather_above": planner.ABOVE_BOUND, "stages": stages}
    cases = {"above": ({planner.COSTS_SECTION: above}, (1e-3, 5e-9)),
             "whole": ({planner.COSTS_SECTION: {**above, "gather_above": "nothing"}}, None), "none": ({}, None)}
    for name, (extra, expected) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": "cuda: G", "time": "2026-01-01", "ceilings": ceilings, **extra}))
        assert planner.machine(path).minibatch_costs == expected, name
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 2e6) == pytest.approx(0.1 + 0.01)
    assert planner.fixed_seconds(None, 100, 2e6) == 0.0
    timed = ((7_000.0, 3e-4), (12_000.0, 2e-4), (40_000.0, 6e-4))  # rows and excess of three batch sizes
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 100 * 9_500, timed) == pytest.approx(100 * 2.5e-4)
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 100 * 7_000, timed) == pytest.approx(100 * 3e-4)
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 100 * 6_000, timed) == pytest.approx(100 * 3e-4)  # the smallest
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 100 * 50_000, timed) == pytest.approx(0.1 + 5e-7 * 50_000)  # line
    assert planner.fixed_seconds((1e-3, 5e-9), 100, 100 * 9_500, timed[:1]) == pytest.approx(0.1 + 5e-7 * 9_500)
    assert planner.fixed_seconds(None, 100, 100 * 9_500, timed) == 0.0
    assert planner.machine("none").minibatch_costs is None
    medians = [{"batch_size": 64, "input_rows": 40_000, "excess_s": 6e-4},
               {"batch_size": 8, "input_rows": 7_000, "excess_s": 3e-4}]
    for name, section, expected in (("medians", {**above, planner.GATHER_BY_BATCH: medians}, timed[::2]),
                                    ("no line", {**above, "gather_above": "nothing", planner.GATHER_BY_BATCH: medians},
                                     ()), ("before medians", above, ())):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": "cuda: G", "time": "2026-01-01", "ceilings": ceilings,
                                    planner.COSTS_SECTION: section}))
        assert planner.machine(path).gather_by_batch == expected, name


def test_the_fixed_cost_is_that_of_minibatches_drawn_by_the_planned_epochs_sampler(tmp_path):
    """A CPU-sampled gather first copies its ids to the GPU: one sampler's line is not taken for another's epochs, and
    the machine says why it has none; a profile whose section is one entry (written before it held one per sampler)
    counts as that entry's sampler's."""
    ceilings = {planner.ZERO_COPY: 40e9, planner.D2D: 900e9}

    def entry(sampling, a, gather_above=planner.ABOVE_BOUND):
        return {"sampling": sampling, "gather_above": gather_above,
                "stages": {"gather": {"a_s": a, "b_s": 5e-9, "per": "input row"}}}

    sections = {"both": {"cpu": entry("cpu", 2e-3), "gpu": entry("gpu", 1e-3)}, "gpu": {"gpu": entry("gpu", 1e-3)},
                "one entry": entry("gpu", 1e-3), "cpu unbounded": {"cpu": entry("cpu", 2e-3, "nothing")}}
    machines = {}
    for name, section in sections.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"device": "cuda: G", "time": "2026-01-01", "ceilings": ceilings,
                                    planner.COSTS_SECTION: section}))
        machines[name] = {sampling: planner.machine(path, sampling=sampling) for sampling in ("cpu", "gpu", "uva")}
    assert machines["both"]["cpu"].minibatch_costs == (2e-3, 5e-9) and machines["both"]["cpu"].costs_note == ""
    assert machines["both"]["cpu"].costs_loader == "the uva loader"  # written before entries named a hot fraction
    assert machines["gpu"]["cpu"].costs_loader == ""
    assert machines["both"]["gpu"].minibatch_costs == (1e-3, 5e-9) and machines["both"]["gpu"].sampling == "gpu"
    assert "sampled on cpu and gpu, not on uva" in machines["both"]["uva"].costs_note
    for name in ("gpu", "one entry"):
        assert machines[name]["gpu"].minibatch_costs == (1e-3, 5e-9), name
        assert machines[name]["cpu"].minibatch_costs is None, name
        assert machines[name]["cpu"].costs_note == ("its fixed costs were timed on minibatches sampled on gpu, not on "
                                                    "cpu as the planned epochs are (`tierbench costs --sampling cpu` "
                                                    "times them)"), name
    assert machines["cpu unbounded"]["cpu"].minibatch_costs is None
    assert "without measured ceilings" in machines["cpu unbounded"]["cpu"].costs_note
    assert planner.machine("none", sampling="gpu").costs_note == ""
    tiered = tmp_path / "tiered.json"
    tiered.write_text(json.dumps({"device": "cuda: G", "time": "2026-01-01", "ceilings": ceilings,
                                  planner.COSTS_SECTION: {"cpu": {**entry("cpu", 2e-3), "loader": "tiered",
                                                                  "hot_fraction": 0.1}}}))
    machine = planner.machine(tiered)
    assert machine.costs_loader == "the tiered loader at 10% hot"
    assert planner.fixed_basis(machine, 10, 10_000).endswith(", timed through the tiered loader at 10% hot")


def test_measured_epochs_are_compared_only_with_the_projection_for_their_sampler(tmp_path):
    from suite.sweep.records import store_records
    from tests.suite.sweep.test_records import row

    runs = tmp_path / "cuda-g" / "runs"
    epoch = {"device": "cuda: G", "loader": "uva"}
    store_records(runs / "fig8.csv", [row(**epoch, sampling="cpu", gather_s=2.0),
                                      row(**epoch, sampling="gpu", gather_s=1.0),
                                      row(**epoch, sampling="cpu", gather_s=3.0, pipeline=True)])
    assert planner.gpu_epochs("cuda: G", "cpu", tmp_path)["gather_s"].tolist() == [2.0]
    assert planner.gpu_epochs("cuda: G", "gpu", tmp_path)["gather_s"].tolist() == [1.0]
    assert planner.gpu_epochs("cuda: H", "gpu", tmp_path).empty


def test_epochs_of_different_code_are_compared_apart(tmp_path):
    from suite.sweep.records import store_records
    from tests.suite.sweep.test_records import row

    epoch = {"device": "cuda: G", "loader": "uva", "hot_fraction": 0.0, "batches": 2, "rows_gathered": 20}
    store_records(tmp_path / "cuda-g" / "runs" / "fig10.csv", [
        row(**epoch, git_revision="b" * 40, time="2026-11-28T19:00:00+00:00", gather_s=1.0),
        row(**epoch, git_revision="b" * 40, time="2026-11-28T19:01:00+00:00", gather_s=2.0, epoch=2),
        row(**epoch, git_revision="a" * 12 + "-dirty", time="2026-11-21T10:00:00+00:00", gather_s=4.0),
    ])
    machine = planner.Machine("cuda: G", {planner.ZERO_COPY: 1e9, planner.D2D: 1e12}, "test", True)
    counts, row_cost = np.ones((1, 10)), np.full(10, 128.0)
    table = planner.compare_measured("tiny", 1024, (10, 10), machine, counts, np.arange(10), row_cost, 128,
                                     batches_per_epoch=2, reads_per_epoch=20.0, results=tmp_path)
    assert table["revision"].tolist() == ["aaaaaaaaaaaa-dirty", "b" * 12]  # oldest first, each marked as recorded
    assert table["epochs"].tolist() == [1, 2]
    assert table["measured gather s"].tolist() == [4.0, 1.5]
    assert table["bound s"].tolist() == [1280 / 1e9] * 2
