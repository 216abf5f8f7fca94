"""``tierbench gpu-suite``: everything a first GPU visit measures, as one resumable command.

The steps, in order, each a subprocess (``python -m suite.cli ...`` or ``python -m pytest ...``) whose output goes
to ``logs/<step>.log`` in the device's folder, ``<out>/<device-slug>/`` (so GPU and CPU records never share a table):

1. ``doctor``: versions, GPUs, limits and the measured ceilings, into ``machines/`` beside ``<out>``
   (``out/machines/`` by default, where every later record finds it);
2. ``gpu-tests``: pytest on the tests marked ``gpu``, the loader, sampling and multi-GPU ones first
   (``gpu-tests.xml``, JUnit); with ``TIERBENCH_REQUIRE_GPU=1``, set for every step, a GPU test that finds no GPU
   fails rather than skips;
3. ``gpubench``: the gather kernel against its same-run peers, PyTorch-Direct Fig. 8 (``microbench/``);
4. ``datasets-<name>``: papers-s and products-s generated and reordered by weighted reverse PageRank, once, on the
   CPU's cores while the GPU tests run (``Step.alongside``: started with ``gpu-tests`` from a thread of the suite's,
   one after the other, where their estimates fit the time left; the suite waits for them before the next step;
   neither times anything, so sharing the machine changes no measurement);
5. ``samplerbench-papers-s``: the fused GPU sampler over the CSR in GPU memory and over UVA, and with its CUDA C++
   kernels, against the CPU sampler on every core, one hop of fanout 12 over 100,000 seeds and a (12,12,12)
   minibatch of 1,024, and the fused samplers' launch costs (``sampler-bench/``); the later steps that sample on the
   GPU launch the set of kernels measured faster there (``--sampler-kernels measured``, the commands' default:
   ``suite.sweep.sampler_choice``, which finds the records under ``out/gpu`` or ``results/gpu``; without them, the
   numba kernels);
6. ``fig8-<name>``, ``fig8-pipeline-<name>``, ``fig10-<name>``: the sweeps of Data Tiering Figures 8 and 10 on the GPU,
   one dataset per step (records in ``runs/``), and ``fig8-gpu-sampling-papers-s``: Figure 8 on papers-s sampled by
   the fused GPU sampler, beside the CPU-sampled cells of ``fig8-papers-s`` in the same records;
   ``lookahead-papers-s``, ``lookahead-pipeline-papers-s``: the lookahead loader beside ``tiered`` in the same GPU
   memory, without and with the pipeline (whose sampler thread announces the minibatches to the lookahead cache);
   ``costs-papers-s``: the fixed cost of one minibatch per stage across batch sizes, sampled by the fused GPU
   sampler (``tierbench costs --sampling gpu``: the GPU-native path), into
   ``costs/papers-s/`` and the machine profile's ``minibatch_costs``, which ``tierbench plan`` adds to its bound;
   ``costs-cpu-sampling-papers-s``: the same with the CPU sampler (``costs/papers-s-cpu-sampling/``), whose ids the
   gather copies to the GPU first; ``costs-compiled-papers-s`` and ``costs-tiered-papers-s``: the same through the
   tiered loader at 10% hot, as Figure 10's epochs gather, with each stage's operators profiled, the model compiled
   by ``torch.compile`` and then eager (``costs/papers-s-cpu-sampling-tiered-compiled/``,
   ``costs/papers-s-cpu-sampling-tiered/``): the latter's are the costs ``tierbench plan`` adds for CPU-sampled
   epochs;
7. ``datasets-papers-xs-gpu-built``, ``datasets-papers-100m``: the paper-scale route (``suite.datasets.generated``),
   first at papers-xs's size, then ogbn-papers100M's: drawn and sorted into lists on the GPU, scored and reordered;
   ``paper-scale-sweeps``: Figure 8 (cpu-gather, uva, degree-cache and tiered at 10% hot) and then, in the same
   process (``tierbench run --and-then``, which keeps the reordered papers-100m open and its table pinned), Figure
   10 (tiered at 0-25% hot) on papers-100m at the paper's batch of 1,024 and fanouts (12,12,12), sampled on the GPU,
   each cell timing the first ``PAPER_SCALE_MINIBATCHES`` minibatches of its epochs (the records and reports say so),
   with no validation pass; ``paper-scale-reach``:
   gpubench over a host buffer of the table's size, so its reach study reads rows from all 53 GiB
   (``microbench-paper-scale/``);
8. ``report-fig8``, ``report-fig10``, ``report-lookahead``: their tables and figures (``fig8/``, ``fig10/``, ``lookahead/``);
   ``report-goals``: the second visit's goals, each judged from the records of the steps that measure it
   (``GOAL_STEPS``), into ``goals.md`` / ``.csv`` / ``.png`` in the device's folder (``suite.figures.gpu_goals``).

Every step runs with ``TIERBENCH_REVISION`` set to the revision the suite found when it started (the caller's value
where set, else git's; ``suite.io.provenance``), so every record of the visit names the same revision; the state file
and each log's second line carry the device, that revision, the source digest and the time.

``--max-minutes`` plans with the wall time each step took the last time it finished with rc 0, from the state file,
and with the typed ``TYPED_S`` for a step that has none; the plan's first line, and each step's line, say which.  A
step whose estimate would end past the budget is left for a later run, and the suite goes on to the later steps
that fit (a report, say), skipping those that need it; ``--dry-run`` with ``--max-minutes`` makes the same choices
from the estimates alone.  A device lent for a few minutes at a time then spends each of them measuring.

The datasets steps write into the machine's dataset cache, not the records, so a fresh machine resuming a suite has
none of their output.  A datasets step done earlier whose dataset that cache lacks runs again where a step left to
run reads the dataset (``refills``), so that step's time is its own and not also the dataset's; the two are
planned together where they fit in ``--max-minutes`` together, else the dataset is made on its own for the next run
on this machine (``paired``).  Making a dataset again redoes none of the steps done with it, since ``prepare`` makes
the same entry whenever it runs.  A step that
reads a dataset whose datasets step is left out (``--skip``, ``--only``) is left out too where the cache lacks the
dataset, with the reason.

The state file ``gpu-suite.json`` records each step's status, return code, wall time, log and command (a datasets
step's also whether the cache held its dataset, or its base entry, when it started, so that only a run that made
it from nothing times a build); an
entry keeps the step's last successful run and last build until a new run replaces them, so that a run that fails,
times out or is cut off loses no measured time (``last_done``, ``last_build``).  It is
written through a temporary file and a rename, under a file lock that also keeps two suites out of one folder.
A rerun skips the steps done (and says when they were; ``--rerun`` runs a sweep step with ``tierbench run
--rerun``, ``Step.redo``), runs the failed, timed-out and interrupted ones again,
and redoes a report whose sweeps were redone since.  A failed step does not stop the suite: only the steps that
need it are skipped, with that reason.  Steps that need a GPU are skipped with "no CUDA GPU visible" where there
is none; the exit status is 1 when a step failed or timed out in this run, else 0 (skips are not failures).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import datetime
import functools
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import filelock

from suite.errors import BadValue
from suite.experiments.sweeps import EXPERIMENTS
from suite.io import atomic
from suite.io.provenance import (
    REVISION_ENV,
    device_name,
    git_revision,
    slug,
    source_digest,
)

STATE_FILE = "gpu-suite.json"
TYPED_S = {  # seconds each step took on one H100, 16 cores (results/gpu/cuda-nvidia-h100-80gb-hbm3), rounded up;
    # the steps first run on the second visit, on one H200 (results/gpu/cuda-nvidia-h200), as their comments say
    "doctor": 15, "gpu-tests": 140, "gpubench": 40, "datasets-papers-s": 100, "datasets-products-s": 60,
    # the sweeps of two rounds (fig8, fig10, lookahead: suite.experiments.sweeps), projected from their times in one
    # round of an untimed and two recorded epochs (H100: 30, 40, 30, 30, 100 and 110 s) by 4/3: four epochs per cell
    "fig8-papers-s": 40, "fig8-products-s": 55, "fig8-pipeline-papers-s": 40, "fig8-pipeline-products-s": 40,
    "fig10-papers-s": 135, "fig10-products-s": 150, "report-fig8": 10, "report-fig10": 20,
    "lookahead-papers-s": 140, "report-lookahead": 10,  # H200: 101 s (one round) and 10 s
    "lookahead-pipeline-papers-s": 140,  # H200: 89 s (one round)
    "samplerbench-papers-s": 40,  # H200: 12 s; 40 keeps its limit (three times this) at the 2 minutes of any step
    "fig8-gpu-sampling-papers-s": 25,  # H200: 18 s (one round)
    "costs-papers-s": 20,  # H200: 14 s
    "costs-cpu-sampling-papers-s": 20,  # H200: 17 s; the same minibatches sampled on the CPU
    "costs-compiled-papers-s": 150,  # not yet run: the step below and the compilations (35 s on this project's CPU)
    "costs-tiered-papers-s": 30,  # not yet run: the step above and 30 profiled minibatches
    # the paper-scale route at papers-xs's size (H200: 6 s), then papers-100m built and reordered (H200: 162 s; its
    # goal: 5 min)
    "datasets-papers-xs-gpu-built": 10, "datasets-papers-100m": 300,
    # H200: 204 s to open papers-100m in each order (its table made in memory and pinned) and run 4 + 6 cells in two
    # rounds of 2 x 25 minibatches sampled on the GPU without validation (~13 ms each, 91 MB of rows), each cell's
    # loader built twice: Figures 8 and 10 apart would open the reordered order twice
    "paper-scale-sweeps": 330,
    "paper-scale-reach": 60,  # H200: 50 s, gpubench over a buffer of papers-100m's table, filled and pinned
    "report-goals": 15,  # H200: 13 s
}
"""Typed by hand from the first and second visits; a plan uses them only for the steps its state file has no time of
(``estimate``).  The datasets steps are timed generating and reordering into an empty cache; where the cache holds
the dataset, ``prepare`` takes seconds, and so would the next plan's estimate (a machine whose cache lasts)."""
STEP_TIMEOUT_S = 540
"""The longest any step may run before it is killed (``step_timeout``)."""
STEP_TIMEOUT_FLOOR_S, STEP_TIMEOUT_FACTOR = 120, 3
TIMEOUT_RC = 124
GPU_TEST_TIMEOUT_S = 120
"""With pytest-timeout installed (the GPU machines' image has it), the longest one GPU test may run: pytest then
stops (``--timeout-method thread``) with every thread's stack in the step's log, the hung test's among them."""
DATASETS = ("papers-s", "products-s")
SCORER = "wrpr"
"""The scorer every datasets step reorders by, the sweeps' default (weighted reverse PageRank, Data Tiering
§3.2)."""
PAPER_SCALE = "papers-100m"
PAPER_SCALE_MINIBATCHES = 25
"""Minibatches each paper-scale epoch times (of its 1,194), each gathering about 178,000 rows (91 MB) on the H200,
so a recorded epoch reads about 2.3 GB; the paper-scale sweeps run no validation pass (``--no-validation``), which
the epoch times never include.  The paper-scale steps (papers-100m made, then the sweeps) took 6.1 minutes on the
H200 (11 by ``TYPED_S``), which two commands of a machine lent for 15 minutes hold."""
RERUN_CELLS = ("--rerun",)
"""What makes ``tierbench run`` measure again the cells its records hold (a sweep step named by ``--rerun``)."""
PAPER_SCALE_SWEEPS = "paper-scale-sweeps"
PAPER_SCALE_EXPERIMENTS = ("fig8", "fig10")
"""The step that runs Figure 8 and then Figure 10 on papers-100m, in one process."""
PAPER_SCALE_FIG8_LOADERS = ("cpu-gather", "uva", "degree-cache", "tiered")
PROFILED_MINIBATCHES = 3
"""Minibatches of each batch size that ``costs-compiled-papers-s`` and ``costs-tiered-papers-s`` run again under
torch's profiler."""
TIERED_COSTS = ("--loader", "tiered", "--hot-fraction", "0.1", "--operators", str(PROFILED_MINIBATCHES))
COSTS_STEPS = (("costs-papers-s", "gpu", "papers-s", ()),
               ("costs-cpu-sampling-papers-s", "cpu", "papers-s-cpu-sampling", ()),
               ("costs-compiled-papers-s", "cpu", "papers-s-cpu-sampling-tiered-compiled",
                (*TIERED_COSTS, "--compile")),
               ("costs-tiered-papers-s", "cpu", "papers-s-cpu-sampling-tiered", TIERED_COSTS))
