"""The planner: the data-loading time of each placement policy and hot fraction on a GPU, projected from a trace.

Given a GPU memory budget, the rows a cache may hold are what the budget
leaves after the model's needs (``model_bytes``).  For each policy and each
capacity that fits, the lab's replay of the dataset's trace
(``suite.policies.lab``) gives the bytes of one epoch: misses read over PCIe
by zero-copy, hits read from GPU memory, rows a dynamic cache writes into
GPU memory.  Divided by the machine's ceilings (``suite.measure.ceilings``:
zero-copy read for misses, device-to-device copy for hits and fills) they
give a bound on the epoch's data-loading time.  The ceilings come from a
machine profile of ``tierbench doctor`` (the newest GPU one in
``out/machines`` or ``results/machines`` unless ``--machine`` names one), else from the link's
nominal numbers (``NOMINAL``), labelled so.

A measured gather also pays per minibatch and per row (launches, the ids'
copy, the traffic counters; README, "GPU results").  Where GPU epochs of the
profile's device are in ``results/gpu``, ``fit_overhead`` fits that cost,
``a`` per minibatch plus ``b`` per row, by least squares on the epochs of
the *other* datasets, and ``compare_measured`` sets the projection with and
without it beside the measured gather time of the planned dataset's epochs:
a check on data the fit never saw.  The overhead is the same for every
policy on one trace, so it moves no recommendation.

Where the profile holds the fixed cost of a minibatch measured across batch
sizes on that GPU (``tierbench costs``, its ``minibatch_costs`` section, one
entry per sampler: the gather's seconds *above* the ceilings' bound fitted as
``a`` per minibatch plus ``b`` per input row, beside the medians of each batch
size timed), the projection of an epoch is the bound plus what every gather
pays beside its bytes (``fixed_seconds``): per minibatch, the medians' excess
interpolated at the trace's rows per minibatch (the smallest size's below
it), else, above the largest size timed, ``a x minibatches + b x row reads``
by the line, which the largest minibatches dominate.  The costs are the ones
timed on minibatches drawn by the planned epochs' sampler: a gather of
CPU-sampled ids first copies them to the GPU, one of GPU-sampled ids does
not, so one sampler's costs say nothing of the other's epochs, nor are their
measured epochs compared with each other's projections.  Without that entry (or with
one fitted on a machine without measured ceilings, whose line holds the bytes'
time too) the projection is the bound alone, and says why.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd

from suite.errors import BadValue
from suite.io.provenance import PROFILE_DIRS
from suite.measure.ceilings import newest_gpu_profile, profile_ceilings, read_profile
from suite.policies.static import replay_static
from suite.sweep.records import read_records
from suite.training.model_memory import training_state_bytes
from tiering.features.placement import hot_rows

GPU_RESULTS = Path("results/gpu")
ZERO_COPY, D2D = "zero_copy_read_bytes_per_s", "d2d_copy_bytes_per_s"
NOMINAL = {ZERO_COPY: 31.5e9, D2D: 1555e9 / 2}
"""Nominal ceilings where no profile is measured: PCIe 4.0 x16 (16 GT/s x 16 lanes x 128/130: 31.5 GB/s each way)
and half an A100-40GB's 1,555 GB/s of HBM for a copy, which reads and writes each byte."""
NOMINAL_SOURCE = ("NOMINAL link numbers, not measured: PCIe 4.0 x16 at 31.5 GB/s for misses, half of an "
                  "A100-40GB's 1,555 GB/s HBM for copies in GPU memory")
CONTEXT_BYTES = 1 << 30
"""GPU memory kept back for the CUDA context and the allocator's slack."""
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20,
          "GIB": 2**30, "TIB": 2**40}


def parse_bytes(text: str) -> int:
    """``40GB`` (10**9), ``40GiB`` (2**30), ``512MB``, or a plain number of bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?I?B?)\s*", str(text).upper())
    if not match or match.group(2) not in _UNITS:
        raise BadValue(f"a memory size is a number and a unit such as 40GB or 24GiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


COSTS_SECTION = "minibatch_costs"
"""The machine profile's section that ``tierbench costs`` writes (``suite.experiments.costs``): one entry per sampler
(``cpu``, ``gpu``, ``uva``), each the fits of minibatches that sampler drew."""
SAMPLING = "cpu"
"""The sampler of the planned epochs unless told (``tierbench train``'s and ``run``'s default)."""
ABOVE_BOUND = "the bound of the profile's ceilings"
"""What its gather line was fitted above where the profile had measured ceilings."""
GATHER_BY_BATCH = "gather_by_batch"
"""The entry's medians per batch size timed: input rows, and the gather's seconds above the bound.  The planner
prices minibatches up to the largest size timed by these rather than by the line, which the largest minibatches'
seconds dominate (at 8 seeds on the H200 the timed minibatches' excess was 0.29 ms, the line's 0.17 ms)."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """Ceilings (bytes/s) to project with, where they come from, and the gather's fixed cost where measured."""

    device: str
    ceilings: dict
    source: str
    measured: bool
    minibatch_costs: tuple[float, float] | None = None  # (seconds per minibatch, per input row) above the bound
    gather_by_batch: tuple[tuple[float, float], ...] = ()  # (input rows, seconds above the bound) per size timed
    sampling: str = SAMPLING  # the sampler of the planned epochs, whose fixed costs these are
    costs_note: str = ""  # why there are none, where the profile holds some of another sampler's minibatches
    costs_loader: str = ""  # the loader that gathered the minibatches the costs were timed on, and its hot fraction


