"""``tierbench report --figure gpu-goals``: the second GPU visit's goals judged from a gpu-suite device folder, on
fake folders whose records are written through the experiments' own writers, on an empty one, and on the committed
first visit."""

import json
from pathlib import Path

import pandas as pd
import pytest

from suite.cli import main
from suite.experiments import gpu, launch_costs
from suite.figures import gpu_goals
from suite.io import records
from suite.sweep import gpu_suite
from suite.sweep.records import store_records

REPO = Path(__file__).resolve().parents[3]
FIRST_VISIT = REPO / "results" / "gpu" / "cuda-nvidia-h100-80gb-hbm3"
DEVICE = "cuda: Fake GPU 80GB"
RECORD = {"device": DEVICE, "git_revision": "0123456789ab", "time": "2027-01-02T10:00:00+00:00"}
H2D, D2D = 1e10, 1e12


def _profile(folder: Path) -> str:
    path = folder.parent / "machines" / "fake-gpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ceilings": {"h2d_memcpy_bytes_per_s": H2D, "d2d_copy_bytes_per_s": D2D}}))
    return str(path)


def _epochs(profile: str, dataset: str, loader: str, epochs=(1.0, 1.0), *, hot=0.0, sampling="cpu", gather_s=0.1,
            pcie=10**9, hit_ratio=0.0, batch_limit=None, time="2027-01-02T11:00:00+00:00", device=DEVICE,
            pipeline=False) -> list[dict]:
    """The rows ``tierbench run`` records for one cell, one per epoch, with the numbers given."""
    return [{
        "dataset": dataset, "num_nodes": 1000, "num_edges": 5000, "feature_dim": 128, "fanouts": "12,12,12",
        "batch_size": 1024, "regime": "unscaled", "loader": loader, "scorer": "wrpr" if hot else "none",
        "hot_fraction": hot, "sampling": sampling, "sampler_kernels": "numba" if sampling != "cpu" else None,
        "processes": 1, "gpus": 1, "device": device,
        "git_revision": RECORD["git_revision"], "time": time, "host": "vm", "torch": "2.11", "machine_profile": profile,
        "epoch": k + 1, "round": 1, "loss": 1.0, "valid_accuracy": None if batch_limit else 0.5, "sample_s": 0.1,
        "gather_s": gather_s, "train_s": 0.1, "epoch_s": epoch_s, "batches": 12, "sampled_edges": 1000,
        "hit_ratio": hit_ratio, "rows_gathered": 10**6, "nodes_touched": 900, "row_bytes": 512,
        "pcie_payload_bytes": pcie, "pcie_requests": 100, "host_bytes_touched": pcie, "gpu_bytes_resident": 0,
        "disk_bytes_read": 0, "pipeline": pipeline, "batch_limit": batch_limit,
        "epoch_batches": 1193 if batch_limit else 12,
    } for k, epoch_s in enumerate(epochs)]


def write_sampler_bench(folder: Path, cpu_threads: int = 16) -> None:
    rows = []
    for case, fanouts, seeds, timings in (("one hop", "12", 100_000,
                                           {"cpu": 3e8, "gpu": 3.6e9, "uva": 1.5e9, "gpu-cupy": 3.8e9}),
                                          ("minibatch", "12,12,12", 1024,
                                           {"cpu": 2.0, "gpu": 0.8, "uva": 1.5, "gpu-cupy": 0.5})):
        for sampler, number in timings.items():
            edges = 1_000_000
            best = edges / number if case == "one hop" else number / 1e3
            rows.append({"dataset": "papers-s", "case": case, "fanouts": fanouts, "seeds": seeds, "sampler": sampler,
                         "sampled_edges": edges, "best_s": best, "sampled_edges_per_second": edges / best,
                         "ms_per_batch": best * 1e3})
    facts = {"command": "tierbench samplerbench --dataset papers-s", "dataset": "papers-s", "seeds": 100_000,
             "batch_size": 1024, "repeat": 5, "cpu_threads": cpu_threads}
    records.write_records(folder / "sampler-bench" / "sampler-bench.csv", pd.DataFrame(rows).assign(**RECORD),
                          RECORD, facts, index=False)
    fixed = [{"sampler": "gpu", "kernels": "numba", "what": "hop kernels, tensors at each launch", "launches": 3,
              "host_us": 90.0},
             {"sampler": "gpu", "kernels": "numba", "what": "minibatch of one seed", "launches": 15, "host_us": 450.0},
             {"sampler": "gpu-cupy", "kernels": "cupy", "what": "minibatch of one seed", "launches": 15,
              "host_us": 210.0}]
    launch_costs.write(fixed, folder / "sampler-bench", RECORD, {"command": facts["command"], "dataset": "papers-s",
                                                                 "repeat": 5, "repetitions": 100})


