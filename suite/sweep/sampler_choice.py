"""Which kernels the fused GPU sampler launches on a GPU where ``--sampler-kernels measured`` (the commands' default)
leaves it to the records: the set ``tierbench samplerbench`` measured faster on this device.

The fused sampler's kernels exist twice, numba-cuda's and the same ones in CUDA C++ launched through CuPy
(``tiering.sampling.fused.KERNELS``).  They draw the same minibatches; what differs is what the host pays to launch
them, which a training minibatch pays nine times whatever its size.  ``tierbench samplerbench`` times both over the
CSR in GPU memory (its samplers ``gpu`` and ``gpu-cupy``) on a (12,12,12) minibatch (``case`` "minibatch"), the case
where launching weighs most, and the faster one there is launched by every GPU sampling on that device, also with
the CSR in pinned host memory (``uva``), whose kernels are the same.  The records are looked for where gpubench's are
(``suite.sweep.variants.GPUBENCH_ROOTS``: ``<root>/<device slug>/sampler-bench/sampler-bench.csv``).  Without them (a
CPU, where numba's simulator runs only the numba kernels, or a GPU samplerbench has not measured both sets on) it is
``tiering.sampling.fused.DEFAULT_KERNELS``.  A choice says why it was made (``KernelChoice.basis``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import torch

from suite.errors import BadValue
from suite.io.provenance import device_name
from suite.sweep.variants import GPUBENCH_ROOTS, device_records
from suite.training.sampling import GRAPH_MEMORY, installed
from tiering.sampling.fused import DEFAULT_KERNELS, KERNELS

MEASURED = "measured"
"""The ``--sampler-kernels`` value that chooses from samplerbench's records."""
CHOICES = (MEASURED, *KERNELS)
RACE = {"numba": "gpu", "cupy": "gpu-cupy"}
"""samplerbench's sampler of each set of kernels over the CSR in GPU memory."""
CASE = "minibatch"


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """The kernels launched, and why: chosen by name, or measured faster (the records' path), or the default."""

    kernels: str
    basis: str

    def line(self, samplings) -> str | None:
        """What a command says of this choice: the kernels the fused sampler launches, and why; ``None`` where none
        of ``samplings`` samples with it."""
        if not any(sampling in GRAPH_MEMORY for sampling in samplings):
            return None
        return f"the fused GPU sampler launches its {self.kernels} kernels ({self.basis})"


def samplerbench_records(device: str, roots=GPUBENCH_ROOTS) -> Path | None:
    """The table samplerbench wrote for ``device`` (``"cuda: NVIDIA H100 ..."``), or ``None``."""
    return device_records(device, "sampler-bench/sampler-bench.csv", roots)


def choose(table: pd.DataFrame, basis: str) -> KernelChoice:
    """The faster set on samplerbench's minibatch in ``table`` (its records, from ``basis``; a sampler timed more than
    once by its best time), or the default where the table does not time both."""
    minibatch = table[table["case"] == CASE]
    timed = minibatch.groupby("sampler")["best_s"].min()
    missing = [sampler for sampler in RACE.values() if sampler not in timed.index]
    if missing:
        return KernelChoice(DEFAULT_KERNELS, f"default: {basis} times no {CASE} of {' or '.join(missing)}")
    times = {kernels: float(timed[sampler]) for kernels, sampler in RACE.items()}
    fastest = min(times, key=times.get)
    if times[fastest] == times[DEFAULT_KERNELS]:
        fastest = DEFAULT_KERNELS  # a tie keeps the default
    first = minibatch.iloc[0]
    versus = ", ".join(f"{kernels} {1e3 * seconds:.3g} ms" for kernels, seconds in times.items())
    return KernelChoice(fastest, f"faster on {first['dataset']}'s ({first['fanouts']}) minibatch of "
                                 f"{first['seeds']:,} seeds in {basis}: {versus}")


def sampler_kernels(option: str, samplings, device) -> KernelChoice:
    """The kernels the fused sampler launches for ``option`` (``CHOICES``) in a run whose cells sample by
    ``samplings`` on ``device``: the named set, or with ``MEASURED`` the set samplerbench measured faster on this
    device where a cell samples on a CUDA GPU, else the default (also where CuPy, which launches the CUDA C++
    kernels, is not installed, or the records cannot be read: the basis says so)."""
    if option != MEASURED:
        return KernelChoice(option, "chosen (--sampler-kernels)")
    if torch.device(device).type != "cuda" or not any(sampling in GRAPH_MEMORY for sampling in samplings):
        return KernelChoice(DEFAULT_KERNELS, "default: nothing samples with the fused sampler on a CUDA GPU")
    from suite.experiments import sampler_bench

    name = device_name(device)
    path = samplerbench_records(name)
    if path is None:
        return KernelChoice(DEFAULT_KERNELS, f"default: no samplerbench records for {name} "
                                             f"(in {' or '.join(GPUBENCH_ROOTS)})")
    try:
        choice = choose(sampler_bench.read_records(path).table, str(path))
    except (BadValue, KeyError) as err:  # records of another version, or without their sidecar
        return KernelChoice(DEFAULT_KERNELS, f"default: {path} cannot be read ({err})")
    if not installed(choice.kernels):
        return KernelChoice(DEFAULT_KERNELS, f"default: CuPy, which launches the cupy kernels, is not installed "
                                             f"(those were {choice.basis})")
    return choice
