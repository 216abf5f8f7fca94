"""``tierbench bucket-train``: epochs of link prediction through Marius's partition buffer, per edge-bucket ordering,
with and without prefetching (Marius §3-§4).

The feature table stays in its file; p partitions of it, c in host memory at
a time, walked in the BETA, Hilbert or row-major ordering
(``baselines.marius.bucket_order``) by ``baselines.marius.partition_buffer.PartitionBuffer``,
each partition one large sequential read (``O_DIRECT`` where the filesystem
allows it, so the page cache holds none of it: the buffer's c partitions,
plus the ``prefetch`` being read, are all the table's rows in host memory;
that budget is the buffer's own, not emulated).  An epoch trains a share of
the graph's edges (``suite.training.link_prediction``: a linear encoder and
DistMult, a shared set of negatives drawn from the buffer per batch), bucket
by bucket in the ordering's states, the file dropped from the page cache
before each.  Prefetch 0 reads each entering partition when the training
reaches it and waits (synchronous swaps, PyTorch-BigGraph's way); prefetch 1
reads the next one in a thread while the current state trains (Marius's).

Two shares of edges per epoch set how much computing there is to hide the
reads behind.  Each setting first runs ``warmup`` untimed epochs (the first
epoch of a process pays for compiling and first allocations, and ran up to
17x slower than the next), then ``repeats`` timed ones, alternating; the
epoch time is their median with their range.  Beside them: the swaps, the
ordering's lower bound, the bytes read, the time those bytes take at the
sequential ceiling measured on the same file in the same run, and the
held-out mean reciprocal rank after the epoch (the same for every ordering
up to the order the edges were seen in).  Records: ``bucket-training.csv`` (per share of
edges, ordering and prefetch), ``bucket-training-runs.csv`` (every run) and
the sidecar (settings, the ceiling); ``suite.figures.bucket_training`` draws them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from baselines.marius.bucket_order import ORDERS, bucket_order, swap_lower_bound
from baselines.marius.partition_buffer import PartitionBuffer, check_prefetch
from suite.datasets import load_dataset
from suite.datasets.dataset import array_file
from suite.errors import BadValue
from suite.io import records
from suite.io.progress import Steps
from suite.io.provenance import provenance
from suite.measure.disk_ceilings import sequential_ceiling
from suite.measure.host_memory import available_bytes, gib
from suite.training.link_prediction import (
    DistMultOverFeatures,
    bucket_edges,
    mean_reciprocal_rank,
    train_over_buckets,
)
from tiering.disk.table import DiskTable

EDGE_FRACTIONS = (0.002, 0.02)
PAPER = ("Marius: on Freebase86m, whose embeddings do not fit in host memory, Marius (BETA, partitions read "
         "ahead) trains 3.7x faster than PyTorch-BigGraph (synchronous swaps), mostly from doing less I/O")
"""The seed's one number for the partition buffer; its ordering comparison is a figure without numbers."""
GB = 1e9
STEM = "bucket-training"
RUNS = "bucket-training-runs"
FACTS = ("command", "name", "num_nodes", "feature_dim", "num_edges", "table_bytes", "partitions", "capacity",
         "io_mode", "sequential_bytes_per_s", "batch_edges", "negatives", "dim", "repeats", "warmup", "orders")
DEFAULTS = {"partitions": 16, "capacity": 4, "edge_fraction": list(EDGE_FRACTIONS), "prefetch": [0, 1], "repeats": 2,
            "warmup": 1, "seed": 0}
"""``tierbench bucket-train``'s defaults, which a table's command line leaves out."""
BUCKET_BYTES = 400
"""Host memory per edge bucket (p² of them), measured with tracemalloc at p = 300: an ordering's buckets as Python
pairs (up to 380 bytes, row-major's the most) and the buckets' offsets (two int64)."""


def command_line(name: str, out_dir, **options) -> str:
    """The ``tierbench bucket-train`` command that makes the report of these options."""
    spelled = [f"--{key.replace('_', '-')} {' '.join(map(str, value)) if isinstance(value, list) else value}"
               for key, value in options.items() if value != DEFAULTS[key]]
    return " ".join(["tierbench bucket-train --dataset", name, *spelled, "--out", str(out_dir)])


def _epoch(dataset, path, boundaries, buckets, name, capacity, prefetch, *, dim, batch_edges, negatives, seed,
           progress) -> dict:
    """One epoch from a cold file and a fresh model; its times, counters and held-out MRR."""
    order = bucket_order(name, len(boundaries) - 1, capacity)
    table = DiskTable(path)
    table.drop_cache()
    buffer = PartitionBuffer(table, boundaries, order, prefetch=prefetch)
    torch.manual_seed(seed)
    model = DistMultOverFeatures(dataset.feature_dim, dim)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    try:
        epoch = train_over_buckets(buffer, buckets, model, optimizer, batch_edges=batch_edges, negatives=negatives,
                                   seed=seed, progress=progress, label=f"{name}, prefetch {prefetch}")
    finally:
        buffer.close()
    features = np.load(path, mmap_mode="r", allow_pickle=False)
    return {"ordering": name, "prefetch": prefetch, "io_mode": table.io_mode, "epoch_s": epoch.seconds,
            "waiting_s": epoch.waiting_s, "edges": epoch.edges, "batches": epoch.batches, "swaps": epoch.swaps,
            "disk_bytes": epoch.disk_bytes_read, "loss": epoch.loss,
            "mrr": mean_reciprocal_rank(model, features, buckets, negatives=negatives, seed=seed)}


