"""tierbench gpu-suite on the CPU: the step runner is replaced, except where the real doctor runs."""

import json
import math
import sys
from pathlib import Path

import filelock
import pytest
import torch

from suite.cli import main
from suite.errors import BadValue
from suite.io import atomic
from suite.sweep import gpu_suite

STEPS = ["doctor", "gpu-tests", "gpubench", "datasets-papers-s", "datasets-products-s", "samplerbench-papers-s",
         "fig8-papers-s", "fig8-products-s", "fig8-pipeline-papers-s", "fig8-pipeline-products-s", "fig10-papers-s",
         "fig10-products-s", "fig8-gpu-sampling-papers-s", "lookahead-papers-s", "lookahead-pipeline-papers-s",
         "costs-papers-s",
         "costs-cpu-sampling-papers-s", "costs-compiled-papers-s", "costs-tiered-papers-s",
         "datasets-papers-xs-gpu-built", "datasets-papers-100m", "paper-scale-sweeps",
         "paper-scale-reach", "report-fig8", "report-fig10", "report-lookahead", "report-goals"]


IS_BEGUN = gpu_suite._is_begun
"""Whether the cache holds a dataset's base entry, as the suite asks it (the tests' ``cache`` fixture replaces it)."""
BESIDE_GPU_TESTS = ("datasets-papers-s", "datasets-products-s")
"""The steps that run alongside gpu-tests, from a thread of their own: they start together with it."""


def ran(names: list[str]) -> list[str]:
    """``names`` in the order steps ran, with gpu-tests and the steps run alongside it put in plan order: which of
    them the fake runner saw first is up to the threads."""
    group = [name for name in names if name == "gpu-tests" or name in BESIDE_GPU_TESTS]
    if not group or "gpu-tests" not in group:
        return list(names)
    first = min(names.index(name) for name in group)
    rest = [name for name in names if name not in group]
    return rest[:first] + sorted(group, key=STEPS.index) + rest[first:]


RUN_ORDER = ran([name for name in STEPS if name not in BESIDE_GPU_TESTS][:2] + list(BESIDE_GPU_TESTS)
                + [name for name in STEPS if name not in BESIDE_GPU_TESTS][2:])
"""The order a whole suite runs its steps in: the datasets steps beside gpu-tests, so before gpubench."""


class FakeRunner:
    """Records each step's command, writes its log, and returns the exit status set for that step (default 0)."""

    def __init__(self, statuses=None):
        self.statuses = statuses or {}
        self.names = []
        self.environments = {}
        self.timeouts = {}
        self.commands = {}

    def __call__(self, command, log, timeout_s, *, header="", environment=None):
        name = log.stem
        self.names.append(name)
        self.commands[name] = command
        self.environments[name] = environment
        self.timeouts[name] = timeout_s
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(command)}\n{header}\nfake output of {name}\n")
        return self.statuses.get(name, 0)


@pytest.fixture(autouse=True)
def cache(monkeypatch):
    """The datasets in this machine's dataset cache, by name: every one (None) unless a test says which."""
    from suite.datasets import reordered

    held = {"names": None}
    monkeypatch.setattr(reordered, "is_prepared",
                        lambda name, scorer: scorer == gpu_suite.SCORER and (held["names"] is None
                                                                            or name in held["names"]))
    monkeypatch.setattr(gpu_suite, "_is_begun", lambda name: held["names"] is None or name in held["names"])
    return held


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(gpu_suite, "visible_gpu", lambda: "cuda: Fake GPU 80GB")


@pytest.fixture
def runner(monkeypatch):
    fake = FakeRunner()
    monkeypatch.setattr(gpu_suite, "run_command", fake)
    return fake


def _suite(tmp_path, lines, **options):
    return gpu_suite.run_suite(tmp_path / "gpu", echo=lines.append, **options)


def _state(tmp_path, device="cuda-fake-gpu-80gb"):
    return json.loads((tmp_path / "gpu" / device / gpu_suite.STATE_FILE).read_text())


def test_the_dry_run_lists_every_step_in_order_with_its_command(tmp_path, fake_gpu, runner):
    lines = []
    assert _suite(tmp_path, lines, dry_run=True) == 0
    assert runner.names == [] and not (tmp_path / "gpu").exists()  # nothing ran, nothing was written
    steps = [line.split(":")[0] for line in lines[1:-1] if not line.startswith(" ")]
    assert steps == STEPS
    text = "\n".join(lines)
    assert f"results in {tmp_path / 'gpu' / 'cuda-fake-gpu-80gb'}" in lines[0]
    assert text.count("would run (not done yet") == len(STEPS)
    assert "datasets-papers-s: would run (not done yet; alongside gpu-tests)" in text
    folder = tmp_path / "gpu" / "cuda-fake-gpu-80gb"
    assert f"-m suite.cli doctor --out {tmp_path / 'machines'}" in text
    assert "-m pytest" in text and "test_loaders.py" in text and "test_multi_gpu.py" in text
    assert f"run --experiment fig8 --datasets papers-s --device cuda --runs {folder / 'runs'} -q --regime unscaled --pipeline" in text
    assert f"report --experiment fig10 --runs {folder / 'runs'} --out {folder / 'fig10'}" in text
    assert (f"samplerbench --dataset papers-s --device cuda --out {folder / 'sampler-bench'} -q" in text)
    assert (f"run --experiment fig8 --datasets papers-s --loaders cpu-gather,uva,degree-cache,tiered --sampling gpu "
            f"--device cuda --runs {folder / 'runs'} -q --regime unscaled" in text)