"""The fixed-cost steps: name, ``--sampling``, folder under ``costs/`` and further options.  Goal 3 judges the
GPU-sampled minibatches (the GPU-native path); ``tierbench plan`` adds to a plan the costs of its epochs' sampler
(``suite.policies.planner``), CPU-sampled for Figure 10's epochs.  The last two time Figure 10's epochs' loader, the
tiered one at 10% hot, their operators profiled (``--operators``: what each stage issues, on the host and on the
GPU): with the model compiled by ``torch.compile`` (``--compile``: does it cut the train stage's fixed cost? its records
only), and eagerly, as the epochs train: theirs are the costs the profile keeps for CPU-sampled minibatches."""
GOAL_STEPS = ("samplerbench-papers-s", "costs-papers-s", "costs-cpu-sampling-papers-s", "fig8-papers-s",
              "fig8-gpu-sampling-papers-s", "datasets-papers-100m", PAPER_SCALE_SWEEPS, "paper-scale-reach",
              "lookahead-papers-s", "lookahead-pipeline-papers-s")
"""The steps whose records ``report-goals`` judges the second visit's goals by (``suite.figures.gpu_goals``)."""
PAPER_SCALE_TABLE_GIB = 53
"""papers-100m's float32 feature table, 111,059,956 x 512 B, in GiB (rounded down): the reach study's whole table."""
REQUIRE_GPU = "TIERBENCH_REQUIRE_GPU"
"""Set to 1, the tests marked ``gpu`` fail where they would skip for want of a CUDA GPU (tests/gpu_marker.py)."""
PRIORITY_TESTS = ("baselines/test_loaders.py", "tiering/sampling/test_neighbors.py", "tiering/features/test_multi_gpu.py")
"""Test files whose GPU tests run first, under tests/: the loaders, sampling and the multi-GPU tensor."""
_REPO = Path(__file__).resolve().parents[2]
_TESTS = _REPO / "tests"
_IMPORT_ROOT = _REPO


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: its command, what it writes, and the steps whose results it uses."""

    name: str
    command: tuple[str, ...]
    output: str
    needs_cuda: bool = True
    inputs: tuple[str, ...] = ()  # steps whose results it uses
    any_input: bool = False  # True: one input done is enough (a report of the sweeps that succeeded)
    alongside: str | None = None  # a step that times nothing, which this one may run beside (module docstring)
    dataset: str | None = None  # the dataset it prepares (reordered by SCORER) in this machine's dataset cache
    redo: tuple[str, ...] = ()  # added to the command where --rerun names the step: measure again what is recorded


def command_of(step: Step, rerun: set[str]) -> tuple[str, ...]:
    """``step``'s command, with its ``redo`` options where ``rerun`` names it: a sweep run again without them
    resumes, and skips every cell its records hold."""
    return step.command + (step.redo if step.name in rerun else ())


@dataclasses.dataclass(frozen=True)
class Estimate:
    """How long a step should take: ``seconds``, and ``source`` "measured" (its wall time the last time it finished
    with rc 0, from the state file) or "typed" (``TYPED_S``)."""

    seconds: int
    source: str

    def __str__(self) -> str:
        return f"~{self.seconds} s, {self.source}"


def last_done(entry: dict | None) -> dict | None:
    """A step's last run that finished with rc 0, from its state file entry: the entry itself, or the run it keeps
    (``earlier_done``) while a later run failed, timed out or was cut off, so that no measured time is lost."""
    if entry is None:
        return None
    return entry if entry["status"] == "done" else entry.get("earlier_done")


def last_build(entry: dict | None) -> dict | None:
    """A datasets step's last run that finished with rc 0 and made its dataset (``cache_held`` false: the cache
    lacked it when the run started), so that its wall time is a build's; the entry itself, or the run it keeps
    (``earlier_build``).  A run into a cache that held the dataset takes seconds and times no build."""
    if entry is None:
        return None
    if entry["status"] == "done" and entry.get("cache_held") is False:
        return entry
    return entry.get("earlier_build")


def _earlier_runs(previous: dict | None) -> dict:
    """What a step's new entry keeps of ``previous`` until the new run replaces it: its last successful run and its
    last build (``last_done``, ``last_build``), each without the runs it kept in turn."""
    kept = {"earlier_done": last_done(previous), "earlier_build": last_build(previous)}
    return {key: {k: v for k, v in run.items() if k not in kept} for key, run in kept.items() if run is not None}


def estimate(step: Step, state: dict, cold: bool = False) -> Estimate:
    """The wall time the state file recorded for ``step``'s last successful run, rounded up; ``TYPED_S`` without one.
    A datasets step run into an empty cache (``cold``) takes its last build's time (``last_build``), else at least its
    typed time, whatever its last run took (in a cache that held the dataset: seconds)."""
    entry = state["steps"].get(step.name)
    build, previous = last_build(entry), last_done(entry)
    if cold and build is not None:
        return Estimate(math.ceil(build["seconds"]), "measured: its last build")
    if previous is not None and previous.get("seconds") is not None:
        measured = math.ceil(previous["seconds"])
        if cold and measured < TYPED_S[step.name]:
            return Estimate(TYPED_S[step.name], "typed: made again into an empty cache")
        return Estimate(measured, "measured")
    return Estimate(TYPED_S[step.name], "typed")


def estimates_of(steps: list[Step], state: dict, cold) -> dict[str, Estimate]:
    """Every step's ``estimate`` by name, the datasets steps named in ``cold`` made into an empty cache."""
    return {step.name: estimate(step, state, step.name in cold) for step in steps}


