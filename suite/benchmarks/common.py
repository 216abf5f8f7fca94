"""Helpers shared by the asv benchmark modules."""

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from suite.datasets import PRESETS
from suite.datasets.build import generate_graph
from tiering.graph import CSRGraph

SIZES = [1 << 16, 1 << 18]


def best_of(fn, repeat=3):
    """The fastest of ``repeat`` wall-clock runs of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def make_graphs():
    """Papers-like graphs of each size in SIZES, saved as .npy files; returns their directory (for setup_cache)."""
    root = Path(tempfile.mkdtemp(prefix="tierbench-asv-"))
    for n in SIZES:
        graph, _ = generate_graph(dataclasses.replace(PRESETS["papers-s"], num_nodes=n))
        np.save(root / f"indptr-{n}.npy", graph.indptr.numpy())
        np.save(root / f"indices-{n}.npy", graph.indices.numpy())
    return str(root)


def load_graph(root, n):
    return CSRGraph(torch.from_numpy(np.load(f"{root}/indptr-{n}.npy")), torch.from_numpy(np.load(f"{root}/indices-{n}.npy")))


class OnPapersLikeGraphs:
    """Base of benchmark classes parametrised over the papers-like graphs of SIZES."""

    params = SIZES
    param_names = ["num_nodes"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()
