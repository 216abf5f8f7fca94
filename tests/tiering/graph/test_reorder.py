"""Graph reordering (Data Tiering §3.2, Algorithm 2) and row permutation."""

import numpy as np
import pytest
import torch

from tiering.graph.csr import CSRGraph
from tiering.graph.reorder import map_ids, order_by_score, permute_rows, reorder_graph


def random_graph(n=200, e=2000, seed=0):
    rng = np.random.default_rng(seed)
    return CSRGraph.from_edges(rng.integers(0, n, e), rng.integers(0, n, e), n)


def test_the_papers_example():
    new_to_old, old_to_new = order_by_score(torch.tensor([0.1, 0.4, 0.2, 0.3]))
    assert old_to_new.tolist() == [3, 0, 2, 1]
    assert new_to_old.tolist() == [1, 3, 2, 0]


def test_ties_go_to_the_smaller_old_id_every_time():
    scores = torch.tensor([1.0, 2.0, 1.0, 2.0, 1.0, 0.0])
    new_to_old, _ = order_by_score(scores)
    assert new_to_old.tolist() == [1, 3, 0, 2, 4, 5]
    ints, _ = order_by_score(np.array([5, 5, 7]))
    assert ints.tolist() == [2, 0, 1]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["random doubles", "few distinct doubles", "signed zeros and infinities",
                                  "float32", "negative ints", "large ints"])
def test_the_radix_order_is_numpys_stable_argsort_of_the_negated_scores(kind, threads):
    import numba

    rng = np.random.default_rng(7)
    n = 5000
    scores = {
        "random doubles": rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n),
        "few distinct doubles": rng.integers(0, 5, n) / 3.0,
        "signed zeros and infinities": rng.choice([-0.0, 0.0, np.inf, -np.inf, 1e-320, -1e-320, 2.5], n),
        "float32": rng.random(n).astype(np.float32),
        "negative ints": rng.integers(-50, 50, n),
        "large ints": rng.integers(-(2**62), 2**62, n) * rng.integers(1, 2, n),
    }[kind]
    reference = np.argsort(-scores.astype(np.float64) if scores.dtype.kind == "f" else -scores, kind="stable")
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip(f"needs {threads} numba threads")
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        new_to_old, old_to_new = order_by_score(scores)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(new_to_old, reference)
    assert np.array_equal(old_to_new[new_to_old], np.arange(n))


def test_reordered_graph_is_the_same_graph_under_old_to_new():
    g = random_graph()
    scores = torch.from_numpy(np.random.default_rng(1).random(g.num_nodes))
    new, old_to_new, new_to_old = reorder_graph(g, scores)
    new.validate()
    assert new.indices.dtype == g.indices.dtype and new.indptr.dtype == torch.int64
    ei = g.to_edge_index()
    mapped = sorted(zip(old_to_new[ei[0]].tolist(), old_to_new[ei[1]].tolist()))
    ej = new.to_edge_index()
    assert sorted(zip(ej[0].tolist(), ej[1].tolist())) == mapped
    # every list kept its order, entry by entry
    for v in range(g.num_nodes):
        old_list = g.indices[g.indptr[v] : g.indptr[v + 1]].long()
        w = int(old_to_new[v])
        assert new.indices[new.indptr[w] : new.indptr[w + 1]].long().tolist() == old_to_new[old_list].tolist()
    assert torch.equal(old_to_new[new_to_old], torch.arange(g.num_nodes))
    assert torch.all(scores[new_to_old][:-1] >= scores[new_to_old][1:])


def test_reordering_by_degree_puts_the_most_listed_node_first():
    from tiering.graph.scores import degree

    g = random_graph(seed=4)
    new, _, _ = reorder_graph(g, degree(g))
    counts = new.appearances()
    assert torch.all(counts[:-1] >= counts[1:])


def test_reorder_refuses_bad_scores():
    g = random_graph()
    with pytest.raises(ValueError, match="199 entries but the graph has 200 nodes"):
        reorder_graph(g, torch.zeros(199))
    bad = torch.zeros(200)
    bad[7] = float("nan")
    with pytest.raises(ValueError, match=r"scores\[7\] is NaN"):
        reorder_graph(g, bad)


def test_permute_rows_matches_fancy_indexing_for_tensors_and_arrays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 7)).astype(np.float32)
    perm = rng.permutation(1000)
    expected = x[perm]
    np.testing.assert_array_equal(permute_rows(torch.from_numpy(x), perm, chunk_rows=64).numpy(), expected)
    out = np.empty_like(x)
    assert permute_rows(x, torch.from_numpy(perm), out=out, chunk_rows=3) is out
    np.testing.assert_array_equal(out, expected)
    labels = np.arange(1000) % 13
    np.testing.assert_array_equal(permute_rows(labels, perm).numpy(), labels[perm])


def test_permute_rows_goes_from_one_memory_mapped_file_to_another(tmp_path):
    rng = np.random.default_rng(1)
    src = np.lib.format.open_memmap(tmp_path / "in.npy", mode="w+", dtype=np.float32, shape=(5000, 16))
    src[:] = rng.standard_normal((5000, 16))
    src.flush()
    perm = rng.permutation(5000)
    source = np.load(tmp_path / "in.npy", mmap_mode="r")
    dst = np.lib.format.open_memmap(tmp_path / "out.npy", mode="w+", dtype=np.float32, shape=(5000, 16))
    permute_rows(source, perm, out=dst, chunk_rows=500)
    dst.flush()
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.asarray(source)[perm])


def test_permute_rows_and_map_ids_refuse_bad_input():
    x = torch.zeros(10, 3)
    with pytest.raises(ValueError, match="9 entries but the array has 10 rows"):
        permute_rows(x, torch.arange(9))
    with pytest.raises(ValueError, match=r"new_to_old\[2\] = 10 is not a row"):
        permute_rows(x, torch.tensor([0, 1, 10, 3, 4, 5, 6, 7, 8, 9]))
    with pytest.raises(ValueError, match="out must match"):
        permute_rows(x, torch.arange(10), out=torch.zeros(10, 4))
    with pytest.raises(ValueError, match=r"ids\[1\] = -1 is not a node id in \[0, 10\)"):
        map_ids(torch.tensor([3, -1]), torch.arange(10))


def test_map_ids_renames_a_split():
    old_to_new = torch.tensor([3, 0, 2, 1])
    assert map_ids(torch.tensor([0, 3]), old_to_new).tolist() == [3, 1]
    assert map_ids(torch.tensor([], dtype=torch.int64), old_to_new).tolist() == []
