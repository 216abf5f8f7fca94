"""``tierbench run``: a sweep of full training epochs over datasets x loaders x hot fractions x fanouts.

Each cell trains GraphSAGE through one loader for ``warmup`` unrecorded
epochs and then ``epochs`` recorded ones; every recorded epoch becomes one
row of the experiment's CSV (``results/runs/<experiment>.csv``) with every
field DESIGN.md asks for: dataset and sizes, fanouts, batch size, loader,
scorer, hot fraction, GPU count, device name, git revision and time; epoch,
sample, gather and train seconds; hit ratio; modelled and measured PCIe
bytes; host bytes touched; GPU bytes resident; validation accuracy.

Rows are appended as each cell finishes, through a temporary file and a
rename, so an interrupted sweep keeps every finished cell, and a rerun skips
the cells already in the file (``rerun=True`` measures them again and
replaces their earlier rows).

Which dataset a loader sees: ``tiered`` needs the dataset reordered
hottest-first (by ``scorer``, weighted reverse PageRank by default); every
other loader uses the dataset in its original order, as the paper's
baselines do.  Loaders without a GPU tier (``cpu-gather``, ``uva``,
``uva-naive``, ``in-memory``) are run once per dataset and fanout, at hot
fraction 0 (``in-memory`` holds everything: its "hot fraction" is 1).

Multi-process sweeps (``gpus`` > 1 processes, ``tierbench run --gpus G``,
``suite.distributed``): every process runs every cell together, the
``tiered`` loader becomes the multi-GPU combined tensor with the hot
fraction as its interleaved tier (no replicated tier, as in seeds/000 §5.5),
each cell is also swept over ``samplings`` (``cpu``, ``uva``, ``distributed``),
and only rank 0 writes records.  Records say how many processes ran
(``processes``) and how many of them had a GPU (``gpus``).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from . import atomic
from .datasets import load_dataset
from .datasets.reordered import load_reordered
from .loaders import create_distributed_loader, create_loader
from .provenance import provenance
from .train import Trainer, default_fanouts

HOT_TIER_LOADERS = ("tiered", "degree-cache", "gns")

EXPERIMENTS = {
    "demo": dict(datasets=["tiny"], loaders=["in-memory", "cpu-gather", "uva", "degree-cache", "tiered"],
                 hot_fractions=[0.1], fanouts=[(10, 10)], epochs=2, warmup=1),
    "fig8": dict(datasets=["papers-s", "products-s"], loaders=["cpu-gather", "uva", "degree-cache", "gns", "tiered"],
                 hot_fractions=[0.1], fanouts=[None], epochs=2, warmup=1),
    "pipeline": dict(datasets=["papers-s"], loaders=["cpu-gather", "uva", "degree-cache", "tiered"],
                     hot_fractions=[0.1], fanouts=[None], epochs=2, warmup=1),
    "fig10": dict(datasets=["papers-s"], loaders=["tiered"], hot_fractions=[0.0, 0.05, 0.10, 0.15, 0.20, 0.25],
                  fanouts=[None], epochs=2, warmup=1),
    "fig11": dict(datasets=["papers-s"], loaders=["tiered"], hot_fractions=[0.0, 0.05, 0.10, 0.20, 0.40],
                  fanouts=[None], samplings=["cpu", "uva", "distributed"], epochs=2, warmup=1),
}
"""Named sweeps; ``fanouts=None`` takes each dataset's training fanouts (suite.train.default_fanouts).