def costs_by_sampling(profile: dict) -> dict[str, dict]:
    """The profile's ``minibatch_costs`` entries by the sampler that drew their minibatches.  A profile written
    before the section held one entry per sampler holds one entry itself, which names its sampler."""
    section = profile.get(COSTS_SECTION)
    if not isinstance(section, dict):
        return {}
    if "stages" in section:
        return {section.get("sampling", SAMPLING): section}
    return {sampling: entry for sampling, entry in section.items() if isinstance(entry, dict)}


def gather_costs(profile: dict, sampling: str = SAMPLING) -> tuple[float, float] | None:
    """``(a, b)`` of the gather's line timed on minibatches drawn by ``sampling``, where it was fitted above the
    ceilings' bound; None otherwise."""
    costs = costs_by_sampling(profile).get(sampling)
    if costs is None or costs.get("gather_above") != ABOVE_BOUND:
        return None
    gather = costs.get("stages", {}).get("gather", {})
    return float(gather["a_s"]), float(gather["b_s"])


def gather_medians(profile: dict, sampling: str = SAMPLING) -> tuple[tuple[float, float], ...]:
    """``(input rows, seconds above the bound)`` per batch size timed, by rows, beside ``gather_costs``'s line; empty
    where there is no line or the entry was written before it held them."""
    if gather_costs(profile, sampling) is None:
        return ()
    timed = costs_by_sampling(profile)[sampling].get(GATHER_BY_BATCH, [])
    return tuple(sorted((float(size["input_rows"]), float(size["excess_s"])) for size in timed))


def costs_loader(profile: dict, sampling: str) -> str:
    """The loader whose gathers ``sampling``'s fixed costs were timed through, with its hot fraction where it kept rows
    in GPU memory (an entry written before it recorded one was timed at 0%); "" without costs."""
    if gather_costs(profile, sampling) is None:
        return ""
    entry = costs_by_sampling(profile)[sampling]
    fraction = entry.get("hot_fraction", 0.0)
    return f"the {entry.get('loader', 'uva')} loader" + (f" at {fraction:.0%} hot" if fraction else "")


def costs_note(profile: dict, sampling: str) -> str:
    """Why a profile with fixed costs has none for ``sampling``'s minibatches ("" where it has, or has none at all)."""
    timed = sorted(costs_by_sampling(profile))
    if not timed or gather_costs(profile, sampling) is not None:
        return ""
    if sampling in timed:
        return (f"its fixed costs of {sampling}-sampled minibatches were fitted without measured ceilings, so their "
                "line holds the bytes' time too")
    return (f"its fixed costs were timed on minibatches sampled on {' and '.join(timed)}, not on {sampling} as the "
            f"planned epochs are (`tierbench costs --sampling {sampling}` times them)")


def fixed_seconds(costs: tuple[float, float] | None, batches, reads, by_batch=()):
    """What the gathers of ``batches`` minibatches reading ``reads`` rows pay beside their bytes (0 without costs):
    ``batches`` times the excess ``by_batch`` gives at ``reads / batches`` rows (``_by_medians``) where it holds
    sizes timed, else the line ``costs``."""
    if costs is None:
        return 0.0
    per_minibatch = _by_medians(by_batch, reads / batches) if batches else None
    return costs[0] * batches + costs[1] * reads if per_minibatch is None else batches * per_minibatch


def _by_medians(by_batch, rows: float) -> float | None:
    """The excess of a minibatch of ``rows`` rows by the sizes timed: interpolated between the two around it, the
    smallest's below the smallest (the excess of the smallest sizes is their fixed part: on the H200 0.29 and 0.25
    ms at 8 and 16 seeds); None above the largest, or with fewer than two sizes timed, where the line holds."""
    if len(by_batch) < 2 or rows > by_batch[-1][0]:
        return None
    timed_rows, excess = zip(*by_batch)
    return float(np.interp(rows, timed_rows, excess))