def step_timeout(expected: Estimate) -> int:
    """The seconds a step may run before it is killed: ``STEP_TIMEOUT_FACTOR`` times its estimate, at least
    ``STEP_TIMEOUT_FLOOR_S`` and at most ``STEP_TIMEOUT_S``.  A step that hangs (a kernel that never ends, a
    collective that never completes) then costs a visit a few times what the step would have taken, not 9 minutes
    of a 15-minute lease."""
    return min(STEP_TIMEOUT_S, max(STEP_TIMEOUT_FLOOR_S, STEP_TIMEOUT_FACTOR * expected.seconds))


def gpu_test_timeout() -> tuple[str, ...]:
    """pytest's options that stop a GPU test after ``GPU_TEST_TIMEOUT_S``, where pytest-timeout is installed."""
    import importlib.util

    if importlib.util.find_spec("pytest_timeout") is None:
        return ()
    return ("--timeout", str(GPU_TEST_TIMEOUT_S), "--timeout-method", "thread")


def describe_estimates(estimates: list[Estimate]) -> str:
    """One line: how many step times come from the state file and how many were typed."""
    measured = sum(e.source == "measured" for e in estimates)
    return (f"plan: {measured} of {len(estimates)} step times measured (the state file's last successful run), "
            f"{len(estimates) - measured} typed (suite.sweep.gpu_suite.TYPED_S)")


