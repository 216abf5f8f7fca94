"""The records of a tierbench sar run, read back to be reused or reported: checked step by step and refused in one
line naming the file and the field; reused only for the same settings on the same graph (its fingerprint)."""

import json

import pytest

from suite.cli import main
from suite.experiments import sar

SETTINGS = {"epochs": 2, "hidden": 8, "layers": 3, "lr": 0.01, "seed": 0}
ARGV = ["sar", "--dataset", "tiny", "--workers", "1", "--epochs", "2", "--hidden", "8", "--no-minibatch", "-q"]


def step(epoch, **changes):
    return {"workers": 1, "aggregation": "vanilla", "epoch": epoch, "loss": 1.5,
            "per_worker": [[2e9, 1e9, 0.5, 1e9, 5e8, 0.0, 4096.0]], **changes}


def write_runs(runs, settings, vanilla_steps):
    runs.mkdir(parents=True, exist_ok=True)
    for aggregation in sar.AGGREGATIONS:
        steps = vanilla_steps if aggregation == "vanilla" else [
            {**s, "aggregation": "sar"} for s in [step(0), step(1, accuracy={"valid": 0.5})]]
        sar.records_file(runs, 1, aggregation).write_text(json.dumps({"settings": settings, "steps": steps}))


@pytest.fixture
def launched(monkeypatch):
    runs = []
    monkeypatch.setattr(sar, "launch", lambda argv, workers: runs.append(argv[argv.index("--aggregation") + 1]))
    return runs


@pytest.mark.parametrize("bad, field, says", [
    (step(1, per_worker=None), "steps[1].per_worker", "is not a list of 1 workers' numbers"),
    (step(1, per_worker=[[1.0, "x", 0, 0, 0, 0, 0]]), "steps[1].per_worker[0]", "finite numbers of at least 0"),
    (step(1, per_worker=[[1.0, -5, 0, 0, 0, 0, 0]]), "steps[1].per_worker[0]", "finite numbers of at least 0"),
    (step(1, loss="nan"), "steps[1].loss", "not a finite number"),
    (step(1, workers=3), "steps[1].workers", "is 3, not 1"),
    (step(7), "steps[1].epoch", "is 7, not 1"),
    ({"epoch": 1}, "steps[1]", "is not an object with"),
    (step(1, accuracy={"valid": 7.5}), "steps[1].accuracy", "in [0, 1]"),
])
def test_recorded_steps_with_matching_settings_are_checked_before_reuse(bad, field, says, tiny, tmp_path, capsys,
                                                                          launched):
    runs = tmp_path / "out" / "runs"
    write_runs(runs, sar.run_settings(tiny, **SETTINGS), [step(0), bad])
    status = main([*ARGV, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"tierbench: error: {runs / 'sar-1-vanilla.json'}: {field} ") and says in err, err
    assert launched == []


def test_well_formed_steps_of_the_same_settings_and_graph_are_reused(tiny, tmp_path, capsys, launched):
    write_runs(tmp_path / "out" / "runs", sar.run_settings(tiny, **SETTINGS), [step(0), step(1)])
    assert main([*ARGV, "--out", str(tmp_path / "out")]) == 0 and launched == []


def test_runs_recorded_on_another_graph_are_run_again(tiny, tmp_path, capsys, launched):
    other = {**sar.run_settings(tiny, **SETTINGS), "fingerprint": "another graph"}
    write_runs(tmp_path / "out" / "runs", other, [step(0), step(1)])
    assert main([*ARGV, "--out", str(tmp_path / "out")]) == 2 and launched == ["vanilla"]
    assert "the 1-worker run of vanilla ended without its records" in capsys.readouterr().err
    assert "fingerprint" in sar.run_settings(tiny, **SETTINGS)


def test_report_refuses_a_malformed_run_behind_a_sar_table(tiny, tmp_path, capsys, launched):
    out = tmp_path / "out"
    write_runs(out / "runs", sar.run_settings(tiny, **SETTINGS), [step(0), step(1)])
    assert main([*ARGV, "--out", str(out)]) == 0
    sar.records_file(out / "runs", 1, "vanilla").write_text(json.dumps([step(0), step(1, per_worker="x")]))
    status = main(["report", "--figure", "sar", "--records", str(out), "--out", str(tmp_path / "again")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "steps[1].per_worker is not a list" in err, err


def test_more_workers_than_nodes_is_one_line(tiny, tmp_path, capsys, launched):
    status = main(["sar", "--dataset", "tiny", "--workers", "5000", "--no-minibatch", "-q", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "cannot split 4,096 nodes into 5000 non-empty parts; give fewer workers (--workers)" in err


def test_a_worker_loads_the_dataset_once_and_records_the_fingerprint_of_the_one_it_trained_on(tiny, tmp_path,
                                                                                                 monkeypatch):
    import torch.distributed as dist

    from suite.datasets.partitions import cached_partition

    cached_partition(tiny, 1, 0)
    store = tmp_path / "store"
    monkeypatch.setattr(sar.distributed, "init_process_group", lambda device, timeout_s: dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=0, world_size=1))
    loads, load = [], sar.load_dataset
    monkeypatch.setattr(sar, "load_dataset", lambda name, progress: loads.append(name) or load(name, progress=progress))
    settings = {**SETTINGS, "epochs": 1}
    sar.run_workers("tiny", tmp_path / "runs", "vanilla", **settings, timeout_s=60)
    assert loads == ["tiny"]
    recorded = json.loads(sar.records_file(tmp_path / "runs", 1, "vanilla").read_text())
    assert recorded["settings"] == sar.run_settings(tiny, **settings)
