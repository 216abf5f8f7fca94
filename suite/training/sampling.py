"""Which sampler draws a training run's minibatches, and where the graph it samples lives (``SAMPLING``).

* ``cpu``: ``NeighborSampler`` (``tiering.sampling.neighbors``), numba over the CSR in host memory;
* ``gpu``: ``FusedNeighborSampler`` (``tiering.sampling.fused``), three kernels and two scans per hop, the CSR
  copied into GPU memory once;
* ``uva``: the same fused sampler with the CSR left in pinned host memory and read by its kernels over PCIe
  (``graph_memory="host"``, ``tiering.features.zero_copy.mapped_graph``): PyTorch-Direct's zero-copy access
  (PyTorch-Direct §3.2) applied to the graph instead of the features, for a graph that does not fit beside them;
* ``distributed``: ``DistributedNeighborSampler`` (``tiering.sampling.distributed``) over a CSR split across the
  processes of a data-parallel run (DSP §4; Data Tiering §5.5), built by ``suite.training.distributed``.

All four draw the same minibatches for the same seed: every hop's draws are counter-based hashes of (hop seed, node
id, draw) (``tiering.rng``), and the hop seeds come from one CPU generator per epoch
(``tiering.sampling.neighbors.minibatches``), whichever device samples.  ``gpu`` and ``uva`` need a CUDA device;
without one, numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, the tests') runs the same kernels on the CPU.
"""

from __future__ import annotations

import importlib.util

import torch

from suite.errors import BadValue
from tiering.sampling.fused import DEFAULT_KERNELS, KERNELS, FusedNeighborSampler
from tiering.sampling.neighbors import NeighborSampler

SAMPLING = ("cpu", "gpu", "uva", "distributed")
SINGLE_PROCESS = tuple(sampling for sampling in SAMPLING if sampling != "distributed")
"""The samplings one process runs by itself (``distributed`` needs a group of them)."""
GRAPH_MEMORY = {"gpu": "gpu", "uva": "host"}
"""The samplings whose kernels run on a GPU, and where each keeps the graph (``FusedNeighborSampler``'s
``graph_memory``)."""
NEEDS_GPU = {"gpu": "gpu sampling runs the fused sampler's kernels on a GPU, the CSR in GPU memory",
             "uva": "uva sampling runs the fused sampler's kernels on a GPU, reading the CSR from pinned host memory"}


def simulated() -> bool:
    """Whether numba's CUDA simulator runs the fused sampler's kernels (importing ``numba.cuda``)."""
    from tiering.sampling.fused import device_code

    return device_code().SIMULATED


def check_device(sampling: str, device) -> None:
    """Refuse, in one line, a sampling whose kernels run on a GPU (``NEEDS_GPU``) on a device that is not CUDA."""
    if sampling in NEEDS_GPU and torch.device(device).type != "cuda":
        raise BadValue(f"{NEEDS_GPU[sampling]}: it needs a CUDA device (--device cuda)")


def check_single_process_name(sampling: str) -> None:
    """Refuse, in one line, a sampling one process cannot run by itself (``SINGLE_PROCESS``), whatever the device."""
    if sampling not in SINGLE_PROCESS:
        raise BadValue(f"sampling must be one of {', '.join(SINGLE_PROCESS)} in one process, got {sampling!r} "
                       "(--sampling)")


def check_single_process(sampling: str, device) -> None:
    """Refuse, in one line, a sampling one process cannot run by itself (``check_single_process_name``), or a GPU
    sampling on a device that is not CUDA unless the simulator stands in for one."""
    check_single_process_name(sampling)
    if sampling in GRAPH_MEMORY and not simulated():
        check_device(sampling, device)


def check_kernels(sampling: str, kernels, device) -> None:
    """Refuse, in one line, kernels that are not the fused sampler's (``tiering.sampling.fused.KERNELS``), kernels
    other than the default for a sampling that does not run them (``cpu``, ``distributed``), or the CUDA C++ kernels
    on a device that is not CUDA (numba's simulator runs only the numba kernels)."""
    if not isinstance(kernels, str):  # an object launching them (the tests' kernels compiled for the host)
        return
    if kernels not in KERNELS:
        raise BadValue(f"the fused sampler's kernels are {' or '.join(KERNELS)}, got {kernels!r} (--sampler-kernels)")
    if kernels != DEFAULT_KERNELS:
        if sampling not in GRAPH_MEMORY:
            raise BadValue(f"--sampler-kernels {kernels} chooses the fused GPU sampler's kernels, which {sampling} "
                           f"sampling does not run: use it with --sampling {' or '.join(GRAPH_MEMORY)}")
        check_device(sampling, device)
    if not installed(kernels):
        raise BadValue("--sampler-kernels cupy launches the kernels through CuPy, which is not installed: install "
                       "tierbench's gpu extra (pip install 'tierbench[gpu]')")


def installed(kernels: str) -> bool:
    """Whether this machine has what launches ``kernels``: CuPy for the CUDA C++ ones (numba-cuda is a
    dependency)."""
    return kernels != "cupy" or importlib.util.find_spec("cupy") is not None


def launched_kernels(sampling: str, kernels: str) -> str | None:
    """The fused sampler's ``kernels`` where ``sampling`` runs it (``GRAPH_MEMORY``), else None: what records say of
    a run's kernels."""
    return kernels if sampling in GRAPH_MEMORY else None


def describe_sampling(sampling: str, kernels: str | None) -> str:
    """``sampling`` as reports say it, with the kernels it launches (``launched_kernels``) where there are any:
    ``gpu sampling (cupy kernels)``, ``cpu sampling``."""
    return f"{sampling} sampling" + (f" ({kernels} kernels)" if kernels else "")


def build_sampler(sampling: str, graph, fanouts, device, kernels=DEFAULT_KERNELS):
    """The single-process sampler of ``sampling`` (``SINGLE_PROCESS``) over ``graph`` for training on ``device``
    (``check_single_process``); a GPU sampling's with the fused sampler's ``kernels`` (``check_kernels``)."""
    check_single_process(sampling, device)
    check_kernels(sampling, kernels, device)
    if sampling == "cpu":
        return NeighborSampler(graph, fanouts)
    device = torch.device(device)
    return FusedNeighborSampler(graph, fanouts, graph_memory=GRAPH_MEMORY[sampling],
                                device=device if device.type == "cuda" else None, kernels=kernels)