def visible_gpu() -> str | None:
    """The name of the CUDA device the steps will use, or ``None`` where no CUDA GPU is visible."""
    import torch

    return device_name("cuda") if torch.cuda.is_available() else None


def device_folder(root, gpu: str | None) -> Path:
    """``root/<slug of the device>``: the GPU's name, or the CPU's where there is no GPU."""
    return Path(root) / slug(gpu or device_name("cpu"))


def gpu_test_paths() -> list[str]:
    """What the GPU tests' step hands pytest, which selects the tests marked ``gpu`` in them: the loader,
    sampling and multi-GPU files first, then the whole of tests/ (pytest collects each file once)."""
    return [str(_TESTS / name) for name in PRIORITY_TESTS] + [str(_TESTS)]


def plan(folder: Path, machines: Path, *, measure_ceilings: bool = True) -> list[Step]:
    """The steps for ``folder`` in the order they run, the machine profile into ``machines``."""
    cli = (sys.executable, "-m", "suite.cli")
    runs = str(folder / "runs")
    steps = [
        Step("doctor", cli + ("doctor", "--out", str(machines)) + (() if measure_ceilings else ("--no-measure",)),
             str(machines), needs_cuda=False),
        Step("gpu-tests", (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra",
                           "-m", "gpu", f"--junitxml={folder / 'gpu-tests.xml'}", *gpu_test_timeout(),
                           *gpu_test_paths()),
             str(folder / "gpu-tests.xml")),
        Step("gpubench", cli + ("gpubench", "--out", str(folder / "microbench"), "-q"), str(folder / "microbench")),
    ]
    for name in DATASETS:  # built on the CPU's cores while the GPU tests run: neither is a measurement
        steps.append(dataset_step(cli, name, alongside="gpu-tests"))
    steps.append(Step("samplerbench-papers-s", cli + ("samplerbench", "--dataset", "papers-s", "--device", "cuda",
                                                      "--out", str(folder / "sampler-bench"), "-q"),
                      str(folder / "sampler-bench"), inputs=("datasets-papers-s",)))
    # times at a batch that keeps the GPU busy; Figure 10's traffic in the paper's regime (suite.datasets.regime)
    sweeps = {"fig8": ("--regime", "unscaled"), "fig8-pipeline": ("--regime", "unscaled", "--pipeline"), "fig10": ()}
    for sweep, extra in sweeps.items():
        for name in DATASETS:
            experiment = sweep.split("-")[0]
            steps.append(Step(f"{sweep}-{name}", cli + ("run", "--experiment", experiment, "--datasets", name,
                                                         "--device", "cuda", "--runs", runs, "-q", *extra),
                              f"{runs}/{experiment}.csv", inputs=(f"datasets-{name}",), redo=RERUN_CELLS))
    # Figure 8 on papers-s with the fused GPU sampler, its rows beside fig8-papers-s's CPU-sampled ones; gns samples
    # with its own CPU sampler, so it is left out
    gpu_sampled = ",".join(name for name in EXPERIMENTS["fig8"]["loaders"] if name != "gns")
    steps.append(Step("fig8-gpu-sampling-papers-s", cli + ("run", "--experiment", "fig8", "--datasets", "papers-s",
                                                           "--loaders", gpu_sampled, "--sampling", "gpu", "--device", "cuda", "--runs", runs,
                                                           "-q", "--regime", "unscaled"),
                      f"{runs}/fig8.csv", inputs=("datasets-papers-s",), redo=RERUN_CELLS))
    # the lookahead cache against the tiered loader in the same GPU memory, in the paper's regime, and the same with
    # the pipeline, whose sampler thread announces the minibatches to the lookahead cache off the training's thread
    for step, extra in (("lookahead-papers-s", ()), ("lookahead-pipeline-papers-s", ("--pipeline",))):
        steps.append(Step(step, cli + ("run", "--experiment", "lookahead", "--datasets", "papers-s", "--device",
                                       "cuda", "--runs", runs, "-q", *extra),
                          f"{runs}/lookahead.csv", inputs=("datasets-papers-s",), redo=RERUN_CELLS))
    # the fixed cost of one minibatch per stage across batch sizes, sampled on the GPU and then on the CPU, into the
    # machine profile `tierbench plan` reads, which adds to a plan the costs of its epochs' sampler
    for step, sampling, records_dir, extra in COSTS_STEPS:
        steps.append(Step(step, cli + ("costs", "--dataset", "papers-s", "--device", "cuda", "--sampling", sampling,
                                       *extra, "--machines", str(machines), "--out",
                                       str(folder / "costs" / records_dir), "-q"),
                          str(folder / "costs" / records_dir), inputs=("doctor", "datasets-papers-s")))
    steps += paper_scale_steps(cli, runs, folder)
    for experiment in ("fig8", "fig10", "lookahead"):
        inputs = tuple(s.name for s in steps if s.name.startswith(f"{experiment}-")
                       or s.name == PAPER_SCALE_SWEEPS and experiment in PAPER_SCALE_EXPERIMENTS)
        steps.append(Step(f"report-{experiment}", cli + ("report", "--experiment", experiment, "--runs", runs,
                                                         "--out", str(folder / experiment)),
                          str(folder / experiment), inputs=inputs, any_input=True))
    # the second visit's goals judged from every record above that measures one (suite.figures.gpu_goals)
    steps.append(Step("report-goals", cli + ("report", "--figure", "gpu-goals", "--records", str(folder)),
                      str(folder / "goals.md"), inputs=GOAL_STEPS, any_input=True))
    return steps


