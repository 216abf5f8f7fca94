"""tierbench costs: the fixed cost of one minibatch per stage, fitted across batch sizes, into the machine profile."""

import json

import numpy as np
import pytest

from suite.cli import main
from suite.errors import BadValue
from suite.experiments import costs as costs_experiment
from suite.experiments.costs import fit_line, read_records
from suite.policies.planner import COSTS_SECTION as SECTION
from suite.policies.planner import GATHER_BY_BATCH


def test_the_line_is_fitted_exactly_where_the_times_lie_on_one():
    rows = np.array([10, 100, 1000, 10_000])
    a, b = fit_line(rows, 2e-4 + 3e-8 * rows)
    assert a == pytest.approx(2e-4) and b == pytest.approx(3e-8)


def test_one_size_cannot_separate_the_fixed_cost_from_the_per_row_cost():
    with pytest.raises(BadValue, match="at least two sizes"):
        fit_line([64, 64, 64], [1.0, 1.1, 0.9])


def _profile(tmp_path):
    assert main(["doctor", "--no-measure", "--out", str(tmp_path / "machines")]) == 0
    (path,) = (tmp_path / "machines").glob("*.json")
    return path


def test_costs_on_tiny_writes_records_and_the_fits_into_the_machine_profile(tiny, tmp_path, capsys, monkeypatch):
    profile = _profile(tmp_path)
    before = json.loads(profile.read_text())
    out = tmp_path / "costs"
    made = []

    def create_loader(*args, **kwargs):
        made.append(real_create_loader(*args, **kwargs))
        monkeypatch.setattr(made[-1], "close", lambda: made.append("closed"))
        return made[0]

    real_create_loader = costs_experiment.create_loader
    monkeypatch.setattr(costs_experiment, "create_loader", create_loader)
    assert main(["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "128", "--repeats", "2",
                 "--machines", str(tmp_path / "machines"), "--out", str(out), "-q"]) == 0
    assert made[1:] == ["closed"]  # a GPU loader's pinned table is released, not left registered once freed
    printed = capsys.readouterr().out
    assert "per sampled edge" in printed and "per input row" in printed and str(profile) in printed
    assert "(tiny, uva, cpu sampling, eager model, batches of 8-128 seeds; gather above nothing (the profile has no " \
           "measured ceilings)):" in printed
    measured = read_records(out)
    table = measured.table
    assert sorted(table["batch_size"].unique()) == [8, 32, 128] and len(table) == 6  # the untimed ones left out
    assert (table["seeds"] == table["batch_size"]).all() and (table["input_rows"] >= table["seeds"]).all()
    assert (table["gather_bound_s"] == 0).all()  # no measured ceilings on a CPU: the line fits the whole gather
    after = json.loads(profile.read_text())
    assert {k: v for k, v in after.items() if k != SECTION} == before  # the doctor's sections are kept as they were
    assert list(after[SECTION]) == ["cpu"]  # under the sampler that drew the minibatches
    costs = after[SECTION]["cpu"]
    assert costs["dataset"] == "tiny" and costs["timed_by"] == "the host clock" and costs["batch_sizes"] == [8, 32, 128]
    assert costs["stages"] == measured.facts["fits"] and set(costs["stages"]) == {"sample", "gather", "train"}
    for stage, column in (("sample", "sampled_edges"), ("gather", "input_rows"), ("train", "input_rows")):
        seconds = table["gather_excess_s"] if stage == "gather" else table[f"{stage}_s"]
        a, b = fit_line(table[column], seconds)
        assert costs["stages"][stage]["a_s"] == pytest.approx(a) and costs["stages"][stage]["b_s"] == pytest.approx(b)
    medians = table.groupby("batch_size")[["input_rows", "gather_excess_s"]].median()
    assert costs[GATHER_BY_BATCH] == [{"batch_size": size, "input_rows": medians.loc[size, "input_rows"],
                                       "excess_s": medians.loc[size, "gather_excess_s"]} for size in (8, 32, 128)]


