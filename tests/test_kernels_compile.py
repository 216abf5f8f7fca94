"""Every numba-cuda kernel compiles for the H100's and H200's sm_90 with the argument types its callers launch it with.

numba's CUDA simulator, which runs the kernels in the other tests, interprets them as Python and types nothing, so a
kernel that numba cannot type for the device (integers of mismatched widths, a call with no device implementation)
passes every simulated test and fails at its first launch on a GPU.  Here the kernels are launched under the
simulator by their callers, the fused sampler and the feature table, with each launch's argument types recorded;
then a fresh interpreter without the simulator compiles every kernel for those types to PTX for sm_90 with the CUDA
toolkit's libNVVM (``numba.cuda.compile_ptx``), as a GPU's first launch would, with ``numpy.row_stack`` removed as
NumPy 2.5 has it (``tiering.numba_cuda``: the GPU machines' NumPy 2.5 stopped numba-cuda compiling any kernel).

Compiling with no GPU needs two of numba-cuda's internals replaced in that interpreter: the current device's compute
capability, which numba reads to compile a kernel's device functions, and NVRTC's path, which it looks up beside
libNVVM's (NVRTC would only be asked which architectures it supports, which ``NUMBA_FORCE_CUDA_CC`` answers).  The
test skips, naming why, where the toolkit's libNVVM is missing or those internals have moved.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
import torch

from suite.datasets import node_data_cuda
from suite.datasets.feature_table import generate_feature_table
from tiering.graph.csr import CSRGraph
from tiering.sampling import fused, fused_kernels
from tiering.sampling.fused import FusedNeighborSampler, append_new_nodes_hashed

REPO = Path(__file__).resolve().parents[1]
NO_NVVM, MOVED = 3, 4  # the compiling interpreter's exit statuses for the two reasons to skip
COMPILE = r"""
import importlib, json, sys, types as pytypes
import numpy
numpy.__dict__.pop("row_stack", None)  # as NumPy 2.5 is, which numba-cuda 0.30 cannot compile with by itself
from numba import types
from tiering.numba_cuda import cuda
import numba.cuda.cuda_paths as cuda_paths
import numba.cuda.dispatcher as dispatcher
if not (hasattr(dispatcher, "get_current_device") and hasattr(cuda_paths, "_get_nvrtc_path")):
    print("numba-cuda no longer has dispatcher.get_current_device and cuda_paths._get_nvrtc_path"); sys.exit(4)
dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
cuda_paths._get_nvrtc_path = lambda: None
try:
    from numba.cuda.cudadrv.nvvm import NVVM
    NVVM()
except Exception as err:
    print(f"no CUDA toolkit's libNVVM here ({type(err).__name__}: {err})"); sys.exit(3)

def numba_type(kind, name, ndim=0, layout=""):
    return types.Array(getattr(types, name), ndim, layout) if kind == "array" else getattr(types, name)

compiled = 0
for module, name, signatures in json.load(sys.stdin):
    kernel = getattr(importlib.import_module(module), name)
    for signature in signatures:
        cuda.compile_ptx(kernel.py_func, tuple(numba_type(*arg) for arg in signature), cc=(9, 0))
        compiled += 1
print(f"compiled {compiled}")
"""


def _describe(value) -> list:
    """``value`` as a kernel sees it, in a form the compiling interpreter turns back into its numba type."""
    if isinstance(value, np.ndarray):
        return ["array", str(value.dtype), value.ndim, "C" if value.flags.c_contiguous else "A"]
    return ["scalar", str(numba.typeof(value))]


@pytest.fixture
def launches(monkeypatch):
    """(module, kernel) -> the argument types of every numba kernel's launch: the fused sampler's
    (``tiering.sampling.fused.NumbaLaunches.launch``) and the feature table's (``tiering.sampling.fused.launch``)."""
    seen = {}
    real, real_sampler_launch = fused.launch, fused.NumbaLaunches.launch

    def record(kernel, args):
        signature = tuple(tuple(_describe(a)) for a in fused.kernel_arguments(args))
        seen.setdefault((kernel.py_func.__module__, kernel.py_func.__name__), set()).add(signature)

    def recorded(kernel, blocks, threads, stream, device, *args):
        record(kernel, args)
        return real(kernel, blocks, threads, stream, device, *args)

    def recorded_by_sampler(self, name, blocks, stream, *args):
        record(getattr(self.code, name), args)
        return real_sampler_launch(self, name, blocks, stream, *args)

    monkeypatch.setattr(fused.NumbaLaunches, "launch", recorded_by_sampler)
    monkeypatch.setattr(node_data_cuda, "launch", recorded)
    return seen


@pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")  # the simulator's wrapping hash
@pytest.mark.skipif(not fused_kernels.SIMULATED, reason="records the kernels' launches under numba's CUDA simulator")
def test_every_kernel_compiles_for_sm_90_with_the_types_its_callers_launch_it_with(launches):
    rng = np.random.default_rng(0)
    n = 60
    graph = CSRGraph.from_edges(rng.integers(0, n, 5 * n), rng.integers(0, n, 5 * n), n).coalesce()
    for indices in (graph.indices.to(torch.int32), graph.indices.to(torch.int64)):  # a dataset's index dtypes
        FusedNeighborSampler(CSRGraph(graph.indptr, indices), (3, 2)).sample(torch.arange(6),
                                                                            torch.Generator().manual_seed(0))
    append_new_nodes_hashed(torch.arange(4), torch.tensor([1, 5, 5, 9]))
    classes = rng.integers(0, 5, n)  # int64, as suite.datasets.dcsbm.draw_classes draws them
    for noise_ids in (None, torch.from_numpy(rng.permutation(n))):
        generate_feature_table(graph, classes, 8, 0.3, 0.6, 11, noise_ids=noise_ids, device="cuda")
    names = {name for _, name in launches}
    assert names == {"sample", "insert_all", "marks", "write", "rows", "renamed_rows"}  # every kernel launched

    plan = [[module, name, sorted(signatures)] for (module, name), signatures in sorted(launches.items())]
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env.update(NUMBA_FORCE_CUDA_CC="9.0", PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", COMPILE], input=json.dumps(plan), capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600, check=False)
    if done.returncode in (NO_NVVM, MOVED):
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"compiled {sum(len(signatures) for *_, signatures in plan)}"