def dataset_step(cli: tuple[str, ...], name: str, **options) -> Step:
    """``datasets-<name>``: ``name`` generated and reordered by ``SCORER`` into the machine's dataset cache."""
    return Step(f"datasets-{name}", cli + ("prepare", "--dataset", name, "--scorer", SCORER, "-q"),
                "the dataset cache ($TIERBENCH_DATA)", dataset=name, **options)


def paper_scale_steps(cli: tuple[str, ...], runs: str, folder: Path) -> list[Step]:
    """papers-100m built and reordered (after the same route at papers-xs's size), then Figures 8 and 10 on it at the
    paper's own batch and fanouts (Data Tiering §5.1), timing the first ``PAPER_SCALE_MINIBATCHES`` of each epoch, and
    gpubench over a buffer the size of its table (the reach study's whole table: how fast rows come from all of it)."""
    smoke = "datasets-papers-xs-gpu-built"
    steps = [dataset_step(cli, "papers-xs-gpu-built"), dataset_step(cli, PAPER_SCALE, inputs=(smoke,))]
    # sampled on the GPU (the CSR, 7.4 GB, in GPU memory): sampling ~1.9M edges a minibatch on the CPU would take
    # longer than gathering their rows, and the loaders' differences would not show (the first visit's lesson)
    paper = ("--datasets", PAPER_SCALE, "--batch-size", "1024", "--fanout", "12,12,12", "--minibatches",
             str(PAPER_SCALE_MINIBATCHES), "--no-validation", "--sampling", "gpu", "--device", "cuda", "--runs", runs,
             "-q")
    first, then = PAPER_SCALE_EXPERIMENTS
    steps.append(Step(PAPER_SCALE_SWEEPS, cli + ("run", "--experiment", first, "--loaders",
                                                 ",".join(PAPER_SCALE_FIG8_LOADERS), "--hot-fractions", "0.1",
                                                 "--and-then", then, *paper),
                      f"{runs}/{first}.csv, {runs}/{then}.csv", inputs=(f"datasets-{PAPER_SCALE}",), redo=RERUN_CELLS))
    reach = str(folder / "microbench-paper-scale")
    steps.append(Step("paper-scale-reach", cli + ("gpubench", "--table-gib", str(PAPER_SCALE_TABLE_GIB), "--out", reach,
                                                   "-q"), reach))
    return steps


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def read_state(folder: Path) -> dict:
    path = folder / STATE_FILE
    if not path.exists():
        return {"steps": {}}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise BadValue(f"{path} is not valid JSON ({err}); delete it to start the suite over") from None


def write_state(folder: Path, state: dict) -> None:
    atomic.write_json(folder / STATE_FILE, state)


def decide(step: Step, state: dict, *, gpu: str | None, rerun: set[str], skip: set[str],
           planned: frozenset[str] = frozenset(), later: frozenset[str] = frozenset(),
           refill: dict[str, str] | None = None, datasets: dict[str, str] | None = None) -> tuple[bool, str]:
    """``(run?, why)`` for ``step`` given what ``state`` says of it and of its inputs.

    ``planned``: steps a dry run would run before it, counted as done; ``later``: steps left for a later run by
    ``--max-minutes``; ``refill``: datasets steps done earlier to run again, each with the step that reads the dataset
    this machine's cache lacks (``refills``): a step that would run waits for them until they have run again (are
    planned); ``datasets``: the datasets steps, each with its dataset, whose redoing redoes no step that reads their
    dataset (``prepare`` makes the same entry whenever it runs), only a report of their records; a step that reads
    the dataset of one left out (``skip``) is left out too where this machine's cache lacks the dataset, which the
    step would otherwise make inside its own time and timeout (a datasets step reads none: papers-100m's needs
    papers-xs's route done, not its entry).
    """
    run, why = _decide(step, state, gpu=gpu, rerun=rerun, skip=skip, planned=planned, later=later, refill=refill or {},
                       datasets=datasets or {})
    waiting = [name for name in step.inputs if name in (refill or {}) and name not in planned]
    if run and waiting and not step.any_input:
        status = "left for a later run by --max-minutes" if waiting[0] in later else "this machine's cache lacks it"
        return False, f"its input {waiting[0]} is not done ({status})"
    return run, why


