"""Throughput of neighbour sampling (Data Tiering §2.2) on a papers-like graph.

``track_sampled_edges_per_second`` is the raw rate of ``sample_neighbors``
(one hop, fanout 12, over 100k frontier nodes) on 1 and 2 numba threads;
``track_time_ratio_vs_torch`` compares it with the vectorised torch version
of the same algorithm on the CPU in the same run (below 1: numba is faster).
``NeighborSampler`` is timed for a whole three-layer minibatch, relabelling
included, and reported as minibatches/s (against DGL: ``tox -e peers``);
``SmallMinibatch`` times minibatches of the paper's 8 seeds, whose hops each go
in one serial call, as a ratio to the staged hops drawing the same minibatches.
``FusedMinibatch`` times a (12,12,12) minibatch drawn by the fused GPU sampler
training launches, with the CSR in GPU memory or in pinned host memory read
from the GPU (UVA sampling), through its numba or its CUDA C++ kernels, as a ratio
to the CPU sampler in the same run; it is skipped without CUDA.  Note that asv reads every number as
lower-is-better; for the edges/s and minibatches/s tracks a drop is the
regression.
"""

import numba
import torch

from benchmarks.workloads import NODES, PAPER_BATCH, load_graph, make_graphs, relabel_workload
from suite.experiments.sampler_bench import FUSED_SAMPLERS
from suite.measure.timing import best_wall_seconds
from suite.training.sampling import build_sampler, installed
from tiering.sampling.neighbors import (
    NeighborSampler,
    append_new_nodes,
    append_new_nodes_by_sorting,
    sample_neighbors,
)


class OneHop:
    params = sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)})
    param_names = ["threads"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, threads):
        numba.set_num_threads(threads)
        self.graph = load_graph(root, NODES)
        self.frontier = torch.randint(0, NODES, (100_000,), generator=torch.Generator().manual_seed(0))
        self.generator = torch.Generator().manual_seed(1)
        counts, _ = sample_neighbors(self.graph, self.frontier, 12, self.generator)  # compile
        self.edges = int(counts.sum())

    def ours(self):
        sample_neighbors(self.graph, self.frontier, 12, self.generator)

    def peer(self):
        sample_neighbors(self.graph, self.frontier, 12, self.generator, backend="torch")

    def time_sample_neighbors(self, root, threads):
        self.ours()

    def track_sampled_edges_per_second(self, root, threads):
        _, seconds = best_wall_seconds(self.ours)
        return self.edges / seconds

    track_sampled_edges_per_second.unit = "edges/s"

    def track_time_ratio_vs_torch(self, root, threads):
        _, ours = best_wall_seconds(self.ours)
        _, peer = best_wall_seconds(self.peer)
        return ours / peer

    track_time_ratio_vs_torch.unit = "ratio"


class Minibatch:
    params = [[(12, 12, 12), (15, 10, 5), (25, 15)]]
    param_names = ["fanouts"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, fanouts):
        graph = load_graph(root, NODES)
        self.sampler = NeighborSampler(graph, fanouts)
        self.seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(0))[:1024]
        self.sampler.sample(self.seeds)

    def time_sample_minibatch(self, root, fanouts):
        self.sampler.sample(self.seeds)

    def track_minibatches_per_second(self, root, fanouts):
        _, seconds = best_wall_seconds(lambda: self.sampler.sample(self.seeds))
        return 1.0 / seconds

    track_minibatches_per_second.unit = "minibatches/s"


class SmallMinibatch:
    """100 (12,12,12) minibatches of the paper's 8 seeds (Data Tiering §5.4), every hop from a frontier below
    ``neighbors.SERIAL_HOP_BELOW`` nodes and so drawn in one serial call, against the staged hops (a sampler whose
    threshold is 0: parallel regions and a Python step per stage) drawing the same minibatches in the same run."""

    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root):
        graph = load_graph(root, NODES)
        self.sampler = NeighborSampler(graph, (12, 12, 12))
        self.staged_sampler = NeighborSampler(graph, (12, 12, 12), serial_hop_below=0)
        generator = torch.Generator().manual_seed(0)
        self.seeds = [torch.randperm(NODES, generator=generator)[:PAPER_BATCH] for _ in range(100)]
        self.in_one_call()  # compiles both paths
        self.staged()

    def _minibatches(self, sampler):
        generator = torch.Generator().manual_seed(1)
        for seeds in self.seeds:
            sampler.sample(seeds, generator)

    def in_one_call(self):
        self._minibatches(self.sampler)

    def staged(self):
        self._minibatches(self.staged_sampler)

    def time_minibatches(self, root):
        self.in_one_call()

    def track_ratio_vs_staged(self, root):
        _, ours = best_wall_seconds(self.in_one_call)
        _, peer = best_wall_seconds(self.staged)
        return ours / peer

    track_ratio_vs_staged.unit = "ratio"


class Relabel:
    """The last hop of a (15,10,5) minibatch: appending new neighbours and relabelling, in one pass over a node
    map (ours) and by sorting (the peer, what the GPU path does)."""

    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root):
        self.frontier, self.neighbors = relabel_workload(load_graph(root, NODES))
        append_new_nodes(self.frontier, self.neighbors)

    def time_relabel(self, root):
        append_new_nodes(self.frontier, self.neighbors)

    def track_time_ratio_vs_sorting(self, root):
        _, ours = best_wall_seconds(lambda: append_new_nodes(self.frontier, self.neighbors))
        _, peer = best_wall_seconds(lambda: append_new_nodes_by_sorting(self.frontier, self.neighbors))
        return ours / peer

    track_time_ratio_vs_sorting.unit = "ratio"


class FusedMinibatch:
    """A (12,12,12) minibatch of 1,024 seeds drawn by the fused GPU sampler, the one training's GPU sampling launches
    (``suite.training.sampling``), for each of samplerbench's fused samplers
    (``suite.experiments.sampler_bench.FUSED_SAMPLERS``: the CSR in GPU memory or pinned host memory, the numba or the
    CUDA C++ kernels), against the CPU sampler on every core drawing the same minibatch in the same run.  Skipped
    without CUDA, and the CUDA C++ kernels without CuPy."""

    params = [list(FUSED_SAMPLERS)]
    param_names = ["sampler"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, sampler):
        sampling, kernels = FUSED_SAMPLERS[sampler]
        if not torch.cuda.is_available() or not installed(kernels):
            raise NotImplementedError(f"{sampler} needs a CUDA GPU" + (" and CuPy" if kernels == "cupy" else ""))
        graph = load_graph(root, NODES)
        self.fused = build_sampler(sampling, graph, (12, 12, 12), "cuda", kernels=kernels)
        self.cpu = build_sampler("cpu", graph, (12, 12, 12), "cpu")
        self.seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(0))[:1024]
        self.sample_fused()  # compiles the kernels, allocates the tables
        self.cpu.sample(self.seeds)

    def sample_fused(self):
        self.fused.sample(self.seeds)
        torch.cuda.synchronize()

    def time_sample_minibatch(self, root, sampler):
        self.sample_fused()

    def track_time_ratio_vs_cpu_sampler(self, root, sampler):
        _, ours = best_wall_seconds(self.sample_fused)
        _, peer = best_wall_seconds(lambda: self.cpu.sample(self.seeds))
        return ours / peer

    track_time_ratio_vs_cpu_sampler.unit = "ratio"
