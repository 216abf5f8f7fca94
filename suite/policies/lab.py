"""The placement-policy lab: every policy replayed against one recorded access stream, beside the optimum.

Which rows to keep in GPU memory is answered differently by each system:
data tiering places by a score (Data Tiering §3), GNNLab by pre-sampled
frequencies (PreSC), PaGraph by degree, DGL GraphBolt with dynamic caches,
and the lookahead cache by the minibatches sampled ahead (Ginex's rule,
``suite.policies.lookahead``).
Here they all serve the same trace (``suite.policies.trace``) at the same
capacities, beside two references: the static optimum (the best fixed set of
C rows for these epochs) and Belady's MIN (the best any cache of C rows can
do, ``suite.policies.belady``).

``POLICIES`` lists them, in the order tables and figures show them.
``lab_traces`` records (or reads) the traces; ``run_lab`` replays every
policy on them at every capacity and returns one row per (policy, capacity,
epoch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import filelock
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from suite.datasets.cache import cache_root, check_writable
from suite.datasets.dataset import content_fingerprint
from suite.datasets.reordered import score_nodes
from suite.policies import belady, dynamic, lookahead, static
from suite.policies.trace import AccessTrace, load_trace, record_trace, save_trace
from suite.registry import scorer_params
from tiering.features.traffic import zero_copy_row_payload
from tiering.sampling.neighbors import NeighborSampler, minibatches

CAPACITY_PERCENTS = (1, 2, 5, 10, 15, 20, 25, 30, 40)
"""The capacities the lab replays, in percent of the rows."""
PRESAMPLE_SEED = 1_000
"""PreSC's pre-sampled epochs use seed ``seed + PRESAMPLE_SEED``: other minibatches than the replayed ones."""


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A placement policy: ``kind`` is ``static`` (a fixed set of rows), ``dynamic`` (a cache that admits and evicts),
    ``lookahead`` (a cache that sees the minibatches sampled ahead) or ``bound`` (a reference no policy of its kind
    can beat)."""

    name: str
    label: str
    kind: str
    what: str


POLICIES = {
    p.name: p
    for p in (
        PolicySpec("degree", "degree", "static", "the highest in-degree rows (PaGraph; Data Tiering §3.1)"),
        PolicySpec("rpr", "R-PR", "static", "by reverse PageRank (Data Tiering §3.1)"),
        PolicySpec("wrpr", "wR-PR", "static", "by weighted reverse PageRank, data tiering's scorer (Data Tiering §3.1)"),
        PolicySpec("presc", "PreSC", "static", "by the reads of k pre-sampled epochs with another seed (GNNLab)"),
        PolicySpec("optimum", "static optimum", "bound", "by the reads of the replayed epochs themselves"),
        PolicySpec("lru", "LRU", "dynamic", "least recently used evicted (GraphBolt)"),
        PolicySpec("clock", "CLOCK", "dynamic", "FIFO with reinsertion of referenced rows (GraphBolt)"),
        PolicySpec("s3-fifo", "S3-FIFO", "dynamic", "small, main and ghost FIFOs (GraphBolt; Yang et al. 2023)"),
        *(PolicySpec(lookahead.policy_name(w), f"lookahead W={w}", "lookahead",
                     f"Belady's rule over the next {w} minibatch(es), the dataset's scorer beyond them (Ginex)")
          for w in lookahead.WINDOWS),
        PolicySpec("belady", "Belady MIN", "bound", "the farthest next use evicted, with a free start: the bound"),
    )
}
"""Every policy of the lab, in the order tables and figures show them."""
SCORED = ("degree", "rpr", "wrpr")
"""The policies that are a scorer of ``tiering.graph.scores`` under the same name."""
WINDOWS = {lookahead.policy_name(w): w for w in lookahead.WINDOWS}
"""The lookahead policies and their windows, in minibatches sampled ahead."""
ID_BYTES = 8
"""Bytes of one sampled id held for the window (int64, as the sampler returns them)."""


@dataclasses.dataclass(frozen=True)
class LabSettings:
    """What is traced: ``dataset`` (a name the cache knows) sampled at ``fanouts`` with ``batch_size`` seeds per
    minibatch, ``epochs`` replayed and ``presample_epochs`` for PreSC, from ``seed``."""

    dataset: str
    fanouts: tuple[int, ...]
    batch_size: int
    regime: str
    epochs: int
    presample_epochs: int
    seed: int

    def trace_key(self, seed: int, epochs: int, checksum: str) -> str:
        text = json.dumps([self.dataset, checksum, list(self.fanouts), self.batch_size, seed, epochs])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def trace_directory() -> Path:
    """Where traces are kept between runs: beside the datasets they were sampled from."""
    return cache_root() / "traces"


def cached_trace(dataset, settings: LabSettings, seed: int, epochs: int, *, directory=None,
                 progress: bool = True) -> tuple[AccessTrace, Path]:
    """The trace of ``epochs`` epochs from ``seed``: read from ``directory`` (default ``trace_directory()``) when
    recorded before, else recorded and written there."""
    directory = Path(directory) if directory else trace_directory()
    fingerprint = content_fingerprint(dataset)
    path = directory / f"{settings.dataset}-{settings.trace_key(seed, epochs, fingerprint)}.npz"
    identity = {"dataset": settings.dataset, "fingerprint": fingerprint}
    expect = {**identity, "num_nodes": dataset.num_nodes, "fanouts": list(settings.fanouts),
              "batch_size": settings.batch_size, "seed": seed, "epochs": epochs}
    if path.is_file():  # written whole (renamed into place): read without the lock, which a read-only cache refuses
        return load_trace(path, expect=expect), path  # a trace claims what it was recorded from: checked
    check_writable(directory, f"the trace {path.name} ({settings.dataset}, {epochs} epochs from seed {seed})",
                   "make it writable (policies and plan also take --trace-dir, a writable folder for traces)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{path}.lock"):  # two runs wanting the same trace record it once
        if path.is_file():
            return load_trace(path, expect=expect), path
        trace = record_trace(dataset.graph, dataset.splits["train"], settings.fanouts, settings.batch_size, seed=seed,
                             epochs=epochs, meta={**identity, "regime": settings.regime}, progress=progress)
        save_trace(path, trace)
    return trace, path


@dataclasses.dataclass(frozen=True)
class LabTraces:
    """What the lab replays: the trace of the settings' epochs (and its file), and PreSC's pre-sampled epochs."""

    trace: AccessTrace
    path: Path
    presample: AccessTrace


def lab_traces(dataset, settings: LabSettings, *, trace_dir=None, progress: bool = True) -> LabTraces:
    """The lab's two traces of ``dataset`` under ``settings`` (``cached_trace``)."""
    trace, path = cached_trace(dataset, settings, settings.seed, settings.epochs, directory=trace_dir,
                               progress=progress)
    presample, _ = cached_trace(dataset, settings, settings.seed + PRESAMPLE_SEED, settings.presample_epochs,
                                directory=trace_dir, progress=progress)
    return LabTraces(trace, path, presample)


