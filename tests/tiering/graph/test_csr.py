import tracemalloc

import numpy as np
import pytest
import torch

from tiering.graph.csr import INT32_LIMIT, CSRGraph, index_dtype_for, indptr_from_counts


def edge_multiset(graph):
    ei = graph.to_edge_index()
    return sorted(zip(ei[0].tolist(), ei[1].tolist()))


def random_edges(n, e, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, e), rng.integers(0, n, e)


def test_from_edges_puts_sources_in_the_target_list_in_input_order():
    # edges u -> v: 2->0, 0->1, 3->1, 2->1, 1->2
    g = CSRGraph.from_edges([2, 0, 3, 2, 1], [0, 1, 1, 1, 2], num_nodes=4)
    assert g.num_nodes == 4 and g.num_edges == 5
    assert g.indptr.dtype == torch.int64
    assert g.indptr.tolist() == [0, 1, 4, 5, 5]
    assert g.indices.tolist() == [2, 0, 3, 2, 1]  # list of 1 keeps the order 0, 3, 2
    assert g.index_dtype == torch.int32
    assert g.degrees().tolist() == [1, 3, 1, 0]
    assert g.appearances().tolist() == [1, 1, 2, 1]


def test_from_edges_accepts_torch_int32_and_numpy_int64_alike():
    src, dst = random_edges(50, 300)
    a = CSRGraph.from_edges(torch.from_numpy(src).int(), torch.from_numpy(dst).int(), 50)
    b = CSRGraph.from_edges(src, dst, 50, index_dtype=torch.int64)
    assert torch.equal(a.indptr, b.indptr)
    assert torch.equal(a.indices.long(), b.indices)
    assert b.index_dtype == torch.int64


def test_to_edge_index_round_trips():
    src, dst = random_edges(100, 1000, seed=1)
    g = CSRGraph.from_edges(src, dst, 100)
    h = CSRGraph.from_ogb(g.to_edge_index(), 100)
    assert torch.equal(g.indptr, h.indptr) and torch.equal(g.indices, h.indices)
    assert edge_multiset(g) == sorted(zip(src.tolist(), dst.tolist()))


def test_transpose_reverses_every_edge_and_is_an_involution():
    src, dst = random_edges(80, 700, seed=2)
    g = CSRGraph.from_edges(src, dst, 80)
    t = g.transpose()
    assert edge_multiset(t) == sorted(zip(dst.tolist(), src.tolist()))
    assert edge_multiset(t.transpose()) == edge_multiset(g)
    assert torch.equal(t.degrees(), g.appearances())


def test_transpose_lists_each_node_by_ascending_source_as_one_sequential_pass_would():
    src, dst = random_edges(300, 5000, seed=3)  # duplicates and self-loops included
    g = CSRGraph.from_edges(src, dst, 300)
    t = g.transpose()
    want = [[] for _ in range(300)]
    indptr, indices = g.indptr.tolist(), g.indices.tolist()
    for v in range(300):
        for p in range(indptr[v], indptr[v + 1]):
            want[indices[p]].append(v)
    assert t.indptr.tolist() == [0, *np.cumsum([len(w) for w in want]).tolist()]
    assert t.indices.tolist() == [v for w in want for v in w]
    assert t.indices.dtype == g.indices.dtype


def test_coalesce_sorts_lists_and_drops_duplicates_and_self_loops():
    g = CSRGraph.from_edges([3, 1, 3, 2, 0, 0], [0, 0, 0, 2, 1, 1], 4).coalesce()
    assert g.indptr.tolist() == [0, 2, 3, 3, 3]
    assert g.indices.tolist() == [1, 3, 0]
    kept = CSRGraph.from_edges([2, 2], [2, 2], 3).coalesce(drop_self_loops=False)
    assert kept.indices.tolist() == [2]


def test_empty_graphs_are_legal():
    g = CSRGraph.from_edges([], [], 5).validate()
    assert g.num_edges == 0 and g.indptr.tolist() == [0] * 6
    assert CSRGraph.from_edges([], [], 0).num_nodes == 0
    assert g.transpose().num_edges == 0 and g.coalesce().num_edges == 0


@pytest.mark.parametrize(
    "indptr, indices, message",
    [
        ([1, 2, 3], [0, 1], r"indptr\[0\] must be 0, got 1"),
        ([0, 2, 1, 3], [0, 1, 2], r"non-decreasing: indptr\[2\] = 1 < indptr\[1\] = 2"),
        ([0, 1, 2], [0, 1, 1], r"indptr\[-1\] = 2 but indices has 3 entries"),
        ([0, 1, 3], [0, 1, 2], r"indices\[2\] = 2 is not a node id in \[0, 2\) \(it is in the neighbour list of node 1\)"),
        ([0, 2, 3], [0, -1, 0], r"indices\[1\] = -1 is not a node id"),
    ],
)
def test_validate_names_the_first_bad_position(indptr, indices, message):
    indptr, indices = torch.tensor(indptr, dtype=torch.int64), torch.tensor(indices, dtype=torch.int32)
    with pytest.raises(ValueError, match=message):
        CSRGraph(indptr, indices)
    unchecked = CSRGraph(indptr, indices, validate=False)
    with pytest.raises(ValueError, match=message):
        unchecked.validate()


def test_bad_construction_inputs_are_refused_with_a_reason():
    with pytest.raises(TypeError, match="indptr must be int64"):
        CSRGraph(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32))
    with pytest.raises(TypeError, match="int32 or int64"):
        CSRGraph(torch.tensor([0, 1]), torch.tensor([0.0]))
    with pytest.raises(ValueError, match="1-D"):
        CSRGraph(torch.zeros((2, 2), dtype=torch.int64), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"dst\[1\] = 7 is not a node id in \[0, 5\)"):
        CSRGraph.from_edges([0, 1], [2, 7], 5)
    with pytest.raises(ValueError, match=r"src\[0\] = -3"):
        CSRGraph.from_edges([-3], [0], 5)
    with pytest.raises(ValueError, match="src has 2 entries but dst has 1"):
        CSRGraph.from_edges([0, 1], [0], 5)
    with pytest.raises(TypeError, match="must hold integers"):
        CSRGraph.from_edges(np.array([0.5]), np.array([0]), 5)
    with pytest.raises(ValueError, match=r"shape \(2, num_edges\)"):
        CSRGraph.from_ogb(np.zeros((3, 4), dtype=np.int64), 5)


def test_index_dtype_switches_to_int64_at_two_to_the_31_nodes():
    assert index_dtype_for(INT32_LIMIT - 1) == torch.int32
    assert index_dtype_for(INT32_LIMIT) == torch.int64
    with pytest.raises(TypeError, match="int32 indices cannot hold"):
        CSRGraph.from_edges([], [], INT32_LIMIT, index_dtype=torch.int32)


def test_indptr_is_int64_even_when_list_lengths_sum_past_int32():
    # three lists of a billion entries each: 3e9 overflows int32, not the offsets
    counts = np.full(3, 1_000_000_000, dtype=np.int32)
    indptr = indptr_from_counts(counts)
    assert indptr.dtype == np.int64
    assert indptr.tolist() == [0, 1_000_000_000, 2_000_000_000, 3_000_000_000]


def test_from_edges_temporaries_stay_within_three_times_the_final_size():
    n, e = 200_000, 2_000_000
    src, dst = random_edges(n, e, seed=3)
    CSRGraph.from_edges(src[:10], dst[:10], n)  # compile outside the measurement
    tracemalloc.start()
    g = CSRGraph.from_edges(src, dst, n)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= 3 * g.nbytes, (peak, g.nbytes)
