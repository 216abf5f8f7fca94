import os
import socket

import pytest
import torch

# Without a GPU, numba's CUDA simulator runs the fused GPU sampler's kernels (tiering.sampling.fused). numba.cuda reads
# this when it is first imported, which only building a fused sampler does; CPU numba ignores it. With a GPU the same
# tests run the real kernels.
if not torch.cuda.is_available():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

pytest_plugins = ["tests.gpu_marker"]  # @pytest.mark.gpu


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Nothing in tierbench may reach the network: fail any test whose code tries.  A Unix socket, which never leaves
    the machine (the forkserver that starts the processes of the tests: tests/processes.py), connects."""

    def refusing(connect):
        def refuse(self, address, *args, **kwargs):
            if self.family == socket.AF_UNIX:
                return connect(self, address, *args, **kwargs)
            raise AssertionError(f"tierbench tried to connect to {address}")

        return refuse

    monkeypatch.setattr(socket.socket, "connect", refusing(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", refusing(socket.socket.connect_ex))


@pytest.fixture(scope="session", autouse=True)
def provenance_in_junit(record_testsuite_property):
    """With ``--junitxml`` (the GPU tests' step of ``tierbench gpu-suite``), the report names the device, revision,
    source digest and time of the run, as every record of a GPU visit does."""
    from suite.io.provenance import provenance

    for key, value in provenance().items():
        record_testsuite_property(key, str(value))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tierbench-cache")


@pytest.fixture(autouse=True)
def isolated_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("TIERBENCH_DATA", str(cache_dir))
    return cache_dir


@pytest.fixture(scope="session")
def tiny(cache_dir):
    """The ``tiny`` preset, prepared once per session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TIERBENCH_DATA", str(cache_dir))
    try:
        from suite.datasets import load_dataset

        yield load_dataset("tiny", progress=False)
    finally:
        mp.undo()