def test_the_gpu_tests_put_the_loader_sampling_and_multi_gpu_files_first():
    paths = [Path(path) for path in gpu_suite.gpu_test_paths()]
    assert [path.name for path in paths[:3]] == ["test_loaders.py", "test_neighbors.py", "test_multi_gpu.py"]
    assert all(path.is_file() for path in paths[:3]) and paths[3] == Path(__file__).parents[2]
    assert all("pytest.mark.gpu" in path.read_text() for path in paths[:3])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skips made where no GPU is visible")
def test_on_a_cpu_only_the_doctor_runs_and_every_skip_says_why(tmp_path, runner):
    lines = []
    assert _suite(tmp_path, lines) == 0
    assert runner.names == ["doctor"]
    for name in STEPS[1:]:
        assert f"[skip] {name}: no CUDA GPU visible" in lines
    folder = next((tmp_path / "gpu").iterdir())
    assert folder.name.startswith("cpu-")  # never the folder a GPU's results go into


def test_every_step_runs_once_then_a_rerun_skips_the_done_ones(tmp_path, fake_gpu, runner):
    lines = []
    assert _suite(tmp_path, lines) == 0
    assert ran(runner.names) == RUN_ORDER
    state = _state(tmp_path)
    assert all(state["steps"][name]["status"] == "done" and state["steps"][name]["rc"] == 0 for name in STEPS)
    assert state["device"] == "cuda: Fake GPU 80GB"
    assert "fake output of gpubench" in open(state["steps"]["gpubench"]["log"]).read()
    assert lines[-1].splitlines()[0].split() == ["step", "status", "seconds", "output"]

    runner.names.clear()
    lines.clear()
    assert _suite(tmp_path, lines) == 0
    assert runner.names == []
    for name in STEPS:
        finished = state["steps"][name]["finished"]
        assert f"[skip] {name}: done at {finished}, rc 0; --rerun {name} to redo" in lines


def test_rerun_redoes_one_step_and_the_report_built_on_it(tmp_path, fake_gpu, runner):
    assert _suite(tmp_path, []) == 0
    runner.names.clear()
    lines = []
    assert _suite(tmp_path, lines, rerun=["fig8-papers-s"]) == 0
    assert runner.names == ["fig8-papers-s", "report-fig8", "report-goals"]
    assert any(line.startswith("[run] fig8-papers-s (--rerun asked for it") for line in lines)
    assert runner.commands["fig8-papers-s"][-2:] == ("unscaled", "--rerun")  # a sweep measures its cells again
    assert "--rerun" not in runner.commands["report-fig8"]
    assert _state(tmp_path)["steps"]["fig8-papers-s"]["command"][-1] == "--rerun"
    runner.names.clear()
    assert _suite(tmp_path, []) == 0 and runner.names == []
    dry = []
    assert _suite(tmp_path, dry, dry_run=True, rerun=["fig8-papers-s", "gpubench"]) == 0
    commands = [line for line in "\n".join(dry).splitlines() if line.startswith("    $ ")]
    assert commands[STEPS.index("fig8-papers-s")].endswith("--regime unscaled --rerun")
    assert commands[STEPS.index("gpubench")].endswith("microbench -q")  # it measures afresh whenever it runs
    assert any(line.startswith("[run] report-fig8 (its input fig8-papers-s was redone at") for line in lines)
    assert any(line.startswith("[run] report-goals (its input fig8-papers-s was redone at") for line in lines)


def test_a_failed_step_skips_only_the_steps_that_need_it(tmp_path, fake_gpu, runner):
    runner.statuses = {"datasets-papers-s": 1, "gpu-tests": 1}
    lines = []
    assert _suite(tmp_path, lines) == 1
    expected = [name for name in RUN_ORDER if (not name.endswith("-papers-s") or name == "datasets-papers-s")
                and name != "report-lookahead"]  # its one sweep is papers-s's
    assert ran(runner.names) == expected  # the products-s sweeps, gpubench and the reports of them still ran
    for name in ("samplerbench-papers-s", "fig8-papers-s", "fig8-pipeline-papers-s", "fig10-papers-s",
                 "fig8-gpu-sampling-papers-s", "lookahead-papers-s", "lookahead-pipeline-papers-s", "costs-papers-s",
                 "costs-cpu-sampling-papers-s", "costs-compiled-papers-s", "costs-tiered-papers-s"):
        assert f"[skip] {name}: its input datasets-papers-s is not done (failed)" in lines
    assert any(line.startswith("[failed] gpu-tests: rc 1") and "fake output of gpu-tests" in line for line in lines)
    assert _state(tmp_path)["steps"]["datasets-papers-s"]["status"] == "failed"

    runner.statuses, runner.names = {}, []
    lines.clear()
    assert _suite(tmp_path, lines) == 0  # the failed steps run again, then what waited on them
    assert ran(runner.names) == ["gpu-tests", "datasets-papers-s", "samplerbench-papers-s", "fig8-papers-s",
                            "fig8-pipeline-papers-s", "fig10-papers-s", "fig8-gpu-sampling-papers-s",
                            "lookahead-papers-s", "lookahead-pipeline-papers-s", "costs-papers-s",
                            "costs-cpu-sampling-papers-s", "costs-compiled-papers-s", "costs-tiered-papers-s",
                            "report-fig8",
                            "report-fig10", "report-lookahead",
                            "report-goals"]
    assert any(line.startswith("[run] gpu-tests (it failed at") and "with rc 1; running it again" in line
               for line in lines)