A predefined sweep's ``uva`` sampling is left out on a CPU device (it reads
pinned host memory from a GPU); asking for it by name there is an error."""


@dataclasses.dataclass(frozen=True)
class Cell:
    dataset: str
    loader: str
    hot_fraction: float
    fanouts: tuple[int, ...]
    scorer: str
    sampling: str = "cpu"

    def describe(self) -> str:
        hot = f" hot {self.hot_fraction:.0%}" if self.loader in HOT_TIER_LOADERS else ""
        sampling = f" {self.sampling} sampling" if self.sampling != "cpu" else ""
        return f"{self.dataset} {self.loader}{hot}{sampling}"


def cells(datasets, loaders, hot_fractions, fanouts, scorer: str = "wrpr", samplings=("cpu",)) -> list[Cell]:
    out = []
    for dataset in datasets:
        for fanout in fanouts:
            for loader in loaders:
                fractions = hot_fractions if loader in HOT_TIER_LOADERS else [1.0 if loader == "in-memory" else 0.0]
                for sampling in samplings:
                    for hot in fractions:
                        resolved = tuple(fanout) if fanout else default_fanouts(dataset)
                        out.append(Cell(dataset, loader, float(hot), resolved, scorer if loader == "tiered" else "none",
                                        sampling))
    return out


def _dataset(cell: Cell, ogb_root, progress: bool):
    if cell.scorer != "none":
        return load_reordered(cell.dataset, cell.scorer, ogb_root=ogb_root, progress=progress)
    return load_dataset(cell.dataset, ogb_root=ogb_root, progress=progress)


def read_records(path: Path) -> pd.DataFrame:
    """The records of an experiment; rows from before the ``pipeline``, ``sampling`` and ``processes``
    columns existed ran without a pipeline, with CPU sampling, in one process."""
    if not path.exists():
        return pd.DataFrame()
    records = pd.read_csv(path)
    records["pipeline"] = records["pipeline"].fillna(False).astype(bool) if "pipeline" in records else False
    records["sampling"] = records["sampling"].fillna("cpu") if "sampling" in records else "cpu"
    records["processes"] = records["processes"].fillna(1).astype(int) if "processes" in records else 1
    return records


def _rows_of(records: pd.DataFrame, cell: Cell, fanouts: str, batch_size: int, device: str, pipeline: bool,
             processes: int) -> pd.Series:
    """Which records belong to ``cell`` measured with these settings on this device."""
    if records.empty:
        return pd.Series(dtype=bool)
    return (records["pipeline"] == pipeline) & (records["sampling"] == cell.sampling) & (records["processes"] == processes) & (
        (records["dataset"] == cell.dataset) & (records["loader"] == cell.loader) & (records["scorer"] == cell.scorer)
        & (records["hot_fraction"].round(6) == round(cell.hot_fraction, 6)) & (records["fanouts"] == fanouts)
        & (records["batch_size"] == batch_size) & (records["device"] == device)
    )


def _is_recorded(path: Path, *select) -> bool:
    return bool(_rows_of(read_records(path), *select).any())


def run_cell(cell: Cell, dataset, *, epochs: int, warmup: int, batch_size: int, device, seed: int, pipeline: bool,
             progress: bool, shm_dir: str = "/dev/shm") -> list[dict]:
    """Train one cell; in a distributed run every process calls this together.

    ``shm_dir`` holds the multi-GPU host tier's shared-memory segment (``tiered`` in a distributed run).
    """
    processes = dist.get_world_size() if dist.is_initialized() else 1
    if dist.is_initialized():
        from .distributed import DistributedTrainer

        loader = create_distributed_loader(cell.loader, dataset, cell.hot_fraction, device, shm_dir=shm_dir,
                                           progress=progress and dist.get_rank() == 0)
        make_trainer = functools.partial(DistributedTrainer, sampling=cell.sampling)
    elif cell.sampling != "cpu":
        raise ValueError(f"{cell.sampling} sampling is for multi-process runs (tierbench run --gpus G)")
    else:
        loader = create_loader(cell.loader, dataset, cell.hot_fraction, device, progress=progress)
        make_trainer = Trainer
    try:
        trainer = make_trainer(dataset, loader, cell.fanouts, batch_size=batch_size, seed=seed)
        for epoch in range(warmup):
            trainer.train_epoch(epoch, progress=False, pipeline=pipeline)
        results = [trainer.train_epoch(warmup + e, progress=progress, pipeline=pipeline) for e in range(epochs)]
    except BaseException:
        # closing is collective in a process group (the multi-GPU tensor waits for every rank): a failing
        # process leaves it to its exit, since peers that did not fail would never join it
        if processes == 1:
            loader.close()
        raise
    if dist.is_initialized():
        trainer.close()
    loader.close()
    record = provenance(device)
    common = {
        "dataset": cell.dataset, "num_nodes": dataset.num_nodes, "num_edges": dataset.graph.num_edges,
        "feature_dim": dataset.feature_dim, "fanouts": ",".join(map(str, cell.fanouts)), "batch_size": batch_size,
        "loader": cell.loader, "scorer": cell.scorer, "hot_fraction": cell.hot_fraction,
        "sampling": cell.sampling, "processes": processes,
        "gpus": processes if torch.device(device).type == "cuda" else 0, **record,
    }
    return [{**common, **r.as_record()} for r in results]


def store_records(path: Path, rows: list[dict], replace: pd.Series | None = None) -> None:
    """Add rows to the CSV (dropping the ``replace``d ones) through a temporary file, so a crash leaves the previous file whole."""
    records = read_records(path)
    if replace is not None and replace.any():
        records = records[~replace]
    atomic.write_csv(path, pd.concat([records, pd.DataFrame(rows)], ignore_index=True), index=False)


def sweep_cells(experiment: str, *, datasets=None, loaders=None, hot_fractions=None, fanouts=None, samplings=None,
                scorer: str = "wrpr") -> list[Cell]:
    """The cells of a sweep: a predefined experiment's, with any setting given here replacing its own."""
    preset = EXPERIMENTS.get(experiment, {})
    settings = {
        "datasets": datasets or preset.get("datasets"),
        "loaders": loaders or preset.get("loaders"),
        "hot_fractions": hot_fractions if hot_fractions is not None else preset.get("hot_fractions", [0.1]),
        "fanouts": fanouts or preset.get("fanouts", [None]),
        "samplings": samplings or preset.get("samplings", ["cpu"]),
    }
    if not settings["datasets"] or not settings["loaders"]:
        raise ValueError(f"experiment {experiment!r} is not predefined ({', '.join(EXPERIMENTS)}): give datasets and loaders")
    return cells(**settings, scorer=scorer)