def row_cost(num_nodes: int, row_bytes: int) -> np.ndarray:
    """The PCIe payload of reading each row by zero-copy from a table in host memory (``tiering.features.traffic``)."""
    return zero_copy_row_payload(torch.arange(num_nodes), row_bytes).numpy()


def scorer_order(dataset, name: str) -> np.ndarray:
    """Rows by scorer ``name``'s score (``tiering.graph.scores``), with its default parameters."""
    return static.order_by(score_nodes(dataset, name, scorer_params(name)).numpy())


def presc_order(presample: AccessTrace) -> np.ndarray:
    """PreSC's order: rows by how many minibatches of the pre-sampled epochs read them."""
    return static.order_by(presample.counts().sum(axis=0))


def static_orders(dataset, counts: np.ndarray, presample: AccessTrace) -> dict[str, np.ndarray]:
    """The order of every static policy: each scorer's, PreSC's and the optimum's (by ``counts``, the replayed
    epochs' reads)."""
    orders = {name: scorer_order(dataset, name) for name in SCORED}
    orders["presc"] = presc_order(presample)
    orders["optimum"] = static.order_by(counts.sum(axis=0))
    return orders


def lookahead_order(dataset, orders: dict[str, np.ndarray]) -> np.ndarray:
    """The static order the lookahead cache falls back on beyond its window: that of the scorer ``dataset`` was
    reordered by, else data tiering's (weighted reverse PageRank)."""
    return orders[dataset.scorer if dataset.scorer in SCORED else "wrpr"]