def test_a_timed_out_step_is_recorded_so(tmp_path, fake_gpu, runner):
    runner.statuses = {"gpubench": gpu_suite.TIMEOUT_RC}
    assert _suite(tmp_path, []) == 1
    assert _state(tmp_path)["steps"]["gpubench"]["status"] == "timed out"


def test_the_state_file_survives_a_crash_while_it_is_written(tmp_path, fake_gpu, runner, monkeypatch):
    assert _suite(tmp_path, []) == 0
    path = tmp_path / "gpu" / "cuda-fake-gpu-80gb" / gpu_suite.STATE_FILE
    before = path.read_text()

    def crash(*args):
        raise KeyboardInterrupt  # the power goes out between writing the new state and renaming it

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        _suite(tmp_path, [], rerun=["doctor"])
    assert path.read_text() == before and json.loads(before)["steps"]["doctor"]["status"] == "done"
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_step_interrupted_by_a_crash_runs_again(tmp_path, fake_gpu, monkeypatch):
    def crash_in_gpubench(command, log, timeout_s, **options):
        if log.stem == "gpubench":
            raise KeyboardInterrupt
        return 0

    monkeypatch.setattr(gpu_suite, "run_command", crash_in_gpubench)
    with pytest.raises(KeyboardInterrupt):
        _suite(tmp_path, [])
    state = _state(tmp_path)
    assert state["steps"]["gpubench"]["status"] == "running" and state["steps"]["gpu-tests"]["status"] == "done"
    runner = FakeRunner()
    monkeypatch.setattr(gpu_suite, "run_command", runner)
    lines = []
    assert _suite(tmp_path, lines) == 0
    assert runner.names == RUN_ORDER[RUN_ORDER.index("gpubench"):]  # the datasets steps ran beside gpu-tests
    assert any(line.startswith("[run] gpubench (it was running (since") for line in lines)


def test_a_dry_run_after_a_failure_shows_what_would_run_again(tmp_path, fake_gpu, runner):
    runner.statuses = {"datasets-products-s": 1}
    _suite(tmp_path, [])
    lines = []
    assert _suite(tmp_path, lines, dry_run=True) == 0
    text = "\n".join(lines)
    assert "datasets-products-s: would run (it failed at" in text
    assert "fig8-products-s: would run (not done yet)" in text
    assert "report-fig8: would run (its input fig8-products-s runs first)" in text
    assert "fig8-papers-s: would skip (done at" in text


def _typed_clock(monkeypatch):
    """Each step the suite runs takes its typed time on a fake clock, which those run beside another step leave
    alone (the tests below run none beside a step that would take less long); returns the names of the steps run."""
    import threading

    clock, names = [0.0], []

    def runner(command, log, timeout_s, **options):
        names.append(log.stem)
        if threading.current_thread() is threading.main_thread():
            clock[0] += gpu_suite.TYPED_S[log.stem]
        return 0

    monkeypatch.setattr(gpu_suite, "run_command", runner)
    monkeypatch.setattr(gpu_suite.time, "monotonic", lambda: clock[0])
    return names


def _table_rows(lines) -> dict:
    """The summary table's rows: step -> its status's first word."""
    table = next(line for line in reversed(lines) if line.startswith("step "))
    return {row.split()[0]: row.split()[1] for row in table.splitlines()[1:]}


def test_a_step_that_would_pass_the_time_budget_waits_and_later_steps_that_fit_run(tmp_path, fake_gpu, monkeypatch):
    typed, names = gpu_suite.TYPED_S, _typed_clock(monkeypatch)
    spare = min(typed[name] for name in typed if name.startswith("datasets-")) - 1
    budget = (typed["doctor"] + typed["gpubench"] + spare) / 60  # neither gpu-tests nor a datasets step fits after doctor
    lines = []
    assert _suite(tmp_path, lines, max_minutes=budget) == 0  # steps left for later are no failure
    assert names == ["doctor", "gpubench"]
    later = f"[later] gpu-tests: its ~{typed['gpu-tests']} s, typed would pass --max-minutes {budget:g}; left for"
    assert any(line.startswith(later) for line in lines)
    assert ("[skip] samplerbench-papers-s: its input datasets-papers-s is not done (left for a later run by "
            "--max-minutes)") in lines
    rows = _table_rows(lines)
    assert rows["gpu-tests"] == rows["paper-scale-reach"] == "not" and rows["gpubench"] == "done"
    assert lines[-1] == (f"25 steps left for a later run by --max-minutes {budget:g}: gpu-tests, datasets-papers-s, "
                         "datasets-products-s, datasets-papers-xs-gpu-built, paper-scale-reach did not fit, and 20 "
                         "more wait on them; run the command again")  # all but doctor and gpubench

    names.clear()
    assert _suite(tmp_path, [], max_minutes=budget * 100) == 0  # the next run starts with what waited
    assert ran(names) == [name for name in RUN_ORDER if name not in ("doctor", "gpubench")]


