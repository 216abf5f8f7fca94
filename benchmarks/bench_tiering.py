"""Scorers and reordering (Data Tiering §3.1-3.2) against SciPy peers timed in the same run.

Reordering is measured on each graph shape of ``benchmarks.workloads.GRAPH_SHAPES`` at ``NODES`` nodes, the
scorers on papers-like graphs of each size.

``track_time_ratio_vs_scipy`` is ours / SciPy (below 1: we are faster);
``track_ns_per_edge`` is the cost per list entry (per entry and iteration for
reverse PageRank).  The graphs are generated once per run by ``setup_cache``
and shared through .npy files.
"""

import torch

from benchmarks.workloads import GRAPH_SHAPES, NODES, OnPapersLikeGraphs, load_graph, make_graphs
from suite.measure.peers import adjacency, scipy_permute, scipy_reverse_pagerank
from suite.measure.timing import best_wall_seconds
from tiering.graph.reorder import order_by_score, reorder_graph
from tiering.graph.scores import degree, reverse_pagerank, weighted_reverse_pagerank


class Reorder:
    """``reorder_graph`` by random scores, its sort included, against SciPy's ``A[p][:, p]`` given the permutation,
    on the three graph shapes: short lists of equal length (uniform), hubs (power-law) and papers-like."""

    params = list(GRAPH_SHAPES)
    param_names = ["shape"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, shape):
        self.graph = load_graph(root, NODES, shape)
        self.scores = torch.rand(NODES, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        self.new_to_old, _ = order_by_score(self.scores)
        self.matrix = adjacency(self.graph)
        reorder_graph(self.graph, self.scores)  # compile

    def ours(self):
        reorder_graph(self.graph, self.scores)

    def peer(self):
        scipy_permute(self.matrix, self.new_to_old)

    def time_reorder_graph(self, root, shape):
        self.ours()

    def time_scipy_permutation(self, root, shape):
        self.peer()

    def track_time_ratio_vs_scipy(self, root, shape):
        _, ours = best_wall_seconds(self.ours)
        _, peer = best_wall_seconds(self.peer)
        return ours / peer

    track_time_ratio_vs_scipy.unit = "ratio"

    def track_ns_per_edge(self, root, shape):
        _, seconds = best_wall_seconds(self.ours)
        return 1e9 * seconds / self.graph.num_edges

    track_ns_per_edge.unit = "ns/edge"


class Scorers(OnPapersLikeGraphs):
    def setup(self, root, n):
        self.graph = load_graph(root, n)
        self.train = torch.arange(0, n, 97)
        weighted_reverse_pagerank(self.graph, self.train)  # compile

    def time_degree(self, root, n):
        degree(self.graph)

    def time_weighted_reverse_pagerank(self, root, n):
        weighted_reverse_pagerank(self.graph, self.train)

    def time_reverse_pagerank(self, root, n):
        reverse_pagerank(self.graph)

    def time_scipy_reverse_pagerank(self, root, n):
        scipy_reverse_pagerank(self.graph)

    def track_rpr_time_ratio_vs_scipy(self, root, n):
        _, ours = best_wall_seconds(lambda: reverse_pagerank(self.graph))
        _, peer = best_wall_seconds(lambda: scipy_reverse_pagerank(self.graph))
        return ours / peer

    track_rpr_time_ratio_vs_scipy.unit = "ratio"

    def track_rpr_ns_per_edge_iteration(self, root, n):
        _, iterations = scipy_reverse_pagerank(self.graph)
        _, seconds = best_wall_seconds(lambda: reverse_pagerank(self.graph))
        return 1e9 * seconds / (self.graph.num_edges * iterations)

    track_rpr_ns_per_edge_iteration.unit = "ns/(edge*iteration)"
