"""tierbench report: one row and one bar per setting, the spread over epochs, speedups only against a reference run."""

import configparser
import datetime
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from suite.figures import write_report
from suite.figures.fig8 import draw as figure8
from suite.figures.fig10 import draw as figure10
from suite.figures.fig11 import draw as figure11
from suite.figures.sweep_tables import PROFILE_REPLACED
from suite.measure.ceilings import archived_profile
from tests.suite.sweep.test_records import OLD_HEADER, OLD_LINE

REPO = Path(__file__).resolve().parents[3]


def cell(loader, epochs, *, hot=0.0, scorer=None, **settings) -> list[dict]:
    """The records of one cell, one per recorded epoch time in ``epochs``, as ``read_records`` returns them."""
    common = dict(dataset="tiny", device="cpu: test", processes=1, gpus=0, pipeline=False, sampling="cpu",
                  fanouts="5,5", batch_size=64, loader=loader, scorer=scorer or ("wrpr" if loader == "tiered" else "none"),
                  hot_fraction=hot, git_revision="48e396741866", time="2026-01-01T00:00:00+00:00", sample_s=0.01,
                  gather_s=0.01, train_s=0.01, hit_ratio=hot, valid_accuracy=0.5, pcie_payload_bytes=1000 * (1 - hot),
                  pcie_rx_bytes_measured=float("nan"), gpu_bytes_resident=100 * hot)
    return [{**common, **settings, "epoch": e, "epoch_s": seconds} for e, seconds in enumerate(epochs)]


def records(*cells) -> pd.DataFrame:
    return pd.DataFrame([row for rows in cells for row in rows])


def test_cells_with_different_hot_fractions_are_never_averaged(tmp_path):
    sweep = records(cell("uva", [2.0, 2.2]), cell("tiered", [1.0, 1.2], hot=0.05), cell("tiered", [0.5, 0.7], hot=0.1))
    md, csv, png = figure8(sweep, tmp_path, "test")
    table = pd.read_csv(csv).set_index("hot_fraction")
    assert len(table) == 3
    assert table.loc[0.05, "epoch_s"] == pytest.approx(1.1) and table.loc[0.1, "epoch_s"] == pytest.approx(0.6)
    assert (table.loc[0.1, "epoch_s min"], table.loc[0.1, "epoch_s max"], table.loc[0.1, "epochs"]) == (0.5, 0.7, 2)
    text = md.read_text()
    assert "0.6 (0.5-0.7)" in text and "fastest and slowest epoch (min-max)" in text
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_speedup_whose_reference_was_not_run_is_omitted_and_said_so(tmp_path):
    sweep = records(cell("uva", [2.0, 2.2]), cell("tiered", [1.0, 1.2], hot=0.1))
    md, csv, _ = figure8(sweep, tmp_path, "test")
    table = pd.read_csv(csv)
    assert "speedup over cpu-gather" not in table and "speedup over uva" in table
    text = md.read_text()
    assert "No cpu-gather records in this sweep: speedup over cpu-gather omitted." in text
    assert "nan" not in text.lower()


def test_speedups_are_taken_within_the_same_setting(tmp_path):
    sweep = records(
        cell("uva", [2.0, 2.0]), cell("tiered", [1.0, 1.0], hot=0.1),
        cell("uva", [4.0, 4.0], pipeline=True), cell("tiered", [1.0, 1.0], hot=0.1, pipeline=True),
        cell("tiered", [1.0, 1.0], hot=0.1, batch_size=128),  # no uva cell with this batch size
    )
    md, csv, _ = figure8(sweep, tmp_path, "test")
    table = pd.read_csv(csv)
    tiered = table[table["loader"] == "tiered"].set_index(["pipeline", "batch_size"])["speedup over uva"]
    assert tiered[(False, 64)] == pytest.approx(2.0) and tiered[(True, 64)] == pytest.approx(4.0)
    assert pd.isna(tiered[(False, 128)])
    assert "1 rows have no uva cell in the same setting: their speedup over uva is empty." in md.read_text()