def test_records_are_fitted_again_into_the_profile_of_the_device_that_measured_them(tiny, tmp_path, capsys):
    profile = _profile(tmp_path)
    out = tmp_path / "costs"
    assert main(["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "--repeats", "2", "--machine",
                 str(profile), "--out", str(out), "-q"]) == 0
    measured = json.loads(profile.read_text())
    emptied = {key: value for key, value in measured.items() if key != SECTION}
    profile.write_text(json.dumps(emptied))
    assert main(["costs", "--from-records", str(out), "--machine", str(profile)]) == 0
    assert json.loads(profile.read_text()) == measured  # what the run that timed them wrote, nothing timed again
    assert f"fitted {out / 'costs.csv'} again into {profile}" in capsys.readouterr().out
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**emptied, "device": "cuda: Other GPU"}))
    for arguments, message in ((["--from-records", str(out), "--machine", str(other)],
                                f"was measured on {measured['device']}, but"),
                               (["--from-records", str(out)], "give it with --machine PATH"),
                               ([], "give --dataset to time its minibatches, or --from-records")):
        status = main(["costs", *arguments])
        error = capsys.readouterr().err
        assert status == 2 and error.startswith("tierbench: error: ") and error.count("\n") == 1, arguments
        assert message in error, arguments
    assert SECTION not in json.loads(other.read_text())


@pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")  # the simulator's hash wraps
def test_costs_sampled_by_the_fused_sampler_say_so_in_the_records_and_the_profile(tiny, tmp_path, capsys):
    """``--sampling gpu``: the fused sampler draws the minibatches (numba's CUDA simulator runs its kernels here), the
    same ones the CPU sampler draws for the same seeds, so the rows and edges counted match a CPU-sampled run's; each
    sampler's fits go into the profile under its name, beside the other's."""
    profile = _profile(tmp_path)
    tables = {}
    for sampling in ("cpu", "gpu"):
        out = tmp_path / sampling
        assert main(["costs", "--dataset", "tiny", "--sampling", sampling, "--batch-sizes", "8", "32", "--repeats", "1",
                     "--machine", str(profile), "--out", str(out), "-q"]) == 0
        sampled = "gpu sampling (numba kernels)" if sampling == "gpu" else "cpu sampling"
        assert f"(tiny, uva, {sampled}, eager model, batches of 8-32 seeds;" in capsys.readouterr().out
        measured = read_records(out)
        assert measured.facts["sampling"] == sampling and f"--sampling {sampling}" in measured.facts["command"]
        kernels = "numba" if sampling == "gpu" else None  # the fused sampler's default kernels
        assert measured.facts["sampler_kernels"] == kernels
        assert ("--sampler-kernels numba" in measured.facts["command"]) == (sampling == "gpu")
        entry = json.loads(profile.read_text())[SECTION][sampling]
        assert entry["sampling"] == sampling and entry["sampler_kernels"] == kernels
        assert entry["stages"] == measured.facts["fits"]
        tables[sampling] = measured.table
    section = json.loads(profile.read_text())[SECTION]
    assert sorted(section) == ["cpu", "gpu"] and section["cpu"]["records"] == str(tmp_path / "cpu" / "costs.csv")
    for column in ("seeds", "sampled_edges", "input_rows"):
        assert tables["gpu"][column].tolist() == tables["cpu"][column].tolist()


def test_costs_refuse_a_sampling_one_process_cannot_time_in_one_line(tiny, tmp_path, capsys):
    profile = _profile(tmp_path)
    status = main(["costs", "--dataset", "tiny", "--sampling", "distributed", "--batch-sizes", "8", "32",
                   "--machine", str(profile), "--out", str(tmp_path / "c"), "-q"])
    error = capsys.readouterr().err
    assert status == 2 and error == "tierbench: error: sampling must be one of cpu, gpu, uva in one process, got " \
                                    "'distributed' (--sampling)\n"
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("options, error", [
    (["--sampling", "cpu", "--sampler-kernels", "cupy"], "--sampler-kernels cupy chooses the fused GPU sampler's "
     "kernels, which cpu sampling does not run: use it with --sampling gpu or uva"),
    (["--sampling", "gpu", "--sampler-kernels", "cupy"], "gpu sampling runs the fused sampler's kernels on a GPU, the "
     "CSR in GPU memory: it needs a CUDA device (--device cuda)")])
def test_costs_refuse_kernels_that_cannot_sample_in_one_line(tiny, tmp_path, capsys, options, error):
    profile = _profile(tmp_path)
    status = main(["costs", "--dataset", "tiny", *options, "--batch-sizes", "8", "32", "--machine", str(profile),
                   "--out", str(tmp_path / "c"), "-q"])
    assert status == 2 and capsys.readouterr().err == f"tierbench: error: {error}\n"
    assert not (tmp_path / "c").exists()