def write_costs(folder: Path, sample_a_s: float = 1e-4) -> None:
    table = pd.DataFrame({"batch_size": [8, 16], "sample_s": [1e-3, 2e-3], "gather_s": [1e-3, 2e-3],
                          "gather_excess_s": [1e-4, 2e-4], "train_s": [1e-3, 2e-3]})
    fits = {"sample": {"a_s": sample_a_s, "b_s": 1e-9, "per": "sampled edge"},
            "gather": {"a_s": 2e-4, "b_s": 1e-9, "per": "input row"},
            "train": {"a_s": 5e-3, "b_s": 1e-9, "per": "input row"}}
    facts = {"command": "tierbench costs --dataset papers-s --sampling gpu", "dataset": "papers-s", "loader": "uva",
             "sampling": "gpu", "sampler_kernels": "numba", "device": "cuda", "fanouts": [12, 12, 12], "batch_sizes": [8, 16], "repeats": 5, "gather_above": "the bound", "fits": fits,
             "machine_profile": "fake.json"}
    records.write_records(folder / "costs" / "papers-s" / "costs.csv", table.assign(**RECORD), RECORD, facts,
                          index=False)


def write_reach(folder: Path) -> None:
    ceilings = {"h2d_memcpy_bytes_per_s": 55e9, "zero_copy_read_bytes_per_s": 51e9, "d2d_copy_bytes_per_s": 1.5e12}
    table_bytes = 53 << 30
    reached = gpu.reach_table([(512, 128 << 20, 50e9), (512, table_bytes, 20e9)], table_bytes, ceilings)
    speeds = pd.DataFrame([{column: "-" for column in gpu.SPEED_COLUMNS} | {"row bytes": 512}])
    facts = {"command": "tierbench gpubench --table-gib 53", "ceilings": ceilings, "table_bytes": table_bytes,
             "repeat": 5, "default_variant": "aligned"}
    gpu.write_records(folder / "microbench-paper-scale", speeds, pd.DataFrame({"bytes": [1]}), reached, RECORD, facts)


def write_state(folder: Path, build_s: float) -> None:
    gpu_suite.write_state(folder, {"device": DEVICE, "git_revision": RECORD["git_revision"], "steps": {
        "datasets-papers-100m": {"status": "done", "rc": 0, "seconds": build_s, "cache_held": False, "device": DEVICE,
                                 "git_revision": RECORD["git_revision"], "started": "2027-01-02T09:00:00+00:00",
                                 "finished": "2027-01-02T09:05:00+00:00"}}})


def write_sweeps(folder: Path) -> None:
    profile, runs = _profile(folder), folder / "runs"
    bound = 10**9 / H2D + 0.5 * 10**6 * 512 / D2D  # tiered's: cold bytes over H2D, hot over D2D
    store_records(runs / "fig8.csv", [
        *_epochs(profile, "papers-s", "tiered", hot=0.1, gather_s=1.1 * bound, hit_ratio=0.5),  # 1.1: met
        *_epochs(profile, "papers-s", "uva", gather_s=0.5, pcie=2 * 10**9),  # 2.5: missed
        *_epochs(profile, "papers-s", "tiered", hot=0.1, sampling="gpu", gather_s=2 * bound, hit_ratio=0.5),  # missed
        *_epochs(profile, "papers-100m", "cpu-gather", (3.0, 3.0), sampling="gpu", batch_limit=50),
        *_epochs(profile, "papers-100m", "uva", (1.0, 1.0), sampling="gpu", batch_limit=50),  # 3x: met
        *_epochs(profile, "papers-100m", "tiered", (0.8, 0.8), hot=0.1, sampling="gpu", batch_limit=50),  # 1.25x
    ])
    store_records(runs / "fig10.csv", [
        *_epochs(profile, "papers-100m", "tiered", (2.0, 2.0), sampling="gpu", batch_limit=50),
        *_epochs(profile, "papers-100m", "tiered", (1.0, 1.0), hot=0.25, sampling="gpu", batch_limit=50),  # -50%: met
    ])
    store_records(runs / "lookahead.csv", [
        *_epochs(profile, "papers-s", "tiered", (1.0, 1.1), hot=0.1),
        *_epochs(profile, "papers-s", "lookahead", (1.05, 1.2), hot=0.1, pcie=8 * 10**8),  # slower, within noise
        *_epochs(profile, "papers-s", "tiered", (1.0, 1.0), hot=0.1, pipeline=True),
        *_epochs(profile, "papers-s", "lookahead", (0.9, 0.9), hot=0.1, pcie=8 * 10**8, pipeline=True),  # faster
    ])