def _decide(step: Step, state: dict, *, gpu, rerun, skip, planned, later, refill, datasets) -> tuple[bool, str]:
    steps = state["steps"]
    if step.name in skip:
        return False, "left out (--skip, --only)"
    if step.needs_cuda and gpu is None:
        return False, "no CUDA GPU visible"
    done = {name for name, s in steps.items() if s["status"] == "done"} | planned
    if step.inputs:
        missing = [name for name in step.inputs if name not in done]
        if step.any_input and len(missing) == len(step.inputs):
            return False, f"none of its inputs is done ({', '.join(step.inputs)})"
        if not step.any_input and missing:
            status = ("left for a later run by --max-minutes" if missing[0] in later
                      else steps.get(missing[0], {}).get("status", "not run"))
            return False, f"its input {missing[0]} is not done ({status})"
        absent = [name for name in step.inputs if name in skip and name in datasets and not step.any_input
                  and step.dataset is None and not _is_prepared(datasets[name])]  # a datasets step reads none
        if absent:
            return False, (f"its input {absent[0]} is left out (--skip, --only) and this machine's dataset cache "
                           f"lacks {datasets[absent[0]]}: let {absent[0]} run too")
    if step.name in rerun:
        return True, "--rerun asked for it"
    previous = steps.get(step.name)
    if previous is None:
        return True, "not done yet"
    if previous["status"] == "running":
        return True, f"it was running (since {previous['started']}) when an earlier gpu-suite stopped"
    if previous["status"] != "done":
        return True, f"it {previous['status']} at {previous['finished']} with rc {previous['rc']}; running it again"
    if step.name in refill:
        return True, (f"done at {previous['finished']}, but this machine's dataset cache lacks {step.dataset}, "
                      f"which {refill[step.name]} reads")
    newer = [name for name in step.inputs if (step.any_input or name not in datasets) and (name in planned
             or name in done and steps[name]["finished"] > previous["finished"])]
    if newer:
        when = "runs first" if newer[0] in planned else f"was redone at {steps[newer[0]]['finished']}"
        return True, f"its input {newer[0]} {when}"
    return False, f"done at {previous['finished']}, rc 0; --rerun {step.name} to redo"


def datasets_of(steps: list[Step]) -> dict[str, str]:
    """The datasets steps among ``steps``, each with the dataset it prepares (``decide``'s ``datasets``)."""
    return {step.name: step.dataset for step in steps if step.dataset is not None}


def refills(steps: list[Step], state: dict, *, gpu: str | None, rerun: set[str], skip: set[str]) -> dict[str, str]:
    """The datasets steps done earlier whose dataset this machine's dataset cache lacks (a fresh machine resuming a
    suite) and that a step left to run reads, each with the first such step: running them again first keeps the
    plan's times true, where the step that reads the dataset would otherwise make it and take that much longer.
    A step is left to run where ``decide`` would run it after the steps before it (those redone because an input is
    redone included); steps left out (``skip``) are neither made again nor counted as readers, and neither are the
    reports, which read the records of their inputs, not the datasets."""
    datasets = datasets_of(steps)
    done = {name for name, entry in state["steps"].items() if entry["status"] == "done"}
    will_run, readers = set(), {}
    for step in steps:
        if decide(step, state, gpu=gpu, rerun=rerun, skip=skip, planned=frozenset(will_run), datasets=datasets)[0]:
            will_run.add(step.name)
            if step.dataset is None and not step.any_input:  # a report (any input) reads records, not datasets
                for name in step.inputs:
                    readers.setdefault(name, step.name)
    return {step.name: readers[step.name] for step in steps
            if step.name in datasets and step.name in readers and step.name in done and step.name not in will_run
            and step.name not in skip and not _is_prepared(step.dataset)}


def _is_prepared(dataset: str) -> bool:
    """Whether this machine's dataset cache holds ``dataset`` reordered by ``SCORER``."""
    from suite.datasets.reordered import is_prepared  # the dataset code only where a cache is looked at

    return is_prepared(dataset, SCORER)


def _is_begun(dataset: str) -> bool:
    """Whether this machine's dataset cache holds ``dataset``'s base entry (reordered or not): a datasets step that
    starts from it does not time the whole build."""
    from suite.datasets import cache  # the dataset code only where a cache is looked at
    from suite.datasets.build import entry_path

    return cache.is_complete(entry_path(dataset))


def waits_for_later(step: Step, state: dict, *, later: frozenset[str], planned: frozenset[str] = frozenset(),
                    **choice) -> bool:
    """Whether ``step``, which ``decide`` did not run, would run were the steps left for a later run done: it is left
    for that run too (a step that needs the paper-scale dataset, when the step that makes it did not fit)."""
    return bool(later & set(step.inputs)) and decide(step, state, planned=planned | later, later=later, **choice)[0]


def paired(refill: dict, estimates: dict, budget: float) -> dict[str, str]:
    """The datasets steps of ``refill`` that fit in ``budget`` together with the step they are made again for, each
    with it: those planned as a pair.  One that fits only alone is made on its own, for a later run on this machine
    to read (papers-100m's build and its sweeps take longer together than one command on a lent GPU may run)."""
    return {name: reader for name, reader in refill.items()
            if estimates[name].seconds + estimates[reader].seconds <= budget}


def needed_seconds(step: Step, estimates: dict, refill: dict) -> int:
    """The seconds that must be left for ``step`` to start: its estimate, and a datasets step run again to refill the
    cache that of the step that reads the dataset first, which it is run again for (``refills``)."""
    reader = refill.get(step.name)
    return estimates[step.name].seconds + (estimates[reader].seconds if reader else 0)


def companions(step: Step, steps: list[Step], estimates: dict, refill: dict, left: float, may_run) -> list[Step]:
    """The steps to start with ``step``, each run after the other beside it: those after it in plan order that may
    run alongside it (``Step.alongside``) and ``may_run(other)`` allows, while the seconds they need
    (``needed_seconds``: a dataset made again with the step it is made for) together fit in the ``left`` seconds of
    the budget; the first that does not fit runs on its own, later."""
    chosen, seconds = [], 0
    for other in steps[steps.index(step) + 1:]:
        if other.alongside == step.name and may_run(other):
            if seconds + needed_seconds(other, estimates, refill) > left:
                break
            chosen.append(other)
            seconds += needed_seconds(other, estimates, refill)
    return chosen


def reserve_readers(names, refill: dict, estimates: dict, reserved: dict) -> None:
    """Keep in ``reserved`` (reader -> seconds) the time of the step each dataset of ``names`` was made again for,
    so that the steps between them cannot use it up (``held``)."""
    for name in names:
        if name in refill:
            reserved[refill[name]] = estimates[refill[name]].seconds


