"""tierbench datasets cost: build and prepare measured in child processes, and the projection from them."""

import sys
import time

import numpy as np
import pandas as pd
import pytest

from suite.cli import main
from suite.datasets import entry_path
from suite.datasets.cache import entry_bytes
from suite.experiments import build_cost


def test_a_child_is_measured_by_its_own_peak_and_time():
    grow = [sys.executable, "-c", "import time; block = b'x' * (300 << 20); time.sleep(0.2)"]
    cost = build_cost.run_child(grow)
    assert 300 << 20 < cost.peak_bytes < 1 << 30 and 0.2 < cost.seconds < 60 and cost.load >= 0
    with pytest.raises(ValueError, match=r"failed \(exit status 3\): the last line"):
        build_cost.run_child([sys.executable, "-c", "import sys; print('a line'); print('the last line'); sys.exit(3)"])


def test_a_childs_peak_is_its_own_even_when_this_process_is_larger():
    ballast = np.ones(3 << 27)  # 3 GiB of pages touched here: a child spawned straight from here would report them
    grow = [sys.executable, "-c", "block = b'x' * (300 << 20)"]
    assert 300 << 20 < build_cost.run_child(grow).peak_bytes < 1 << 30
    del ballast


def in_process(command, threads=None):
    """``run_child`` without the child: the tierbench command it names, run here (the test above runs a real one)."""
    assert command[:3] == build_cost.tierbench()
    start = time.perf_counter()
    assert main(command[3:]) == 0
    return build_cost.ChildCost(time.perf_counter() - start, 1 << 30, 0.0)


def test_the_cost_command_on_tiny(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_cost, "run_child", in_process)
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "cache"))  # the command rebuilds: not the session's tiny
    assert main(["datasets", "cost", "tiny", "--out", str(tmp_path), "-q"]) == 0
    markdown = (tmp_path / "build-cost.md").read_text()
    assert "Made by `tierbench datasets cost tiny --out" in markdown and "device cpu:" in markdown
    assert "| tiny" in markdown and "measured" in markdown and "No projection" in markdown
    row = pd.read_csv(tmp_path / "build-cost.csv").iloc[0]
    assert row["dataset"] == "tiny" and row["rows"] == "measured" and row["nodes"] == 4096
    assert row["size_on_disk_bytes"] == entry_bytes(entry_path("tiny"))
    assert row["build_peak_bytes"] == 1 << 30 and row["build_s"] > 0
    assert (tmp_path / "build-cost.png").read_bytes()[:4] == b"\x89PNG"
    assert "wrote" in capsys.readouterr().out