def test_costs_without_a_machine_profile_is_one_line(tiny, tmp_path, capsys):
    status = main(["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "--machines", str(tmp_path / "none"),
                   "--out", str(tmp_path / "c"), "-q"])
    error = capsys.readouterr().err
    assert status == 2 and error.startswith("tierbench: error: ") and error.count("\n") == 1
    assert "run `tierbench doctor` on this machine first" in error and not (tmp_path / "c").exists()


def test_costs_with_one_batch_size_is_one_line(tiny, tmp_path, capsys):
    profile = _profile(tmp_path)
    status = main(["costs", "--dataset", "tiny", "--batch-sizes", "64", "--repeats", "1", "--machine", str(profile),
                   "--out", str(tmp_path / "c"), "-q"])
    error = capsys.readouterr().err
    assert status == 2 and error.startswith("tierbench: error: ") and "at least two sizes" in error
    assert SECTION not in json.loads(profile.read_text())


@pytest.mark.gpu
@pytest.mark.parametrize("sampling", ["cpu", "gpu"])
def test_costs_on_a_gpu_are_timed_by_events_and_fitted_above_the_ceilings_bound(tiny, tmp_path, sampling):
    from suite.policies import planner

    assert main(["doctor", "--out", str(tmp_path / "machines")]) == 0
    (profile,) = (tmp_path / "machines").glob("*.json")
    assert main(["costs", "--dataset", "tiny", "--device", "cuda", "--sampling", sampling, "--batch-sizes", "8", "64",
                 "512", "--repeats", "3", "--operators", "1", "--machine", str(profile), "--out", str(tmp_path / "c"),
                 "-q"]) == 0
    costs = json.loads(profile.read_text())[SECTION][sampling]
    assert costs["timed_by"] == "CUDA events on the stage's stream" and costs["gather_above"] == planner.ABOVE_BOUND
    assert costs["sampling"] == sampling
    table = read_records(tmp_path / "c").table
    assert (table["gather_bound_s"] > 0).all() and (table["gather_s"] > 0).all()
    assert planner.machine(profile, sampling=sampling).minibatch_costs == (costs["stages"]["gather"]["a_s"],
                                                                           costs["stages"]["gather"]["b_s"])
    from suite.experiments.costs import read_operators

    operators = read_operators(tmp_path / "c").table
    train = operators[operators["stage"] == "train"]
    assert train["device_us"].sum() > 0 and train["kernels"].sum() > 0  # the kernels of the step, on the GPU's clock
    gather = operators[operators["stage"] == "gather"]
    assert gather["kernels"].sum() >= 1  # the gather's own kernel at least


