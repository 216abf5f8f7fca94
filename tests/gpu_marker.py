"""The one marker for tests that need a CUDA GPU: ``@pytest.mark.gpu``.

Without a CUDA GPU such a test is skipped ("needs a CUDA GPU"), so the suite
runs anywhere.  With ``TIERBENCH_REQUIRE_GPU=1`` in the environment (``tierbench
gpu-suite`` sets it for its steps) a missing GPU fails the test instead: a run
meant to exercise the GPU can never pass with every GPU test skipped.
"""

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

    if torch.cuda.is_available():
        return
    if os.environ.get(REQUIRE_GPU) == "1":
        pytest.fail(f"needs a CUDA GPU, and none is visible while {REQUIRE_GPU}=1", pytrace=False)
    pytest.skip("needs a CUDA GPU")
