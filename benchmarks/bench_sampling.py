"""Throughput of neighbour sampling (Data Tiering §2.2) on a papers-like graph.

``track_sampled_edges_per_second`` is the raw rate of ``sample_neighbors``
(one hop, fanout 12, over 100k frontier nodes) on 1 and 2 numba threads;
``track_time_ratio_vs_torch`` compares it with the vectorised torch version
of the same algorithm on the CPU in the same run (below 1: numba is faster).
``NeighborSampler`` is timed for a whole three-layer minibatch, relabelling
included, and reported as minibatches/s (against DGL: ``tox -e peers``).
``CSRLocation`` times the same minibatch with the CSR in host memory (numba),
in GPU memory (the torch sampler on the GPU) and in pinned host memory read
from the GPU (UVA sampling, ``tiering.features.zero_copy.mapped_graph``); the GPU cases
are skipped without CUDA.  Note that asv reads every number as
lower-is-better; for the edges/s and minibatches/s tracks a drop is the
regression.
"""

import numba
import torch

from benchmarks.workloads import NODES, load_graph, make_graphs, relabel_workload
from suite.measure.timing import best_wall_seconds
from tiering.features.zero_copy import mapped_graph
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


class CSRLocation:
    params = [["host", "gpu", "uva"]]
    param_names = ["csr"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, csr):
        graph = load_graph(root, NODES)
        if csr != "host":
            if not torch.cuda.is_available():
                raise NotImplementedError("needs a CUDA GPU")  # asv's way to skip a parameter
            graph = graph.to("cuda") if csr == "gpu" else mapped_graph(graph, "cuda")
        self.sampler = NeighborSampler(graph, (12, 12, 12), backend="cpu" if csr == "host" else "torch")
        self.seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(0))[:1024].to(graph.indptr.device)
        self.sampler.sample(self.seeds)

    def time_sample_minibatch(self, root, csr):
        self.sampler.sample(self.seeds)
        if csr != "host":
            torch.cuda.synchronize()
