"""The processes a test starts, forked from Python's forkserver rather than spawned.

A spawned process imports torch, numba, PyG and tierbench anew (seconds each on a CI machine's two cores).  The
forkserver imports them once per test session (``PRELOAD``) and forks every process a test starts from there.
Nothing that runs a test body starts a thread in it, so what each process forks from holds only imported modules.
On a GPU machine a process forked from there cannot use the GPU: on an H200 with torch 2.11 its first CUDA call
failed with "initialization error", the driver's answer in a process forked after the driver was initialised (by
one of those imports, there).  A process whose body uses a GPU is therefore spawned (``GPU_START_METHOD``), a fresh
interpreter that imports what it needs itself.

A forked process inherits the forkserver's environment, the one of the test that happened to start it first; its
target is therefore wrapped (``in_callers_environment``) to run in the environment of the test that starts it:
``TIERBENCH_DATA``, say, and ``NUMBA_ENABLE_CUDASIM``, which numba's CUDA module (not preloaded) takes from numba's
settings when a process first imports it, so numba reads its settings again from that environment.
"""

import functools
import multiprocessing
import os

PRELOAD = ["numpy", "numba", "torch", "torch.distributed", "torch_geometric", "pandas", "tiering.features.multi_gpu",
           "tiering.sampling.distributed", "suite.training.trainer", "suite.training.distributed",
           "suite.training.domain_parallel", "suite.sweep.run"]
"""What the forkserver imports before it forks a test's processes (not ``numba.cuda``: see the module docstring)."""
START_METHOD = "forkserver"
GPU_START_METHOD = "spawn"
"""How a process whose body uses a GPU is started (see the module docstring)."""
multiprocessing.set_forkserver_preload(PRELOAD)


def context():
    """The multiprocessing context whose processes fork from the forkserver."""
    return multiprocessing.get_context(START_METHOD)


def in_callers_environment(target):
    """``target`` as a process runs it: in the environment of the process that calls this, as it is now."""
    return functools.partial(_in_environment, dict(os.environ), target)


def _in_environment(environment: dict, target, *args, **kwargs):
    from numba.core import config

    os.environ.clear()
    os.environ.update(environment)
    config.reload_config()  # numba's NUMBA_* settings, read when the forkserver imported it
    return target(*args, **kwargs)
