"""Every asv benchmark (``benchmarks/bench_*.py``) runs: each class set up for each of its named settings (loaders,
policies, graph shapes) at its smallest size, and each of its ``time_``, ``track_``, ``mem_`` and ``peakmem_``
methods called once, the way ``asv run`` calls them (``setup_cache``'s value first where there is one).  The graphs
and tables are made small here, so that a benchmark broken by a change in the code it measures fails CI rather than
the next ``asv run``; how fast anything is stays asv's to say.  A setting asv would skip (``NotImplementedError`` from
``setup``: the CUDA ones without a GPU) is skipped here too, and only where no GPU is visible."""

import importlib
import inspect
import itertools
import math
import numbers
from pathlib import Path

import pytest
import torch

import benchmarks
from benchmarks import workloads

MODULES = sorted(path.stem for path in Path(benchmarks.__file__).parent.glob("bench_*.py"))
PREFIXES = ("time_", "track_", "mem_", "peakmem_")
"""The methods asv runs as benchmarks."""
SMALL_NODES = 1 << 13
"""The papers-like graphs' size here (asv's: ``benchmarks.workloads.NODES``), and the other sizes made this small."""
SMALL = {"NODES": SMALL_NODES, "SIZES": [SMALL_NODES // 2, SMALL_NODES], "ROWS": SMALL_NODES}


def asv_classes(module) -> list[type]:
    """The classes of ``module`` asv would find benchmarks in."""
    return [cls for name, cls in vars(module).items() if inspect.isclass(cls) and cls.__module__ == module.__name__
            and any(attr.startswith(PREFIXES) for attr in dir(cls))]


def settings(cls) -> list[tuple]:
    """Each combination of ``cls``'s parameters to run: every named setting, and of each axis of sizes (integers)
    only the smallest."""
    params = getattr(cls, "params", None)
    if params is None:
        return [()]
    axes = params if params and isinstance(params[0], list) else [params]
    axes = [[min(axis)] if all(isinstance(v, int) for v in axis) else axis for axis in axes]
    return list(itertools.product(*axes))


@pytest.fixture
def small(monkeypatch, tmp_path):
    """The workloads' and every benchmark module's sizes made small, and the working directory a fresh one (asv runs
    ``setup_cache`` in a directory of its own)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(workloads.OnPapersLikeGraphs, "params", SMALL["SIZES"])  # bound when the class was made
    for module in [workloads, *(importlib.import_module(f"benchmarks.{name}") for name in MODULES)]:
        for name, value in SMALL.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)


def test_every_benchmark_module_is_found_with_its_classes():
    assert {"bench_datasets", "bench_disk", "bench_loaders", "bench_policies", "bench_sampling",
            "bench_tiering"} <= set(MODULES)
    for name in MODULES:
        assert asv_classes(importlib.import_module(f"benchmarks.{name}")), name


@pytest.mark.parametrize("module_name", MODULES)
def test_every_asv_benchmark_runs_once_on_small_inputs(module_name, small):
    module = importlib.import_module(f"benchmarks.{module_name}")
    ran, skipped = [], []
    for cls in asv_classes(module):
        cached = (cls().setup_cache(),) if hasattr(cls, "setup_cache") else ()
        methods = sorted(attr for attr in dir(cls) if attr.startswith(PREFIXES))
        for setting in settings(cls):
            bench, args = cls(), (*cached, *setting)
            try:
                if hasattr(bench, "setup"):
                    bench.setup(*args)
            except NotImplementedError:  # asv's skip
                assert not torch.cuda.is_available(), f"{cls.__name__}{setting} skipped on a GPU machine"
                skipped.append((cls.__name__, setting))
                continue
            for method in methods:
                value = getattr(bench, method)(*args)
                if method.startswith("track_"):
                    assert isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0, (method, value)
                ran.append((cls.__name__, method, setting))
            if hasattr(bench, "teardown"):
                bench.teardown(*args)
    assert ran, f"no benchmark of {module_name} ran (skipped: {skipped})"
