"""What the host spends launching the fused GPU sampler's work (``tierbench samplerbench``'s second table).

A hop of the fused sampler (``tiering.sampling.fused``) launches three kernels, ``sample``, ``marks`` and ``write``,
with 9, 5 and 14 arrays among their arguments: numba-cuda kernels taking torch tensors wrapped as numba device arrays
(``cuda.as_cuda_array``; the sampler wraps each tensor once, where it is made, and keeps its work buffers, so that a
hop wraps only its two outputs), or the same kernels in CUDA C++ launched by CuPy, each tensor its address and size;
then two torch scans.  A minibatch sets its seeds' count on the device (one fill) and reads every hop's totals back
once, at its end.  On a minibatch of 1,024 seeds such fixed costs, more than the GPU's work, may decide whether a
(12,12,12) minibatch samples within a millisecond, so ``samplerbench`` measures them beside its rates for each fused
sampler over the CSR in GPU memory, each as the host's microseconds per repetition, the best of ``repeat`` timings of
``LAUNCHES`` repetitions launched back to back and then waited for:

* ``hop kernels, tensors at each launch``: the hop's three kernels on empty inputs (each one block that does
  nothing), every torch tensor made into what the kernel takes at each launch;
* ``hop kernels, arguments made once``: the same launches with every tensor made into it once beforehand: what
  making them once leaves of the first (the sampler makes all but a hop's two outputs once per sampler or per
  minibatch size);
* ``hop scans``: the hop's two torch ``cumsum`` on empty tensors: torch's own launch cost, for comparison;
* ``minibatch of one seed``: a whole (12,12,12) minibatch of one seed through the sampler: every fixed cost of its
  three hops, the fill and the read back included, with almost no work.

The rows are measured on the sampler's device; where the kernels run on the CPU (the tests) the times mean nothing
of a GPU's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.io import records
from suite.measure.timing import best_wall_seconds, wait_for
from tiering.sampling.fused import kernel_parameters, made_current

STEM = "launch-costs"
FACTS = ("command", "dataset", "repeat", "repetitions")
LAUNCHES = 100
"""Repetitions per timing: launched back to back, so the host's cost per repetition, not the wait, is what is
timed."""
MINIBATCH_FANOUTS = (12, 12, 12)
ONE_SEED = "minibatch of one seed"
"""The row of a ``MINIBATCH_FANOUTS`` minibatch of one seed: the fixed costs under a minibatch of any size."""


def _hop_arguments(graph, counts: torch.Tensor) -> dict[str, tuple]:
    """The three kernels' arguments for a hop of an empty frontier over ``graph``, ``counts`` (empty) its rows'
    counts: empty arrays of the types the sampler's own launches pass, so that no kernel compiles again, each
    kernel's in its order (``kernel_parameters``)."""
    device = counts.device
    given = {"indptr": graph.indptr[:0], "indices": graph.indices[:0], "counts": counts, "fanout": 12, "width": 12,
             "seed": np.uint64(0), "hop": 0, "table": 0,
             "sizes": torch.zeros(4, dtype=torch.int64, device=device),  # an empty frontier's size, its totals, a flag
             "left": torch.zeros(2, dtype=torch.int64, device=device)}
    return {name: tuple(given[p] if p in given else torch.empty(0, dtype=torch.int64, device=device)
                        for p in kernel_parameters(name)) for name in ("sample", "marks", "write")}


def _per_repetition_us(run, device: torch.device, repeat: int, launches: int) -> float:
    """Microseconds per ``run()``: the best of ``repeat`` timings of ``launches`` runs and a wait for the device,
    after an untimed run (kernels compile at their first launch)."""
    def batch():
        for _ in range(launches):
            run()
        wait_for(device)

    run()
    wait_for(device)
    return best_wall_seconds(batch, repeat)[1] / launches * 1e6


def measure_launch_costs(sampler, seed_node: torch.Tensor, repeat: int, launches: int | None = None) -> list[dict]:
    """The rows of the module docstring for the fused ``sampler`` (on its device, with its kernels), ``seed_node``
    one node of its graph, each timing ``launches`` repetitions (``LAUNCHES`` by default): ``kernels``, ``what``,
    ``launches`` (the kernels and scans of one repetition; a minibatch also checks its seeds, allocates and reads back
    once) and ``host_us`` (microseconds per repetition)."""
    device, launches = sampler.device, launches or LAUNCHES
    kernels = sampler.launches
    counts = torch.empty(0, dtype=torch.int64, device=device)
    arguments = _hop_arguments(sampler.graph, counts)
    with made_current(device):
        stream = kernels.stream(device)
        made = {name: kernels.arrays(args) for name, args in arguments.items()}

    def hop_kernels(by_name):
        def run():
            for name, args in by_name.items():
                kernels.launch(name, 1, stream, *args)
        return run

    def scans():
        torch.cumsum(counts, 0)
        torch.cumsum(counts, 0)

    minibatch = sampler.with_fanouts(MINIBATCH_FANOUTS)
    generator = torch.Generator().manual_seed(0)
    cases = (("hop kernels, tensors at each launch", 3, hop_kernels(arguments)),
             ("hop kernels, arguments made once", 3, hop_kernels(made)),
             ("hop scans", 2, scans),
             (ONE_SEED, 1 + 3 * len(MINIBATCH_FANOUTS) + 2 * len(MINIBATCH_FANOUTS),
              lambda: minibatch.sample(seed_node, generator)))
    with made_current(device):  # once, as the sampler makes its device current once a minibatch
        return [{"kernels": sampler.kernels, "what": what, "launches": count,
                 "host_us": _per_repetition_us(run, device, repeat, launches)} for what, count, run in cases]


def write(rows: list[dict], out_dir, provenance: dict, facts: dict) -> Path:
    """The rows as records in ``out_dir``; their path."""
    table = pd.DataFrame(rows).assign(us_per_launch=lambda t: t["host_us"] / t["launches"], **provenance)
    return records.write_records(Path(out_dir) / f"{STEM}.csv", table, provenance, facts, index=False)


def records_beside(folder) -> records.Records | None:
    """The launch costs samplerbench wrote into ``folder`` beside its rates, or ``None`` where it measured none (no
    fused sampler in GPU memory: a CPU device)."""
    path = Path(folder) / f"{STEM}.csv"
    return read_records(path) if path.exists() else None


def read_records(path) -> records.Records:
    """The records in ``path`` (their folder or ``launch-costs.csv``)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS,
                                measured_by="tierbench samplerbench")
