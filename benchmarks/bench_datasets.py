"""Throughput of graph generation and of OGB -> CSR conversion.

Speeds are reported as nanoseconds per edge (lower is better, as asv
assumes) and, for CSR construction, as a ratio against SciPy's COO -> CSR
conversion of the same edges timed in the same run, so a number from one
machine can be read against another.
"""

import dataclasses
import tempfile
from pathlib import Path

import numpy as np

from suite.datasets import PRESETS, ogb_format
from suite.datasets.build import convert_ogb, generate_arrays
from suite.datasets.dcsbm import dcsbm_edges
from suite.datasets.rmat import rmat_edges
from suite.measure.peers import scipy_coo_to_csr
from suite.measure.timing import best_wall_seconds
from tiering.graph.csr import CSRGraph


class EdgeGeneration:
    params = [["rmat", "dcsbm"], [1 << 16, 1 << 19]]
    param_names = ["generator", "num_nodes"]

    def setup(self, generator, num_nodes):
        self.num_edges = 16 * num_nodes
        scale = num_nodes.bit_length() - 1
        if generator == "rmat":
            self.run = lambda: rmat_edges(scale, self.num_edges, seed=0)
        else:
            self.run = lambda: dcsbm_edges(num_nodes, self.num_edges, 64, 2.2, 0.6, 0.8, False, seed=0)
        self.run()  # numba compilation outside the timing

    def time_generate(self, generator, num_nodes):
        self.run()

    def track_ns_per_edge(self, generator, num_nodes):
        _, seconds = best_wall_seconds(self.run)
        return 1e9 * seconds / self.num_edges

    track_ns_per_edge.unit = "ns/edge"


class CSRConstruction:
    params = [[1 << 20, 1 << 23]]
    param_names = ["num_edges"]

    def setup(self, num_edges):
        rng = np.random.default_rng(0)
        self.num_nodes = num_edges // 16
        self.src = rng.integers(0, self.num_nodes, num_edges)
        self.dst = rng.integers(0, self.num_nodes, num_edges)
        CSRGraph.from_edges(self.src[:100], self.dst[:100], self.num_nodes)

    def ours(self):
        CSRGraph.from_edges(self.src, self.dst, self.num_nodes)

    def scipy_peer(self):
        scipy_coo_to_csr(self.src, self.dst, self.num_nodes)

    def time_from_edges(self, num_edges):
        self.ours()

    def time_scipy_coo_to_csr(self, num_edges):
        self.scipy_peer()

    def track_ns_per_edge(self, num_edges):
        _, seconds = best_wall_seconds(self.ours)
        return 1e9 * seconds / num_edges

    track_ns_per_edge.unit = "ns/edge"

    def track_time_ratio_vs_scipy(self, num_edges):
        _, ours = best_wall_seconds(self.ours)
        _, peer = best_wall_seconds(self.scipy_peer)
        return ours / peer

    track_time_ratio_vs_scipy.unit = "ratio"


class OGBConversion:
    """Reading a synthetic dataset through ogb's loader and converting it to tierbench arrays."""

    timeout = 300

    def setup_cache(self):
        preset = dataclasses.replace(PRESETS["products-s"], num_nodes=1 << 16, name="bench")
        graph, features, labels, splits = generate_arrays(preset)
        root = Path(tempfile.mkdtemp(prefix="tierbench-asv-"))
        ogb_format.write_node_dataset(root / "bench", graph.to_edge_index(), features, labels, splits)
        return str(root / "bench"), preset.num_classes, graph.num_edges

    def setup(self, cached):
        path, num_classes, self.num_edges = cached
        self.meta = ogb_format.synthetic_meta_dict(path, "tierbench-bench", num_classes)

    def read_and_convert(self):
        # no processed pickle is written, so every round times ogb's read of the raw files
        convert_ogb(*ogb_format.read_node_dataset(self.meta, "", cache_processed=False), "bench")

    def time_read_and_convert(self, cached):
        self.read_and_convert()

    def track_ns_per_edge(self, cached):
        _, seconds = best_wall_seconds(self.read_and_convert, repeat=2)
        return 1e9 * seconds / self.num_edges

    track_ns_per_edge.unit = "ns/edge"