def test_a_speedup_within_the_spread_of_epochs_is_flagged_as_noise(tmp_path):
    sweep = records(cell("cpu-gather", [1.0, 1.4]), cell("uva", [1.1, 1.3]), cell("tiered", [0.5, 0.6], hot=0.1))
    md, csv, _ = figure8(sweep, tmp_path, "test")
    table = pd.read_csv(csv).set_index("loader")
    assert table.loc["uva", "within spread of cpu-gather"] == True  # noqa: E712 (a CSV boolean)
    assert table.loc["tiered", "within spread of cpu-gather"] == False  # noqa: E712
    text = md.read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "1.00x (noise)" in rows["uva"] and "2.18x" in rows["tiered"] and "(noise)" not in rows["tiered"].split("|")[-4]
    assert "reference" in rows["cpu-gather"]


def test_a_loader_one_dataset_did_not_run_is_marked_in_its_panel_not_left_as_an_empty_slot():
    from suite.figures.fig8 import NOT_RUN, mark_not_run
    from suite.io.plotting import pyplot

    plt, sns = pyplot()
    plotted = pd.DataFrame({"dataset": ["a", "a", "a", "b", "b"], "loader": ["uva", "gns", "tiered", "uva", "tiered"],
                            "epoch_s": [1.0, 2.0, 0.5, 3.0, 1.0]})
    order = ["uva", "gns", "tiered"]
    grid = sns.catplot(data=plotted, x="loader", y="epoch_s", col="dataset", kind="bar", order=order, sharey=False)
    mark_not_run(grid, plotted, order)
    assert [t.get_text() for t in grid.axes_dict["a"].texts] == []
    (text,) = grid.axes_dict["b"].texts
    assert text.get_text() == NOT_RUN and text.get_position()[0] == order.index("gns")
    plt.close(grid.figure)


def test_one_recorded_epoch_is_said_to_have_no_spread(tmp_path):
    md, _, _ = figure8(records(cell("uva", [2.0, 2.2]), cell("tiered", [1.0], hot=0.1)), tmp_path, "test")
    assert "A cell with one recorded epoch has no spread" in md.read_text()


def test_a_sweep_of_single_epochs_promises_no_error_bars(tmp_path, monkeypatch):
    import seaborn

    calls = []
    real = seaborn.catplot
    monkeypatch.setattr(seaborn, "catplot", lambda **kwargs: calls.append(kwargs) or real(**kwargs))
    md, _, _ = figure8(records(cell("uva", [2.0]), cell("tiered", [1.0], hot=0.1)), tmp_path, "test")
    text = md.read_text()
    assert "its one recorded epoch, which has no spread, so the figure has no error bars" in text
    assert "as the figure's error bars" not in text
    (kwargs,) = calls
    assert kwargs["errorbar"] is None


def test_a_setting_that_varies_within_a_loader_gets_its_own_bar(tmp_path, monkeypatch):
    import seaborn

    calls = []
    real = seaborn.catplot
    monkeypatch.setattr(seaborn, "catplot", lambda **kwargs: calls.append(kwargs) or real(**kwargs))
    sweep = records(cell("uva", [2.0, 2.2]), cell("tiered", [1.0, 1.2], hot=0.05), cell("tiered", [0.5, 0.7], hot=0.1))
    figure8(sweep, tmp_path, "test")
    (kwargs,) = calls
    assert kwargs["hue"] == "setting" and kwargs["hue_order"] == ["hot 0%", "hot 5%", "hot 10%"]
    assert kwargs["errorbar"](pd.Series([3.0, 1.0, 2.0])) == (1.0, 3.0)


def test_figure_10_compares_each_setting_with_its_own_zero_hot_tier(tmp_path):
    sweep = records(
        cell("tiered", [2.0, 2.0], hot=0.0), cell("tiered", [1.0, 1.0], hot=0.25),
        cell("tiered", [4.0, 4.0], hot=0.0, fanouts="10,10"), cell("tiered", [3.9, 4.2], hot=0.25, fanouts="10,10"),
    )
    md, csv, _ = figure10(sweep, tmp_path, "test")
    table = pd.read_csv(csv).set_index(["fanouts", "hot_fraction"])
    assert len(table) == 4
    assert table.loc[("5,5", 0.25), "time vs 0%"] == pytest.approx(-0.5)
    assert table.loc[("10,10", 0.25), "time vs 0%"] == pytest.approx(0.0125)
    assert table.loc[("10,10", 0.25), "time vs 0% within spread"] == True  # noqa: E712
    text = md.read_text()
    assert "+1% (noise)" in text and "-50%" in text and "fanouts 10,10" not in text.split("|")[0]


