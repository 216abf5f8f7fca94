"""Graph structure, node scoring and reordering (data tiering §3).

* ``csr``: ``CSRGraph``, the one graph structure every scorer, sampler and
  reorder walks;
* ``scores``: the node scorers (degree, reverse PageRank, weighted reverse
  PageRank) that predict how often sampling fetches a node;
* ``reorder``: renumbering a graph and its node data hottest-first.
"""

from tiering.graph.csr import CSRGraph, index_dtype_for
from tiering.graph.reorder import map_ids, order_by_score, permute_rows, reorder_graph
from tiering.graph.scores import SCORERS, ScorerSpec, degree, get_scorer, reverse_pagerank, weighted_reverse_pagerank

__all__ = [
    "CSRGraph", "index_dtype_for",
    "map_ids", "order_by_score", "permute_rows", "reorder_graph",
    "SCORERS", "ScorerSpec", "degree", "get_scorer", "reverse_pagerank", "weighted_reverse_pagerank",
]
