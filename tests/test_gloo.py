"""The test helpers that run a body in gloo processes: forked from the forkserver, or spawned for a GPU body."""

import sys

from tests.gloo import run_gloo

PRELOADED_ONLY = "suite.sweep.run"
"""A module the forkserver imports (``tests.processes.PRELOAD``) and neither this module nor the helpers do."""


def preloaded(rank, world):
    return PRELOADED_ONLY in sys.modules


def test_a_body_is_forked_from_the_forkserver(tmp_path):
    assert run_gloo(preloaded, 1, tmp_path) == [True]


def test_a_gpu_body_runs_in_a_spawned_interpreter(tmp_path):
    # forked from the forkserver, a process cannot start CUDA on a GPU machine (tests.processes)
    assert run_gloo(preloaded, 2, tmp_path, gpu=True) == [False, False]