def test_costs_of_the_tiered_loader_profile_each_stages_operators_and_draw_them(tiny, tmp_path, capsys):
    """``--loader tiered --hot-fraction 0.25 --operators 2``: the timed minibatches gather through a hot tier of the
    dataset reordered by the default scorer, two more of each size run under the profiler, and the report draws both;
    a later run without ``--operators`` leaves no operators of the earlier one beside its records."""
    from suite.experiments.costs import read_operators
    from suite.measure.operators import OUTSIDE_OPERATORS

    profile = _profile(tmp_path)
    out = tmp_path / "c"
    assert main(["costs", "--dataset", "tiny", "--loader", "tiered", "--hot-fraction", "0.25", "--batch-sizes", "8",
                 "32", "--repeats", "1", "--operators", "2", "--machine", str(profile), "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "using --scorer wrpr" in printed and "(tiny, tiered at 25% hot, cpu sampling" in printed
    measured = read_records(out)
    assert measured.facts["hot_fraction"] == 0.25 and measured.facts["scorer"] == "wrpr"
    assert "--hot-fraction 0.25 --scorer wrpr" in measured.facts["command"] and "--operators 2" in measured.facts[
        "command"]
    assert (measured.table["hit_rows"] > 0).any()  # the hot tier served some of the rows
    assert json.loads(profile.read_text())[SECTION]["cpu"]["hot_fraction"] == 0.25
    operators = read_operators(out)
    table = operators.table
    assert sorted(table["batch_size"].unique()) == [8, 32]
    assert list(dict.fromkeys(table["stage"])) == ["sample", "gather", "train"]
    for (size, stage), rows in table.groupby(["batch_size", "stage"]):
        assert (rows["operator"] == OUTSIDE_OPERATORS).sum() == 1, (size, stage)
        assert rows["calls"].sum() > 0 and (rows["host_us"] >= 0).all()
    assert table["device_us"].isna().all()  # a CPU: no device profiled
    assert (table[table["stage"] == "train"]["operator"] == "aten::linear").any()
    for name in ("costs.md", "costs.png", "costs-operators.csv", "costs-operators.png"):
        assert (out / name).is_file(), name
    report = (out / "costs.md").read_text()
    assert "## Operators per stage" in report and "gathered by tiered at 25% hot" in report
    assert main(["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "--repeats", "1", "--machine",
                 str(profile), "--out", str(out), "-q"]) == 0
    assert read_operators(out) is None and not (out / "costs-operators.json").exists()
    assert not (out / "costs-operators.png").exists()
    assert "## Operators" not in (out / "costs.md").read_text()


def test_a_hot_fraction_for_a_loader_without_a_hot_tier_is_ignored_with_a_warning(tiny, tmp_path, capsys):
    profile = _profile(tmp_path)
    assert main(["costs", "--dataset", "tiny", "--hot-fraction", "0.5", "--batch-sizes", "8", "32", "--repeats", "1",
                 "--machine", str(profile), "--out", str(tmp_path / "c"), "-q"]) == 0
    assert "tierbench: warning: --hot-fraction 0.5 is ignored: loader uva has no hot tier" in capsys.readouterr().err
    assert read_records(tmp_path / "c").facts["hot_fraction"] == 0.0


def test_a_stages_totals_count_its_operators_and_all_its_device_work():
    import pandas as pd

    from suite.figures.costs import stage_totals
    from suite.measure.operators import OUTSIDE_OPERATORS

    rows = [(8, "gather", "aten::index_select", 2.0, 30.0, 8.0, 2.0),
            (8, "gather", "cuLaunchKernel", 1.0, 5.0, 0.0, 0.0),
            (8, "gather", OUTSIDE_OPERATORS, 0.0, 65.0, 12.0, 1.0), (8, "train", "aten::linear", 3.0, 40.0, 9.0, 3.0),
            (8, "train", OUTSIDE_OPERATORS, 0.0, 60.0, 0.0, 0.0)]
    table = pd.DataFrame(rows, columns=["batch_size", "stage", "operator", "calls", "host_us", "device_us", "kernels"])
    totals = stage_totals(table).set_index("stage")
    assert totals.loc["gather"].to_dict() == {"batch_size": 8, "operators": 3.0, "host ms in operators": 0.035,
                                              "host ms outside": 0.065, "kernels": 3.0, "device ms": 0.02}
    assert totals.loc["train", "operators"] == 3.0 and totals.loc["train", "device ms"] == 0.009
    cpu = stage_totals(table.assign(device_us=float("nan"), kernels=float("nan")))
    assert cpu["device ms"].isna().all() and cpu["kernels"].isna().all()  # no device profiled: empty, not zero


def test_costs_with_a_compiled_model_train_through_the_graphs_torch_compile_makes(tiny, tmp_path, capsys,
                                                                                   monkeypatch):
    """``--compile``: each step calls the graphs dynamo captured (its "eager" backend here: no code generation on a
    CPU test), one graph for minibatches of every size (dynamic shapes), compiled before any timed minibatch."""
    import torch._dynamo

    from suite.training import trainer

    monkeypatch.setattr(trainer, "COMPILE_BACKEND", "eager")
    torch._dynamo.reset()
    captured = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    profile = _profile(tmp_path)
    try:
        assert main(["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "128", "--repeats", "2", "--compile",
                     "--machine", str(profile), "--out", str(tmp_path / "c"), "-q"]) == 0
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - captured
    finally:
        torch._dynamo.reset()
    assert graphs == 1  # every size through one training graph: nothing compiled again
    printed = capsys.readouterr().out
    assert "(tiny, uva, cpu sampling, compiled model, batches of 8-128 seeds;" in printed
    measured = read_records(tmp_path / "c")
    assert measured.facts["compiled"] is True and "--compile" in measured.facts["command"]
    assert len(measured.table) == 6  # the compiling minibatches are not among the timed ones
    assert SECTION not in json.loads(profile.read_text())  # the profile keeps an eager model's costs: none yet
    assert f"left {profile} as it was: a --compile run writes records only" in printed
    status = main(["costs", "--from-records", str(tmp_path / "c"), "--machine", str(profile)])
    error = capsys.readouterr().err
    assert status == 2 and error.startswith("tierbench: error: ") and error.count("\n") == 1
    assert "timed a model compiled by torch.compile (--compile)" in error
    assert SECTION not in json.loads(profile.read_text())
    assert "trained by the compiled model" in (tmp_path / "c" / "costs.md").read_text()
