"""The ``gpu`` marker: a skip without a GPU, a failure where a GPU run asks for one (tests/gpu_marker.py); the same
for a GPU test that finds the GPU short of something else it needs (``unusable``)."""

import os
import subprocess
import sys
from pathlib import Path


from suite.sweep.gpu_suite import REQUIRE_GPU

REPO = Path(__file__).resolve().parents[1]
MARKED = '''
import pytest

from tests.gpu_marker import unusable

@pytest.mark.gpu
def test_on_the_gpu():
    assert False, "a GPU test ran where no GPU is visible"

def test_anywhere():
    pass

def test_short_of_a_counter():
    unusable("needs a counter", "the driver has none")
'''


def _pytest_without_gpu(tmp_path, **env) -> subprocess.CompletedProcess:
    (tmp_path / "test_marked.py").write_text(MARKED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    environment = {k: v for k, v in os.environ.items() if k != REQUIRE_GPU}
    environment.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO), **env)  # no GPU visible, on any machine
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.gpu_marker", "-p", "no:cacheprovider", "-rs",
                           "--strict-markers", str(tmp_path)], cwd=tmp_path, env=environment, capture_output=True,
                          text=True)


def test_a_gpu_test_skips_where_no_gpu_is_visible(tmp_path):
    run = _pytest_without_gpu(tmp_path)
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 skipped" in run.stdout and "needs a CUDA GPU" in run.stdout
    assert "needs a counter: the driver has none" in run.stdout


def test_a_gpu_run_fails_the_gpu_tests_that_find_no_gpu(tmp_path):
    run = _pytest_without_gpu(tmp_path, **{REQUIRE_GPU: "1"})
    assert run.returncode == 1, run.stdout
    assert "1 failed, 1 passed, 1 error" in run.stdout and f"none is visible while {REQUIRE_GPU}=1" in run.stdout
    assert f"needs a counter, and the driver has none while {REQUIRE_GPU}=1" in run.stdout


def test_every_gpu_test_carries_the_one_marker():
    """No test skips for want of CUDA by a skipif of its own: it would escape the marker's failure mode."""
    own_skip = "skipif(not torch.cuda" + ".is_available()"
    for path in (REPO / "tests").rglob("test_*.py"):
        assert own_skip not in path.read_text(), path