def test_the_dry_run_plans_what_a_run_under_the_same_budget_runs(tmp_path, fake_gpu, monkeypatch):
    typed, names = gpu_suite.TYPED_S, _typed_clock(monkeypatch)
    spare = typed["datasets-papers-xs-gpu-built"] - 1
    budget = (typed["doctor"] + typed["gpu-tests"] + spare) / 60  # the papers-s dataset fits beside gpu-tests, not both
    assert typed["datasets-papers-s"] <= typed["gpu-tests"] < typed["datasets-papers-s"] + typed["datasets-products-s"]
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, max_minutes=budget) == 0
    planned = [line.split(":")[0] for line in lines if ": would run (" in line]
    run_lines = []
    assert _suite(tmp_path, run_lines, max_minutes=budget) == 0
    assert planned == [name for name in STEPS if name in names]
    assert ran(names) == ["doctor", "gpu-tests", "datasets-papers-s"]
    assert run_lines[-1].startswith(f"24 steps left for a later run by --max-minutes {budget:g}: gpubench, ")
    text = "\n".join(lines)
    assert "datasets-papers-s: would run (not done yet; alongside gpu-tests)" in text
    assert f"datasets-products-s: would skip (its ~60 s, typed would pass --max-minutes {budget:g}" in text
    seconds = typed["doctor"] + typed["gpu-tests"]
    assert lines[-1].startswith(f"would run 3 of {len(STEPS)} steps: ~{seconds} s")
    assert lines[-1].endswith(f"; 24 left for a later run by --max-minutes {budget:g}")


def test_a_fresh_machine_makes_again_the_datasets_a_step_left_to_run_reads_and_redoes_nothing_else(tmp_path, fake_gpu,
                                                                                                   runner, cache):
    assert _suite(tmp_path, []) == 0
    cache["names"] = set()  # the next machine's dataset cache is empty
    runner.names.clear()
    lines = []
    assert _suite(tmp_path, lines) == 0
    assert runner.names == []  # every step done: no dataset is made for nothing
    assert "[skip] datasets-papers-s: done at" in "\n".join(lines)

    lines.clear()
    assert _suite(tmp_path, lines, rerun=["fig8-papers-s", "paper-scale-sweeps"]) == 0
    assert runner.names == ["datasets-papers-s", "fig8-papers-s", "datasets-papers-100m", "paper-scale-sweeps",
                            "report-fig8", "report-fig10", "report-goals"]  # not the papers-s steps left done
    finished = _state(tmp_path)["steps"]
    assert any(line.startswith("[run] datasets-papers-s (done at ") and "but this machine's dataset cache lacks "
               "papers-s, which fig8-papers-s reads" in line for line in lines)
    assert "datasets-papers-xs-gpu-built" not in runner.names  # papers-100m's input, but it reads none of its data
    assert finished["samplerbench-papers-s"]["finished"] < finished["datasets-papers-s"]["finished"]


def test_a_dataset_step_left_out_is_not_made_again_and_nothing_it_alone_would_read_counts(tmp_path, fake_gpu, runner,
                                                                                         cache):
    assert _suite(tmp_path, []) == 0
    cache["names"] = {"papers-s"}
    runner.names.clear()
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, rerun=["fig8-products-s"], skip=["fig8-products-s"]) == 0
    assert "datasets-products-s: would skip (done at" in "\n".join(lines)  # its only reader is left out
    assert _suite(tmp_path, [], only=["fig8-products-s"], rerun=["fig8-products-s"]) == 0
    assert runner.names == []  # --only: left out with its dataset, which the cache lacks
    assert _suite(tmp_path, [], rerun=["fig8-papers-s"]) == 0  # papers-s is in the cache
    assert runner.names == ["fig8-papers-s", "report-fig8", "report-goals"]


def _all_done(tmp_path, **seconds):
    """A state file of an earlier machine's suite with every step done, each in its typed time unless given."""
    _fake_state(tmp_path, {name: seconds.get(name.replace("-", "_"), gpu_suite.TYPED_S[name]) for name in STEPS})


def test_a_dataset_made_again_is_planned_cold_with_its_reader_or_alone_where_both_never_fit(tmp_path, fake_gpu,
                                                                                            monkeypatch, cache):
    _all_done(tmp_path, datasets_papers_s=5.0)  # that machine's cache held papers-s: its last run took 5 s
    cache["names"] = set()
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, rerun=["doctor"]) == 0  # costs-papers-s reruns after the doctor
    text = "\n".join(lines)
    typed = gpu_suite.TYPED_S["datasets-papers-s"]
    assert (f"datasets-papers-s: would run (done at 2026-11-22T11:01:00+00:00, but this machine's dataset cache lacks "
            f"papers-s, which costs-papers-s reads); ~{typed} s, typed: made again into an empty cache") in text

    budget = (typed + gpu_suite.TYPED_S["fig8-papers-s"] - 1) / 60  # the dataset and its reader do not fit together
    lines.clear()
    assert _suite(tmp_path, lines, dry_run=True, rerun=["fig8-papers-s"], max_minutes=budget) == 0
    text = "\n".join(lines)
    assert ("datasets-papers-s: would run (done at 2026-11-22T11:01:00+00:00, but this machine's dataset cache lacks "
            f"papers-s, which fig8-papers-s reads); ~{typed} s, typed: made again into an empty cache") in text
    assert (f"fig8-papers-s: would skip (its ~{gpu_suite.TYPED_S['fig8-papers-s']} s, measured would pass "
            f"--max-minutes {budget:g}; left for a later run)") in text
    assert "samplerbench-papers-s: would skip (done at" in text  # a step done reads nothing this time
    names = _typed_clock(monkeypatch)
    assert _suite(tmp_path, [], rerun=["fig8-papers-s"], max_minutes=budget) == 0
    assert names == ["datasets-papers-s"]  # on its own, for the next run on this machine: together they never fit
    cache["names"] = {"papers-s"}  # that run, on the same machine
    names.clear()
    assert _suite(tmp_path, [], rerun=["fig8-papers-s"], max_minutes=budget) == 0
    assert names == ["fig8-papers-s", "report-fig8", "report-goals"]

    cache["names"] = set()  # a fresh machine with time for both: the dataset is made with the step that reads it
    names.clear()
    assert _suite(tmp_path, [], rerun=["fig8-papers-s"], max_minutes=2 * budget) == 0
    assert names == ["datasets-papers-s", "fig8-papers-s", "report-fig8", "report-goals"]