def test_a_bad_request_is_a_one_line_error(tmp_path, capsys):
    assert main(["datasets", "cost", "tiny", "--out", str(tmp_path), "--one-thread", "papers-s"]) == 2
    assert main(["datasets", "cost", "nope", "--out", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and all(line.startswith("tierbench: error: ") for line in errors)
    assert "--one-thread papers-s must be one of the datasets measured" in errors[0] and "'nope'" in errors[1]


def measured_rows(names, entries, feature_bytes, coefficients):
    rows = []
    for name, e, f in zip(names, entries, feature_bytes):
        costs = {cost: c0 + c1 * e + c2 * f for cost, (c0, c1, c2) in coefficients.items()}
        rows.append({"dataset": name, "rows": "measured", "cores": 2, "nodes": f // 512, "list_entries": e,
                     "feature_bytes": f, "papers_like": name.startswith("papers"), **costs})
    return pd.DataFrame(rows)


def test_the_fit_recovers_a_linear_cost_and_projects_it():
    coefficients = {cost: (1.0 + k, 2e-8 * k, 3e-9) for k, cost in enumerate(build_cost.COSTS)}
    measured = measured_rows(["tiny", "papers-s", "papers-m"], [4e4, 3.1e7, 2.5e8], [5e5, 5.4e8, 4.3e9], coefficients)
    fitted = build_cost.fit(measured)
    for cost, expected in coefficients.items():
        np.testing.assert_allclose(fitted.loc[cost].to_numpy(), expected, rtol=1e-6, atol=1e-9)
    # Amdahl: 10 s on one thread and 6 s on two make 8 s parallel and 2 s serial, so 2.5 s on 16
    factors = build_cost.amdahl_factor(pd.Series({"build_s": 6.0, "prepare_s": 4.0}),
                                       pd.Series({"build_s": 10.0, "prepare_s": 4.0}), cores=2, target=16)
    assert factors["build_s"] == pytest.approx(2.5 / 6) and factors["prepare_s"] == pytest.approx(1.0)
    projected = build_cost.project(measured, fitted, factors, cores=2)
    assert list(zip(projected["dataset"].str.split(",").str[0], projected["cores"])) == [
        ("papers-l", 2), ("papers-l", 16), ("ogbn-papers100M size", 16), ("ogbn-papers100M size", 16)]
    here, there = projected.iloc[0], projected.iloc[1]
    assert there["build_s"] == pytest.approx(here["build_s"] * 2.5 / 6)
    assert there["build_peak_bytes"] == here["build_peak_bytes"]  # memory does not depend on the cores
    per_node = np.mean([3.1e7 / (5.4e8 // 512), 2.5e8 / (4.3e9 // 512)])
    assert projected.iloc[2]["list_entries"] == pytest.approx(111_059_956 * per_node, rel=1e-6)
    assert projected.iloc[3]["list_entries"] == build_cost.PAPERS_100M_EDGES


def test_papers_100m_is_projected_linearly_from_a_measured_preset_not_built(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_cost, "run_child", in_process)
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "cache"))
    assert main(["datasets", "cost", "tiny", "papers-100m", "--out", str(tmp_path), "-q"]) == 0
    table = pd.read_csv(tmp_path / "build-cost.csv").set_index("dataset")
    tiny, big = build_cost.get_preset("tiny"), build_cost.get_preset("papers-100m")
    measured, projected = table.loc["tiny"], table.loc["papers-100m"]
    assert projected["rows"] == "projected (linear)" and projected["projected_from"] == "tiny"
    assert projected["nodes"] == 111_059_956 and projected["list_entries"] == big.list_entries
    entries = big.list_entries / tiny.list_entries  # the measured list entries per second, held
    assert projected["build_s"] == pytest.approx(measured["build_s"] * entries)
    assert projected["prepare_s"] == pytest.approx(measured["prepare_s"] * entries)
    arrays = big.estimated_bytes() / tiny.estimated_bytes()
    assert projected["build_peak_bytes"] == pytest.approx(measured["build_peak_bytes"] * arrays)
    written = (big.csr_bytes + big.label_bytes) / tiny.estimated_bytes()  # no feature table on disk
    assert projected["size_on_disk_bytes"] == pytest.approx(measured["size_on_disk_bytes"] * written)
    assert not (tmp_path / "cache").joinpath(f"papers-100m-{big.key()}").exists()
    markdown = (tmp_path / "build-cost.md").read_text()
    assert "papers-100m: a projection of the CPU builder, not a build" in markdown and "| papers-100m" in markdown


def test_paper_scale_alone_measures_the_reference_preset(monkeypatch, tmp_path):
    measured = []

    def fake_measure(name, threads=None):
        measured.append(name)
        return {"dataset": name, "rows": "measured", "cores": 2, "nodes": 1, "list_entries": 1, "feature_bytes": 1,
                "papers_like": True, **{cost: 1.0 for cost in build_cost.COSTS}}

    monkeypatch.setattr(build_cost, "measure_dataset", fake_measure)
    path = build_cost.measure(["papers-100m-half"], tmp_path, progress=False)
    assert measured == [build_cost.PROJECTION_REFERENCE]
    assert list(pd.read_csv(path)["dataset"]) == [build_cost.PROJECTION_REFERENCE, "papers-100m-half"]
