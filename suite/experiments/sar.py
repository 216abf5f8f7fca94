"""``tierbench sar``: peak memory per worker against the number of workers, vanilla domain parallelism and SAR, with
epoch time and accuracy (SAR Figure 1), beside minibatch tiered training of the same model.

For each worker count W: the dataset's METIS partition into W parts
(``suite.datasets.partitions``, computed once and cached), then W
processes launched by torchrun (gloo on a CPU, one per worker) that each
build their part (``suite.training.domain_parallel.LocalGraph``) and train
full-batch GraphSAGE (``suite.training.full_batch``) for ``epochs`` epochs
with vanilla aggregation; then W fresh processes the same with SAR, from
the same initial model (fresh, so that neither inherits the other's heap).
Every step, each worker's peak resident memory (``PeakMemory``) and time;
the slowest worker's time is the epoch's and the largest peak the figure's.
Rank 0 writes the records of each run (``sar-<W>-<aggregation>.json``, a
temporary file renamed), with the settings it ran with and the dataset's
fingerprint (``suite.datasets.dataset.content_fingerprint``); a later
``tierbench sar`` with the same settings on the same graph reuses them instead
of running again (so an interrupted run resumes), unless told ``--rerun``; a
run of other settings or of another graph (a dataset regenerated since) is run
again.  Records read back, to reuse or to report, are checked step by step
(``check_steps``: types, keys and ranges) and a malformed one is refused
naming the file and the field.  Then tierbench's minibatch training of the same model
(``tiered`` at 10% hot, the dataset's fanouts) for the same number of
epochs, for its accuracy and epoch time.  Records: ``sar.csv`` (one row per
worker count and aggregation) with its sidecar (the settings, the minibatch
training's numbers) beside the runs' own records; ``suite.figures.sar`` draws
them.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.datasets.dataset import content_fingerprint
from suite.datasets.partitions import cached_partition, load_partition, partition_meta, partition_path
from suite.datasets.reordered import load_reordered
from suite.errors import BadValue
from suite.io import atomic, records
from suite.io.provenance import provenance
from suite.measure.process_memory import resident_bytes
from suite.registry import create_loader
from suite.training import distributed
from suite.training.domain_parallel import AGGREGATIONS, LocalGraph
from suite.training.errors import WorkersFailed
from suite.training.full_batch import WorkerData, accuracy, sage_layers, train_step
from suite.training.trainer import Trainer

PAPER = {"vanilla / SAR": "2x for GraphSAGE (4x for GAT) at 128 workers, ogbn-papers100M",
         "epoch": "3.8 s per epoch on ogbn-papers100M, 128 two-socket Icelake workers"}
"""SAR's numbers: the peak-memory ratio of Figure 1 and the epoch time of Figure 2."""
GIB = 1 << 30
STEM = "sar"
FACTS = ("command", "name", "workers", "epochs", "hidden", "layers", "lr", "runs", "minibatch")


