"""``tierbench costs``: the fixed cost of one minibatch per stage, measured across batch sizes (PyTorch-Direct §3.3).

Every stage of a minibatch pays a cost that does not shrink with its size
(kernel launches, the ids' copy, the traffic counters, Python) beside one
that grows with it.  For each batch size (8 to 4,096 seeds by default) this
samples ``repeats`` minibatches of distinct training seeds, after one untimed
minibatch, and times each stage of each on its own: on CUDA by events on the
stream it runs on (``suite.measure.timing.stage_seconds``), elsewhere by the
host clock.  The minibatches are drawn by the training's sampler of
``sampling`` (``suite.training.sampling``: ``cpu`` by default; ``gpu``, the
fused sampler with the CSR in GPU memory, is the GPU-native path whose fixed
costs the second GPU visit judges), the fused sampler launching
``sampler_kernels`` (``tiering.sampling.fused.KERNELS``).  Then, per stage, a
least-squares line
``seconds = a + b x rows``:

* **sample**: rows are the minibatch's sampled edges (the sampler's work
  grows with them, not with the seeds);
* **gather**: rows are the minibatch's input rows (``input_nodes``), and the
  seconds are the gather's time *above* the bound the machine profile's
  ceilings give for its bytes (misses over zero-copy, hits over D2D,
  ``suite.policies.planner.projected_seconds``), so that ``a`` and ``b`` are
  what the traffic model leaves out; without measured ceilings (a CPU) the
  bound is 0 and the line fits the whole gather;
* **train**: rows are the input rows (the first layer's width).

The loader gathers with a hot tier of ``hot_fraction`` of the rows (0 by
default: ``uva`` keeps none; ``tiered`` at the epochs' hot fraction, over the
dataset reordered by the epochs' scorer, times the gathers that the epochs
make).  With ``operators`` minibatches asked for, each
batch size's timed ones are followed by that many more run under torch's
profiler (``suite.measure.operators``; never the timed ones, which the
profiler would slow): what each stage issues, operator by operator, with its
host and device time and the kernels it launches.  With ``compile_model``
the model trains as ``torch.compile`` made it (``suite.training.trainer``):
the train stage's fixed cost, compiled, beside an eager run's; its graphs
are compiled on untimed minibatches of the smallest and the largest size
before any is timed, so that no timed one waits for a compilation.  Such a
run writes its records only: the machine profile keeps the fits of an eager
model's minibatches, which is how the epochs the planner projects train.

Records: ``costs.csv`` (one row per timed minibatch) and its sidecar with the
fits, ``costs-operators.csv`` (one row per batch size, stage and top-level
operator) where operators were profiled; the fits also go into the machine
profile (``tierbench doctor``'s JSON), in its ``minibatch_costs`` section under the sampler's name (beside
another sampler's, which they leave as they were), with the medians of each
batch size's input rows and gather excess (``gather_by_batch``), where
``tierbench plan`` finds those of the sampler it plans for.  ``refit``
(``tierbench costs --from-records``) puts them there again from records
already made, measuring nothing: a GPU visit's, into the committed profile of
the machine that measured them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.datasets.reordered import load_reordered
from suite.errors import BadValue
from suite.io import atomic, records
from suite.io.provenance import provenance
from suite.measure.ceilings import profile_ceilings, read_profile
from suite.measure.operators import COLUMNS as OPERATOR_COLUMNS
from suite.measure.operators import OUTSIDE_OPERATORS, operator_table, profiled, stage_range
from suite.measure.stage_events import StageEvents
from suite.measure.timing import stage_seconds
from suite.policies.planner import (
    ABOVE_BOUND,
    COSTS_SECTION,
    D2D,
    GATHER_BY_BATCH,
    ZERO_COPY,
    costs_by_sampling,
    projected_seconds,
)
from suite.registry import create_loader
from suite.training.sampling import check_kernels, check_single_process, describe_sampling, launched_kernels
from suite.training.trainer import Trainer
from tiering.sampling.fused import DEFAULT_KERNELS

STEM = "costs"
OPERATORS_STEM = "costs-operators"
BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
ROWS = {"sample": "sampled_edges", "gather": "input_rows", "train": "input_rows"}
"""The column each stage's seconds are fitted against."""
FACTS = ("command", "dataset", "loader", "sampling", "sampler_kernels", "device", "fanouts", "batch_sizes", "repeats",
         "gather_above", "fits", "machine_profile")


