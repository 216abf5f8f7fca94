"""``tierbench run``: a sweep of full training epochs over datasets x loaders x hot fractions x fanouts.

Each cell trains GraphSAGE through one loader for ``warmup`` unrecorded
epochs and then ``epochs`` recorded ones, once per round: a sweep of
``rounds`` rounds runs every cell in each, in its order in the odd rounds and
in the reverse order in the even ones, so that a machine drifting over the
sweep (clocks, a neighbour on a lent host) moves the mean of every cell alike
instead of being read as a difference between the first cells and the last (a
counterbalanced order; Figure 10's cells run in order of hot fraction, which
one round alone confounds with the drift).  Every recorded epoch becomes one
row of the experiment's CSV (``out/runs/<experiment>.csv`` by default; the committed ones are in ``results/runs``) with every
field docs/design.md asks for: dataset and sizes, fanouts, batch size, loader,
scorer, hot fraction, GPU count, device name, git revision and time; epoch,
sample, gather and train seconds; hit ratio; modelled and measured PCIe
bytes; host bytes touched; GPU bytes resident; validation accuracy.

A sweep is checked whole before its first cell runs (``plan_sweep``): every
dataset, loader, scorer, sampling, hot fraction and fanout, the epoch
counts, the batch size, the experiment's name and whether its records can be
written.  Rows are appended under a lock as each cell finishes a round, with
the round (``suite.sweep.records``), so an interrupted sweep keeps every
finished round of a cell, and a rerun skips the rounds of cells already in the
file (``rerun=True`` measures them again and replaces their earlier rows).  Two sweeps running the same cell at
once may both record it; neither loses a row.

Which cells a sweep has, and which dataset each loader sees, is
``suite.sweep.cells``'s part.  ``train_cell`` trains one of them; it is also
what ``tierbench train`` runs.

Multi-process sweeps (``gpus`` > 1 processes, ``tierbench run --gpus G``,
``suite.training.distributed``): every process runs every cell together, the
``tiered`` loader becomes the multi-GPU combined tensor with the hot
fraction as its interleaved tier (no replicated tier, as in Data Tiering §5.5),
each cell is also swept over the experiment's ``samplings`` (``cpu``, ``gpu``, ``uva``, ``distributed``:
``suite.training.sampling``), and only rank 0 writes records.  One process samples on the CPU unless
``samplings`` names ``gpu`` or ``uva`` (a GPU sampler over the CSR in GPU or pinned host memory).  Records say how many processes ran
(``processes``) and how many of them had a GPU (``gpus``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from suite.datasets import load_dataset, prepare_dataset
from suite.datasets.reordered import load_reordered, prepare_reordered
from suite.errors import BadValue
from suite.experiments.sweeps import EXPERIMENTS
from suite.io.provenance import provenance
from suite.registry import LOADERS, create_distributed_loader, create_loader
from suite.sweep import RUNS_DIR
from suite.sweep.cells import (
    Cell,
    check_batch_limit,
    check_cells,
    check_count,
    check_sampler_kernels,
    is_paper_scale,
    sweep_cells,
)
from suite.sweep.records import (
    check_writable,
    read_records,
    records_path,
    store_records,
)
from suite.sweep.sampler_choice import KernelChoice
from suite.sweep.variants import VariantChoice, kernel_variant
from suite.training.sampling import GRAPH_MEMORY, NEEDS_GPU, launched_kernels
from suite.training.trainer import EpochResult, Trainer
from tiering.features.placement import hot_rows
from tiering.features.zero_copy import register_host_memory, unregister_host_memory
from tiering.sampling.fused import DEFAULT_KERNELS


def open_dataset(cell: Cell, ogb_root=None, progress: bool = True):
    """The dataset ``cell`` trains on: reordered by its scorer, or in its original order (scorer \"none\")."""
    if cell.scorer != "none":
        return load_reordered(cell.dataset, cell.scorer, ogb_root=ogb_root, progress=progress)
    return load_dataset(cell.dataset, ogb_root=ogb_root, progress=progress)


def _rows_of(records: pd.DataFrame, cell: Cell, fanouts: str, device: str, pipeline: bool, processes: int,
             batch_limit: int | None, sampler_kernels: str = DEFAULT_KERNELS, round_: int | None = None) -> pd.Series:
    """Which records belong to ``cell`` measured with these settings on this device (in round ``round_`` where
    given, else in any)."""
    if records.empty:
        return pd.Series(dtype=bool)
    limited = records["batch_limit"].isna() if batch_limit is None else records["batch_limit"] == batch_limit
    kernels = launched_kernels(cell.sampling, sampler_kernels)
    launched = records["sampler_kernels"].isna() if kernels is None else records["sampler_kernels"] == kernels
    in_round = True if round_ is None else records["round"] == round_
    return in_round & limited & launched & (records["pipeline"] == pipeline) & (records["sampling"] == cell.sampling) & (records["processes"] == processes) & (
        (records["dataset"] == cell.dataset) & (records["loader"] == cell.loader) & (records["scorer"] == cell.scorer)
        & (records["hot_fraction"].round(6) == round(cell.hot_fraction, 6)) & (records["fanouts"] == fanouts)
        & (records["batch_size"] == cell.batch_size) & (records["device"] == device)
        & (records["host_fraction"].isna() if cell.host_fraction is None
           else records["host_fraction"].round(6) == round(cell.host_fraction, 6))
    )


def train_cell(cell: Cell, dataset, *, epochs: int, warmup: int = 0, device, seed: int, pipeline: bool, progress: bool,
               variant: VariantChoice | None, shm_dir: str = "/dev/shm", model: dict | None = None,
               on_epoch=None, batch_limit: int | None = None, validate: bool = True,
               sampler_kernels: str = DEFAULT_KERNELS) -> list[EpochResult]:
    """Train GraphSAGE on ``cell`` (at its batch): ``warmup`` unrecorded epochs, then ``epochs`` whose results are
    returned; each epoch stops after ``batch_limit`` minibatches when one is given, and is followed by a validation
    pass unless ``validate`` is False (then its ``valid_accuracy`` is None: the pass is not in the epoch's time).

    In a distributed run every process calls this together.  ``variant``: the
    gather kernel variant of the cell's loader (``cell_variant``).  ``model``
    (hidden, dropout, lr) goes to the trainer; ``on_epoch(result)`` is called
    after each recorded epoch; ``sampler_kernels``: the fused GPU sampler's kernels
    (``suite.training.sampling.check_kernels``); ``shm_dir`` holds the multi-GPU host tier's
    shared-memory segment (``tiered`` in a distributed run).  The loader is
    closed on the way out, also when training fails (in one process: closing
    is collective in a process group, so a failing process of a group leaves
    it to its exit, since peers that did not fail would never join it).
    """
    options = {} if cell.host_fraction is None else {"host_fraction": cell.host_fraction}
    if variant is not None:
        options["variant"] = variant.variant
    if dist.is_initialized():
        from suite.training.distributed import DistributedTrainer

        loader = create_distributed_loader(cell.loader, dataset, cell.hot_fraction, device, shm_dir=shm_dir,
                                           progress=progress and dist.get_rank() == 0, **options)
        make_trainer = functools.partial(DistributedTrainer, sampling=cell.sampling, sampler_kernels=sampler_kernels)
    elif cell.sampling == "distributed":
        raise BadValue("distributed sampling is for multi-process runs (tierbench run --gpus G)")
    else:
        loader = create_loader(cell.loader, dataset, cell.hot_fraction, device, progress=progress, **options)
        make_trainer = functools.partial(Trainer, sampling=cell.sampling, sampler_kernels=sampler_kernels)
    try:
        trainer = make_trainer(dataset, loader, cell.fanouts, batch_size=cell.batch_size, seed=seed,
                               batch_limit=batch_limit, validate=validate, **(model or {}))
        for epoch in range(warmup):
            trainer.train_epoch(epoch, progress=False, pipeline=pipeline)
        results = []
        for epoch in range(warmup, warmup + epochs):
            results.append(trainer.train_epoch(epoch, progress=progress, pipeline=pipeline))
            if on_epoch is not None:
                on_epoch(results[-1])
    except BaseException:
        if not dist.is_initialized() or dist.get_world_size() == 1:
            loader.close()
        raise
    if dist.is_initialized():
        trainer.close()
    loader.close()
    return results


def cell_variant(cell: Cell, dataset, device) -> VariantChoice | None:
    """The gather kernel variant of the cell's loader (``suite.sweep.variants``); ``None`` where the loader has no
    choice to make (every loader but one-process ``tiered``)."""
    if dist.is_initialized():
        return None
    return kernel_variant(cell.loader, dataset.features, hot_rows(dataset.num_nodes, cell.hot_fraction), device)


def run_cell(cell: Cell, dataset, *, epochs: int, warmup: int, device, seed: int, pipeline: bool, progress: bool,
             shm_dir: str = "/dev/shm", batch_limit: int | None = None, validate: bool = True,
             sampler_kernels: str = DEFAULT_KERNELS, round_: int = 1) -> list[dict]:
    """Train one cell (``train_cell``) and return its records: one row per recorded epoch, with the cell's settings,
    the sweep's round it ran in and the provenance of the measurement.  ``sampler_kernels``: the fused GPU sampler's
    kernels, where the cell samples with it."""
    choice = cell_variant(cell, dataset, device)
    kernels = sampler_kernels if cell.sampling in GRAPH_MEMORY else DEFAULT_KERNELS
    results = train_cell(cell, dataset, epochs=epochs, warmup=warmup, device=device, seed=seed, pipeline=pipeline,
                         progress=progress, variant=choice, shm_dir=shm_dir, batch_limit=batch_limit, validate=validate,
                         sampler_kernels=kernels)
    processes = dist.get_world_size() if dist.is_initialized() else 1
    record = provenance(device)
    common = {
        "dataset": cell.dataset, "num_nodes": dataset.num_nodes, "num_edges": dataset.graph.num_edges,
        "feature_dim": dataset.feature_dim, "fanouts": ",".join(map(str, cell.fanouts)), "batch_size": cell.batch_size,
        "regime": cell.regime,
        "loader": cell.loader, "scorer": cell.scorer, "hot_fraction": cell.hot_fraction, "batch_limit": batch_limit,
        "host_fraction": cell.host_fraction, "sampling": cell.sampling,
        "sampler_kernels": launched_kernels(cell.sampling, kernels), "processes": processes,
        "gpus": processes if torch.device(device).type == "cuda" else 0, **record,
        "kernel_variant": choice and choice.variant, "variant_basis": choice and choice.basis, "round": round_,
    }
    return [{**common, **r.as_record()} for r in results]


def prepare_datasets(todo: list[Cell], ogb_root=None, progress: bool = True) -> None:
    """Generate and reorder, where they are not cached yet, the datasets the cells use, once each, without opening
    them: a table made in memory (papers-100m's 57 GB) is made by each process that opens its dataset."""
    for dataset, scorer in dict.fromkeys((cell.dataset, cell.scorer) for cell in todo):
        if scorer != "none":
            prepare_reordered(dataset, scorer, ogb_root=ogb_root, progress=progress)
        else:
            prepare_dataset(dataset, ogb_root=ogb_root, progress=progress)


def _on_rank_zero(decide):
    """``decide()`` evaluated by rank 0 and shared with every process (just ``decide()`` in one process)."""
    if not dist.is_initialized():
        return decide()
    box = [decide() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A checked sweep: its cells, the settings every cell runs with, and the CSV that records them."""

    path: Path
    cells: list[Cell]
    epochs: int
    warmup: int
    device: torch.device | str
    pipeline: bool
    processes: int
    kernels: KernelChoice  # the fused GPU sampler's, for the cells it samples, and why
    batch_limit: int | None = None  # minibatches each epoch stops at; None: whole epochs
    ogb_root: str | None = None  # where the real OGB datasets its cells were checked against are read from
    rounds: int = 1  # times every cell runs, in the cells' order and then the reverse, by turns

    @property
    def sampler_kernels(self) -> str:
        """The fused GPU sampler's kernels, for the cells it samples."""
        return self.kernels.kernels

    @functools.cached_property
    def device_name(self) -> str:
        """The device as records name it; asked for only when records are read or written (a process that
        launches GPU processes never touches a GPU itself)."""
        return provenance(self.device)["device"]

    def rows_of(self, cell: Cell, round_: int | None = None):
        """``records -> mask`` of the records of ``cell`` measured with this sweep's settings on this device, in
        round ``round_`` where given."""
        return functools.partial(_rows_of, cell=cell, fanouts=",".join(map(str, cell.fanouts)),
                                 device=self.device_name, pipeline=self.pipeline, processes=self.processes,
                                 batch_limit=self.batch_limit, sampler_kernels=self.sampler_kernels, round_=round_)

    def runs(self) -> list[tuple[int, Cell]]:
        """``(round, cell)`` in the order they run: the cells in their order in odd rounds, reversed in even ones.
        The cells on a dataset whose table is made in memory at every open (a paper-scale preset, ``is_paper_scale``:
        papers-100m's 57 GB, which the original and the reordered order's would not fit beside) run all their rounds
        before the next dataset's, so that each table is made once, not once per round."""
        blocks: list[list[Cell]] = []
        for cell in self.cells:
            key = (cell.dataset, cell.scorer)
            if blocks and (key == (blocks[-1][-1].dataset, blocks[-1][-1].scorer)
                           or not (is_paper_scale(cell.dataset) or is_paper_scale(blocks[-1][-1].dataset))):
                blocks[-1].append(cell)
            else:
                blocks.append([cell])
        return [(round_, cell) for block in blocks for round_ in range(1, self.rounds + 1)
                for cell in (block if round_ % 2 else block[::-1])]

    def describe_kernels(self) -> str | None:
        """The line that says which kernels the fused sampler launches in this sweep and why; ``None`` where no
        cell samples with it."""
        line = self.kernels.line(cell.sampling for cell in self.cells)
        return line and f"{self.path.stem}: {line}"

    def is_recorded(self, cell: Cell, round_: int) -> bool:
        return bool(self.rows_of(cell, round_)(read_records(self.path)).any())

    def recorded(self) -> list[tuple[int, Cell]]:
        """The rounds of the sweep's cells its CSV holds."""
        records = read_records(self.path)
        return [(round_, cell) for round_, cell in self.runs() if self.rows_of(cell, round_)(records).any()]


def plan_sweep(experiment: str, out_dir=RUNS_DIR, *, datasets=None, loaders=None, hot_fractions=None,
               host_fractions=None, fanouts=None, samplings=None, epochs=None, warmup=None, rounds=None,
               batch_size: int | None = None, regime: str | None = None, device="cpu", scorer: str | None = "wrpr",
               pipeline: bool = False, ogb_root=None, processes: int | None = None,
               batch_limit: int | None = None, sampler_kernels: str = DEFAULT_KERNELS) -> Sweep:
    """The sweep's cells and settings, every one checked before anything runs (nothing is built or written).

    ``processes``: how many processes run the sweep together (``tierbench
    run --gpus G`` before it launches them); by default this process group's
    size, or one process outside a group.  ``sampler_kernels``: the fused GPU
    sampler's kernels for the cells it samples (``gpu``, ``uva``), or ``measured``
    (``suite.sweep.sampler_choice``), the others sampling as before
    (``check_sampler_kernels``).  A bad setting, an experiment name
    that is not a plain file name, a records directory that cannot be
    written, or a records file that does not parse raises ``ValueError`` (or
    ``KeyError`` for an unknown dataset) naming it.
    """
    path = records_path(out_dir, experiment)
    preset = EXPERIMENTS.get(experiment, {})
    distributed = processes is not None or dist.is_initialized()
    launcher = processes is not None and not dist.is_initialized()  # of the processes that will run it
    if processes is None:
        processes = dist.get_world_size() if dist.is_initialized() else 1
    if not distributed:
        samplings = samplings or ["cpu"]  # a preset's other samplings are its multi-process ones
    elif not samplings and torch.device(device).type != "cuda":
        samplings = [name for name in preset.get("samplings", ["cpu"]) if name not in NEEDS_GPU]
    epochs = check_count(epochs if epochs is not None else preset.get("epochs", 1), 1, "epochs (--epochs)")
    warmup = check_count(warmup if warmup is not None else preset.get("warmup", 1), 0, "warmup (--warmup)")
    rounds = check_count(rounds if rounds is not None else preset.get("rounds", 1), 1, "rounds (--rounds)")
    if batch_size is not None:
        batch_size = check_count(batch_size, 1, "batch size (--batch-size)")
    batch_limit = check_batch_limit(batch_limit)
    todo = sweep_cells(experiment, datasets=datasets, loaders=loaders, hot_fractions=hot_fractions,
                       host_fractions=host_fractions, fanouts=fanouts,
                       samplings=samplings, scorer=scorer, regime=regime, batch_size=batch_size)
    fractions = hot_fractions if hot_fractions is not None else preset.get("hot_fractions", [])
    check_cells(todo, fractions, scorer, ogb_root, device, distributed)
    kernels = check_sampler_kernels(todo, sampler_kernels, device, launcher)
    check_writable(path)
    read_records(path)  # a records file that does not parse is refused now, not after the first cell
    return Sweep(path, todo, epochs, warmup, device, pipeline, processes, kernels, batch_limit, ogb_root, rounds)


def run_sweep(experiment: str, out_dir=RUNS_DIR, *, datasets=None, loaders=None, hot_fractions=None,
              host_fractions=None, fanouts=None, samplings=None, epochs=None, warmup=None, rounds=None,
              batch_size: int | None = None, regime: str | None = None, device="cpu", scorer: str | None = "wrpr",
              seed: int = 0, pipeline: bool = False, rerun: bool = False, ogb_root=None, progress: bool = True,
              shm_dir: str = "/dev/shm", batch_limit: int | None = None,
              validate: bool = True, opened: dict | None = None,
              sampler_kernels: str = DEFAULT_KERNELS) -> tuple[Path, pd.DataFrame]:
    """Check a sweep whole (``plan_sweep``) and run or resume it (``run_planned``); returns the CSV path and a summary
    table of the cells run or found.  ``sampler_kernels``: the fused GPU sampler's kernels, for the cells it samples
    (recorded per row, empty in the others'), or ``measured`` (``plan_sweep``)."""
    sweep = plan_sweep(experiment, out_dir, datasets=datasets, loaders=loaders, hot_fractions=hot_fractions,
                       host_fractions=host_fractions,
                       fanouts=fanouts, samplings=samplings, epochs=epochs, warmup=warmup, rounds=rounds,
                       batch_size=batch_size,
                       regime=regime, device=device, scorer=scorer, pipeline=pipeline, ogb_root=ogb_root,
                       batch_limit=batch_limit, sampler_kernels=sampler_kernels)
    return run_planned(sweep, seed=seed, rerun=rerun, progress=progress, shm_dir=shm_dir, validate=validate,
                       opened=opened)


def run_planned(sweep: Sweep, *, seed: int = 0, rerun: bool = False, progress: bool = True,
                shm_dir: str = "/dev/shm", validate: bool = True,
                opened: dict | None = None) -> tuple[Path, pd.DataFrame]:
    """Run (or resume) the sweep ``plan_sweep`` checked; returns the CSV path and a summary table of the cells run or
    found.

    Inside a process group (``tierbench run --gpus G``) every process runs every cell and
    rank 0 alone reads and writes the records; ``shm_dir`` is where the
    multi-GPU host tier's shared-memory segment goes.  ``validate=False`` runs no
    validation pass (records' ``valid_accuracy`` empty); it is not a setting of a cell,
    since the epoch's times never include the pass.  ``opened``: the datasets open in this process
    (``datasets_kept_open``), which the sweep uses and adds to and leaves open for the next; by default
    its own, let go at its end.
    """
    writer = not dist.is_initialized() or dist.get_rank() == 0
    with contextlib.ExitStack() as sweep_end, tqdm(sweep.runs(), desc=sweep.path.stem, unit="cell",
                                                   disable=not (progress and writer)) as bar:
        if opened is None:
            opened = sweep_end.enter_context(datasets_kept_open())
        for round_, cell in bar:
            shown = cell.describe()
            bar.set_postfix_str(shown if sweep.rounds == 1 else f"round {round_}/{sweep.rounds}: {shown}")
            if not rerun and _on_rank_zero(functools.partial(sweep.is_recorded, cell, round_)):
                continue
            key = (cell.dataset, cell.scorer)
            if LOADERS[cell.loader].disk:
                # another cell's rows gathered through a dataset's memory map stay mapped, and mapped pages stay in
                # the page cache: a loader that reads from disk starts with no dataset open but its own
                _let_go(opened, list(opened))
            if key not in opened:
                # a table made in memory (papers-100m's: 57 GB) is let go before another dataset is opened: the
                # original order's and the reordered order's tables do not fit in host memory side by side
                _let_go(opened, [k for k, (dataset, _) in opened.items() if dataset.features_in_memory])
                # held by ``opened`` alone (no local name), so that letting it go frees it
                opened[key] = open_dataset(cell, sweep.ogb_root, progress=False), contextlib.ExitStack()
                opened[key][1].enter_context(pinned_for_the_sweep(opened[key][0], sweep.device))
            rows = run_cell(cell, opened[key][0], epochs=sweep.epochs, warmup=sweep.warmup, device=sweep.device,
                            seed=seed, pipeline=sweep.pipeline, progress=False, shm_dir=shm_dir,
                            batch_limit=sweep.batch_limit, validate=validate, sampler_kernels=sweep.sampler_kernels,
                            round_=round_)
            if writer:  # a rerun replaces the cell's earlier rows, chosen under the file's lock: in its first round
                # all of them (an earlier sweep may have had more rounds), then those of the round
                store_records(sweep.path, rows, sweep.rows_of(cell, None if round_ == 1 else round_) if rerun else None)
    return sweep.path, summarize_runs(read_records(sweep.path))


@contextlib.contextmanager
def datasets_kept_open():
    """The datasets open in this process for the sweeps run inside: (dataset, scorer) -> the Dataset, opened and
    checksummed once, and the ExitStack that unpins its table (``pinned_for_the_sweep``).  A sweep opens what it
    needs that is not there (letting go first of a table made in memory, which two would not fit beside), and
    leaves the rest open for the next sweep (``tierbench run --and-then``); all are let go at the end."""
    opened = {}
    try:
        yield opened
    finally:
        _let_go(opened, list(opened))


def _let_go(opened: dict, keys: list) -> None:
    """Unpin the tables of the datasets ``keys`` of ``opened`` (key -> dataset and the stack that unpins its table)
    and drop them, so that their memory is freed before the next dataset is opened."""
    for key in keys:
        opened.pop(key)[1].close()
    if keys:
        gc.collect()


@contextlib.contextmanager
def pinned_for_the_sweep(dataset, device):
    """A feature table made in memory (``suite.datasets.generated``: papers-100m's 57 GB), page-locked in place once
    for every cell of the one-process sweeps that use it on CUDA (``datasets_kept_open``) and unlocked after them (or
    when a sweep lets the dataset go to open another): each zero-copy loader then finds it pinned and leaves it so,
    instead of pinning it again per cell (Data Tiering §4.1).  Nothing happens elsewhere."""
    if torch.device(device).type != "cuda" or not dataset.features_in_memory or dist.is_initialized():
        yield
        return
    registered = register_host_memory(dataset.features)
    try:
        yield
    finally:
        if registered:
            torch.cuda.synchronize(device)  # no kernel still reads it
            unregister_host_memory(dataset.features)


def summarize_runs(records: pd.DataFrame) -> pd.DataFrame:
    """Mean of the recorded epochs per cell."""
    if records.empty:
        return records
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "valid_accuracy"]
    keys = ["dataset", "loader", "scorer", "hot_fraction", "host_fraction", "fanouts", "device", "pipeline", "sampling",
            "sampler_kernels", "processes"]
    return records.groupby(keys, sort=False, dropna=False)[columns].mean().reset_index()