def visit(tmp_path: Path, build_s: float = 250.0) -> Path:
    folder = tmp_path / "gpu" / "cuda-fake-gpu-80gb"
    folder.mkdir(parents=True)
    write_sampler_bench(folder)
    write_costs(folder)
    write_reach(folder)
    write_state(folder, build_s)
    write_sweeps(folder)
    return folder


def report(folder: Path, *out: str) -> pd.DataFrame:
    assert main(["report", "--figure", "gpu-goals", "--records", str(folder), *out]) == 0
    where = Path(out[1]) if out else folder
    assert all((where / f"goals.{suffix}").is_file() for suffix in ("md", "csv", "png"))
    return pd.read_csv(where / "goals.csv", dtype={"setting": str, "measured": str, "source": str})


def _row(table: pd.DataFrame, goal: int, setting: str = "", exact: bool = False) -> pd.Series:
    """The one row of ``goal`` whose setting holds ``setting`` (is it, where ``exact``)."""
    settings = table["setting"].fillna("")
    chosen = settings == setting if exact else settings.str.contains(setting, regex=False)
    rows = table[(table["goal"] == goal) & chosen]
    assert len(rows) == 1, (goal, setting, table[table["goal"] == goal][["setting", "verdict"]])
    return rows.iloc[0]


def test_every_goal_is_computed_from_the_visit_s_records_and_judged(tmp_path):
    folder = visit(tmp_path)
    table = report(folder)
    verdicts = {(goal, setting): _row(table, goal, setting)["verdict"] for goal, setting in [
        (1, "gpu sampler"), (1, "uva sampler"), (2, "gpu sampler"), (2, "uva sampler"), (3, ""), (4, "cpu sampling, tiered"),
        (4, "cpu sampling, best"), (4, "gpu sampling, numba kernels, tiered"), (5, ""), (6, "UVA ÷ CPU gather"), (6, "tiered ÷ UVA"),
        (7, ""), (8, ""), (9, "no pipeline, PCIe bytes"), (9, "no pipeline, epoch time"), (10, "")]}
    assert verdicts == {(1, "gpu sampler"): "met", (1, "uva sampler"): "missed", (2, "gpu sampler"): "met",
                        (2, "uva sampler"): "missed", (3, ""): "met", (4, "cpu sampling, tiered"): "met",
                        (4, "cpu sampling, best"): "report only", (4, "gpu sampling, numba kernels, tiered"): "missed",
                        (5, ""): "met",
                        (6, "UVA ÷ CPU gather"): "met", (6, "tiered ÷ UVA"): "missed", (7, ""): "met",
                        (8, ""): "report only", (9, "no pipeline, PCIe bytes"): "met",
                        (9, "no pipeline, epoch time"): "missed",
                        (10, ""): "not computed here"}
    assert _row(table, 1, "gpu sampler")["value"] == pytest.approx(12.0)
    assert _row(table, 2, "uva sampler")["value"] == pytest.approx(1.5)
    assert _row(table, 2, "gpu sampler")["measured"] == "0.8 ms (one seed: 0.45 ms of fixed costs, launch-costs.csv)"
    assert _row(table, 2, "uva sampler")["measured"] == "1.5 ms"  # no fixed costs measured over UVA
    assert _row(table, 2, "gpu-cupy sampler")["measured"] == "0.5 ms (one seed: 0.21 ms of fixed costs, launch-costs.csv)"
    assert _row(table, 1, "gpu-cupy sampler")["verdict"] == "met"
    assert _row(table, 3)["value"] == pytest.approx(0.3)  # sample's a + gather's a, in ms; train's left out
    assert _row(table, 3)["setting"] == "papers-s, cuda, gpu sampling (numba kernels)"
    assert _row(table, 4, "cpu sampling, tiered")["value"] == pytest.approx(1.1)
    assert _row(table, 4, "cpu sampling, best")["source"].startswith("runs/fig8.csv")
    assert "best: tiered" in _row(table, 4, "cpu sampling, best")["setting"]  # uva's 2.5 is worse
    assert _row(table, 5)["value"] == 250.0 and _row(table, 5)[gpu_goals.SCORE] == pytest.approx(300 / 250)
    assert _row(table, 6, "UVA ÷ CPU gather")["value"] == pytest.approx(3.0)
    assert _row(table, 6, "tiered ÷ UVA")["value"] == pytest.approx(1.25)
    assert _row(table, 7)["value"] == pytest.approx(-0.5) and "paper -42%" in _row(table, 7)["measured"]
    assert _row(table, 8)["value"] == pytest.approx(20 / 55) and pd.isna(_row(table, 8)[gpu_goals.SCORE])
    assert _row(table, 9, "no pipeline, PCIe bytes")["value"] == pytest.approx(0.8)
    assert _row(table, 9, "no pipeline, epoch time")["measured"] == "1.07 of tiered's (noise)"
    assert _row(table, 9, "pipeline, epoch time", exact=True)["verdict"] == "met"
    assert _row(table, 9, "pipeline, epoch time", exact=True)["value"] == pytest.approx(0.9)
    assert pd.isna(_row(table, 10)["value"])
    assert (table["verdict"] != "not yet run").all()
    judged = table[table["verdict"].isin(["met", "missed"])]
    assert ((judged[gpu_goals.SCORE] >= 1) == (judged["verdict"] == "met")).all()
    text = (folder / "goals.md").read_text()
    assert f"Made by `tierbench report --figure gpu-goals --records {folder}`" in text
    assert f"device {DEVICE} | git 0123456789ab | 2027-01-02T09:05:00+00:00 to 2027-01-02T11:00:00+00:00" in text
    assert "sum of the sample and gather stages' fitted fixed costs per minibatch" in text


