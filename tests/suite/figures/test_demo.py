"""The demo's table and panels: per loader and hot fraction, with the PCIe column and a labelled projection."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from suite.figures import demo
from suite.sweep.records import read_records
from suite.sweep.run import run_sweep


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path, _ = run_sweep("demo-test", tmp_path_factory.mktemp("runs"), datasets=["tiny"],
                        loaders=["cpu-gather", "uva", "tiered"], hot_fractions=[0.1, 0.25], fanouts=[(5, 5)], epochs=1,
                        warmup=0, batch_size=512, progress=False)
    return read_records(path)


def test_each_hot_fraction_has_its_own_bar_and_the_table_a_pcie_column(records, tmp_path):
    md, csv, png = demo.draw(records, tmp_path / "out", "`test`", machines=tmp_path / "none")
    text = md.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| loader"))
    assert "PCIe bytes / epoch (model)" in header and "footprint %" in header
    table = pd.read_csv(csv)
    tiered = table[table["loader"] == "tiered"]
    assert sorted(tiered["hot_fraction"]) == [0.1, 0.25]  # two rows, never one averaged bar
    assert tiered["hit_ratio"].iloc[1] > tiered["hit_ratio"].iloc[0]
    assert tiered["pcie_payload_bytes"].iloc[1] < tiered["pcie_payload_bytes"].iloc[0]
    assert "footprint %" in table and "touched %" in table and table["touched %"].between(0, 100).all()
    assert "no projection" in text and demo.PROJECTED not in table and png.stat().st_size > 0


def test_a_gpu_profile_adds_the_projection_labelled_with_its_device_and_date(records, tmp_path):
    machines = tmp_path / "machines"
    machines.mkdir()
    profile = {"device": "cuda: NVIDIA H100", "time": "2026-11-20T10:00:00+00:00",
               "ceilings": {"h2d_memcpy_bytes_per_s": 50e9, "d2d_copy_bytes_per_s": 2.5e12}}
    (machines / "h100.json").write_text(json.dumps(profile))
    (machines / "cpu.json").write_text(json.dumps({"device": "cpu", "time": "2026-11-21", "ceilings": None}))
    md, csv, _ = demo.draw(records, tmp_path / "out", "`test`", machines=machines)
    table = pd.read_csv(csv)
    hot = table["hit_ratio"] * table["rows_gathered"] * table["row_bytes"]
    projected = table["pcie_payload_bytes"] / 50e9 + hot / 2.5e12
    assert table[demo.PROJECTED].to_numpy() == pytest.approx(projected.to_numpy())
    text = md.read_text()
    assert "cuda: NVIDIA H100" in text and "2026-11-20" in text and "not a measurement" in text


def test_a_difference_within_the_epoch_spread_is_marked_noise_and_each_bar_shows_its_value(records, tmp_path,
                                                                                         monkeypatch):
    """Two recorded epochs per cell: the epoch time against cpu-gather's and uva's, "(noise)" where the two cells'
    ranges overlap (as Figure 8's table marks it); every bar carries its value, so that a hit ratio of 0 reads 0."""
    import matplotlib.axes

    times = {"cpu-gather": (1.0, 1.1), "uva": (0.5, 1.2), "tiered": (0.5, 0.55)}  # uva's range holds tiered's
    twice = pd.concat([records.assign(epoch=k, epoch_s=records["loader"].map(lambda name: times[name][k]))
                       for k in (0, 1)])
    labelled = []
    real = matplotlib.axes.Axes.bar_label
    monkeypatch.setattr(matplotlib.axes.Axes, "bar_label",
                        lambda ax, bars, **kw: labelled.append([t.get_text() for t in real(ax, bars, **kw)]) or [])
    md, _, _ = demo.draw(twice, tmp_path / "out", "`test`", machines=tmp_path / "none")
    rows = {line.split("|")[1].strip(): line for line in md.read_text().splitlines() if line.startswith("| ")}
    header = [cell.strip() for cell in rows["loader"].split("|")[1:-1]]
    assert "speedup over cpu-gather" in header and "speedup over uva" in header
    tiered = dict(zip(header, (cell.strip() for cell in rows["tiered 10%"].split("|")[1:-1])))
    assert tiered["speedup over cpu-gather"] == "2.00x"  # 0.5-0.55 s against 1.0-1.1 s: apart
    assert tiered["speedup over uva"] == "1.62x (noise)"  # 0.85 s against 0.525 s, 0.5-1.2 s: within its spread
    assert dict(zip(header, (c.strip() for c in rows["uva"].split("|")[1:-1])))["speedup over uva"] == "reference"
    hit_ratios = [text for texts in labelled for text in texts]
    assert "0" in hit_ratios  # cpu-gather's and uva's hit ratio, printed on their empty bars


def test_the_demo_records_an_untimed_warm_up_and_two_epochs_per_cell():
    from suite.experiments.sweeps import EXPERIMENTS

    assert (EXPERIMENTS["demo"]["warmup"], EXPERIMENTS["demo"]["epochs"]) == (1, 2)
