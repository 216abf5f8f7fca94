"""What building and preparing a dataset costs: wall time, peak memory and size on disk, measured and projected.

``tierbench datasets cost NAME [NAME ...] --out DIR [--one-thread NAME]`` (``tox -e build-cost``) writes
``build-cost.md`` / ``.csv`` / ``.png`` into DIR.  For each dataset two child processes run, one after the other:

* ``tierbench datasets generate NAME --force -q``: the build (``suite.datasets.build``);
* ``tierbench prepare --dataset NAME --scorer wrpr --force -q``: checksums of the base entry, scoring by weighted
  reverse PageRank, reordering, permuting the features (``suite.datasets.reordered``).

Each child is measured from outside: its wall time from start to exit (Python's start and imports included), and
its peak resident memory, ``ru_maxrss`` of the resource usage ``os.wait4`` returns for that one child (the counter
``getrusage(RUSAGE_CHILDREN)`` takes the maximum of over all children; here it is each child's own).  Resident
memory counts mapped file pages as well as allocated memory.  Then the entry's size on disk.  The machine's
one-minute load average before each child is recorded beside it: other work on the machine slows a child without
showing in its own numbers.

**Projection.** Each of the four costs is fitted over the measured datasets (at least three) as::

    cost = c0 + c1 * E + c2 * F

with E the dataset's list entries and F the bytes of its feature table, the coefficients non-negative (SciPy's
``nnls``): per-node arrays are folded into F, which grows with the nodes.  The fit is evaluated at papers-l when it
was not measured (its entries: its nodes times the entries per node of the measured papers-like datasets) and at
the size of ogbn-papers100M (``suite.datasets.regime.IMITATED``; features as wide as the papers presets'), with
the entries per node of our papers presets (about 30, so ~3.3B entries) and with OGB's 1.6B edges.

**Paper scale.** A ``gpu_built`` preset (``papers-100m``: ogbn-papers100M's size) is not built here: its build
runs on the GPU machine and its feature table is never written to disk (``suite.datasets.memory_plan``).  Its row
is a linear projection from the measured preset with the most list entries (a papers-like one first;
``PROJECTION_REFERENCE`` is measured when only paper-scale presets are named): the reference's list entries per
second for the build and the prepare, and its bytes scaled by the arrays' bytes (``Preset.estimated_bytes``, the
feature table included, for the peaks; ``Preset.disk_bytes``, the arrays the entry writes, for its size on disk).

**Cores.** Measured times are this machine's (all of its cores).  With ``--one-thread NAME`` NAME is also built
and prepared with one numba thread, right after its runs on all cores (so under the same load); Amdahl's law on
the two runs, ``T(p) = S + P / p``, splits each time into a serial part S and a part P that numba spreads over
threads, and a time projected to 16 cores is the projected time here scaled by ``(S + P/16) / (S + P/p)``.  That is an assumption: the parallel share stays what it was on
NAME at every size, a core there is as fast as one here, and memory bandwidth never limits, so the 16-core times
are optimistic.  Peak memory is taken as the same on any number of cores (numba's per-thread buffers are small).

Records: ``build-cost.csv``, the measured and projected rows with their provenance, and its sidecar (the command,
this machine's cores and memory, the fitted coefficients and Amdahl's factors); ``suite.figures.build_cost`` draws
them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from suite.datasets.build import entry_path, regenerate_hint
from suite.datasets.cache import entry_bytes, read_manifest
from suite.datasets.presets import PAPERS_100M_EDGES, PRESETS, get_preset
from suite.datasets.regime import IMITATED
from suite.datasets.reordered import reordered_entry_path
from suite.errors import BadValue
from suite.io import records
from suite.io.provenance import provenance
from suite.measure.host_memory import physical_bytes
from suite.registry import scorer_params

log = logging.getLogger(__name__)

SCORER = "wrpr"
PAPERS = "ogbn-papers100M"
TARGET_CORES = 16
TARGET_MEMORY_BYTES = 128 * 10**9
"""The GPU machine the projection is for: 16 cores, 128 GB."""
COSTS = ("size_on_disk_bytes", "build_s", "build_peak_bytes", "prepare_s", "prepare_peak_bytes")
"""What is measured of each dataset, and fitted and projected."""
MIN_FIT_POINTS = 3
PROJECTION_REFERENCE = "papers-xs"
"""Measured for the linear projection of a paper-scale preset when no other preset is named."""
LINEAR = "projected (linear)"
STEM = "build-cost"
FACTS = ("command", "cpu_count", "memory_bytes", "cores", "one_thread", "coefficients", "factors")


@dataclasses.dataclass(frozen=True)
class ChildCost:
    seconds: float
    peak_bytes: int
    load: float  # one-minute load average of the machine before the child started


_PEAK_REPORTER = (
    "import os, sys\n"
    "pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
"""Runs a command and writes its peak resident set (KiB) into a file.  Linux counts, in a child's ``ru_maxrss``, the
peak of the memory it ran in before ``exec``: a child spawned straight from this process would report this process's
peak when that is larger.  Spawned from this small reporter, the command inherits only the reporter's few MB."""


