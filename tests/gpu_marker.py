"""The one marker for tests that need a CUDA GPU: ``@pytest.mark.gpu``.

Without a CUDA GPU such a test is skipped ("needs a CUDA GPU"), so the suite
runs anywhere.  With ``TIERBENCH_REQUIRE_GPU=1`` in the environment (``tierbench
gpu-suite`` sets it for its steps) a missing GPU fails the test instead: a run
meant to exercise the GPU can never pass with every GPU test skipped.  A GPU
test that finds the GPU short of something else it needs (NVML's counters)
calls ``unusable``, which skips or fails it the same way."""

from __future__ import annotations

import os

import pytest

from suite.sweep.gpu_suite import REQUIRE_GPU


def pytest_configure(config):
    config.addinivalue_line("markers", f"gpu: needs a CUDA GPU; skipped without one, a failure with {REQUIRE_GPU}=1")


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is None:
        return
    import torch

    if not torch.cuda.is_available():
        unusable("needs a CUDA GPU", "none is visible")


def unusable(need: str, why: str):
    """Skip a GPU test that finds the GPU short of what it ``need``s, for ``why``; fail it with ``REQUIRE_GPU=1``."""
    if os.environ.get(REQUIRE_GPU) == "1":
        pytest.fail(f"{need}, and {why} while {REQUIRE_GPU}=1", pytrace=False)
    pytest.skip(f"{need}: {why}")