def worker_records(name: str, aggregation: str, epochs: int, hidden: int, layers: int, lr: float,
                   seed: int) -> tuple[dict, list[dict]]:
    """Inside torchrun: this worker's part, trained with ``aggregation``; the run's settings (``run_settings``, of
    the dataset this worker loaded) and every worker's numbers, on rank 0."""
    rank, world = dist.get_rank(), dist.get_world_size()
    baseline = resident_bytes()
    dataset = load_dataset(name, progress=False)
    settings = run_settings(dataset, epochs, hidden, layers, lr, seed)
    partition = load_partition(partition_path(dataset, world, seed), dataset.num_nodes, world,
                               expect=partition_meta(dataset, world, seed))
    graph = LocalGraph.build(dataset.graph, partition, rank, world)
    data = WorkerData.of(dataset, graph.nodes)
    in_dim, classes = dataset.feature_dim, dataset.num_classes
    del dataset, partition  # unmap the whole graph and table: a worker keeps its part only
    gc.collect()
    held = resident_bytes()
    records = []
    model = sage_layers(in_dim, hidden, classes, layers, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for epoch in range(epochs):
        step = train_step(model, optimizer, graph, data, aggregation)
        mine = torch.tensor([step.peak_bytes, step.added_bytes, step.seconds, held, baseline, graph.halo_rows(),
                             graph.num_nodes], dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        records.append({"workers": world, "aggregation": aggregation, "epoch": epoch, "loss": step.loss,
                        "per_worker": [t.tolist() for t in every]})
    records[-1]["accuracy"] = accuracy(model, graph, data, aggregation)
    return settings, records


def records_file(runs_dir, workers: int, aggregation: str) -> Path:
    return Path(runs_dir) / f"sar-{workers}-{aggregation}.json"


def run_workers(name: str, runs_dir, aggregation: str, *, epochs: int, hidden: int, layers: int, lr: float, seed: int,
                timeout_s: int) -> None:
    """The body of ``tierbench sar`` under torchrun: join the group, train, and write rank 0's records."""
    distributed.init_process_group("cpu", timeout_s=timeout_s)
    try:
        settings, records = worker_records(name, aggregation, epochs, hidden, layers, lr, seed)
        if dist.get_rank() == 0:
            atomic.write_json(records_file(runs_dir, dist.get_world_size(), aggregation),
                              {"settings": settings, "steps": records})
    finally:
        distributed.destroy_process_group()


def run_settings(dataset, epochs: int, hidden: int, layers: int, lr: float, seed: int) -> dict:
    """What makes two runs' records the same measurement: the settings, and the graph they ran on (its
    fingerprint)."""
    return {"dataset": dataset.name, "fingerprint": content_fingerprint(dataset), "epochs": epochs, "hidden": hidden,
            "layers": layers, "lr": lr, "seed": seed}


def recorded_steps(path: Path, settings: dict, workers: int, aggregation: str) -> list[dict] | None:
    """The steps recorded in ``path`` if it holds a finished run with ``settings`` (checked by ``check_steps``);
    else None."""
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("settings") != settings:
        return None
    return check_steps(path, recorded.get("steps"), workers, aggregation, settings["epochs"])


STEP_KEYS = {"workers", "aggregation", "epoch", "loss", "per_worker"}
PER_WORKER = ("peak", "added", "seconds", "held", "baseline", "halo", "nodes")
"""What each worker reports per step (``worker_records``), in this order, each a number of at least 0."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_steps(path: Path, steps, workers: int, aggregation: str, epochs: int | None = None) -> list[dict]:
    """``steps`` as ``worker_records`` makes them for the run of ``workers`` and ``aggregation`` (epochs 0, 1, ...
    in turn, ``epochs`` of them where given), else ``BadValue`` naming ``path`` and the field."""
    def refuse(field: str, what: str):
        raise BadValue(f"{path}: {field} {what}; it is not the records of a tierbench sar run (delete it, or give "
                       "--rerun, to run it again)")

    if not isinstance(steps, list) or not steps:
        refuse("steps", "is not a list of steps")
    if epochs is not None and len(steps) != epochs:
        refuse("steps", f"holds {len(steps)} epochs, not {epochs}")
    for k, step in enumerate(steps):
        field = f"steps[{k}]"
        if not isinstance(step, dict) or not STEP_KEYS <= set(step):
            refuse(field, f"is not an object with {', '.join(sorted(STEP_KEYS))}")
        if step["workers"] != workers or isinstance(step["workers"], bool):
            refuse(f"{field}.workers", f"is {step['workers']!r}, not {workers}")
        if step["aggregation"] != aggregation:
            refuse(f"{field}.aggregation", f"is {step['aggregation']!r}, not {aggregation!r}")
        if step["epoch"] != k or isinstance(step["epoch"], bool):
            refuse(f"{field}.epoch", f"is {step['epoch']!r}, not {k}")
        if not _number(step["loss"]):
            refuse(f"{field}.loss", f"is {step['loss']!r}, not a finite number")
        per_worker = step["per_worker"]
        if not isinstance(per_worker, list) or len(per_worker) != workers:
            refuse(f"{field}.per_worker", f"is not a list of {workers} workers' numbers")
        for w, numbers in enumerate(per_worker):
            if (not isinstance(numbers, list) or len(numbers) != len(PER_WORKER)
                    or not all(_number(v) and v >= 0 for v in numbers)):
                refuse(f"{field}.per_worker[{w}]", f"is not {len(PER_WORKER)} finite numbers of at least 0 "
                       f"({', '.join(PER_WORKER)})")
        if "accuracy" in step and not (isinstance(step["accuracy"], dict) and all(
                isinstance(split, str) and _number(v) and 0 <= v <= 1 for split, v in step["accuracy"].items())):
            refuse(f"{field}.accuracy", "is not each split's accuracy in [0, 1]")
    return steps


def launch(argv: list[str], workers: int) -> None:
    """``tierbench <argv>`` in ``workers`` torchrun processes; a failure ends with the workers' own errors above."""
    status = subprocess.run(distributed.torchrun_command(workers, argv), check=False).returncode
    if status != 0:
        raise WorkersFailed(f"the {workers}-worker run failed (exit status {status}); its workers' errors are above")


def steps_of(path: Path, workers: int, aggregation: str) -> list[dict]:
    """The steps in a run's records at ``path``, checked: ``{"settings", "steps"}``, or the bare list of steps that
    runs wrote before their settings were kept with them (the committed runs of results/sar)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadValue(f"{path} does not exist: the records of the runs behind a tierbench sar table") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadValue(f"{path}: not the JSON records of a tierbench sar run ({err})") from None
    return check_steps(path, recorded.get("steps") if isinstance(recorded, dict) else recorded, workers, aggregation)


def per_step_table(records: list[dict]) -> pd.DataFrame:
    """One row per (workers, aggregation, epoch): the largest peak of any worker, the slowest worker's time."""
    rows = []
    for record in records:
        workers = pd.DataFrame(record["per_worker"], columns=["peak", "added", "seconds", "held", "baseline", "halo",
                                                              "nodes"])
        rows.append({"workers": record["workers"], "aggregation": record["aggregation"], "epoch": record["epoch"],
                     "loss": record["loss"], "peak GiB": workers["peak"].max() / GIB,
                     "added GiB": workers["added"].max() / GIB, "held GiB": workers["held"].max() / GIB,
                     "process GiB": workers["baseline"].max() / GIB, "epoch s": workers["seconds"].max(),
                     "halo rows": int(workers["halo"].sum()), "nodes per worker": int(workers["nodes"].max()),
                     **{f"{split} accuracy": value for split, value in record.get("accuracy", {}).items()}})
    return pd.DataFrame(rows)


def measure(name: str, records_dir, *, workers=(1, 2, 4), epochs: int = 3, hidden: int = 256, layers: int = 3,
            lr: float = 0.01, seed: int = 0, runs_dir=None, minibatch: bool = True, rerun: bool = False,
            progress: bool = True, argv_of=None) -> Path:
    """Run every worker count and aggregation not recorded with these settings yet (all of them with ``rerun``;
    ``argv_of(W, aggregation, runs_dir)`` is the command line of one, launched by torchrun) and write the records
    into ``records_dir``; their path."""
    records_dir = Path(records_dir)
    runs_dir = Path(runs_dir) if runs_dir else records_dir / "runs"
    dataset = load_dataset(name, progress=progress)
    partitions = []
    for count in workers:
        partition, path, seconds = cached_partition(dataset, count, seed)
        cut = partition.edge_cut(dataset.graph)
        partitions.append({"workers": count, "edge cut": cut, "edge cut %": 100 * cut / dataset.graph.num_edges,
                           "balance": partition.balance(), "METIS s": seconds or float("nan")})
    settings = run_settings(dataset, epochs, hidden, layers, lr, seed)
    recorded = []
    for count in workers:
        for aggregation in AGGREGATIONS:
            path = records_file(runs_dir, count, aggregation)
            steps = None if rerun else recorded_steps(path, settings, count, aggregation)
            if steps is None:
                path.unlink(missing_ok=True)  # only this launch's records may be read after it
                launch(argv_of(count, aggregation, runs_dir), count)
                steps = recorded_steps(path, settings, count, aggregation)
            elif progress:
                print(f"reusing {path}: {count} workers, {aggregation}, recorded with the same settings")
            if steps is None:
                raise WorkersFailed(f"the {count}-worker run of {aggregation} ended without its records in {path}")
            recorded += steps
    steps = per_step_table(recorded)
    steady = steady_steps(steps)
    first = steps[steps["epoch"] == 0].set_index(["workers", "aggregation"])["peak GiB"]
    table = steady.groupby(["workers", "aggregation"], sort=False).agg(
        **{"peak GiB": ("peak GiB", "max"), "added GiB": ("added GiB", "max"), "held GiB": ("held GiB", "max"),
           "process GiB": ("process GiB", "max"), "epoch s": ("epoch s", "mean"), "epoch s min": ("epoch s", "min"),
           "epoch s max": ("epoch s", "max"), "loss": ("loss", "last"), "halo rows": ("halo rows", "first"),
           "nodes per worker": ("nodes per worker", "first"),
           **{c: (c, "last") for c in steps.columns if c.endswith("accuracy")}}).reset_index()
    table.insert(3, "first step peak GiB", [first[key] for key in zip(table["workers"], table["aggregation"])])
    table = table.merge(pd.DataFrame(partitions), on="workers")
    vanilla = table[table["aggregation"] == "vanilla"].set_index("workers")["peak GiB"]
    table["vanilla / SAR"] = (table["workers"].map(vanilla) / table["peak GiB"]).where(table["aggregation"] == "sar")
    table["paper"] = table["vanilla / SAR"].notna().map({True: PAPER["vanilla / SAR"], False: ""})
    del dataset
    gc.collect()
    record = provenance(device="cpu")
    facts = {"command": f"tierbench sar --dataset {name} --workers {' '.join(map(str, workers))} --epochs {epochs} "
                        f"--out {records_dir}",
             "name": name, "workers": list(workers), "epochs": epochs, "hidden": hidden, "layers": layers, "lr": lr,
             "runs": os.path.relpath(runs_dir, records_dir) if runs_dir.is_relative_to(records_dir) else str(runs_dir),
             "minibatch": _minibatch(name, epochs, hidden, seed, progress) if minibatch else None}
    return records.write_records(records_dir / f"{STEM}.csv", table, record, facts, index=False)


def steady_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps after the first of each run (the first also sets up the process), or every step where the runs
    had one epoch only."""
    return steps[(steps["epoch"] > 0) | (steps["epoch"].max() == 0)]


def read_records(path) -> tuple[records.Records, pd.DataFrame]:
    """The table in ``path`` (the records' folder or ``sar.csv``) and every step of the runs behind it."""
    path = Path(path)
    table = records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS)
    table.table["paper"] = table.table["paper"].fillna("")
    runs = table.path.parent / table.facts["runs"]
    recorded = []
    for count in table.facts["workers"]:
        for aggregation in AGGREGATIONS:
            recorded += steps_of(records_file(runs, count, aggregation), count, aggregation)
    return table, per_step_table(recorded)


def _minibatch(name: str, epochs: int, hidden: int, seed: int, progress: bool) -> dict:
    """Minibatch tiered training of the same model for the same epochs: its settings, accuracy and epoch time."""
    batch, _ = regimes.resolve(name, "paper", None)
    fanouts = regimes.default_fanouts(name)
    dataset = load_reordered(name, "wrpr", progress=progress)
    loader = create_loader("tiered", dataset, 0.1, "cpu", progress=progress)
    try:
        trainer = Trainer(dataset, loader, fanouts, batch_size=batch, seed=seed, hidden=hidden)
        results = [trainer.train_epoch(epoch, progress=progress) for epoch in range(epochs)]
    finally:
        loader.close()
    return {"fanouts": list(fanouts), "batch": batch, "epochs": epochs,
            "valid_accuracy": results[-1].valid_accuracy, "epoch_s": sum(r.epoch_s for r in results) / len(results)}