def test_the_time_of_the_step_a_dataset_is_made_again_for_is_kept_from_the_steps_between(tmp_path, fake_gpu,
                                                                                      monkeypatch, cache):
    typed = gpu_suite.TYPED_S
    _fake_state(tmp_path, {name: typed[name] for name in STEPS if name != "samplerbench-papers-s"})
    cache["names"] = set()
    # papers-s made again for samplerbench leaves too little for products-s and its sweep before samplerbench
    budget = (typed["datasets-papers-s"] + typed["samplerbench-papers-s"] + typed["datasets-products-s"] - 1) / 60
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, rerun=["fig8-products-s"], max_minutes=budget) == 0
    planned = [line.split(":")[0] for line in lines if ": would run (" in line]
    names = _typed_clock(monkeypatch)
    assert _suite(tmp_path, [], rerun=["fig8-products-s"], max_minutes=budget) == 0
    assert names == planned == ["datasets-papers-s", "samplerbench-papers-s", "report-goals"]


def test_a_dataset_rerun_into_an_empty_cache_is_planned_at_its_typed_time(tmp_path, fake_gpu, runner, cache):
    _all_done(tmp_path, datasets_papers_s=5.0)
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, rerun=["datasets-papers-s"]) == 0
    typed = gpu_suite.TYPED_S["datasets-papers-s"]
    assert "datasets-papers-s: would run (--rerun asked for it); ~5 s, measured" in "\n".join(lines)  # cached
    cache["names"] = set()
    lines.clear()
    assert _suite(tmp_path, lines, dry_run=True, rerun=["datasets-papers-s"]) == 0
    assert (f"datasets-papers-s: would run (--rerun asked for it); ~{typed} s, typed: made again into an empty "
            "cache") in "\n".join(lines)


def test_a_step_is_killed_after_three_times_its_estimate_within_two_and_nine_minutes(tmp_path, fake_gpu, runner):
    _fake_state(tmp_path, {"doctor": 3.0, "gpubench": 100.0, "datasets-papers-100m": 400.0})
    assert _suite(tmp_path, [], rerun=["doctor", "gpubench", "datasets-papers-100m"]) == 0
    assert runner.timeouts["doctor"] == gpu_suite.STEP_TIMEOUT_FLOOR_S == 120  # 9 s: the floor
    assert runner.timeouts["gpubench"] == 300  # three times its measured 100 s
    assert runner.timeouts["datasets-papers-100m"] == gpu_suite.STEP_TIMEOUT_S == 540  # 1,200 s: the ceiling
    assert runner.timeouts["samplerbench-papers-s"] == 3 * gpu_suite.TYPED_S["samplerbench-papers-s"]


def test_the_gpu_tests_stop_at_a_hung_test_where_pytest_timeout_is_installed(tmp_path, monkeypatch):
    import importlib.util

    def gpu_tests():
        (step,) = [s for s in gpu_suite.plan(tmp_path, tmp_path) if s.name == "gpu-tests"]
        return step.command

    def plugin(found):
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *args: (object() if found else None) if name == "pytest_timeout"
                            else real(name, *args))

    plugin(found=False)
    assert "--timeout" not in gpu_tests()  # an option pytest would refuse without the plugin
    plugin(found=True)
    command = gpu_tests()
    at = command.index("--timeout")
    assert command[at:at + 4] == ("--timeout", "120", "--timeout-method", "thread")
    assert command.index("-m") < at < command.index(str(Path(__file__).parents[2] / "baselines" / "test_loaders.py"))


def test_a_second_suite_in_the_same_folder_is_refused(tmp_path, fake_gpu, runner):
    folder = tmp_path / "gpu" / "cuda-fake-gpu-80gb"
    folder.mkdir(parents=True)
    with filelock.FileLock(str(folder / f"{gpu_suite.STATE_FILE}.lock")):
        with pytest.raises(ValueError, match="another tierbench gpu-suite is running"):
            _suite(tmp_path, [])
    assert runner.names == []