def sampling_seconds(dataset, settings: LabSettings, batches: int = 64) -> float:
    """Seconds the sampler takes per minibatch under ``settings`` on this CPU (the mean of ``batches``, after one
    untimed): how long a window of W minibatches takes to sample ahead."""
    sampler = NeighborSampler(dataset.graph, settings.fanouts)
    stream = minibatches(sampler, dataset.splits["train"], settings.batch_size, settings.seed, 0, shuffle=True)
    next(stream, None)
    start, timed = time.perf_counter(), 0
    for _ in range(batches):
        if next(stream, None) is None:
            break
        timed += 1
    return (time.perf_counter() - start) / max(timed, 1)


def capacities_of(num_nodes: int, percents=CAPACITY_PERCENTS) -> list[int]:
    """Capacities in rows for ``percents`` of ``num_nodes`` rows (at least one row each)."""
    return sorted({max(1, round(num_nodes * p / 100)) for p in percents})


def run_lab(dataset, settings: LabSettings, capacities, traces: LabTraces, *,
            progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Replay every policy on ``traces`` (``lab_traces``) of ``dataset`` at every one of ``capacities`` (rows).

    Returns ``(rows, facts)``: one row per (policy, capacity, epoch) with
    reads, hits, miss bytes and rows admitted; ``facts`` about the trace
    (its file and size, reads per epoch), the replay speed of each policy
    that is replayed access by access (reads per second), and what a
    lookahead window costs: the bytes of one minibatch's ids and the seconds
    to sample one.
    """
    trace, presample = traces.trace, traces.presample
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    cost = row_cost(dataset.num_nodes, row_bytes)
    capacities = sorted(set(capacities))
    counts = trace.counts()
    replays = []
    orders = static_orders(dataset, counts, presample)
    for name, order in orders.items():
        replays += static.replay_static(name, counts, order, capacities, cost)
    seconds = {}
    replayed = [name for name, spec in POLICIES.items() if spec.kind in ("dynamic", "lookahead")] + ["belady"]
    with tqdm(total=len(replayed) * len(capacities), desc="replaying", unit="replay", disable=not progress,
              leave=False) as bar:
        beyond_window = lookahead_order(dataset, orders)
        for name in replayed:
            start = time.perf_counter()
            if name in WINDOWS:  # one pass over the trace finds every read's next and previous use for all capacities
                bar.set_postfix_str(f"{name} at {len(capacities)} capacities")
                replays += lookahead.replay_lookahead(trace, capacities, cost, WINDOWS[name], beyond_window)
                bar.update(len(capacities))
            for capacity in capacities if name not in WINDOWS else ():
                bar.set_postfix_str(f"{name} at {capacity:,} rows")
                replays.append(belady.replay_belady(trace, capacity, cost) if name == "belady"
                               else dynamic.replay_dynamic(name, trace, capacity, cost))
                bar.update(1)
            seconds[name] = time.perf_counter() - start
    rows = pd.DataFrame([
        {"policy": r.policy, "kind": POLICIES[r.policy].kind, "capacity_rows": r.capacity,
         "capacity_percent": 100 * r.capacity / dataset.num_nodes, "epoch": e, "reads": int(r.accesses[e]),
         "hits": int(r.hits[e]), "miss_bytes": int(r.miss_bytes[e]), "fill_rows": int(r.fills[e])}
        for r in replays for e in range(trace.num_epochs)
    ])
    facts = {
        "row_bytes": row_bytes,
        "reads_per_epoch": trace.epoch_accesses().tolist(),
        "batches_per_epoch": int(np.diff(trace.epoch_batches)[0]),
        "trace_file": str(traces.path),
        "trace_bytes_per_epoch": traces.path.stat().st_size / trace.num_epochs,
        "counts": counts,
        "row_cost": cost,
        "replay_reads_per_s": {name: len(capacities) * trace.num_accesses / s for name, s in seconds.items()},
        "window_bytes_per_batch": ID_BYTES * trace.num_accesses / trace.num_batches,
        "sample_s_per_batch": sampling_seconds(dataset, settings),
    }
    return rows, facts
