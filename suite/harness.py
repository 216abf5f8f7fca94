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
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from . import atomic
from .datasets import load_dataset
from .datasets.reordered import load_reordered
from .loaders import create_loader
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
}
"""Named sweeps; ``fanouts=None`` takes each dataset's training fanouts (suite.train.default_fanouts)."""


@dataclasses.dataclass(frozen=True)
class Cell:
    dataset: str
    loader: str
    hot_fraction: float
    fanouts: tuple[int, ...]
    scorer: str

    def describe(self) -> str:
        hot = f" hot {self.hot_fraction:.0%}" if self.loader in HOT_TIER_LOADERS else ""
        return f"{self.dataset} {self.loader}{hot}"


def cells(datasets, loaders, hot_fractions, fanouts, scorer: str = "wrpr") -> list[Cell]:
    out = []
    for dataset in datasets:
        for fanout in fanouts:
            for loader in loaders:
                fractions = hot_fractions if loader in HOT_TIER_LOADERS else [1.0 if loader == "in-memory" else 0.0]
                for hot in fractions:
                    resolved = tuple(fanout) if fanout else default_fanouts(dataset)
                    out.append(Cell(dataset, loader, float(hot), resolved, scorer if loader == "tiered" else "none"))
    return out


def _dataset(cell: Cell, ogb_root, progress: bool):
    if cell.scorer != "none":
        return load_reordered(cell.dataset, cell.scorer, ogb_root=ogb_root, progress=progress)
    return load_dataset(cell.dataset, ogb_root=ogb_root, progress=progress)


def read_records(path: Path) -> pd.DataFrame:
    """The records of an experiment; rows from before the ``pipeline`` column existed ran without it."""
    if not path.exists():
        return pd.DataFrame()
    records = pd.read_csv(path)
    records["pipeline"] = records["pipeline"].fillna(False).astype(bool) if "pipeline" in records else False
    return records


def _rows_of(records: pd.DataFrame, cell: Cell, fanouts: str, batch_size: int, device: str, pipeline: bool) -> pd.Series:
    """Which records belong to ``cell`` measured with these settings on this device."""
    if records.empty:
        return pd.Series(dtype=bool)
    return (records["pipeline"] == pipeline) & (
        (records["dataset"] == cell.dataset) & (records["loader"] == cell.loader) & (records["scorer"] == cell.scorer)
        & (records["hot_fraction"].round(6) == round(cell.hot_fraction, 6)) & (records["fanouts"] == fanouts)
        & (records["batch_size"] == batch_size) & (records["device"] == device)
    )


def run_cell(cell: Cell, dataset, *, epochs: int, warmup: int, batch_size: int, device, seed: int, pipeline: bool,
             progress: bool) -> list[dict]:
    loader = create_loader(cell.loader, dataset, cell.hot_fraction, device)
    try:
        trainer = Trainer(dataset, loader, cell.fanouts, batch_size=batch_size, seed=seed)
        for epoch in range(warmup):
            trainer.train_epoch(epoch, progress=False, pipeline=pipeline)
        results = [trainer.train_epoch(warmup + e, progress=progress, pipeline=pipeline) for e in range(epochs)]
    finally:
        loader.close()
    record = provenance(device)
    common = {
        "dataset": cell.dataset, "num_nodes": dataset.num_nodes, "num_edges": dataset.graph.num_edges,
        "feature_dim": dataset.feature_dim, "fanouts": ",".join(map(str, cell.fanouts)), "batch_size": batch_size,
        "loader": cell.loader, "scorer": cell.scorer, "hot_fraction": cell.hot_fraction,
        "gpus": 1 if torch.device(device).type == "cuda" else 0, **record,
    }
    return [{**common, **r.as_record()} for r in results]


def store_records(path: Path, rows: list[dict], replace: pd.Series | None = None) -> None:
    """Add rows to the CSV (dropping the ``replace``d ones) through a temporary file, so a crash leaves the previous file whole."""
    records = read_records(path)
    if replace is not None and replace.any():
        records = records[~replace]
    atomic.write_csv(path, pd.concat([records, pd.DataFrame(rows)], ignore_index=True), index=False)


def run_sweep(experiment: str, out_dir="results/runs", *, datasets=None, loaders=None, hot_fractions=None,
              fanouts=None, epochs=None, warmup=None, batch_size: int = 1024, device="cpu", scorer: str = "wrpr",
              seed: int = 0, pipeline: bool = False, rerun: bool = False, ogb_root=None,
              progress: bool = True) -> tuple[Path, pd.DataFrame]:
    """Run (or resume) a sweep; returns the CSV path and a summary table of the cells run or found."""
    preset = EXPERIMENTS.get(experiment, {})
    settings = {
        "datasets": datasets or preset.get("datasets"),
        "loaders": loaders or preset.get("loaders"),
        "hot_fractions": hot_fractions if hot_fractions is not None else preset.get("hot_fractions", [0.1]),
        "fanouts": fanouts or preset.get("fanouts", [None]),
    }
    if not settings["datasets"] or not settings["loaders"]:
        raise ValueError(f"experiment {experiment!r} is not predefined ({', '.join(EXPERIMENTS)}): give datasets and loaders")
    epochs = epochs if epochs is not None else preset.get("epochs", 1)
    warmup = warmup if warmup is not None else preset.get("warmup", 1)
    device_name = provenance(device)["device"]
    path = Path(out_dir) / f"{experiment}.csv"
    todo = cells(**settings, scorer=scorer)
    datasets_loaded = {}  # (dataset, scorer) -> Dataset: each is opened and checksummed once per sweep
    bar = tqdm(todo, desc=experiment, unit="cell", disable=not progress)
    for cell in bar:
        bar.set_postfix_str(cell.describe())
        fanout_text = ",".join(map(str, cell.fanouts))
        if not rerun and _rows_of(read_records(path), cell, fanout_text, batch_size, device_name, pipeline).any():
            continue
        key = (cell.dataset, cell.scorer)
        if key not in datasets_loaded:
            datasets_loaded[key] = _dataset(cell, ogb_root, progress=False)
        rows = run_cell(cell, datasets_loaded[key], epochs=epochs, warmup=warmup, batch_size=batch_size, device=device,
                        seed=seed, pipeline=pipeline, progress=False)
        # a rerun replaces the cell's earlier records instead of averaging with them
        store_records(path, rows, _rows_of(read_records(path), cell, fanout_text, batch_size, device_name, pipeline))
    bar.close()
    return path, summarize_runs(read_records(path))


def summarize_runs(records: pd.DataFrame) -> pd.DataFrame:
    """Mean of the recorded epochs per cell."""
    if records.empty:
        return records
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "valid_accuracy"]
    keys = ["dataset", "loader", "scorer", "hot_fraction", "fanouts", "device", "pipeline"]
    return records.groupby(keys, sort=False)[columns].mean().reset_index()
