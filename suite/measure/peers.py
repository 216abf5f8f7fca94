"""SciPy implementations of the same work as tierbench's kernels, timed beside them.

A speed is only reported as a ratio against one of these, measured in the
same run on the same data, so numbers from different machines stay
comparable.  Each peer does the whole job the tierbench function does,
including building its sparse matrices.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from tiering.graph.csr import CSRGraph


def adjacency(graph: CSRGraph) -> scipy.sparse.csr_array:
    """Row v holds list(v): the graph as SciPy sees it."""
    data = np.ones(graph.num_edges, dtype=np.float32)
    shape = (graph.num_nodes, graph.num_nodes)
    return scipy.sparse.csr_array((data, graph.indices.numpy(), graph.indptr.numpy()), shape=shape)


def scipy_coo_to_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> scipy.sparse.csr_array:
    """The graph of edges ``src[i] -> dst[i]`` (row ``dst[i]`` holds ``src[i]``) from the edge list: the peer of
    ``CSRGraph.from_edges``."""
    data = np.ones(len(src), dtype=np.float32)
    return scipy.sparse.coo_array((data, (dst, src)), shape=(num_nodes, num_nodes)).tocsr()


def scipy_permute(matrix: scipy.sparse.csr_array, new_to_old: np.ndarray) -> scipy.sparse.csr_array:
    """Row and column permutation ``P A P^T`` by fancy indexing: the peer of ``reorder_graph``."""
    return matrix[new_to_old][:, new_to_old]


def scipy_reverse_pagerank(graph: CSRGraph, damping: float = 0.85, tol: float = 1e-10, max_iter: int = 1000):
    """Reverse PageRank by SciPy sparse matrix-vector products: the peer of ``reverse_pagerank``.

    Returns ``(scores, iterations)``.
    """
    n = graph.num_nodes
    lengths = np.diff(graph.indptr.numpy())
    dangling = lengths == 0
    owners = np.repeat(np.arange(n), lengths)
    weights = damping / lengths[owners]
    walk = scipy.sparse.csr_array((weights, (graph.indices.numpy(), owners)), shape=(n, n))
    x = np.full(n, 1.0 / n)
    iterations, change = 0, float("inf")
    while iterations < max_iter and not change < tol:
        new = walk @ x + ((1.0 - damping) + damping * x[dangling].sum()) / n
        change = np.abs(new - x).sum()
        x = new
        iterations += 1
    return x, iterations
