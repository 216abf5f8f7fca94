"""pytest-benchmark settings: machine info names the GPU (or says there is none); data built once per session."""

import dataclasses

import pytest
import torch

from suite.datasets import PRESETS
from suite.datasets.build import generate_graph


def pytest_benchmark_update_machine_info(config, machine_info):
    if torch.cuda.is_available():
        machine_info["gpu"] = torch.cuda.get_device_name()
        machine_info["cuda"] = torch.version.cuda
    else:
        machine_info["gpu"] = "none (CPU code paths only)"
    machine_info["torch"] = torch.__version__


@pytest.fixture(scope="session")
def papers_like_graph():
    graph, _ = generate_graph(dataclasses.replace(PRESETS["papers-s"], num_nodes=1 << 18))
    return graph