def test_cells_run_in_rounds_say_so_and_how_far_the_second_round_drifted_from_the_first(tmp_path):
    def rounds(hot, first, second):
        return [{**row, "round": 1} for row in cell("tiered", [first], hot=hot)] + \
            [{**row, "round": 2} for row in cell("tiered", [second], hot=hot)]

    sweep = records(rounds(0.0, 2.0, 2.2), rounds(0.1, 1.0, 1.2), rounds(0.25, 1.0, 1.1))
    text = figure10(sweep, tmp_path / "rounds", "test")[0].read_text()
    assert "The cells ran in up to 2 rounds (`--rounds`)" in text
    assert "Over the 3 cells recorded in both of the first two rounds, the second round's epochs took 1.1x the " \
           "first's (median; 1.1-1.2x)." in text
    assert "| 2.1 (2-2.2)" in text  # a cell's mean and spread take in both rounds
    one = records(cell("tiered", [2.0, 2.0], hot=0.0), cell("tiered", [1.0, 1.0], hot=0.25))
    assert "rounds" not in figure10(one, tmp_path / "one", "test")[0].read_text()
    assert "rounds" not in figure10(one.assign(round=1), tmp_path / "one", "test")[0].read_text()


MEASURED = {"h2d_memcpy_bytes_per_s": 25e9, "zero_copy_read_bytes_per_s": 20e9, "d2d_copy_bytes_per_s": 1e12,
            "buffer_bytes": 1 << 29}  # the ceilings tierbench doctor writes
NO_CEILINGS = "No gather bound, as there are no measured ceilings for these records: run `tierbench doctor`"