def fixed_basis(machine: Machine, batches, reads) -> str:
    """How ``fixed_seconds`` prices ``machine``'s minibatches of ``reads / batches`` rows, in words."""
    rows = reads / batches if batches else 0.0
    per_minibatch = _by_medians(machine.gather_by_batch, rows)
    timed = f", timed through {machine.costs_loader}" if machine.costs_loader else ""
    if per_minibatch is not None:
        return (f"the medians of the batch sizes timed nearest {rows:,.0f} rows a minibatch: "
                f"{per_minibatch * 1e3:.3f} ms a minibatch above the bound{timed}")
    a, b = machine.minibatch_costs
    return f"{a * 1e3:.3f} ms per minibatch + {b * 1e9:.2f} ns per row read above the bound{timed}"


NO_PROFILE = "none"
"""The ``--machine`` that asks for the nominal numbers even where a profile exists."""


def machine(path=None, machines=PROFILE_DIRS, sampling: str = SAMPLING) -> Machine:
    """The machine profile at ``path`` (a file, or a folder whose newest GPU profile is taken), else the newest GPU
    profile in ``machines`` (folders), else the nominal numbers (and those where ``path`` is ``"none"``); its fixed
    costs those of minibatches drawn by ``sampling``."""
    nominal = Machine("a GPU on PCIe 4.0 x16 (nominal)", dict(NOMINAL), NOMINAL_SOURCE, False, sampling=sampling)
    if path == NO_PROFILE:
        return nominal
    if path is None:
        found = newest_gpu_profile(machines, (ZERO_COPY, D2D))
        if found is None:
            return nominal
        path = found[0]
    elif Path(path).is_dir():
        found = newest_gpu_profile(path, (ZERO_COPY, D2D))
        if found is None:
            raise BadValue(f"{path} holds no machine profile with measured zero-copy and D2D ceilings: run "
                           "`tierbench doctor` on the GPU machine")
        path = found[0]
    elif not Path(path).is_file():
        raise BadValue(f"{path} does not exist: `tierbench doctor` on the GPU machine writes a profile")
    ceilings = profile_ceilings(path)
    if not {ZERO_COPY, D2D} <= set(ceilings):
        raise BadValue(f"{path} holds no measured zero-copy and D2D ceilings (made on a CPU, or with "
                       "--no-measure?): run `tierbench doctor` on the GPU machine")
    profile = read_profile(path)
    return Machine(profile["device"], ceilings, f"measured by `tierbench doctor` on {profile['time']} ({path})", True,
                   gather_costs(profile, sampling), gather_medians(profile, sampling), sampling,
                   costs_note(profile, sampling), costs_loader(profile, sampling))


def model_bytes(feature_dim: int, num_classes: int, layers: int, hidden: int, max_rows: int, row_bytes: int) -> int:
    """GPU memory training needs beside the cache, estimated: the model's parameters four times (weights, gradients,
    Adam's two moments), the largest minibatch's gathered rows and two hidden activations per layer of it, and
    ``CONTEXT_BYTES``."""
    return training_state_bytes(feature_dim, num_classes, layers, hidden) + max_rows * (row_bytes + 2 * layers * hidden * 4) + CONTEXT_BYTES


def projected_seconds(miss_bytes, hit_rows, fill_rows, row_bytes: int, ceilings: dict):
    """The data-loading bound: misses over the zero-copy ceiling, hits and fills over the D2D ceiling."""
    return miss_bytes / ceilings[ZERO_COPY] + (hit_rows + fill_rows) * row_bytes / ceilings[D2D]


def gpu_epochs(device: str, sampling: str = SAMPLING, results=GPU_RESULTS) -> pd.DataFrame:
    """Every recorded single-process epoch of a zero-copy loader (``uva``, ``tiered``) measured on ``device`` with
    minibatches drawn by ``sampling``, without the pipeline (whose gather time overlaps the others)."""
    frames = [read_records(path) for path in sorted(Path(results).glob("*/runs/*.csv"))]
    if not frames:
        return pd.DataFrame()
    epochs = pd.concat(frames, ignore_index=True)
    keep = ((epochs["device"] == device) & (epochs["sampling"] == sampling) & epochs["loader"].isin(["uva", "tiered"])
            & (epochs["processes"] == 1) & ~epochs["pipeline"].astype(bool))
    return epochs[keep].reset_index(drop=True)


def record_bound(epochs: pd.DataFrame, ceilings: dict) -> pd.Series:
    """Each recorded epoch's bound from its own counted bytes (no fills: these loaders never write a cache)."""
    hits = epochs["hit_ratio"] * epochs["rows_gathered"]
    return projected_seconds(epochs["pcie_payload_bytes"], hits, 0, epochs["row_bytes"], ceilings)


