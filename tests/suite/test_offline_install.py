"""An install without internet: what tierbench needs at import time, and (given wheels) a real offline install.

GPU nodes often have no internet and a CUDA image that lacks a few of the
dependencies (numba-cuda, ogb, platformdirs, pymetis); the README's offline install brings those
as wheels.  ``--help`` and ``doctor`` must work before they are there, so
that ``doctor`` can say what is missing.
"""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ABSENT = ("numba_cuda", "ogb", "platformdirs", "pymetis", "seaborn", "tabulate", "torch_geometric")
# a None in sys.modules makes `import NAME` raise ImportError, as if the package were not installed
PRELUDE = f"import sys\nfor name in {ABSENT!r}:\n    sys.modules[name] = None\nfrom suite.cli import main\n"


def _tierbench_without_optional_packages(args, env=None):
    command = [sys.executable, "-c", PRELUDE + f"sys.exit(main({list(args)!r}))"]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def test_help_and_doctor_need_none_of_the_packages_a_cuda_image_may_lack(tmp_path):
    help_ = _tierbench_without_optional_packages(["--help"])
    assert help_.returncode == 0 and "doctor" in help_.stdout, help_.stderr
    doctor = _tierbench_without_optional_packages(["doctor", "--no-measure", "--out", str(tmp_path)])
    assert doctor.returncode == 0, doctor.stderr
    assert "missing packages" in doctor.stdout and len(list(tmp_path.glob("*.json"))) == 1


def test_without_platformdirs_the_cache_is_taken_from_tierbench_data(tmp_path):
    env = {**os.environ, "TIERBENCH_DATA": str(tmp_path)}
    listed = _tierbench_without_optional_packages(["datasets", "list"], env)
    assert listed.returncode == 0 and "papers-s" in listed.stdout, listed.stderr
    del env["TIERBENCH_DATA"]
    refused = _tierbench_without_optional_packages(["datasets", "list"], env)
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("tierbench: error: platformdirs is not installed: install it, or set "
                                      "TIERBENCH_DATA to the dataset cache directory")


@pytest.mark.skipif(not os.environ.get("TIERBENCH_WHEELS"), reason="set TIERBENCH_WHEELS to a folder of wheels")
def test_offline_install_from_a_folder_of_wheels(tmp_path):
    """The README's offline install in a fresh virtual environment, with pip kept off the network."""
    venv.create(tmp_path / "env", with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--no-index", "--find-links", os.environ["TIERBENCH_WHEELS"],
               "-e", str(REPO)]
    subprocess.run(install, check=True, timeout=1800)
    doctor = subprocess.run([str(tmp_path / "env" / "bin" / "tierbench"), "doctor", "--no-measure", "--out",
                             str(tmp_path / "machines")], capture_output=True, text=True, timeout=600)
    assert doctor.returncode == 0, doctor.stderr
    missing = next(line for line in doctor.stdout.splitlines() if line.startswith("missing packages"))
    missing = missing.removeprefix("missing packages").strip()
    assert missing == "none" or missing.startswith("cupy-cuda13x:")  # a CPU machine's wheels need not hold CuPy
