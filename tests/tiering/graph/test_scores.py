"""Scorers of Data Tiering §3.1 against independent dense implementations."""

import numpy as np
import pytest
import torch

from tiering.graph.csr import CSRGraph
from tiering.graph.scores import degree, reverse_pagerank, weighted_reverse_pagerank


def small_graph():
    # lists: 0:[1,2]  1:[2]  2:[0,0,3] (duplicate)  3:[3] (self-loop)  4:[] (dangling, and 4 is in no list)
    indptr = torch.tensor([0, 2, 3, 6, 7, 7])
    indices = torch.tensor([1, 2, 2, 0, 0, 3, 3], dtype=torch.int32)
    return CSRGraph(indptr, indices)


def random_graph(n=60, e=300, seed=0, dangling=10):
    rng = np.random.default_rng(seed)
    dst = rng.integers(dangling, n, e)  # nodes 0..dangling-1 have empty lists
    src = rng.integers(0, n, e)
    return CSRGraph.from_edges(src, dst, n)


def dense_walk(graph):
    """P[u, v] = how often u is in list(v) / |list(v)|, and the dangling mask: an independent reference."""
    n = graph.num_nodes
    P = np.zeros((n, n))
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    for v in range(n):
        lst = indices[indptr[v] : indptr[v + 1]]
        for u in lst:
            P[u, v] += 1.0 / len(lst)
    return P, np.diff(indptr) == 0


def dense_update(P, dangling, x, d):
    n = len(x)
    return (1 - d) / n + d * (P @ x + x[dangling].sum() / n)


def test_degree_counts_appearances_including_duplicates_and_self_loops():
    assert degree(small_graph()).tolist() == [2.0, 1.0, 2.0, 2.0, 0.0]
    assert degree(small_graph()).dtype == torch.float64


@pytest.mark.parametrize("graph", [small_graph(), random_graph(), random_graph(seed=1, dangling=0)], ids=["handmade", "dangling", "no-dangling"])
def test_reverse_pagerank_agrees_with_a_dense_power_iteration(graph):
    P, dangling = dense_walk(graph)
    n = graph.num_nodes
    x = np.full(n, 1.0 / n)
    for _ in range(1000):
        new = dense_update(P, dangling, x, 0.85)
        if np.abs(new - x).sum() < 1e-15:
            break
        x = new
    np.testing.assert_allclose(reverse_pagerank(graph, tol=1e-15).numpy(), new, rtol=0, atol=1e-14)
    # at the default tol = 1e-10 the error is at most tol * d / (1 - d) < 6e-10
    ours = reverse_pagerank(graph).numpy()
    np.testing.assert_allclose(ours, new, rtol=0, atol=6e-10)
    assert ours.sum() == pytest.approx(1.0, abs=1e-9)  # dangling mass is redistributed, not lost


def test_reverse_pagerank_is_not_degree_it_sees_two_hops():
    # 0 and 1 both appear in one list; 0 is in the list of the hub 2 (which 3 and 4 sample), 1 is not
    g = CSRGraph.from_edges([0, 1, 2, 2], [2, 5, 3, 4], 6)
    r = reverse_pagerank(g)
    assert degree(g)[0] == degree(g)[1]
    assert r[0] > r[1]


def test_reverse_pagerank_warns_when_it_runs_out_of_iterations():
    with pytest.warns(RuntimeWarning, match="stopped after 3 iterations"):
        reverse_pagerank(random_graph(), max_iter=3)


def test_weighted_rpr_with_every_node_labelled_equals_five_plain_updates():
    graph = random_graph(seed=2)
    P, dangling = dense_walk(graph)
    x = np.full(graph.num_nodes, 1.0 / graph.num_nodes)
    for _ in range(5):
        x = dense_update(P, dangling, x, 0.85)
    everyone = torch.ones(graph.num_nodes, dtype=torch.bool)
    np.testing.assert_allclose(weighted_reverse_pagerank(graph, everyone).numpy(), x, rtol=1e-12, atol=0)
    # and the same as stopping plain reverse PageRank after five updates
    with pytest.warns(RuntimeWarning):
        np.testing.assert_allclose(reverse_pagerank(graph, max_iter=5).numpy(), x, rtol=1e-12, atol=0)


def test_weighted_rpr_follows_algorithm_1():
    graph = random_graph(seed=3)
    n = graph.num_nodes
    labeled = torch.tensor([11, 40, 40, 57])  # repeated ids count once: |labeled| = 3
    P, dangling = dense_walk(graph)
    x = np.full(n, 1.0 / n)
    x[[11, 40, 57]] *= n / 3
    for _ in range(5):
        x = dense_update(P, dangling, x, 0.85)
    ours = weighted_reverse_pagerank(graph, labeled).numpy()
    np.testing.assert_allclose(ours, x, rtol=1e-12, atol=0)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[[11, 40, 57]] = True
    np.testing.assert_array_equal(weighted_reverse_pagerank(graph, mask).numpy(), ours)
    assert ours.sum() != pytest.approx(1.0)  # not renormalised
    zero = weighted_reverse_pagerank(graph, labeled, iterations=0).numpy()
    assert zero[11] == pytest.approx(1 / 3) and zero[0] == pytest.approx(1 / n)


def test_scorers_refuse_bad_input():
    g = random_graph()
    with pytest.raises(ValueError, match="labeled is empty"):
        weighted_reverse_pagerank(g, torch.zeros(g.num_nodes, dtype=torch.bool))
    with pytest.raises(ValueError, match="labeled is empty"):
        weighted_reverse_pagerank(g, torch.tensor([], dtype=torch.int64))
    with pytest.raises(ValueError, match=r"labeled\[1\] = 60 is not a node id in \[0, 60\)"):
        weighted_reverse_pagerank(g, torch.tensor([3, 60]))
    with pytest.raises(ValueError, match=r"mask must have shape \(60,\)"):
        weighted_reverse_pagerank(g, torch.ones(59, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean mask or integer node ids"):
        weighted_reverse_pagerank(g, torch.tensor([0.5]))
    with pytest.raises(ValueError, match="damping"):
        reverse_pagerank(g, damping=1.0)
    with pytest.raises(ValueError, match="empty graph"):
        reverse_pagerank(CSRGraph.from_edges([], [], 0))


def test_isolated_nodes_get_the_teleport_share():
    g = CSRGraph.from_edges([0, 1], [1, 0], 3)  # node 2 is isolated
    r = reverse_pagerank(g).numpy()
    assert np.all(np.isfinite(r)) and r[2] < r[0]