def test_unknown_step_names_are_one_clear_error(tmp_path, capsys):
    assert main(["gpu-suite", "--out", str(tmp_path), "--rerun", "fig9", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: --rerun: no step named fig9; the steps are doctor, gpu-tests")


def test_the_real_runner_records_output_and_kills_a_step_past_its_time(tmp_path):
    log = tmp_path / "logs" / "hello.log"
    assert gpu_suite.run_command((sys.executable, "-c", "print('hello from a step')"), log, 60) == 0
    assert "hello from a step" in log.read_text() and log.read_text().startswith("$ ")
    assert gpu_suite.run_command((sys.executable, "-c", "import sys; sys.exit(3)"), log, 60) == 3
    slow = (sys.executable, "-c", "import time; time.sleep(60)")
    assert gpu_suite.run_command(slow, log, 0.5) == gpu_suite.TIMEOUT_RC
    assert "killed after 0 s" in log.read_text() or "killed after 1 s" in log.read_text()


def test_the_real_doctor_step_runs_inside_the_suite(tmp_path):
    lines = []
    others = [name for name in STEPS if name != "doctor"]
    assert gpu_suite.run_suite(tmp_path / "gpu", skip=others, measure_ceilings=False, echo=lines.append) == 0
    profiles = list((tmp_path / "machines").glob("*.json"))
    assert len(profiles) == 1 and "torch" in profiles[0].read_text()
    folder = next((tmp_path / "gpu").iterdir())
    state = json.loads((folder / gpu_suite.STATE_FILE).read_text())
    assert state["steps"]["doctor"]["status"] == "done" and "--no-measure" in state["steps"]["doctor"]["command"]
    assert "wrote" in (folder / "logs" / "doctor.log").read_text()
    assert "[skip] gpubench: left out (--skip, --only)" in lines


def test_every_tierbench_step_s_command_line_parses(tmp_path):
    # an option renamed or mistyped in a step would cost a GPU visit the whole step
    from suite.cli import build_parser

    parsed = {}
    for step in gpu_suite.plan(tmp_path / "gpu", tmp_path / "machines"):
        if step.command[1:3] == ("-m", "suite.cli"):
            parsed[step.name] = build_parser().parse_args(list(step.command[3:]))
    assert set(parsed) == set(STEPS) - {"gpu-tests"}
    paper = parsed["paper-scale-sweeps"]
    assert (paper.minibatches, paper.validate, paper.batch_size) == (gpu_suite.PAPER_SCALE_MINIBATCHES, False, 1024)
    assert (paper.experiment, paper.and_then, paper.sampling) == ("fig8", "fig10", ["gpu"])
    assert parsed["fig8-papers-s"].validate and parsed["fig8-papers-s"].minibatches is None


def test_only_runs_the_steps_it_names_and_refuses_an_unknown_one(tmp_path, fake_gpu, runner):
    lines = []
    named = ["datasets-papers-xs-gpu-built", "datasets-papers-100m", "paper-scale-sweeps"]
    assert _suite(tmp_path, lines, only=named) == 0
    assert runner.names == named
    assert "[skip] gpubench: left out (--skip, --only)" in lines
    assert "[skip] paper-scale-reach: left out (--skip, --only)" in lines
    with pytest.raises(BadValue, match="--only: no step named paper-scale"):
        _suite(tmp_path, lines, only=["paper-scale"])


def test_a_step_whose_datasets_step_is_left_out_runs_only_where_the_cache_holds_its_dataset(tmp_path, fake_gpu,
                                                                                           runner, cache):
    _all_done(tmp_path)  # an earlier machine's suite, whose dataset cache this one lacks
    cache["names"] = set()
    lines = []
    assert _suite(tmp_path, lines, only=["fig8-papers-s"], rerun=["fig8-papers-s"]) == 0
    assert runner.names == []  # it would have made papers-s inside its own timeout
    assert ("[skip] fig8-papers-s: its input datasets-papers-s is left out (--skip, --only) and this machine's dataset "
            "cache lacks papers-s: let datasets-papers-s run too") in lines
    cache["names"] = {"papers-s"}
    assert _suite(tmp_path, [], only=["fig8-papers-s"], rerun=["fig8-papers-s"]) == 0
    assert runner.names == ["fig8-papers-s"]
    runner.names.clear()
    cache["names"] = set()
    assert _suite(tmp_path, [], only=["datasets-papers-s", "fig8-papers-s"], rerun=["fig8-papers-s"]) == 0
    assert runner.names == ["datasets-papers-s", "fig8-papers-s"]  # made again first, as a refill
    runner.names.clear()
    assert _suite(tmp_path, [], only=["datasets-papers-100m"], rerun=["datasets-papers-100m"]) == 0
    assert runner.names == ["datasets-papers-100m"]  # its input's route was done; it reads none of its entry


def test_every_step_runs_with_the_revision_the_suite_started_at(tmp_path, fake_gpu, runner, monkeypatch):
    monkeypatch.setenv("TIERBENCH_REVISION", "0123456789ab")
    assert _suite(tmp_path, []) == 0
    assert {env["TIERBENCH_REVISION"] for env in runner.environments.values()} == {"0123456789ab"}
    state = _state(tmp_path)
    assert state["git_revision"] == "0123456789ab" and len(state["source_sha256"]) == 16
    assert {step["git_revision"] for step in state["steps"].values()} == {"0123456789ab"}


def test_the_real_runner_passes_the_environment_and_heads_the_log_with_the_stamp(tmp_path):
    log = tmp_path / "logs" / "stamp.log"
    command = (sys.executable, "-c", "import os; print(os.environ['TIERBENCH_REVISION'])")
    assert gpu_suite.run_command(command, log, 60, header="# device cuda: X | git_revision abc",
                                 environment={"TIERBENCH_REVISION": "abc"}) == 0
    lines = log.read_text().splitlines()
    assert lines[0].startswith("$ ") and lines[1] == "# device cuda: X | git_revision abc" and lines[2] == "abc"


def _fake_state(tmp_path, seconds: dict, status="done"):
    """A state file of an earlier run in which the steps in ``seconds`` finished with that status after that long."""
    folder = tmp_path / "gpu" / "cuda-fake-gpu-80gb"
    steps = {name: {"status": status, "rc": 0 if status == "done" else 1, "seconds": s, "command": [], "log": "",
                    "started": "2026-11-22T11:00:00+00:00", "finished": "2026-11-22T11:01:00+00:00"}
             for name, s in seconds.items()}
    atomic.write_json(folder / gpu_suite.STATE_FILE, {"device": "cuda: Fake GPU 80GB", "steps": steps})


def test_the_plan_uses_the_times_the_state_file_recorded_and_typed_ones_only_for_the_rest(tmp_path, fake_gpu, runner):
    _fake_state(tmp_path, {"doctor": 3.2, "gpu-tests": 600.1})
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, rerun=["doctor", "gpu-tests"]) == 0
    assert f"plan: 2 of {len(STEPS)} step times measured" in lines[0] and f"{len(STEPS) - 2} typed" in lines[0]
    text = "\n".join(lines)
    assert "doctor: would run (--rerun asked for it); ~4 s, measured" in text
    assert "gpu-tests: would run (--rerun asked for it); ~601 s, measured" in text
    assert f"gpubench: would run (not done yet); ~{gpu_suite.TYPED_S['gpubench']} s, typed" in text


def test_the_time_budget_plans_with_the_measured_time_where_there_is_one(tmp_path, fake_gpu, runner):
    _fake_state(tmp_path, {"gpu-tests": 600.0})  # far longer than typed: the budget below would let the typed time in
    lines = []
    budget = (gpu_suite.TYPED_S["doctor"] + 2 * gpu_suite.TYPED_S["gpu-tests"]) / 60
    assert _suite(tmp_path, lines, max_minutes=budget, rerun=["gpu-tests"]) == 0
    assert runner.names[0] == "doctor" and "gpu-tests" not in runner.names
    assert any(line.startswith("[later] gpu-tests: its ~600 s, measured would pass") for line in lines)


def test_the_dry_run_ends_with_the_time_of_the_steps_it_would_run(tmp_path, fake_gpu, runner):
    _fake_state(tmp_path, {"gpubench": 12.3})
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, only=["gpu-tests", "gpubench", "doctor"], rerun=["gpubench"]) == 0
    seconds = gpu_suite.TYPED_S["doctor"] + gpu_suite.TYPED_S["gpu-tests"] + 13
    assert lines[-1] == (f"would run 3 of {len(STEPS)} steps: ~{seconds} s ({seconds / 60:.1f} min) by the estimates "
                         "above, steps run alongside another counted where they outlast it")


