"""``tierbench disk``: the disk-backed loaders on the minibatches of a traced epoch, against the disk's own ceilings
(Marius).

Feature tables larger than host memory leave part of the table on the SSD.
This measures, on this machine, what the loaders that read it cost: the
gathers of the first ``BATCHES`` training minibatches of an epoch (the
policy lab's trace, ``suite.policies.trace``, in the paper's regime; on the
dataset reordered by weighted R-PR, whose row order ``disk-tiered`` needs)
through

* ``in-memory``: the whole table in memory, the reference;
* ``mmap``, cold (the file dropped from the page cache first,
  ``posix_fadvise(DONTNEED)``) and warm (the same minibatches again): the page
  cache decides; and with the page cache held to the same memory as each
  ``disk-tiered`` setting (emulated: after each minibatch the pages past the
  first rows are dropped);
* ``disk-tiered`` at a hot fraction in the top tier and host budgets of a
  few shares of the table, the rest read from disk on demand by
  ``O_DIRECT`` (where the filesystem allows), ``in_flight`` reads at a time;
  each also with gaps between wanted blocks read through when they are
  shorter than what the disk moves sequentially in one random read's time
  (``worth_reading``, from the ceilings of the same run).
  A host budget below the table's size is *emulated*: the loader is told to
  keep only that share, on a machine that could hold it all.

Beside them, in the same run, the disk's ceilings: a cold sequential read of
the whole file in 64 MiB ``O_DIRECT`` reads (``dd``'s way), and random
single-block reads at the same ``in_flight``.  Disk bytes are measured at
the file (``disk-tiered``: with the traffic model's count beside them;
``mmap``: the kernel's per-process accounting).  Records: ``disk.csv``, one row per loader and setting, and its sidecar (the ceilings, the trace);
``suite.figures.disk`` draws them.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from baselines.in_memory import InMemoryLoader
from baselines.page_cache import MmapLoader
from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.datasets.dataset import array_file
from suite.datasets.reordered import load_reordered
from suite.errors import BadValue
from suite.io import records
from suite.io.provenance import provenance
from suite.measure.disk_ceilings import (
    random_ceiling,
    sequential_ceiling,
    worth_reading,
)
from suite.measure.memory_limit import (
    MemoryLimitUnavailable,
    memory_cgroup_root,
    memory_limit,
)
from suite.policies.lab import LabSettings, cached_trace
from tiering.disk.table import BLOCK, DiskTable
from tiering.disk.tiered import DiskTieredLoader
from tiering.features.placement import hot_rows

BATCHES = 50
"""Minibatches measured per loader and setting: the first of the traced epoch.  On a disk that serves about 10,000
random blocks a second, a whole papers-s epoch read block by block would take over 15 minutes per setting."""
HOST_FRACTIONS = (0.0, 0.15, 0.4)
ENFORCED_BATCHES = 5
"""Minibatches measured with the page cache under a memory cgroup, and emulated beside them on the same ones."""
CGROUP_SLACK = 16 << 20
"""Room in an enforced budget for what the gathers allocate (their output, a few MB per minibatch), beyond the
page cache."""
GB = 1e9
STEM = "disk"
FACTS = ("command", "name", "num_nodes", "table_bytes", "trace", "measured", "num_batches", "reads", "io_mode",
         "sequential_bytes_per_s", "random_reads_per_s", "in_flight", "gap_bytes", "enforced_batches",
         "cgroup_slack_bytes", "unenforced_because")
INTEGER_COLUMNS = ("modelled_disk_bytes", "cgroup_limit_bytes", "cgroup_peak_bytes")
"""Counts that some rows lack: integers with gaps."""


def _epoch(loader, batches, label: str, progress: bool) -> dict:
    loader.reset_stats()
    start = time.perf_counter()
    for ids in tqdm(batches, desc=label, unit="batch", disable=not progress, leave=False):
        loader.gather(ids)
    seconds = time.perf_counter() - start
    stats = loader.stats()
    return {"minibatches": len(batches), "seconds": seconds, "rows": stats.accesses, "hit_ratio": stats.hit_ratio,
            "disk_bytes": stats.disk_bytes_read, "modelled_disk_bytes": getattr(loader, "modelled_disk_bytes", None)}


def _emulated_mmap(path, rows_kept: int, batches, label: str, progress: bool) -> dict:
    """``_epoch`` of ``mmap`` from a cold file with the page cache emulated to hold only the first ``rows_kept``."""
    budgeted = MmapLoader(path, budget_rows=rows_kept)
    budgeted.drop_cache()
    try:
        return _epoch(budgeted, batches, label, progress)
    finally:
        budgeted.close()


def _limited_epoch(path, budget_bytes: int, batches, label: str, progress: bool) -> dict:
    """``_epoch`` of ``mmap`` from a cold file, in a memory cgroup that holds its page cache to ``budget_bytes``
    (plus ``CGROUP_SLACK`` for the gathers' own allocations); with the most the cgroup was charged."""
    mapped = MmapLoader(path)
    mapped.drop_cache()
    try:
        with memory_limit(budget_bytes + CGROUP_SLACK, "tierbench-disk") as group:
            measured = _epoch(mapped, batches, label, progress)
            measured["cgroup_limit_bytes"] = group.limit_bytes
            measured["cgroup_peak_bytes"] = group.peak_bytes()
    finally:
        mapped.close()
    return measured


def measure(name: str, records_dir, *, hot_fraction: float = 0.1, host_fractions=HOST_FRACTIONS, in_flight: int = 32,
                batches: int = BATCHES, seed: int = 0, progress: bool = True) -> list[Path]:
    """Measure the disk loaders on ``name`` and write the records into ``records_dir``; their path."""
    if hot_fraction + max(host_fractions) > 1:
        raise BadValue(f"disk-tiered's GPU and host tiers are shares of one table: --hot-fraction {hot_fraction:g} "
                       f"leaves {1 - hot_fraction:.0%} of the rows, less than the largest host tier measured, "
                       f"{max(host_fractions):.0%}; give --hot-fraction at most {1 - max(host_fractions):g}")
    batch, regime = regimes.resolve(name, "paper", None)
    fanouts = regimes.default_fanouts(name)
    dataset = load_dataset(name, progress=progress)
    reordered = load_reordered(name, "wrpr", progress=progress)
    old_to_new, num_nodes = reordered.old_to_new.numpy().copy(), reordered.num_nodes
    path = array_file(reordered.path, "features")
    del reordered  # its memory map of the file would keep the file's pages in the page cache
    gc.collect()
    settings = LabSettings(name, fanouts, batch, regime, 1, 1, seed)
    trace, _ = cached_trace(dataset, settings, seed, 1, progress=progress)
    renamed = old_to_new[trace.ids]
    measured = min(batches, trace.num_batches)
    batches = [torch.from_numpy(renamed[trace.batch_offsets[b]:trace.batch_offsets[b + 1]]) for b in range(measured)]
    reads = int(trace.batch_offsets[measured])
    table_bytes = path.stat().st_size
    sequential, mode = sequential_ceiling(path)
    random_rate = random_ceiling(path, in_flight)
    probe = DiskTable(path)
    row_bytes = probe.row_bytes
    probe.close()
    try:
        memory_cgroup_root()
        enforced = None
    except MemoryLimitUnavailable as err:
        enforced = str(err)
    rows = []
    mapped = MmapLoader(path)
    mapped.drop_cache()
    rows.append({"loader": "mmap", "setting": "cold page cache", **_epoch(mapped, batches, "mmap cold", progress)})
    rows.append({"loader": "mmap", "setting": "warm page cache", **_epoch(mapped, batches, "mmap warm", progress)})
    mapped.close()
    hot = hot_rows(num_nodes, hot_fraction)
    gap = worth_reading(sequential, random_rate)
    for share in host_fractions:
        host = min(hot_rows(num_nodes, share), num_nodes - hot)
        emulated = {"loader": "mmap", "setting": f"page cache held to the first {100 * hot_fraction:g}% + "
                    f"{100 * share:g}% of rows (emulated)"}
        rows.append({**emulated, **_emulated_mmap(path, hot + host, batches, f"mmap {share:g}", progress)})
        if enforced is None:  # the kernel's reclaim under a limit is slow enough to measure only a few minibatches
            first = batches[:ENFORCED_BATCHES]
            rows.append({**emulated, **_emulated_mmap(path, hot + host, first, f"mmap {share:g}", progress)})
            rows.append({"loader": "mmap", "setting": f"page cache limited to {100 * (hot_fraction + share):g}% of the "
                         f"table by a memory cgroup (enforced)",
                         **_limited_epoch(path, (hot + host) * row_bytes, first, f"mmap {share:g} cgroup", progress)})
        for max_gap in (0, gap):
            table = DiskTable(path)
            table.drop_cache()
            loader = DiskTieredLoader(table, hot, host, in_flight=in_flight, max_gap_bytes=max_gap)
            setting = (f"{100 * hot_fraction:g}% top tier, {100 * share:g}% host (emulated), rest on disk"
                       + (f", gaps up to {max_gap // 1024} KiB read" if max_gap else ""))
            rows.append({"loader": "disk-tiered", "setting": setting,
                         **_epoch(loader, batches, f"disk-tiered {share:g} gap {max_gap}", progress)})
            loader.close()
    memory = InMemoryLoader(torch.from_numpy(np.load(path, allow_pickle=False)))
    rows.insert(0, {"loader": "in-memory", "setting": "whole table in memory",
                    **_epoch(memory, batches, "in-memory", progress)})
    table = pd.DataFrame(rows)
    table["disk GB"] = table["disk_bytes"] / GB
    table["disk GB/s"] = table["disk_bytes"] / table["seconds"] / GB
    table["of sequential ceiling"] = table["disk GB/s"] / (sequential / GB)
    table["of random-read ceiling"] = table["disk GB/s"] / (random_rate * BLOCK / GB)
    table["modelled_disk_bytes"] = table["modelled_disk_bytes"].astype("Int64")
    for column in ("cgroup_limit_bytes", "cgroup_peak_bytes"):
        table[column] = (table[column] if column in table else pd.Series(dtype=float)).astype("Int64")
    record = provenance(device="cpu")
    facts = {"command": f"tierbench disk --dataset {name} --out {records_dir}", "name": name, "num_nodes": num_nodes,
             "table_bytes": table_bytes, "trace": regimes.describe(name, batch, regime), "measured": measured,
             "num_batches": trace.num_batches, "reads": reads, "io_mode": mode, "sequential_bytes_per_s": sequential,
             "random_reads_per_s": random_rate, "in_flight": in_flight, "gap_bytes": gap, "enforced_batches":
             ENFORCED_BATCHES, "cgroup_slack_bytes": CGROUP_SLACK, "unenforced_because": enforced}
    return records.write_records(Path(records_dir) / f"{STEM}.csv", table, record, facts, index=False)


def read_records(path) -> records.Records:
    """The disk loaders' records in ``path`` (their folder or ``disk.csv``)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS,
                                dtype={c: "Int64" for c in INTEGER_COLUMNS})
