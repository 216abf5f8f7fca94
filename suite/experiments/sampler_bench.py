"""Neighbour sampling throughput (``tierbench samplerbench``): the fused GPU sampler over the CSR in GPU memory
(``gpu``) and read over PCIe from pinned host memory (``uva``, UVA sampling, PyTorch-Direct §3.2 applied to the
graph), and the fused sampler's CUDA C++ kernels over the CSR in GPU memory (``gpu-cupy``), against the CPU sampler on
every core (``cpu``, numba) (``suite.training.sampling``, ``tiering.sampling.fused``).

Two cases on one dataset, the same seeds for every sampler:

* ``one hop``: fanout 12 over ``seeds`` distinct seeds (100,000 by default), the raw sampling rate;
* ``minibatch``: a training minibatch, fanouts (12, 12, 12) from ``batch_size`` seeds (1,024 by default), where
  the later hops' frontiers and the relabelling dominate.

Each sampler samples once untimed (kernels compile, the GPU's tables are allocated), then ``repeat`` times, each
timing waiting for the device; the best time is kept (``suite.measure.timing.best_wall_seconds``).  Rates are sampled
edges (the blocks' edges) per second; all the samplers draw the same minibatch (``tiering.sampling.fused``), which
is checked by the equal edge counts.  Each sampler's graph is copied where it samples once, for both cases.  On a
CPU device only ``cpu`` runs.  For each fused sampler over the CSR in GPU memory (``gpu``, ``gpu-cupy``), its fixed
costs are measured right after its rates (``suite.experiments.launch_costs``: the host's time to launch a hop's
kernels and scans, and a minibatch of one seed), into ``launch-costs.csv`` beside them.  The records are written
again after each sampler, so a sampler that fails leaves those measured before it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numba
import pandas as pd
import torch

from suite.errors import BadValue
from suite.experiments import launch_costs
from suite.io import records
from suite.io.provenance import provenance
from suite.measure.timing import best_wall_seconds, wait_for
from suite.training.sampling import GRAPH_MEMORY, build_sampler

STEM = "sampler-bench"
FACTS = ("command", "dataset", "seeds", "batch_size", "repeat", "cpu_threads")
CASES = {"one hop": (12,), "minibatch": (12, 12, 12)}
"""Each case's fanouts; the one hop samples ``seeds`` seeds, the minibatch ``batch_size``."""
SEEDS, BATCH_SIZE, REPEAT = 100_000, 1024, 5


FUSED_SAMPLERS = {"gpu": ("gpu", "numba"), "uva": ("uva", "numba"), "gpu-cupy": ("gpu", "cupy")}
"""The fused GPU samplers measured on a CUDA device, by name: (sampling, kernels), the sampling's graph placement
(``suite.training.sampling.GRAPH_MEMORY``) and the set of kernels (``tiering.sampling.fused.KERNELS``)."""


def samplers(device) -> dict[str, tuple[str, object]]:
    """The samplers measured on ``device``, by name, each (sampling, kernels): the CPU's alone, or with a CUDA device
    the fused ones too (``FUSED_SAMPLERS``)."""
    return {"cpu": ("cpu", None), **(FUSED_SAMPLERS if torch.device(device).type == "cuda" else {})}


def time_sampler(sampler, seeds: torch.Tensor, repeat: int, device) -> tuple[float, int]:
    """``(best seconds, sampled edges)`` of ``sampler`` on ``seeds``: the best of ``repeat`` host-clock timings
    (``suite.measure.timing``), each waiting for the device, after an untimed first run; run ``r`` draws with seed
    ``r``."""
    runs = itertools.count()

    def sample():
        batch = sampler.sample(seeds, torch.Generator().manual_seed(next(runs)))
        wait_for(device)
        return batch

    sample()
    batch, best = best_wall_seconds(sample, repeat)
    return best, batch.num_sampled_edges


def measure(dataset, out_dir, device="cuda", *, seeds: int = SEEDS, batch_size: int = BATCH_SIZE,
            repeat: int = REPEAT, command: str = "") -> Path:
    """Measure every sampler of ``samplers(device)`` in both cases on ``dataset`` and write the records into
    ``out_dir``; their path."""
    for count, option in ((seeds, "--seeds"), (batch_size, "--batch-size")):
        if count > dataset.num_nodes:
            raise BadValue(f"{option} {count} is more than {dataset.name}'s {dataset.num_nodes:,} nodes")
    order = torch.randperm(dataset.num_nodes, generator=torch.Generator().manual_seed(0))
    record = provenance(device)
    facts = {"command": command, "dataset": dataset.name, "seeds": seeds, "batch_size": batch_size, "repeat": repeat,
             "cpu_threads": numba.get_num_threads()}
    path, rows, fixed = Path(out_dir) / f"{STEM}.csv", [], []
    for name, (sampling, kernels) in samplers(device).items():
        placed = build_sampler(sampling, dataset.graph, CASES["one hop"], device, kernels=kernels)  # graph placed
        for case, fanouts in CASES.items():
            chosen = order[: seeds if case == "one hop" else batch_size]
            best, edges = time_sampler(placed.with_fanouts(fanouts), chosen, repeat, device)
            rows.append({"dataset": dataset.name, "case": case, "fanouts": ",".join(map(str, fanouts)),
                         "seeds": len(chosen), "sampler": name, "sampled_edges": edges, "best_s": best,
                         "sampled_edges_per_second": edges / best if best > 0 else float("nan"),
                         "ms_per_batch": best * 1e3})
        # written after each sampler, so that one failing later leaves what was measured before it
        table = pd.DataFrame(sorted(rows, key=lambda row: list(CASES).index(row["case"]))).assign(**record)
        records.write_records(path, table, record, facts, index=False)  # case by case, the samplers in order
        if GRAPH_MEMORY.get(sampling) == "gpu":  # a fused sampler over the CSR in GPU memory: its fixed costs too
            fixed += [{"sampler": name, **row} for row in launch_costs.measure_launch_costs(placed, order[:1], repeat)]
            launch_costs.write(fixed, out_dir, record, {"command": command, "dataset": dataset.name,
                                                        "repeat": repeat, "repetitions": launch_costs.LAUNCHES})
        del placed  # one sampler's graph in GPU memory at a time
    return path


def read_records(path) -> records.Records:
    """The records in ``path`` (their folder or ``sampler-bench.csv``)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS,
                                measured_by="tierbench samplerbench")