def fit_overhead(epochs: pd.DataFrame, ceilings: dict) -> tuple[float, float] | None:
    """``(a, b)``: seconds per minibatch and per row of the measured gather time above the bound, by least squares;
    None with fewer than two distinct rows-per-minibatch (a and b not identifiable)."""
    per_batch = epochs["rows_gathered"] / epochs["batches"]
    if len(epochs) < 2 or per_batch.round().nunique() < 2:
        return None
    design = np.stack([epochs["batches"], epochs["rows_gathered"]], axis=1).astype(np.float64)
    excess = (epochs["gather_s"] - record_bound(epochs, ceilings)).to_numpy(np.float64)
    (a, b), *_ = np.linalg.lstsq(design, excess, rcond=None)
    return float(a), float(b)


def static_epoch(counts: np.ndarray, order: np.ndarray, capacity: int, row_cost: np.ndarray) -> tuple[float, float]:
    """``(miss bytes, hit rows)`` per epoch of the rows ``order[:capacity]`` kept (capacity 0: nothing kept)."""
    if capacity == 0:
        return float((counts * row_cost).sum() / counts.shape[0]), 0.0
    kept = replay_static("placed", counts, order, [capacity], row_cost)[0]
    return float(kept.miss_bytes.mean()), float(kept.hits.mean())


REVISION_CHARS = 12
"""How much of a git revision the comparison shows (the length the records of earlier runs hold)."""
DIRTY = "-dirty"


def short_revision(revision: str) -> str:
    """``revision``'s first ``REVISION_CHARS`` characters, still marked where the working tree was not clean."""
    return revision[:REVISION_CHARS] + (DIRTY if revision.endswith(DIRTY) else "")


def compare_measured(name: str, batch_size: int, fanouts, measured_machine: Machine, counts, order, row_cost,
                     row_bytes: int, batches_per_epoch: int, reads_per_epoch: float,
                     results=GPU_RESULTS) -> pd.DataFrame:
    """Projected against measured data-loading (gather) time for the GPU epochs of ``name`` at this trace's batch
    and fanouts, sampled as the machine's fixed costs were (``Machine.sampling``): the ``tiered`` loader (order
    ``order``) at each hot fraction, and ``uva`` (nothing kept).  One row per loader, hot fraction and revision of
    the code that measured the epochs, oldest first: epochs of different code are never averaged together."""
    epochs = gpu_epochs(measured_machine.device, measured_machine.sampling, results)
    if epochs.empty:
        return pd.DataFrame()
    mine = epochs[(epochs["dataset"] == name) & (epochs["batch_size"] == batch_size)
                  & (epochs["fanouts"] == ",".join(map(str, fanouts)))]
    overhead = fit_overhead(epochs[epochs["dataset"] != name], measured_machine.ceilings)
    mine = mine.assign(revision=mine["git_revision"].astype(str).map(short_revision))
    mine = mine.assign(first=mine.groupby("revision")["time"].transform("min"))
    rows, bounds = [], {}  # the bound of each capacity, replayed once for the revisions that measured it
    num_nodes = counts.shape[1]
    fixed = None if measured_machine.minibatch_costs is None else fixed_seconds(
        measured_machine.minibatch_costs, batches_per_epoch, reads_per_epoch, measured_machine.gather_by_batch)
    for (loader, fraction, _, revision), group in mine.groupby(["loader", "hot_fraction", "first", "revision"]):
        capacity = hot_rows(num_nodes, fraction) if loader == "tiered" else 0
        if capacity not in bounds:
            miss_bytes, hit_rows = static_epoch(counts, order, capacity, row_cost)
            bounds[capacity] = projected_seconds(miss_bytes, hit_rows, 0, row_bytes, measured_machine.ceilings)
        bound = bounds[capacity]
        row = {"loader": loader, "hot fraction": fraction, "revision": revision, "epochs": len(group),
               "measured gather s": group["gather_s"].mean(), "bound s": bound,
               "bound error": bound / group["gather_s"].mean() - 1}
        if overhead is not None:
            projected = bound + overhead[0] * batches_per_epoch + overhead[1] * reads_per_epoch
            row.update({"bound + overhead s": projected, "error": projected / group["gather_s"].mean() - 1})
        if fixed is not None:
            projected = bound + fixed
            row.update({"bound + fixed cost s": projected,
                        "fixed cost error": projected / group["gather_s"].mean() - 1})
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["overhead"] = overhead
    table.attrs["fitted_on"] = sorted(set(epochs["dataset"]) - {name})
    return table
