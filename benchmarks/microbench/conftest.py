"""pytest-benchmark settings: machine info names the GPU (or says there is none); data built once per session."""

import pytest
import torch

from benchmarks import workloads


def pytest_benchmark_update_machine_info(config, machine_info):
    if torch.cuda.is_available():
        machine_info["gpu"] = torch.cuda.get_device_name()
        machine_info["cuda"] = torch.version.cuda
    else:
        machine_info["gpu"] = "none (CPU code paths only)"
    machine_info["torch"] = torch.__version__


@pytest.fixture(scope="session")
def papers_like_graph():
    return workloads.papers_like_graph(workloads.NODES)
