"""The lab end to end: PreSC by hand, the sweep's hit ratio replayed exactly, and the two commands on ``tiny``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from suite.cli import main
from suite.datasets.reordered import load_reordered
from suite.experiments import plan
from suite.policies.lab import POLICIES, presc_order
from suite.policies.static import replay_static
from suite.policies.trace import record_trace
from suite.sweep.records import read_records
from suite.sweep.run import run_sweep
from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment
from tiering.features.placement import hot_rows
from tiering.graph.csr import CSRGraph


def test_presc_with_one_presampled_epoch_matches_a_hand_count():
    """A star: leaves 0, 1, 3 and 4 around node 2; training seeds 0, 1 and 3, one per minibatch, one hop of fanout 4
    (a leaf's whole list).  Every minibatch reads {leaf, 2}, whatever the seed: node 2 three times, leaves 0, 1 and
    3 once, leaf 4 never.  PreSC orders 2, 0, 1, 3, 4; one row cached serves 3 of the 6 reads, two rows 4."""
    leaves = torch.tensor([0, 1, 3, 4])
    hub = torch.full((4,), 2)
    graph = CSRGraph.from_edges(torch.cat([leaves, hub]), torch.cat([hub, leaves]), 5)
    train = torch.tensor([0, 1, 3])
    presample = record_trace(graph, train, (4,), 1, seed=1000, epochs=1, progress=False)
    assert presc_order(presample).tolist() == [2, 0, 1, 3, 4]
    replayed = record_trace(graph, train, (4,), 1, seed=0, epochs=2, progress=False)
    one, two = replay_static("presc", replayed.counts(), presc_order(presample), [1, 2], np.ones(5, np.int64))
    assert one.hits.tolist() == [3, 3] and two.hits.tolist() == [4, 4]
    assert one.accesses.tolist() == [6, 6] and one.miss_bytes.tolist() == [3, 3]


HOT = [0.05, 0.25]
FANOUTS = (10, 5)
BATCH = 64
EPOCHS = 2


def test_replaying_the_tiered_sweeps_trace_gives_its_measured_hit_ratio(tmp_path):
    """The sweep trains on the dataset reordered by wR-PR, hottest first, so its hot tier at fraction h is rows
    [0, H): the wR-PR order at capacity H.  The trace of the same minibatches replayed there gives the same hits."""
    path, _ = run_sweep("trace", tmp_path, datasets=["tiny"], loaders=["tiered"], hot_fractions=HOT, fanouts=[FANOUTS],
                        epochs=EPOCHS, warmup=0, batch_size=BATCH, progress=False)
    records = read_records(path)
    dataset = load_reordered("tiny", "wrpr", progress=False)
    trace = record_trace(dataset.graph, dataset.splits["train"], FANOUTS, BATCH, epochs=EPOCHS, progress=False)
    capacities = [hot_rows(dataset.num_nodes, h) for h in HOT]
    replays = replay_static("wrpr", trace.counts(), np.arange(dataset.num_nodes), capacities,
                            np.ones(dataset.num_nodes, np.int64))
    for fraction, replay in zip(HOT, replays):
        measured = records[records["hot_fraction"] == fraction].sort_values("epoch")
        assert measured["rows_gathered"].tolist() == replay.accesses.tolist()
        assert measured["hit_ratio"].tolist() == pytest.approx(replay.hit_ratio.tolist(), rel=1e-12, abs=0)
    assert 0 < replays[0].overall_hit_ratio < replays[1].overall_hit_ratio < 1


@pytest.fixture(scope="module")
def policies_run(tiny, cache_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("policies")
    mp = pytest.MonkeyPatch()
    mp.setenv("TIERBENCH_DATA", str(cache_dir))
    try:
        code = main(["policies", "--dataset", "tiny", "--epochs", "2", "--batch-size", "64", "--fanout", "5,3",
                     "--out", str(out), "-q"])
    finally:
        mp.undo()
    return code, out


def test_tierbench_policies_writes_every_policy_at_every_capacity(policies_run):
    code, out = policies_run
    assert code == 0
    table = pd.read_csv(out / "policies.csv")
    labels = [spec.label for spec in POLICIES.values()]
    assert list(dict.fromkeys(table["policy"])) == labels
    assert table.groupby("policy")["capacity (%)"].nunique().eq(9).all()
    belady = table[table["policy"] == "Belady MIN"].set_index("capacity (rows)")["hit ratio"]
    for _, rows in table.groupby("policy"):
        assert (rows.set_index("capacity (rows)")["hit ratio"] <= belady.loc[rows["capacity (rows)"]] + 1e-12).all()
        replayed = {spec.label for spec in POLICIES.values() if spec.kind in ("dynamic", "lookahead")}
        assert rows["hit ratio"].is_monotonic_increasing or rows["policy"].iloc[0] in replayed
    assert (table.loc[table["policy"] == "Belady MIN", "of Belady"] == 1).all()
    text = (out / "policies.md").read_text()
    assert "Replay speed" in text and "MiB per epoch" in text and "device cpu" in text
    window_table = text.split("## What a lookahead window costs")[1]
    windows = [line.split("|")[1].strip() for line in window_table.splitlines() if line.startswith("|")][2:]
    assert windows == ["1", "4", "16", "64", "256"]  # one row per window, with the ids it holds and its lead
    epochs = pd.read_csv(out / "policies-epochs.csv")
    assert set(epochs["epoch"]) == {0, 1} and {"device", "git_revision", "time"} <= set(epochs.columns)
    assert (out / "policies.png").stat().st_size > 0


def test_tierbench_plan_says_its_numbers_are_nominal_without_a_profile(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no results/machines here
    code = main(["plan", "--dataset", "tiny", "--gpu-memory", "2GB", "--batch-size", "64", "--fanout", "5,3",
                 "--out", str(tmp_path / "plan"), "-q"])
    assert code == 0
    text = (tmp_path / "plan" / "plan.md").read_text()
    assert "NOMINAL link numbers, not measured" in text and "every one of its 4,096 rows fits" in text
    assert "nothing to compare with" in text
    table = pd.read_csv(tmp_path / "plan" / "plan.csv")
    assert table["capacity (%)"].max() == pytest.approx(100)  # 2 GB holds all of tiny
    assert "Recommended for tiny" in capsys.readouterr().out


def test_tierbench_plan_uses_a_measured_profile_when_given_one(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    profile = tmp_path / "gpu.json"
    profile.write_text(json.dumps({"device": "cuda: Test GPU", "time": "2026-11-22T00:00:00+00:00", "ceilings": {
        "zero_copy_read_bytes_per_s": 50e9, "d2d_copy_bytes_per_s": 1500e9, "h2d_memcpy_bytes_per_s": 55e9}}))
    code = main(["plan", "--dataset", "tiny", "--gpu-memory", "24GiB", "--batch-size", "64", "--fanout", "5,3",
                 "--machine", str(profile), "--out", str(tmp_path / "plan"), "-q"])
    assert code == 0
    text = (tmp_path / "plan" / "plan.md").read_text()
    assert "measured by `tierbench doctor`" in text and "50.0 GB/s" in text and "NOMINAL" not in text
    assert "No GPU epochs of tiny" in text


@pytest.mark.parametrize("argv, message", [
    (["--gpu-memory", "lots"], "a memory size is a number and a unit"),
    (["--gpu-memory", "0.5GB"], "leaves no room for a cache"),
    (["--gpu-memory", "40GB", "--machine", "no-such.json"], "does not exist"),
])
def test_bad_plans_are_refused_in_one_line(tiny, tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--dataset", "tiny", "--batch-size", "64", "--fanout", "5,3", "-q", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tierbench: error:") and message in err and "\n" not in err


def _claiming(path, **claims):
    """Rewrite the trace at ``path`` so that its meta claims ``claims``, its ids left as they are."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = np.array(json.dumps({**meta, **claims}, sort_keys=True))
    path.unlink()
    np.savez_compressed(path, **arrays)


@pytest.mark.parametrize(("claims", "named"), [
    ({"num_nodes": 10**9}, "num_nodes 1000000000, not 4096"),  # before: allocated until the OOM killer came
    ({"dataset": "tiny-rmat"}, "dataset 'tiny-rmat', not 'tiny'"),
    ({"fingerprint": "another graph"}, "fingerprint 'another graph'"),
    ({"epochs": 7}, "epochs 7, not 1"),
    ({"batch_size": 3}, "batch_size 3"),
    ({"seed": 9}, "seed 9"),
])
def test_a_trace_that_claims_another_recording_is_refused_before_anything_is_allocated(tiny, tmp_path, capsys,
                                                                                     claims, named):
    argv = ["plan", "--dataset", "tiny", "--gpu-memory", "1.2GB", "--trace-dir", str(tmp_path / "traces"),
            "--out", str(tmp_path / "plan"), "-q"]
    assert main(argv) == 0
    traces = sorted((tmp_path / "traces").glob("tiny-*.npz"))  # the replayed epochs and PreSC's pre-sampled one
    assert len(traces) == 2
    for trace in traces:
        _claiming(trace, **claims)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and any(err[0].startswith(f"tierbench: error: {trace} was recorded with {named}")
                                 for trace in traces), err


def plan_printing_to(printed: str, argv: list[str]) -> None:
    """``tierbench`` with ``argv``, what it prints going to the file ``printed``; exits with its status."""
    import contextlib

    with open(printed, "w") as out, contextlib.redirect_stdout(out):
        status = main(argv)
    sys.exit(status)


def test_two_plans_into_one_folder_take_turns_and_each_prints_its_own(tiny, tmp_path):
    """Two `tierbench plan` processes with the same --out: each prints the plan it made, not the other's."""
    budgets = ["1.2GB", "2GB"]
    context = forkserver_context()
    runs = [context.Process(target=in_callers_environment(plan_printing_to), args=(
        str(tmp_path / f"printed-{budget}.txt"),
        ["plan", "--dataset", "tiny", "--gpu-memory", budget, "--out", str(tmp_path / "plan"), "-q"]))
        for budget in budgets]
    for run in runs:
        run.start()
    for budget, run in zip(budgets, runs):
        run.join(300)
        assert run.exitcode == 0
        out = (tmp_path / f"printed-{budget}.txt").read_text()
        (recommendation,) = [line for line in out.splitlines() if line.startswith("Recommended for tiny")]
        assert recommendation.startswith(f"Recommended for tiny in {budget} of GPU memory"), out
        assert f"in {budget} of GPU memory" in out.split("wrote ")[0]  # the table it printed is its own too


def test_tierbench_plan_adds_the_profiles_fixed_cost_of_a_minibatch_to_every_projection(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ceilings = {"zero_copy_read_bytes_per_s": 50e9, "d2d_copy_bytes_per_s": 1500e9}
    plain, costed = tmp_path / "plain.json", tmp_path / "costed.json"
    profile = {"device": "cuda: Test GPU", "time": "2026-11-22T00:00:00+00:00", "ceilings": ceilings}
    plain.write_text(json.dumps(profile))
    a, b = 0.9e-3, 7e-9
    costed.write_text(json.dumps({**profile, "minibatch_costs": {"gpu": {
        "sampling": "gpu", "gather_above": "the bound of the profile's ceilings",
        "stages": {"gather": {"a_s": a, "b_s": b, "per": "input row"}}}}}))
    plans = {}
    for name, path, sampling in (("plain", plain, "gpu"), ("costed", costed, "gpu"), ("cpu", costed, "cpu")):
        assert main(["plan", "--dataset", "tiny", "--gpu-memory", "24GiB", "--batch-size", "64", "--fanout", "5,3",
                     "--sampling", sampling, "--machine", str(path), "--out", str(tmp_path / name), "-q"]) == 0
        plans[name] = plan.read_records(tmp_path / name)[0]
    assert plans["cpu"].facts["minibatch_costs"] is None and plans["cpu"].facts["fixed_s_per_epoch"] == 0
    assert plans["cpu"].facts["sampling"] == "cpu" and "--sampling" not in plans["cpu"].facts["command"]
    assert "the profile's fixed costs are not added: its fixed costs were timed on minibatches sampled on gpu, not " \
           "on cpu" in (tmp_path / "cpu" / "plan.md").read_text()
    assert plans["cpu"].table[plan.PROJECTED].tolist() == plans["plain"].table[plan.PROJECTED].tolist()
    facts = plans["costed"].facts
    assert facts["sampling"] == "gpu" and "--sampling gpu" in facts["command"] and facts["costs_note"] == ""
    assert plans["plain"].facts["minibatch_costs"] is None and plans["plain"].facts["fixed_s_per_epoch"] == 0
    assert facts["minibatch_costs"] == [a, b] and facts["fixed_s_per_epoch"] > a * facts["batches_per_epoch"]
    added = plans["costed"].table[plan.PROJECTED] - plans["plain"].table[plan.PROJECTED]
    assert added.to_numpy() == pytest.approx(facts["fixed_s_per_epoch"])  # the same for every policy and capacity
    assert "projected bound + fixed cost" in facts["recommendation"]
    text = (tmp_path / "costed" / "plan.md").read_text()
    assert "0.900 ms per minibatch + 7.00 ns per row" in text
    assert "tierbench costs" not in (tmp_path / "plain" / "plan.md").read_text()


def test_tierbench_plan_refuses_a_sampler_in_one_line(tiny, tmp_path, capsys):
    status = main(["plan", "--dataset", "tiny", "--gpu-memory", "24GiB", "--sampling", "distributed",
                   "--out", str(tmp_path / "p"), "-q"])
    error = capsys.readouterr().err
    assert status == 2 and error.startswith("tierbench: error: sampling must be one of cpu, gpu, uva in one process")
    assert len(error.strip().splitlines()) == 1 and not (tmp_path / "p").exists()