def test_partial_epochs_are_named_and_what_cannot_be_judged_honestly_is_not(tmp_path):
    folder = visit(tmp_path)
    table = report(folder)
    for goal, setting in ((6, "UVA ÷ CPU gather"), (6, "tiered ÷ UVA"), (7, "")):
        assert _row(table, goal, setting)["setting"].startswith("first 50 minibatches")  # no whole epochs
    write_costs(folder, sample_a_s=-3e-4)  # a line through the large batches that leaves the small ones below 0
    write_sampler_bench(folder, cpu_threads=2)  # a CPU sampler weaker than the goal's
    profile = _profile(folder)
    store_records(folder / "runs" / "fig10.csv", [  # a second scorer's cell at 25% hot
        {**row, "scorer": "degree"} for row in _epochs(profile, "papers-100m", "tiered", (1.6, 1.6), hot=0.25,
                                                      sampling="gpu", batch_limit=50)])
    table = report(folder)
    fixed = _row(table, 3)
    assert fixed["verdict"] == "not yet run" and "a fitted fixed cost is negative (sample -0.3 ms" in fixed["source"]
    weaker = _row(table, 1, "gpu sampler")
    assert weaker["verdict"] == "report only" and weaker["source"].endswith("the goal's CPU sampler runs on 16")
    several = _row(table, 7)
    assert several["verdict"] == "not yet run" and "2 cells of runs/fig10.csv match one side (scorers degree, wrpr)" \
        in several["source"]


def test_a_build_slower_than_five_minutes_is_missed_with_its_value(tmp_path):
    folder = visit(tmp_path, build_s=400.0)
    row = _row(report(folder), 5)
    assert row["verdict"] == "missed" and row["value"] == 400.0 and row["measured"].startswith("400 s")


def test_a_run_into_a_cache_that_held_papers_100m_times_no_build_but_keeps_the_last_one(tmp_path):
    folder = visit(tmp_path, build_s=250.0)
    state = gpu_suite.read_state(folder)
    build = state["steps"]["datasets-papers-100m"]
    rerun = {**build, "seconds": 4.0, "cache_held": True, "finished": "2027-01-03T09:00:00+00:00"}
    gpu_suite.write_state(folder, {**state, "steps": {"datasets-papers-100m": rerun}})
    row = _row(report(folder), 5)
    assert row["verdict"] == "not yet run" and "into a dataset cache that held it" in row["source"]
    gpu_suite.write_state(folder, {**state, "steps": {"datasets-papers-100m": {**rerun, "earlier_build": build}}})
    row = _row(report(folder), 5)
    assert row["verdict"] == "met" and row["value"] == 250.0 and "finished 2027-01-02T09:05:00" in row["source"]