def prepare_datasets(todo: list[Cell], ogb_root=None, progress: bool = True) -> dict:
    """Open (generating or reordering first where needed) every dataset the cells use, once each."""
    opened = {}
    for cell in todo:
        if (cell.dataset, cell.scorer) not in opened:
            opened[cell.dataset, cell.scorer] = _dataset(cell, ogb_root, progress)
    return opened


def _on_rank_zero(decide):
    """``decide()`` evaluated by rank 0 and shared with every process (just ``decide()`` in one process)."""
    if not dist.is_initialized():
        return decide()
    box = [decide() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def run_sweep(experiment: str, out_dir="results/runs", *, datasets=None, loaders=None, hot_fractions=None,
              fanouts=None, samplings=None, epochs=None, warmup=None, batch_size: int = 1024, device="cpu",
              scorer: str = "wrpr", seed: int = 0, pipeline: bool = False, rerun: bool = False, ogb_root=None,
              progress: bool = True, shm_dir: str = "/dev/shm") -> tuple[Path, pd.DataFrame]:
    """Run (or resume) a sweep; returns the CSV path and a summary table of the cells run or found.

    Inside a process group (``tierbench run --gpus G``) every process runs
    every cell and rank 0 alone reads and writes the records; ``shm_dir`` is
    where the multi-GPU host tier's shared-memory segment goes.
    """
    preset = EXPERIMENTS.get(experiment, {})
    processes = dist.get_world_size() if dist.is_initialized() else 1
    if not dist.is_initialized():
        samplings = samplings or ["cpu"]  # the other samplers need a process group
    elif not samplings and torch.device(device).type != "cuda":
        samplings = [name for name in preset.get("samplings", ["cpu"]) if name != "uva"]
    todo = sweep_cells(experiment, datasets=datasets, loaders=loaders, hot_fractions=hot_fractions, fanouts=fanouts,
                       samplings=samplings, scorer=scorer)
    epochs = epochs if epochs is not None else preset.get("epochs", 1)
    warmup = warmup if warmup is not None else preset.get("warmup", 1)
    device_name = provenance(device)["device"]
    path = Path(out_dir) / f"{experiment}.csv"
    writer = not dist.is_initialized() or dist.get_rank() == 0
    datasets_loaded = {}  # (dataset, scorer) -> Dataset: each is opened and checksummed once per sweep
    bar = tqdm(todo, desc=experiment, unit="cell", disable=not (progress and writer))
    for cell in bar:
        bar.set_postfix_str(cell.describe())
        select = (cell, ",".join(map(str, cell.fanouts)), batch_size, device_name, pipeline, processes)
        if not rerun and _on_rank_zero(functools.partial(_is_recorded, path, *select)):
            continue
        key = (cell.dataset, cell.scorer)
        if key not in datasets_loaded:
            datasets_loaded[key] = _dataset(cell, ogb_root, progress=False)
        rows = run_cell(cell, datasets_loaded[key], epochs=epochs, warmup=warmup, batch_size=batch_size, device=device,
                        seed=seed, pipeline=pipeline, progress=False, shm_dir=shm_dir)
        if writer:  # a rerun replaces the cell's earlier records instead of averaging with them
            store_records(path, rows, _rows_of(read_records(path), *select))
    bar.close()
    return path, summarize_runs(read_records(path))


def summarize_runs(records: pd.DataFrame) -> pd.DataFrame:
    """Mean of the recorded epochs per cell."""
    if records.empty:
        return records
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "valid_accuracy"]
    keys = ["dataset", "loader", "scorer", "hot_fraction", "fanouts", "device", "pipeline", "sampling", "processes"]
    return records.groupby(keys, sort=False)[columns].mean().reset_index()