def fit_line(rows, seconds) -> tuple[float, float]:
    """``(a, b)`` of ``seconds = a + b x rows`` by least squares; at least two distinct row counts are needed."""
    rows, seconds = np.asarray(rows, np.float64), np.asarray(seconds, np.float64)
    if len(np.unique(rows)) < 2:
        raise BadValue("a fixed cost needs minibatches of at least two sizes: give two or more --batch-sizes")
    design = np.stack([np.ones_like(rows), rows], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    return float(a), float(b)


def fits_of(table: pd.DataFrame) -> dict:
    """Per stage: ``a_s`` (seconds per minibatch), ``b_s`` (seconds per row) and what a row is."""
    fitted = {}
    for stage, column in ROWS.items():
        seconds = table["gather_excess_s"] if stage == "gather" else table[f"{stage}_s"]
        a, b = fit_line(table[column], seconds)
        fitted[stage] = {"a_s": a, "b_s": b, "per": "sampled edge" if column == "sampled_edges" else "input row"}
    return fitted


def _time_minibatch(trainer: Trainer, seeds: torch.Tensor, generator: torch.Generator, ceilings: dict) -> dict:
    device, untimed, times = trainer.device, StageEvents("cpu"), {"train": 0.0}
    batch, sample_s = stage_seconds(lambda: trainer.sampler.sample(seeds, generator), device)
    trainer.loader.reset_stats()
    (batch, x, blocks), gather_s = stage_seconds(lambda: trainer._prepare(batch), device)
    stats = trainer.loader.stats()
    _, train_s = stage_seconds(lambda: trainer._step(batch, x, blocks, times, train=True, events=untimed), device)
    row_bytes = trainer.dataset.feature_dim * trainer.dataset.features.element_size()
    bound = projected_seconds(stats.pcie_payload_bytes, stats.hits, 0, row_bytes, ceilings) if ceilings else 0.0
    return {"seeds": len(seeds), "sampled_edges": batch.num_sampled_edges, "input_rows": len(batch.input_nodes),
            "pcie_payload_bytes": stats.pcie_payload_bytes, "hit_rows": stats.hits, "sample_s": sample_s,
            "gather_s": gather_s, "gather_bound_s": bound, "gather_excess_s": max(gather_s - bound, 0.0),
            "train_s": train_s}


def _profile_minibatch(trainer: Trainer, seeds: torch.Tensor, generator: torch.Generator) -> None:
    """One minibatch of ``seeds``, each stage in its profiler range, which ends once the device has done the stage's
    work (``suite.measure.operators`` counts the device work that starts within a range as its stage's)."""
    with stage_range("sample"):
        batch = trainer.sampler.sample(seeds, generator)
        trainer._sync()
    with stage_range("gather"):
        prepared = trainer._prepare(batch)
        trainer._sync()
    with stage_range("train"):
        trainer._step(*prepared, {"train": 0.0}, train=True, events=StageEvents("cpu"))


def measure(name: str, records_dir, profile_path, *, device="cpu", loader: str = "uva", hot_fraction: float = 0.0,
            scorer: str | None = None, sampling: str = "cpu", sampler_kernels: str = DEFAULT_KERNELS,
            batch_sizes=BATCH_SIZES, repeats: int = 5, operators: int = 0, compile_model: bool = False, fanouts=None,
            seed: int = 0, ogb_root=None, progress: bool = True) -> Path:
    """Time the stages of ``repeats`` minibatches of each size in ``batch_sizes`` on ``name``, sampled by
    ``sampling``'s sampler (the fused one launching ``sampler_kernels``) and gathered by ``loader`` at
    ``hot_fraction`` (from the dataset reordered by ``scorer``, where one is given), the model compiled where
    ``compile_model``; then profile ``operators`` more of each size.  Write the records into ``records_dir`` and the
    fits into the machine profile at ``profile_path`` (not with ``compile_model``); the records' path."""
    profile_path = Path(profile_path)
    sizes = sorted(set(batch_sizes))
    if len(sizes) < 2:
        raise BadValue("a fixed cost needs minibatches of at least two sizes: give two or more --batch-sizes")
    if operators < 0:
        raise BadValue(f"--operators is a number of minibatches, at least 0, got {operators}")
    check_single_process(sampling, device)  # before the dataset is loaded
    check_kernels(sampling, sampler_kernels, device)
    kernels = launched_kernels(sampling, sampler_kernels)
    if not profile_path.is_file():
        raise BadValue(f"{profile_path} does not exist: run `tierbench doctor` on this machine first, the fixed "
                       "costs go into its profile")
    profile = read_profile(profile_path)
    ceilings = profile_ceilings(profile_path)
    ceilings = ceilings if {ZERO_COPY, D2D} <= set(ceilings) else {}
    device = torch.device(device)
    fanouts = tuple(fanouts) if fanouts else regimes.default_fanouts(name)
    dataset = load_reordered(name, scorer, ogb_root=ogb_root, progress=progress) if scorer \
        else load_dataset(name, ogb_root=ogb_root, progress=progress)
    train_ids = dataset.splits["train"]
    if sizes[-1] > len(train_ids):
        raise BadValue(f"{name} has {len(train_ids):,} training nodes, fewer than a batch of {sizes[-1]:,} seeds")
    with create_loader(loader, dataset, hot_fraction, device, progress=progress) as feature_loader:  # unpinned
        trainer = Trainer(dataset, feature_loader, fanouts, batch_size=sizes[0], seed=seed, sampling=sampling,
                          sampler_kernels=sampler_kernels, compile_model=compile_model)
        generator = torch.Generator().manual_seed(seed)

        def draw(size: int) -> torch.Tensor:
            return train_ids[torch.randperm(len(train_ids), generator=generator)[:size]]

        for size in (sizes[0], sizes[-1]) if compile_model else ():  # the compilations, untimed
            _time_minibatch(trainer, draw(size), generator, ceilings)
        rows, operator_tables = [], []
        for size in tqdm(sizes, desc=f"costs of {name} minibatches", unit="size", disable=not progress):
            for repeat in range(repeats + 1):  # the first is untimed: it warms the allocator and the kernels' caches
                timed = _time_minibatch(trainer, draw(size), generator, ceilings)
                if repeat:
                    rows.append({"batch_size": size, "repeat": repeat, **timed})
            if operators:
                with profiled(device) as trace:
                    for _ in range(operators):
                        _profile_minibatch(trainer, draw(size), generator)
                profiled_table = operator_table(trace.events(), operators, on_device=device.type == "cuda")
                operator_tables.append(profiled_table.assign(batch_size=size))
    table = pd.DataFrame(rows)
    fits = fits_of(table)
    above = ABOVE_BOUND if ceilings else "nothing (the profile has no measured ceilings)"
    records_dir = Path(records_dir)
    kernels_option = f" --sampler-kernels {kernels}" if kernels else ""
    facts = {
        "command": (f"tierbench costs --dataset {name} --device {device} --loader {loader} --hot-fraction "
                    f"{hot_fraction:g}{f' --scorer {scorer}' if scorer else ''} --sampling {sampling}{kernels_option} "
                    f"--batch-sizes {' '.join(map(str, sizes))} --repeats {repeats} --operators {operators}"
                    f"{' --compile' if compile_model else ''} --out {records_dir} --machine {profile_path}"),
        "dataset": name, "loader": loader, "hot_fraction": hot_fraction, "scorer": scorer or "none",
        "sampling": sampling, "sampler_kernels": kernels, "device": str(device), "fanouts": list(fanouts),
        "batch_sizes": sizes,
        "repeats": repeats, "operators": operators, "compiled": compile_model, "gather_above": above, "fits": fits,
        "machine_profile": str(profile_path),
    }
    record = provenance(device)
    operators_path = records_dir / f"{OPERATORS_STEM}.csv"
    if operator_tables:
        ordered = pd.concat(operator_tables, ignore_index=True)[["batch_size", *OPERATOR_COLUMNS]]
        records.write_records(operators_path, ordered, record, facts, index=False)
    else:  # an earlier run's operators would sit beside records they were not profiled with
        operators_path.unlink(missing_ok=True)
        records.sidecar_path(operators_path).unlink(missing_ok=True)
    path = records.write_records(records_dir / f"{STEM}.csv", table, record, facts, index=False)
    if not compile_model:
        _into_profile(profile_path, profile, table, facts, fits, path, record["time"])
    return path


def gather_by_batch(table: pd.DataFrame) -> list[dict]:
    """Per batch size timed: the median input rows of its minibatches and the median of their gathers' seconds above
    the bound (``planner.GATHER_BY_BATCH``)."""
    medians = table.groupby("batch_size")[["input_rows", "gather_excess_s"]].median()
    return [{"batch_size": int(size), "input_rows": float(row["input_rows"]), "excess_s": float(row["gather_excess_s"])}
            for size, row in medians.iterrows()]


def _into_profile(profile_path: Path, profile: dict, table: pd.DataFrame, facts: dict, fits: dict, path: Path,
                  time: str) -> None:
    """``fits`` and the medians of ``table`` (records ``path``, timed at ``time``) as the profile's entry for their
    sampler, beside any other sampler's entry, written to ``profile_path``."""
    profile[COSTS_SECTION] = costs_by_sampling(profile)
    profile[COSTS_SECTION][facts["sampling"]] = {
        "time": time, "dataset": facts["dataset"], "loader": facts["loader"],
        "hot_fraction": facts.get("hot_fraction", 0.0), "sampling": facts["sampling"],
        "sampler_kernels": facts["sampler_kernels"], "fanouts": list(facts["fanouts"]),
        "batch_sizes": list(facts["batch_sizes"]), "repeats": facts["repeats"],
        "timed_by": "CUDA events on the stage's stream" if torch.device(facts["device"]).type == "cuda"
        else "the host clock",
        "gather_above": facts["gather_above"], "stages": fits, GATHER_BY_BATCH: gather_by_batch(table),
        "records": str(path),
    }
    atomic.write_json(profile_path, profile)


def refit(records_path, profile_path) -> records.Records:
    """Fit again the records ``tierbench costs`` wrote at ``records_path`` (a GPU visit's, committed) and put the
    fits into the machine profile at ``profile_path`` of the device that measured them, as ``measure`` does, measuring
    nothing; the records.  Those of a compiled model are refused, as ``measure`` leaves the profile to an eager
    model's."""
    measured = read_records(records_path)
    if measured.facts.get("compiled", False):
        raise BadValue(f"{measured.path} timed a model compiled by torch.compile (--compile): a machine profile keeps "
                       "the fixed costs of an eager model's minibatches, as the planned epochs train")
    profile_path = Path(profile_path)
    if not profile_path.is_file():
        raise BadValue(f"{profile_path} does not exist: give the profile of the machine that measured the records")
    profile = read_profile(profile_path)
    if profile.get("device") != measured.provenance["device"]:
        raise BadValue(f"{measured.path} was measured on {measured.provenance['device']}, but {profile_path} is the "
                       f"profile of {profile.get('device')}: give that machine's profile")
    _into_profile(profile_path, profile, measured.table, measured.facts, fits_of(measured.table), measured.path,
                  measured.provenance["time"])
    return measured


def read_records(path) -> records.Records:
    """The fixed-cost records in ``path`` (their folder or ``costs.csv``)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS,
                                measured_by="tierbench costs")


def summary(measured: records.Records) -> str:
    """One line per stage: its fixed cost per minibatch and its cost per row."""
    facts = measured.facts
    sizes = f"{facts['batch_sizes'][0]}-{facts['batch_sizes'][-1]}"
    lines = [f"fixed cost of one minibatch on {measured.provenance['device']} ({facts['dataset']}, "
             f"{loaded_by(facts)}, {sampled_by(facts)}, {trained_by(facts)}, batches of {sizes} seeds; gather above "
             f"{facts['gather_above']}):"]
    for stage, fit in facts["fits"].items():
        lines.append(f"  {stage:<7} {1e3 * fit['a_s']:8.3f} ms + {1e9 * fit['b_s']:9.2f} ns per {fit['per']}")
    return "\n".join(lines)


def sampled_by(facts: dict) -> str:
    """The sampler that drew the minibatches, in words."""
    return describe_sampling(facts["sampling"], facts["sampler_kernels"])


def loaded_by(facts: dict) -> str:
    """The loader that gathered, and its hot fraction where it kept rows in GPU memory (records made before the
    option was their loader at 0%)."""
    fraction = facts.get("hot_fraction", 0.0)
    return f"{facts['loader']} at {fraction:.0%} hot" if fraction else facts["loader"]


def trained_by(facts: dict) -> str:
    """How the model ran: as ``torch.compile`` made it, or eagerly (records made before the option ran it so)."""
    return "compiled model" if facts.get("compiled", False) else "eager model"


def outside_operators(operators: pd.DataFrame) -> pd.Series:
    """Which rows of an operators table hold a stage's time outside its operators (``suite.measure.operators``), not
    an operator."""
    return operators["operator"] == OUTSIDE_OPERATORS


def read_operators(path) -> records.Records | None:
    """The operators ``tierbench costs --operators`` profiled beside the records at ``path`` (their folder or
    ``costs.csv``); None where none were."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if not (folder / f"{OPERATORS_STEM}.csv").exists():
        return None
    return records.read_records(folder / f"{OPERATORS_STEM}.csv", FACTS, measured_by="tierbench costs --operators")