def measure(name: str, records_dir, *, partitions: int = DEFAULTS["partitions"],
                           capacity: int = DEFAULTS["capacity"], edge_fractions=EDGE_FRACTIONS, orders=ORDERS,
                           prefetches=(0, 1), repeats: int = DEFAULTS["repeats"], warmup: int = DEFAULTS["warmup"],
                           dim: int = 100,
                           batch_edges: int = 10_000, negatives: int = 1000, seed: int = DEFAULTS["seed"],
                           progress: bool = True) -> list[Path]:
    """Train ``name`` over edge buckets in every ordering and prefetch setting; write the records into
    ``records_dir`` and return their path."""
    try:
        swap_lower_bound(partitions, capacity)
        for prefetch in prefetches:
            check_prefetch(partitions, capacity, prefetch)
    except ValueError as err:  # a buffer that is not 2 <= c < p, a read-ahead beyond p - c: the user's options
        raise BadValue(f"{err} (--partitions, --capacity, --prefetch)") from None
    needed, available = BUCKET_BYTES * partitions**2, available_bytes()
    if needed > available:
        raise BadValue(f"--partitions {partitions} makes {partitions**2:,} edge buckets, whose orderings take about "
                       f"{gib(needed)} of host memory, and {gib(available)} is available: give fewer --partitions")
    dataset = load_dataset(name, progress=progress)
    if partitions > dataset.num_nodes:
        raise BadValue(f"--partitions {partitions} is more than {name}'s {dataset.num_nodes:,} nodes: every "
                       "partition needs a row; give fewer")
    path = array_file(dataset.path, "features")
    boundaries = np.linspace(0, dataset.num_nodes, partitions + 1).round().astype(np.int64)
    sequential, mode = sequential_ceiling(path)
    runs = []
    steps = Steps(f"partition buffer on {name}",
                  len(edge_fractions) * (warmup + repeats) * len(orders) * len(prefetches), progress)
    for fraction in edge_fractions:
        buckets = bucket_edges(dataset.graph, boundaries, fraction, seed=seed)
        for repeat in range(-warmup, repeats):  # negative: an untimed warm-up epoch
            for order in orders:
                for prefetch in prefetches:
                    what = f"warm-up {repeat + warmup + 1}" if repeat < 0 else f"run {repeat + 1}"
                    with steps.step(f"{100 * fraction:g}% of edges, {order}, prefetch {prefetch}, {what}"):
                        run = _epoch(dataset, path, boundaries, buckets, order, capacity, prefetch, dim=dim,
                                     batch_edges=batch_edges, negatives=negatives, seed=seed, progress=False)
                    if repeat >= 0:
                        runs.append({"edge_fraction": fraction, "repeat": repeat, **run})
    steps.close()
    raw = pd.DataFrame(runs)
    keys = ["edge_fraction", "ordering", "prefetch"]
    table = raw.groupby(keys, sort=False).agg(
        epoch_s=("epoch_s", "median"), epoch_min_s=("epoch_s", "min"), epoch_max_s=("epoch_s", "max"),
        waiting_s=("waiting_s", "median"), edges=("edges", "first"), swaps=("swaps", "first"),
        disk_bytes=("disk_bytes", "first"), loss=("loss", "first"), mrr=("mrr", "first"),
        io_mode=("io_mode", "first")).reset_index()
    table["bound"] = swap_lower_bound(partitions, capacity)
    table["disk GB"] = table["disk_bytes"] / GB
    table["read at sequential ceiling s"] = table["disk_bytes"] / sequential
    table["computing s"] = table["epoch_s"] - table["waiting_s"]
    reference = table[(table["ordering"] == "beta") & (table["prefetch"] == max(prefetches))].set_index(
        "edge_fraction")["epoch_s"]
    table["epoch / BETA prefetching"] = table["epoch_s"] / table["edge_fraction"].map(reference)
    records_dir = Path(records_dir)
    record = provenance(device="cpu")
    facts = {"command": command_line(name, records_dir, partitions=partitions, capacity=capacity,
                                     edge_fraction=list(edge_fractions), prefetch=list(prefetches), repeats=repeats,
                                     warmup=warmup, seed=seed),
             "name": name, "num_nodes": dataset.num_nodes, "feature_dim": dataset.feature_dim,
             "num_edges": dataset.graph.num_edges, "table_bytes": path.stat().st_size, "partitions": partitions,
             "capacity": capacity, "io_mode": mode, "sequential_bytes_per_s": sequential, "batch_edges": batch_edges,
             "negatives": negatives, "dim": dim, "repeats": repeats, "warmup": warmup, "orders": list(orders)}
    records.write_records(records_dir / f"{RUNS}.csv", raw, record, {}, index=False)
    return records.write_records(records_dir / f"{STEM}.csv", table, record, facts, index=False)


def read_records(path) -> tuple[records.Records, pd.DataFrame]:
    """The table in ``path`` (the records' folder or ``bucket-training.csv``) and every run behind it."""
    path = Path(path)
    table = records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS)
    return table, records.read_records(table.path.with_name(f"{RUNS}.csv"), ()).table