@pytest.mark.parametrize("beside, outlast", [(["datasets-papers-s"], False),
                                             (["datasets-papers-s", "datasets-products-s"], True)])
def test_steps_run_beside_gpu_tests_count_in_the_dry_run_only_where_they_outlast_it(tmp_path, fake_gpu, runner,
                                                                                    beside, outlast):
    lines = []
    assert _suite(tmp_path, lines, dry_run=True, only=["gpu-tests", *beside]) == 0
    typed = gpu_suite.TYPED_S
    assert (sum(typed[name] for name in beside) > typed["gpu-tests"]) == outlast
    seconds = max(typed["gpu-tests"], sum(typed[name] for name in beside))
    assert lines[-1].startswith(f"would run {1 + len(beside)} of {len(STEPS)} steps: ~{seconds} s")


def test_steps_beside_gpu_tests_start_with_it_and_the_suite_waits_for_them(tmp_path, fake_gpu, monkeypatch):
    import threading

    started, release = [], threading.Event()

    def runner(command, log, timeout_s, **options):
        started.append(log.stem)
        if log.stem == "gpu-tests":  # the datasets steps must have started before the GPU tests end
            assert release.wait(5), "the datasets step did not start beside gpu-tests"
        if log.stem == "datasets-papers-s":
            release.set()
        return {"datasets-products-s": 3}.get(log.stem, 0)

    monkeypatch.setattr(gpu_suite, "run_command", runner)
    lines = []
    assert _suite(tmp_path, lines, only=["gpu-tests", "gpubench", *BESIDE_GPU_TESTS, "samplerbench-papers-s"]) == 1
    assert started.index("gpubench") > max(started.index(name) for name in BESIDE_GPU_TESTS)
    steps = _state(tmp_path)["steps"]
    assert steps["datasets-papers-s"]["status"] == "done" and steps["datasets-products-s"]["status"] == "failed"
    assert steps["samplerbench-papers-s"]["status"] == "done"
    assert any(line.startswith("[run] datasets-papers-s (alongside gpu-tests;") for line in lines)
    table = lines[-1].splitlines()
    assert [row.split()[0] for row in table[1:]][:5] == STEPS[:5]  # the summary in plan order


def test_a_step_that_failed_last_time_is_planned_with_its_typed_time(tmp_path, fake_gpu, runner):
    _fake_state(tmp_path, {"gpubench": 2.0}, status="failed")
    lines = []
    assert _suite(tmp_path, lines, dry_run=True) == 0
    assert f"~{gpu_suite.TYPED_S['gpubench']} s, typed" in next(line for line in lines if line.startswith("gpubench"))


def test_each_finished_step_records_its_wall_time_for_the_next_plan(tmp_path, fake_gpu, runner):
    assert _suite(tmp_path, [], skip=[name for name in STEPS if name != "doctor"]) == 0
    seconds = _state(tmp_path)["steps"]["doctor"]["seconds"]
    assert isinstance(seconds, float) and seconds >= 0
    lines = []
    _suite(tmp_path, lines, dry_run=True)
    assert f"~{math.ceil(seconds)} s, measured" in next(line for line in lines if line.startswith("doctor"))