def held(step: Step, reserved: dict) -> int:
    """The seconds kept for steps other than ``step`` that a dataset was made again for, released as ``step`` is
    decided if it is one of them."""
    reserved.pop(step.name, None)
    return sum(reserved.values())


def _would_run(step: Step, **choice) -> bool:
    return decide(step, **choice)[0]


def _later(step: Step, estimates: dict, refill: dict, max_minutes: float) -> str:
    reader = refill.get(step.name)
    also = f" with {reader}'s {estimates[reader]}, which it is made again for," if reader else ""
    return f"its {estimates[step.name]}{also} would pass --max-minutes {max_minutes:g}; left for a later run"


_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
"""libc's ``prctl``, looked up here: the child calls it between fork and exec, where a step started from a thread
of the suite must not import or look anything up (another thread may have held a lock at the fork)."""


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the thread that started it ends, even by SIGKILL of the suite (Linux
    ``PR_SET_PDEATHSIG``)."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG


def run_command(command: tuple[str, ...], log: Path, timeout_s: float, *, header: str = "",
                environment: dict | None = None) -> int:
    """Run ``command`` in its own process group with its output in ``log``; kill the group after ``timeout_s``.

    The log starts with the command and then ``header``; ``environment`` is added to this process's for the command.
    Returns the exit status, ``TIMEOUT_RC`` after a timeout.  Interrupted (Ctrl-C, SIGTERM), it kills the group too.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_IMPORT_ROOT), os.environ.get("PYTHONPATH")])),
           REQUIRE_GPU: "1", **(environment or {})}  # a GPU test that finds no GPU fails instead of skipping
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        out.write(f"$ {shlex.join(command)}\n" + (f"{header}\n" if header else ""))
        out.flush()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                   preexec_fn=_die_with_parent)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            out.write(f"\ntierbench gpu-suite: killed after {timeout_s:.0f} s\n")
            return TIMEOUT_RC
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextlib.contextmanager
def _sigterm_as_exit():
    """SIGTERM ends the suite like Ctrl-C does, so the running step's process group is killed on the way out."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _check_names(names: set[str], steps: list[Step], option: str) -> None:
    unknown = sorted(names - {s.name for s in steps})
    if unknown:
        raise BadValue(f"{option}: no step named {', '.join(unknown)}; "
                       f"the steps are {', '.join(s.name for s in steps)}")


def run_suite(out_root="out/gpu", *, dry_run: bool = False, rerun=(), skip=(), only=(),
              max_minutes: float | None = None, measure_ceilings: bool = True, echo=print) -> int:
    """Run (or resume, or with ``dry_run`` only describe) the suite; returns the exit status (module docstring).
    ``only``, where given, leaves out every other step, as ``skip`` would."""
    gpu = visible_gpu()
    folder = device_folder(out_root, gpu)
    steps = plan(folder, Path(out_root).parent / "machines", measure_ceilings=measure_ceilings)
    rerun, skip, only = set(rerun), set(skip), set(only)
    _check_names(rerun, steps, "--rerun")
    _check_names(skip, steps, "--skip")
    _check_names(only, steps, "--only")
    if only:
        skip |= {step.name for step in steps if step.name not in only}
    state = read_state(folder)
    refill = refills(steps, state, gpu=gpu, rerun=rerun, skip=skip)
    choice = {"gpu": gpu, "rerun": rerun, "skip": skip, "refill": refill,
              "datasets": datasets_of(steps)}
    cold = set(refill) | {step.name for step in steps if step.dataset is not None and step.name in rerun - skip
                          and gpu is not None and not _is_prepared(step.dataset)}
    echo(f"gpu-suite for {gpu or device_name('cpu') + ' (no CUDA GPU visible)'}: results in {folder}; "
         + describe_estimates(list(estimates_of(steps, state, cold).values())))
    budget = math.inf if max_minutes is None else 60 * max_minutes
    if dry_run:
        _describe_plan(steps, state, choice, cold, budget, max_minutes, echo)
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(folder / f"{STATE_FILE}.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise BadValue(f"another tierbench gpu-suite is running in {folder} (it holds {lock.lock_file}); "
                       "wait for it to finish") from None
    try:
        with _sigterm_as_exit():
            return _run_steps(folder, steps, choice, cold, budget, max_minutes, echo)
    finally:
        lock.release()


def _describe_plan(steps, state, choice, cold, budget, max_minutes, echo) -> None:
    """What a run would do, step by step in plan order, with each step's estimate standing for its time."""
    estimates = estimates_of(steps, state, cold)
    refill = paired(choice["refill"], estimates, budget)
    planned, later, used, beside = frozenset(), frozenset(), 0, {}  # beside: step -> (why, the step it runs beside)
    reserved = {}  # a step a dataset was made again for -> its seconds
    for step in steps:
        expected = estimates[step.name]
        if step.name in beside:
            why, host = beside[step.name]
            echo(f"{step.name}: would run ({why}; alongside {host}); {expected}\n"
                 f"    $ {shlex.join(command_of(step, choice['rerun']))}")
            continue
        left = budget - used - held(step, reserved)
        run, why = decide(step, state, planned=planned, later=later, **choice)
        if not run and waits_for_later(step, state, later=later, planned=planned, **choice):
            later |= {step.name}
        elif run and needed_seconds(step, estimates, refill) > left:
            run, why, later = False, _later(step, estimates, refill, max_minutes), later | {step.name}
        elif run:
            known = {"state": state, "planned": planned | {step.name}, "later": later, **choice}
            chosen = companions(step, steps, estimates, refill, left, functools.partial(_would_run, **known))
            beside.update({other.name: (decide(other, **known)[1], step.name) for other in chosen})
            planned |= {step.name, *beside}
            used += max(expected.seconds, sum(estimates[other.name].seconds for other in chosen))
            reserve_readers([step.name, *(other.name for other in chosen)], refill, estimates, reserved)
        echo(f"{step.name}: {'would run' if run else 'would skip'} ({why}); {expected}\n"
             f"    $ {shlex.join(command_of(step, choice['rerun']))}")
    echo(f"would run {len(planned)} of {len(steps)} steps: ~{used} s ({used / 60:.1f} min) by the estimates above, "
         "steps run alongside another counted where they outlast it"
         + (f"; {len(later)} left for a later run by --max-minutes {max_minutes:g}" if later else ""))