def machine_profile(folder: Path, ceilings: dict, name: str = "nvidia-h100-host.json") -> str:
    """A machine profile as tierbench doctor writes it (the parts the report reads), at ``folder/name``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"format": 1, "device": "cuda: NVIDIA H100", "ceilings": ceilings}))
    return str(folder / name)


def gpu_cell(loader, epochs, *, payload, gather_s, profile, hot=0.0, **settings) -> list[dict]:
    """A cell recorded on the GPU machine with ``profile``: 1,000,000 rows of 400 B gathered per epoch."""
    return cell(loader, epochs, hot=hot, machine_profile=profile, rows_gathered=1_000_000, row_bytes=400,
                pcie_payload_bytes=payload, gather_s=gather_s, **{"device": "cuda: NVIDIA H100", "gpus": 1, **settings})


def test_the_gather_time_is_set_against_the_bound_of_the_measured_ceilings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # records name their profile relative to the working directory
    profile = machine_profile(Path("results/machines"), MEASURED)
    sweep = records(
        gpu_cell("uva", [2.0, 2.0], payload=5e9, gather_s=0.2, profile=profile),
        gpu_cell("tiered", [1.0, 1.0], hot=0.5, payload=2.5e9, gather_s=0.2004, profile=profile),
    )
    sweep.loc[(sweep["loader"] == "uva") & (sweep["epoch"] == 1), "gather_s"] = 0.3  # mean gather 0.25 s
    md, csv, _ = figure8(sweep, tmp_path / "fig8", "test")
    table = pd.read_csv(csv).set_index("loader")
    # uva: 5e9 cold bytes / 25e9 B/s = 0.2 s, nothing hot; tiered: 2.5e9 / 25e9 + 0.5 x 1e6 x 400 B / 1e12 B/s
    assert table.loc["uva", "gather bound s"] == pytest.approx(0.2)
    assert table.loc["tiered", "gather bound s"] == pytest.approx(0.1 + 2e-4)
    assert table.loc["uva", "gather / bound"] == pytest.approx(1.25)  # mean gather time / mean bound
    assert table.loc["tiered", "gather / bound"] == pytest.approx(2.0)
    text = md.read_text()
    header, _, *rows = [[field.strip() for field in line.split("|")[1:-1]] for line in text.splitlines()
                        if line.startswith("|")]
    assert header.index("gather_s") + 1 == header.index("gather bound s") == header.index("gather / bound") - 1
    shown = {row[header.index("loader")]: row[header.index("gather bound s"):][:2] for row in rows}
    assert shown == {"uva": ["0.2", "1.25"], "tiered": ["0.1", "2"]}  # 3 digits, as every number of the table
    assert "hot bytes hit ratio x rows gathered x row bytes" in text and "goal <= 1.2" in text
    assert "No gather bound" not in text

    tiered = records(
        gpu_cell("tiered", [2.0, 2.0], payload=5e9, gather_s=0.3, profile=profile),
        gpu_cell("tiered", [1.0, 1.0], hot=0.5, payload=2.5e9, gather_s=0.2004, profile=profile),
    )
    md, csv, _ = figure10(tiered, tmp_path / "fig10", "test")
    table = pd.read_csv(csv).set_index("hot_fraction")
    assert table["gather / bound"].tolist() == pytest.approx([1.5, 2.0])  # 0.3 / 0.2 at 0% hot, as above at 50%
    assert "gather bound s" in md.read_text() and "No gather bound" not in md.read_text()


def test_records_made_under_out_find_their_profile_committed_under_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a GPU visit's records name out/machines/; committed, the profile is in results/
    committed = machine_profile(Path("results/machines"), MEASURED)
    made_in_out = str(Path("out/machines") / Path(committed).name)
    sweep = records(gpu_cell("uva", [2.0, 2.0], payload=5e9, gather_s=0.2, profile=made_in_out))
    _, csv, _ = figure8(sweep, tmp_path / "fig8", "test")
    assert pd.read_csv(csv).set_index("loader").loc["uva", "gather bound s"] == pytest.approx(0.2)

    profile = json.loads(Path(committed).read_text())
    for written, bound in (("2025-12-31T23:00:00+00:00", True), ("2026-01-02T00:00:00+00:00", False)):
        Path(committed).write_text(json.dumps({**profile, "time": written}))  # the records ran at 2026-01-01T00:00
        md, csv, _ = figure8(sweep, tmp_path / "fig8", "test")
        assert ("gather bound s" in pd.read_csv(csv)) is bound  # a later doctor's profile has other ceilings
        assert (PROFILE_REPLACED in md.read_text()) is not bound
    earlier = datetime.datetime(2025, 12, 31, 23, tzinfo=datetime.timezone.utc)  # the one the records ran under, kept
    halved = {**MEASURED, "h2d_memcpy_bytes_per_s": MEASURED["h2d_memcpy_bytes_per_s"] / 2}
    archived_profile(Path(committed), earlier).write_text(json.dumps({**profile, "ceilings": halved,
                                                                      "time": earlier.isoformat()}))
    _, csv, _ = figure8(sweep, tmp_path / "fig8", "test")
    assert pd.read_csv(csv).set_index("loader").loc["uva", "gather bound s"] == pytest.approx(0.4)


def test_a_cell_has_a_bound_only_when_every_record_of_it_has_one(tmp_path):
    profile = machine_profile(tmp_path, MEASURED)
    sweep = records(
        gpu_cell("uva", [2.0, 2.0], payload=5e9, gather_s=0.2, profile=profile),
        gpu_cell("tiered", [1.0, 1.0], hot=0.1, payload=2.5e9, gather_s=0.2, profile=profile),
        gpu_cell("tiered", [1.0, 1.0], hot=0.1, payload=2.5e9, gather_s=0.2, profile=profile, processes=2),
        gpu_cell("degree-cache", [1.0, 1.0], hot=0.1, payload=2.5e9, gather_s=0.2, profile=profile),
        gpu_cell("gns", [1.0, 1.0], hot=0.1, payload=2.5e9, gather_s=0.2, profile=profile, device="cpu: test"),
    )
    sweep.loc[(sweep["loader"] == "degree-cache") & (sweep["epoch"] == 1), "machine_profile"] = None
    md, csv, _ = figure8(sweep, tmp_path / "out", "test")
    table = pd.read_csv(csv).set_index(["loader", "processes"])
    assert table.loc[("uva", 1), "gather bound s"] == pytest.approx(0.2)
    assert table.loc[("tiered", 1), "gather bound s"] == pytest.approx(0.1 + 0.1 * 4e8 / 1e12)
    assert table[["gather bound s", "gather / bound"]].isna().sum().tolist() == [3, 3]
    assert pd.isna(table.loc[("tiered", 2), "gather bound s"])
    assert pd.isna(table.loc[("degree-cache", 1), "gather / bound"])  # one of its epochs names no profile
    assert pd.isna(table.loc[("gns", 1), "gather bound s"])  # a CPU run on the GPU machine names its profile
    text = md.read_text()
    assert "3 rows have no bound, as they ran in several processes" in text and "no measured ceilings" in text
    assert "they ran on a CPU, where no byte crosses PCIe" in text


def test_records_without_measured_ceilings_get_no_bound_columns_and_a_line_saying_why(tmp_path):
    cpu = machine_profile(tmp_path, {"skipped": "no CUDA GPU visible"}, "cpu-host.json")  # doctor on a CPU machine
    sweep = records(
        cell("uva", [2.0, 2.0], rows_gathered=1000, row_bytes=128),  # no profile
        cell("tiered", [1.0, 1.0], hot=0.1, rows_gathered=1000, row_bytes=128, machine_profile=cpu),
        cell("tiered", [1.5, 1.5], rows_gathered=1000, row_bytes=128, machine_profile=str(tmp_path / "gone.json")),
    )
    for figure in (figure8, figure10):
        md, csv, _ = figure(sweep, tmp_path / figure.__module__, "test")
        columns = set(pd.read_csv(csv))
        assert not {"gather bound s", "gather / bound"} & columns
        assert figure is figure8 or "gather_s" not in columns  # Figure 10's table is as it was without a bound
        text = md.read_text()
        assert text.count(NO_CEILINGS) == 1 and "gather bound s" not in text


def test_records_written_before_rows_were_counted_still_report(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "old.csv").write_text(",".join(OLD_HEADER) + "\n" + OLD_LINE + "\n")
    md, csv, _ = write_report("old", runs_dir=runs, out_dir=tmp_path / "out", figure="fig8")
    assert NO_CEILINGS in md.read_text() and "gather bound s" not in pd.read_csv(csv)
    profile = machine_profile(tmp_path, MEASURED)
    old = records(cell("uva", [2.0, 2.0], device="cuda: NVIDIA H100", machine_profile=profile))  # no row counts
    md, csv, _ = figure8(old, tmp_path / "gpu", "test")
    assert "No gather bound, as they were recorded before rows_gathered and row_bytes existed" in md.read_text()


def test_a_machine_profile_that_is_not_json_is_refused_with_its_path(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{half a profile")
    sweep = records(cell("uva", [2.0], machine_profile=str(broken), rows_gathered=10, row_bytes=4))
    with pytest.raises(ValueError, match="broken.json is not a machine profile of tierbench doctor"):
        figure8(sweep, tmp_path / "out", "test")


def test_figure_11_keeps_settings_apart(tmp_path):
    sweep = records(
        cell("tiered", [2.0, 2.0], hot=0.1, processes=2), cell("tiered", [1.0, 1.0], hot=0.1, processes=2, pipeline=True),
        cell("tiered", [1.5, 1.5], hot=0.1, processes=2, sampling="distributed"),
    )
    md, csv, png = figure11(sweep, tmp_path, "test")
    table = pd.read_csv(csv)
    assert sorted(table["epoch_s"]) == [1.0, 1.5, 2.0]
    assert "| pipeline" in md.read_text() and png.read_bytes()[:4] == b"\x89PNG"


def test_the_demo_writes_into_an_ignored_folder_and_results_demo_into_results():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    for env, root in (("demo", "out"), ("results-demo", "results")):
        assert f"DEMO_ROOT = {root}" in tox[f"testenv:{env}"]["set_env"]
    commands = tox["testenv:demo"]["commands"]
    assert commands.count("{env:DEMO_ROOT}") >= 4 and "results" not in commands
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout")
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "out/runs/demo.csv",
                              "out/demo/demo.md", ".venv"], capture_output=True, text=True).stdout.split()
    assert ignored == ["out/runs/demo.csv", "out/demo/demo.md", ".venv"]


def test_a_sweep_other_than_figure_8_is_titled_by_its_name_and_shows_each_loaders_tiers(tmp_path, monkeypatch):
    import seaborn

    calls = []
    real = seaborn.catplot
    monkeypatch.setattr(seaborn, "catplot", lambda **kwargs: calls.append(kwargs) or real(**kwargs))
    sweep = records(cell("cpu-gather", [3.0, 3.1], host_fraction=float("nan")),
                    cell("mmap", [9.0, 9.5], host_fraction=0.15),
                    cell("disk-tiered", [5.0, 5.2], hot=0.1, host_fraction=0.15))
    md, _, _ = figure8(sweep, tmp_path, "test", experiment="disk")
    assert md.read_text().startswith("# Sweep disk: epoch time by feature loader (Figure 8's table)")
    (kwargs,) = calls
    assert kwargs["order"] == ["cpu-gather", "mmap\nhost 15%", "disk-tiered\nhot 10%, host 15%"]