def test_redoing_the_doctor_redoes_the_fixed_costs_its_fresh_profile_drops(tmp_path, fake_gpu, runner):
    assert _suite(tmp_path, []) == 0
    runner.names = []
    assert _suite(tmp_path, [], rerun=["doctor"]) == 0
    # the goals read the fixed costs of GPU-sampled minibatches; the planner those of the CPU-sampled ones
    assert runner.names == ["doctor", "costs-papers-s", "costs-cpu-sampling-papers-s", "costs-compiled-papers-s",
                            "costs-tiered-papers-s", "report-goals"]
    costs = [s for s in gpu_suite.plan(tmp_path / "gpu", tmp_path / "machines") if s.name.startswith("costs-")]
    for step, sampling in zip(costs, ("gpu", "cpu", "cpu", "cpu"), strict=True):
        assert step.command[step.command.index("--machines") + 1] == str(tmp_path / "machines")
        assert step.command[step.command.index("--sampling") + 1] == sampling
    assert len({step.output for step in costs}) == 4 and costs[1].output.endswith("papers-s-cpu-sampling")
    for step in costs[2:]:  # the planned epochs' loader and hot fraction, compiled and then eager, last in the profile
        command = step.command
        assert command[command.index("--loader") + 1] == "tiered" and command[command.index("--hot-fraction") + 1] \
            == "0.1"
        assert command[command.index("--operators") + 1] == str(gpu_suite.PROFILED_MINIBATCHES)
    assert "--compile" in costs[2].command and "--compile" not in costs[3].command


def test_only_the_steps_beside_gpu_tests_that_fit_the_time_left_start_with_it(tmp_path, fake_gpu, runner):
    typed = gpu_suite.TYPED_S
    budget = typed["gpu-tests"] + 10  # seconds: gpu-tests, and datasets-papers-s beside it, but not products-s too
    assert typed["datasets-papers-s"] <= budget < typed["datasets-papers-s"] + typed["datasets-products-s"]
    lines = []
    assert _suite(tmp_path, lines, max_minutes=budget / 60, only=["gpu-tests", *BESIDE_GPU_TESTS]) == 0
    assert ran(runner.names[:2]) == ["gpu-tests", "datasets-papers-s"] and runner.names[2] == "datasets-products-s"
    assert any(line.startswith("[run] datasets-papers-s (alongside gpu-tests;") for line in lines)
    assert any(line.startswith("[run] datasets-products-s (not done yet;") for line in lines)  # after, on its own


def test_a_step_that_ran_beside_gpu_tests_keeps_its_row_when_the_budget_stops_the_suite_before_it(tmp_path, fake_gpu,
                                                                                                   monkeypatch):
    typed, clock = gpu_suite.TYPED_S, [0.0]

    def runner(command, log, timeout_s, **options):  # each step takes its typed time on a fake clock
        clock[0] += typed[log.stem]
        return 0

    monkeypatch.setattr(gpu_suite, "run_command", runner)
    monkeypatch.setattr(gpu_suite.time, "monotonic", lambda: clock[0])
    ran_beside = typed["gpu-tests"] + typed["datasets-papers-s"] + typed["datasets-products-s"]
    budget = ran_beside + typed["gpubench"] - 1  # the three fit; gpubench after them does not
    lines = []
    assert _suite(tmp_path, lines, max_minutes=budget / 60, only=["gpu-tests", "gpubench", *BESIDE_GPU_TESTS]) == 0
    rows = _table_rows(lines)
    assert rows["gpubench"] == "not" and rows["datasets-papers-s"] == rows["datasets-products-s"] == "done"
    assert list(rows) == STEPS  # one row per step, in plan order


def test_report_goals_waits_on_every_step_a_goal_names():
    from suite.figures.gpu_goals import GOALS

    steps = {step.name for step in gpu_suite.plan(Path("gpu"), Path("machines"))}
    named = {word.strip("`,") for _, _, text in GOALS.values() for word in text.split()} & steps
    assert named == set(gpu_suite.GOAL_STEPS)


def test_a_run_that_fails_keeps_the_last_successful_run_and_the_last_build(tmp_path, fake_gpu, runner, cache):
    _all_done(tmp_path)
    cache["names"] = set()  # papers-100m made from nothing: a build
    only = ["datasets-papers-100m"]
    runner.statuses["datasets-papers-100m"] = 0
    assert _suite(tmp_path, [], only=only, rerun=only) == 0
    built = _state(tmp_path)["steps"]["datasets-papers-100m"]
    assert built["status"] == "done" and built["cache_held"] is False
    assert "earlier_done" not in built and "earlier_build" not in built  # it replaced them

    cache["names"] = {"papers-100m"}  # run again into the cache it made: seconds, no build
    assert _suite(tmp_path, [], only=only, rerun=only) == 0
    again = _state(tmp_path)["steps"]["datasets-papers-100m"]
    assert again["cache_held"] is True and "earlier_done" not in again
    assert again["earlier_build"]["finished"] == built["finished"]
    assert gpu_suite.last_build(again) == again["earlier_build"]

    cache["names"] = set()
    runner.statuses["datasets-papers-100m"] = 1  # a build that fails loses neither
    assert _suite(tmp_path, [], only=only, rerun=only) == 1
    failed = _state(tmp_path)["steps"]["datasets-papers-100m"]
    assert failed["status"] == "failed"
    assert gpu_suite.last_done(failed)["finished"] == again["finished"]
    assert gpu_suite.last_build(failed)["finished"] == built["finished"]
    assert "earlier_done" not in failed["earlier_done"] and "earlier_build" not in failed["earlier_build"]
    (step,) = [s for s in gpu_suite.plan(tmp_path, tmp_path) if s.name == "datasets-papers-100m"]
    state = _state(tmp_path)
    assert gpu_suite.estimate(step, state).source == "measured"  # the last successful run's time
    assert gpu_suite.estimate(step, state, cold=True).source == "measured: its last build"


def test_a_datasets_run_is_a_build_only_where_the_cache_lacked_the_dataset_s_base_entry(tiny):
    assert IS_BEGUN("tiny")  # prepared by the session's fixture: a run now would time no build
    assert not IS_BEGUN("papers-s")  # nothing of it in this test session's cache