def _left_for_later(later: frozenset[str], not_started: list[str], max_minutes: float) -> str:
    """The last line of a run that left steps for later: those not started, and how many wait on them."""
    waiting = len(later) - len(not_started)
    return (f"{len(later)} steps left for a later run by --max-minutes {max_minutes:g}: {', '.join(not_started)} "
            "did not fit" + (f", and {waiting} more wait on them" if waiting else "") + "; run the command again")


def _run_steps(folder, steps, choice, cold, budget, max_minutes, echo) -> int:
    state = read_state(folder)
    stamp = {"device": choice["gpu"] or device_name("cpu"), "git_revision": git_revision(),
             "source_sha256": source_digest()}
    state.update(stamp)
    estimates = estimates_of(steps, state, cold)  # before this run overwrites any step's time
    timed = paired(choice["refill"], estimates, budget)  # the datasets made again planned with their readers
    reserved = {}  # a step a dataset was made again for -> its seconds
    began = time.monotonic()
    runner = _StepRunner(folder, state, stamp, echo, choice["rerun"])
    summary, beside, later = [], set(), frozenset()  # beside: the steps that ran alongside an earlier one
    for step in steps:
        if step.name in beside:
            summary.append(runner.rows[step.name])
            continue
        kept = held(step, reserved)
        run, why = decide(step, state, later=later, **choice)
        if not run:
            echo(f"[skip] {step.name}: {why}")
            status = "done earlier" if why.startswith("done at") else "skipped"
            summary.append((step.name, status, state["steps"].get(step.name, {}).get("seconds"), why))
            later |= {step.name} if waits_for_later(step, state, later=later, **choice) else set()
            continue
        expected = estimates[step.name]
        left = budget - (time.monotonic() - began) - kept
        if needed_seconds(step, estimates, timed) > left:  # a later step may still fit
            why = _later(step, estimates, timed, max_minutes)
            echo(f"[later] {step.name}: {why}")
            summary.append((step.name, "not started", None, why))
            later |= {step.name}
            continue
        chosen = companions(step, steps, estimates, timed, left,
                            functools.partial(_would_run, state=state, later=later, **choice))
        background = threading.Thread(target=runner.run_all, args=(chosen, step.name, estimates),
                                      daemon=True)  # its steps are killed with the suite (_die_with_parent)
        if chosen:
            background.start()
        row = runner.run(step, why, expected)
        if chosen:
            background.join()
            beside.update(other.name for other in chosen)
        summary.append(row)
        ran = {step.name, *(other.name for other in chosen)}
        reserve_readers(ran, timed, estimates, reserved)
        if ran & set(choice["refill"]):  # made again: done for the steps that read it, as the state file says
            choice = {**choice, "refill": {name: reader for name, reader in choice["refill"].items()
                                           if name not in ran}}
    echo(_table(summary))
    if later:
        echo(_left_for_later(later, [row[0] for row in summary if row[1] == "not started"], max_minutes))
    return 1 if runner.failed else 0


class _StepRunner:
    """Runs steps and records them in the state file; steps run alongside another do so from a thread of their
    own, so the state and its file are updated under a lock."""

    def __init__(self, folder: Path, state: dict, stamp: dict, echo, rerun: set[str]):
        self.folder, self.state, self.stamp, self.echo, self.rerun = folder, state, stamp, echo, rerun
        self.lock = threading.Lock()
        self.rows = {}  # step name -> its summary row
        self.failed = False

    def run_all(self, steps: list[Step], beside: str, estimates: dict) -> None:
        """``steps`` one after another, alongside step ``beside``."""
        for step in steps:
            self.run(step, f"alongside {beside}", estimates[step.name])

    def run(self, step: Step, why: str, expected: Estimate) -> tuple:
        log = self.folder / "logs" / f"{step.name}.log"
        command = command_of(step, self.rerun)
        self.echo(f"[run] {step.name} ({why}; {expected}, killed after {step_timeout(expected)} s)\n"
                  f"    $ {shlex.join(command)}")
        entry = {"status": "running", "command": list(command), "log": str(log), "started": _now(),
                 "finished": None, "rc": None, "seconds": None, **self.stamp}
        if step.dataset is not None:
            entry["cache_held"] = _is_begun(step.dataset)
        with self.lock:
            entry.update(_earlier_runs(self.state["steps"].get(step.name)))
            self.state["steps"][step.name] = entry
            write_state(self.folder, self.state)
        start = time.monotonic()
        header = " | ".join(f"{key} {value}" for key, value in {**self.stamp, "time": entry["started"]}.items())
        rc = run_command(command, log, step_timeout(expected), header=f"# {header}",
                         environment={REVISION_ENV: self.stamp["git_revision"]})
        status = "done" if rc == 0 else "timed out" if rc == TIMEOUT_RC else "failed"
        with self.lock:
            entry.update(status=status, rc=rc, seconds=round(time.monotonic() - start, 1), finished=_now())
            for key, last in (("earlier_done", last_done), ("earlier_build", last_build)):
                if last(entry) is entry:  # it is now the run it kept an earlier one of
                    entry.pop(key, None)
            write_state(self.folder, self.state)
            self.failed |= rc != 0
        if rc != 0:
            self.echo(f"[{status}] {step.name}: rc {rc} after {entry['seconds']} s; the end of {log}:\n{_tail(log)}")
        self.rows[step.name] = (step.name, status, entry["seconds"], step.output if rc == 0 else str(log))
        return self.rows[step.name]


def _table(rows) -> str:
    header = ("step", "status", "seconds", "output")
    cells = [header] + [(n, s, "" if t is None else f"{t:.1f}", o) for n, s, t, o in rows]
    widths = [max(len(str(row[k])) for row in cells) for k in range(3)]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(row[:3], widths)) + "  " + str(row[3]) for row in cells)