def run_child(command: list[str], threads: int | None = None) -> ChildCost:
    """Run ``command`` in a child process (with ``threads`` numba threads if given); its wall time and peak memory."""
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)} if threads else None
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        start = time.perf_counter()
        returncode = subprocess.run([sys.executable, "-c", _PEAK_REPORTER, str(peak_file), *command], stdout=log,
                                    stderr=log, env=env).returncode
        seconds = time.perf_counter() - start
        if returncode:
            log.seek(0)
            last = (log.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise BadValue(f"`{' '.join(command)}` failed (exit status {returncode}): {last}")
        peak_kib = int(peak_file.read_text())
    return ChildCost(seconds, peak_kib * 1024, load)  # ru_maxrss is in KiB on Linux


def tierbench(*args: str) -> list[str]:
    """The command line of ``tierbench ARGS`` run by this Python."""
    return [sys.executable, "-m", "suite.cli", *args]


def measure_dataset(name: str, threads: int | None = None) -> dict:
    """Build and prepare ``name`` in child processes; one row of the table."""
    get_preset(name)  # an unknown name fails here, before anything runs
    build = run_child(tierbench("datasets", "generate", name, "--force", "-q"), threads)
    base = entry_path(name)
    manifest = read_manifest(base, regenerate_hint(name))
    prepare = run_child(tierbench("prepare", "--dataset", name, "--scorer", SCORER, "--force", "-q"), threads)
    reordered = reordered_entry_path(name, SCORER, scorer_params(SCORER), base, regenerate_hint(name))
    return {
        "dataset": name,
        "rows": "measured",
        "cores": threads or numba.config.NUMBA_NUM_THREADS,
        "nodes": manifest["num_nodes"],
        "list_entries": manifest["num_edges"],
        "feature_bytes": manifest["num_nodes"] * manifest["feature_dim"] * 4,
        "size_on_disk_bytes": entry_bytes(base),
        "reordered_size_bytes": entry_bytes(reordered),
        "build_s": build.seconds,
        "build_peak_bytes": build.peak_bytes,
        "prepare_s": prepare.seconds,
        "prepare_peak_bytes": prepare.peak_bytes,
        "load_before_build": build.load,
        "load_before_prepare": prepare.load,
        "papers_like": PRESETS[name].imitates == PAPERS,
    }


def fit(measured: pd.DataFrame) -> pd.DataFrame:
    """``cost = c0 + c1 * E + c2 * F`` for each of ``COSTS``, by non-negative least squares: a row of coefficients
    per cost."""
    from scipy.optimize import nnls

    design = np.column_stack([np.ones(len(measured)), measured["list_entries"], measured["feature_bytes"]]).astype(float)
    scale = design.max(axis=0)  # columns of similar size for the solver
    rows = {}
    for cost in COSTS:
        coefficients, _ = nnls(design / scale, measured[cost].to_numpy(float))
        rows[cost] = coefficients / scale
    return pd.DataFrame.from_dict(rows, orient="index", columns=["c0", "c1 (per entry)", "c2 (per feature byte)"])


def amdahl_factor(parallel: pd.Series, serial: pd.Series, cores: int, target: int) -> dict[str, float]:
    """For each time: ``T(target) / T(cores)`` by Amdahl's law from the run on ``cores`` threads and the one-thread run."""
    factors = {}
    for cost in ("build_s", "prepare_s"):
        t_p, t_1 = parallel[cost], serial[cost]
        p = max(0.0, (t_1 - t_p) * cores / (cores - 1))  # the part numba spreads over threads, as one thread runs it
        s = max(0.0, t_1 - p)
        factors[cost] = (s + p / target) / (s + p / cores)
    return factors


def project(measured: pd.DataFrame, coefficients: pd.DataFrame, factors: dict | None, cores: int) -> pd.DataFrame:
    """Projected rows: papers-l (if not measured) here, and it and ogbn-papers100M's size on the 16-core machine."""
    papers = measured[measured["papers_like"]]
    per_node = (papers["list_entries"] / papers["nodes"]).mean() if len(papers) else float("nan")
    width = get_preset("papers-l").feature_dim
    n_real = IMITATED[PAPERS].num_nodes
    targets = [(f"{PAPERS} size, {per_node:.1f} entries per node", n_real, n_real * per_node),
               (f"{PAPERS} size, OGB's edges", n_real, PAPERS_100M_EDGES)]
    if "papers-l" not in set(measured["dataset"]):
        n_l = get_preset("papers-l").num_nodes
        targets.insert(0, ("papers-l", n_l, n_l * per_node))
    rows = []
    for name, nodes, entries in targets:
        base = {"dataset": name, "nodes": nodes, "list_entries": int(round(entries)), "feature_bytes": nodes * width * 4}
        x = np.array([1.0, base["list_entries"], base["feature_bytes"]])
        costs = {cost: float(coefficients.loc[cost].to_numpy() @ x) for cost in COSTS}
        if name == "papers-l":
            rows.append({**base, "rows": "projected", "cores": cores, **costs})
        if factors:
            scaled = {cost: value * factors.get(cost, 1.0) for cost, value in costs.items()}
            rows.append({**base, "rows": "projected", "cores": TARGET_CORES, **scaled})
    return pd.DataFrame(rows)


def linear_projection(reference: pd.Series, name: str) -> dict:
    """The row of the paper-scale preset ``name``, linear in the measured row ``reference``: its list entries per
    second, its peaks per byte of arrays and its size per byte written."""
    preset, measured = get_preset(name), get_preset(reference["dataset"])
    entries = preset.list_entries / measured.list_entries
    arrays = preset.estimated_bytes() / measured.estimated_bytes()
    written = preset.disk_bytes / measured.disk_bytes
    return {"dataset": name, "rows": LINEAR, "cores": reference["cores"], "nodes": preset.num_nodes,
            "list_entries": preset.list_entries, "feature_bytes": preset.feature_bytes,
            "size_on_disk_bytes": reference["size_on_disk_bytes"] * written,
            "build_s": reference["build_s"] * entries, "build_peak_bytes": reference["build_peak_bytes"] * arrays,
            "prepare_s": reference["prepare_s"] * entries,
            "prepare_peak_bytes": reference["prepare_peak_bytes"] * arrays,
            "papers_like": preset.imitates == PAPERS, "projected_from": reference["dataset"]}


def reference_row(measured: pd.DataFrame) -> pd.Series:
    """The measured row a linear projection starts from: the papers-like one with the most list entries, else the
    one with the most."""
    papers = measured[measured["papers_like"]]
    pool = papers if len(papers) else measured
    return pool.loc[pool["list_entries"].idxmax()]


def measure(names: list[str], records_dir, one_thread: str | None = None, progress: bool = True) -> Path:
    """Measure every dataset in ``names`` (and ``one_thread`` with one numba thread), project, and write the records
    into ``records_dir``; their path.  Paper-scale presets are projected, not built (the module docstring)."""
    from tqdm.auto import tqdm

    paper_scale = [name for name in names if get_preset(name).gpu_built]
    built = [name for name in names if name not in paper_scale] or ([PROJECTION_REFERENCE] if paper_scale else [])
    if one_thread is not None and one_thread not in built:
        raise BadValue(f"--one-thread {one_thread} must be one of the datasets measured ({', '.join(built)})")
    record = provenance(device="cpu")
    cores = numba.config.NUMBA_NUM_THREADS
    # the one-thread run right after the same dataset's run on all cores: under the same load, if the machine has any
    runs = [(name, threads) for name in built for threads in ((None, 1) if name == one_thread else (None,))]
    rows = []
    for name, threads in tqdm(runs, desc="build cost", unit="dataset", disable=not progress):
        rows.append(measure_dataset(name, threads))
        log.info("%s on %d cores: build %.1f s, peak %.2f GB; prepare %.1f s, peak %.2f GB; %.2f GB on disk", name,
                 rows[-1]["cores"], rows[-1]["build_s"], rows[-1]["build_peak_bytes"] / 1e9, rows[-1]["prepare_s"],
                 rows[-1]["prepare_peak_bytes"] / 1e9, rows[-1]["size_on_disk_bytes"] / 1e9)
    measured = pd.DataFrame(rows)
    everywhere = measured[measured["cores"] == cores]
    coefficients = factors = None
    table = measured
    if everywhere["dataset"].nunique() >= MIN_FIT_POINTS:
        coefficients = fit(everywhere)
        if one_thread and cores > 1:
            serial = measured[(measured["dataset"] == one_thread) & (measured["cores"] == 1)].iloc[0]
            parallel = everywhere[everywhere["dataset"] == one_thread].iloc[0]
            factors = amdahl_factor(parallel, serial, cores, TARGET_CORES)
        table = pd.concat([measured, project(everywhere, coefficients, factors, cores)], ignore_index=True)
    if paper_scale:
        reference = reference_row(everywhere)
        table = pd.concat([table, pd.DataFrame([linear_projection(reference, name) for name in paper_scale])],
                          ignore_index=True)
    command = " ".join(["tierbench datasets cost", *names, "--out", str(records_dir)]
                       + (["--one-thread", one_thread] if one_thread else []))
    facts = {"command": command, "cpu_count": os.cpu_count(), "memory_bytes": physical_bytes(), "cores": cores,
             "one_thread": one_thread,
             "coefficients": None if coefficients is None else {cost: list(row) for cost, row in coefficients.iterrows()},
             "factors": factors}
    return records.write_records(Path(records_dir) / f"{STEM}.csv", table.assign(**record), record, facts, index=False)


def read_records(path) -> records.Records:
    """The build-cost records in ``path`` (their folder or ``build-cost.csv``)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS)