def test_goals_without_records_say_not_yet_run_and_name_their_step(tmp_path):
    folder = tmp_path / "visit"
    folder.mkdir()
    write_state(folder, 250.0)
    write_sampler_bench(folder)
    table = report(folder, "--out", str(tmp_path / "out"))
    assert _row(table, 5)["verdict"] == "met" and _row(table, 1, "gpu sampler")["verdict"] == "met"
    waiting = table[table["verdict"] == "not yet run"]
    assert set(waiting["goal"]) == {3, 4, 6, 7, 8, 9}
    for row in waiting.itertuples():
        assert row.measured == "not yet run" and pd.isna(row.value)
        assert row.step == gpu_goals.GOALS[row.goal][2] and f"run step {row.step}" in row.source
    assert "--out" in (tmp_path / "out" / "goals.md").read_text()
    assert not (folder / "goals.md").exists()


def test_the_gpu_sampled_cells_missing_are_a_row_of_their_own(tmp_path):
    folder = tmp_path / "visit"
    profile = _profile(folder)
    store_records(folder / "runs" / "fig8.csv", _epochs(profile, "papers-s", "tiered", hot=0.1, gather_s=0.5))
    row = _row(report(folder), 4, "gpu sampling")
    assert row["verdict"] == "not yet run" and "run step fig8-gpu-sampling-papers-s" in row["source"]


def test_the_lookahead_cells_with_the_pipeline_missing_are_a_row_of_their_own(tmp_path):
    folder = tmp_path / "visit"
    profile = _profile(folder)
    store_records(folder / "runs" / "lookahead.csv", [*_epochs(profile, "papers-s", "tiered", hot=0.1),
                                                      *_epochs(profile, "papers-s", "lookahead", hot=0.1, pcie=10)])
    table = report(folder)
    waiting = _row(table, 9, "pipeline", exact=True)
    assert waiting["verdict"] == "not yet run" and "no lookahead cell with the pipeline" in waiting["source"]
    assert "lookahead-pipeline-papers-s" in waiting["source"]
    assert _row(table, 9, "no pipeline, PCIe bytes")["verdict"] == "met"


def test_an_empty_folder_gives_every_goal_not_yet_run(tmp_path):
    table = report(tmp_path)
    assert list(table["goal"]) == list(range(1, 11))  # one row each
    assert (table.loc[table["goal"] != 10, "verdict"] == "not yet run").all()
    assert _row(table, 10)["verdict"] == "not computed here"
    assert f"device none (no records in {tmp_path} yet)" in (tmp_path / "goals.md").read_text()


def test_a_folder_that_does_not_exist_is_one_error_line(tmp_path, capsys):
    assert main(["report", "--figure", "gpu-goals", "--records", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tierbench: error: ") and "nowhere" in err[0]


def test_cpu_records_give_no_bound_and_say_why(tmp_path):
    folder = tmp_path / "visit"
    store_records(folder / "runs" / "fig8.csv", _epochs(_profile(folder), "papers-s", "tiered", hot=0.1,
                                                        device="cpu: Fake CPU"))
    row = _row(report(folder), 4)
    assert row["verdict"] == "not yet run" and "they ran on a CPU" in row["source"]


def test_a_cpu_sweep_of_another_dataset_leaves_the_goals_not_yet_run(tiny, tmp_path):
    folder = tmp_path / "visit"
    assert main(["run", "--experiment", "fig8", "--datasets", "tiny", "--loaders", "uva,tiered", "--epochs", "1",
                 "--warmup", "0", "--device", "cpu", "--runs", str(folder / "runs"), "-q"]) == 0
    row = _row(report(folder), 4)
    assert row["verdict"] == "not yet run" and "no papers-s rows" in row["source"]  # tiny is not papers-s
    assert "run step fig8-papers-s, fig8-gpu-sampling-papers-s" in row["source"]


@pytest.mark.skipif(not FIRST_VISIT.is_dir(), reason="the committed first visit")
def test_the_committed_first_visit_is_judged_where_its_records_allow(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # its records name their machine profile relative to the checkout
    table = report(FIRST_VISIT.relative_to(REPO), "--out", str(tmp_path))
    tiered = _row(table, 4, "cpu sampling, tiered")
    assert tiered["verdict"] == "missed" and tiered["value"] == pytest.approx(2.64, abs=0.01)  # README: 2.64
    assert _row(table, 4, "gpu sampling")["verdict"] == "not yet run"
    assert set(table.loc[table["verdict"] == "not yet run", "goal"]) == {1, 2, 3, 4, 5, 6, 7, 8, 9}
