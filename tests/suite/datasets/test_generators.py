"""Synthetic generators: determinism, parallel reproducibility, heavy tails, learnable labels."""

import numba
import numpy as np
import pytest
import torch

from suite.datasets import PRESETS
from suite.datasets.dcsbm import _class_order, dcsbm_edges
from suite.datasets.node_data import random_splits, synthesize_features, visible_labels
from suite.datasets.rmat import GRAPH500, rmat_communities, rmat_edges, shuffle_ids
from suite.datasets.stats import top_share
from tiering.graph.csr import CSRGraph, indptr_from_counts


def dcsbm(seed=0, n=20_000, e=200_000, exponent=2.2, homophily=0.7, symmetric=False):
    return dcsbm_edges(n, e, num_classes=10, exponent=exponent, homophily=homophily, class_skew=0.8, symmetric=symmetric, seed=seed)


def with_threads(count, fn):
    before = numba.get_num_threads()
    numba.set_num_threads(count)
    try:
        return fn()
    finally:
        numba.set_num_threads(before)


@pytest.mark.parametrize("generate", [lambda s: rmat_edges(14, 100_000, s), lambda s: dcsbm(s)], ids=["rmat", "dcsbm"])
def test_generators_are_deterministic_for_a_seed_and_differ_across_seeds(generate):
    a, b, c = generate(7), generate(7), generate(8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("generate", [lambda: rmat_edges(14, 100_000, 3), lambda: dcsbm(3)], ids=["rmat", "dcsbm"])
def test_generators_give_identical_output_on_one_and_two_threads(generate):
    one = with_threads(1, generate)
    two = with_threads(2, generate)
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)


def test_rmat_quadrant_frequencies_match_graph500_parameters():
    scale, e = 12, 200_000
    src, dst = rmat_edges(scale, e, seed=1)
    top = scale - 1
    u, v = src >> top, dst >> top  # the first level's quadrant
    a, b, c = GRAPH500
    observed = [np.mean((u == 0) & (v == 0)), np.mean((u == 0) & (v == 1)), np.mean((u == 1) & (v == 0))]
    # standard error of a proportion near 0.5 with 2e5 draws is ~0.0011: allow 5 of them
    np.testing.assert_allclose(observed, [a, b, c], atol=0.006)
    assert src.min() >= 0 and src.max() < 2**scale and dst.max() < 2**scale


def test_shuffle_ids_is_a_relabelling():
    src, dst = rmat_edges(10, 5_000, seed=2)
    classes = rmat_communities(1024, 8)
    new_src, new_dst, new_classes = shuffle_ids(src, dst, classes, seed=2)
    np.testing.assert_array_equal(np.sort(np.bincount(new_classes)), np.sort(np.bincount(classes)))
    np.testing.assert_array_equal(new_classes[new_src], classes[src])  # every edge keeps its class pair
    assert np.corrcoef(np.bincount(new_src, minlength=1024), np.arange(1024))[0, 1] > -0.2  # hubs no longer at low ids


def appearance_counts(src, dst, n):
    return CSRGraph.from_edges(src, dst, n).coalesce().appearances().numpy()


def test_rmat_degrees_are_heavy_tailed():
    # Graph500 scale 16, edge factor 16: the top 1% of nodes appear in over 30% of lists
    src, dst = rmat_edges(16, 16 * 2**16, seed=0)
    counts = appearance_counts(np.concatenate([src, dst]), np.concatenate([dst, src]), 2**16)
    assert top_share(counts, 0.01) > 0.30
    assert top_share(counts, 0.10) > 0.65


def test_dcsbm_matches_the_papers100m_concentration_it_is_tuned_for():
    # Data Tiering §5.2: the top 1% of ogbn-papers100M nodes hold 32% of its edges; exponent 2.2 aims there
    n = 100_000
    src, dst, _ = dcsbm(n=n, e=34 * n, exponent=2.2)
    share = top_share(appearance_counts(src, dst, n), 0.01)
    assert 0.25 < share < 0.40, share
    # a lighter tail concentrates less: the exponent is what controls it
    src, dst, _ = dcsbm(n=n, e=34 * n, exponent=3.0)
    assert top_share(appearance_counts(src, dst, n), 0.01) < share - 0.1


def test_dcsbm_homophily_and_class_sizes():
    src, dst, classes = dcsbm(homophily=0.7)
    same = np.mean(classes[src] == classes[dst])
    # 0.7 by construction plus the 30% of cross-class draws that land back in the class
    sizes = np.bincount(classes, minlength=10) / len(classes)
    expected = 0.7 + 0.3 * np.sum(sizes**2)
    assert abs(same - expected) < 0.02, (same, expected)
    assert sizes[0] > sizes[-1] * 3  # skewed class sizes, largest first


def test_splits_are_disjoint_sorted_and_sized():
    splits = random_splits(1000, (0.011, 0.0011, 0.0019), seed=0)
    sizes = {k: len(v) for k, v in splits.items()}
    assert sizes == {"train": 11, "valid": 1, "test": 2}
    ids = np.concatenate(list(splits.values()))
    assert len(np.unique(ids)) == len(ids)
    assert all(np.all(np.diff(v) > 0) for v in splits.values())
    labels = visible_labels(np.arange(1000) % 5, splits)
    assert (labels >= 0).sum() == 14 and labels[splits["train"]].tolist() == (splits["train"] % 5).tolist()


def nearest_centroid_accuracy(x, y, train, test):
    centroids = np.stack([x[train][y[train] == c].mean(0) for c in range(y.max() + 1)])
    predicted = np.argmin(((x[test, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    return np.mean(predicted == y[test])


def test_features_are_learnable_and_neighbours_help():
    n = 20_000
    src, dst, classes = dcsbm(n=n, e=10 * n, homophily=0.7, exponent=2.5)
    graph = CSRGraph.from_edges(src, dst, n).coalesce()
    preset = PRESETS["tiny"]
    x = synthesize_features(graph, classes, dim=32, signal=preset.signal, neighbor_signal=preset.neighbor_signal, seed=1)
    assert x.dtype == np.float32 and x.shape == (n, 32)
    rng = np.random.default_rng(0)
    order = rng.permutation(n)
    train, test = order[: n // 2], order[n // 2 :]
    majority = np.bincount(classes[test]).max() / len(test)
    own = nearest_centroid_accuracy(x, classes, train, test)
    # one round of mean aggregation over the sampled-from lists, as SAGEConv does
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    sums = np.add.reduceat(x[indices], indptr[:-1].clip(max=len(indices) - 1), axis=0)
    deg = np.diff(indptr)[:, None]
    agg = np.where(deg > 0, sums / np.maximum(deg, 1), 0)
    both = nearest_centroid_accuracy(np.hstack([x, agg]), classes, train, test)
    assert own > majority + 0.1, (own, majority)
    assert both > own + 0.1, (both, own)


def test_features_are_deterministic():
    src, dst, classes = dcsbm(n=2000, e=20_000)
    graph = CSRGraph.from_edges(src, dst, 2000)
    a = synthesize_features(graph, classes, 16, 0.25, 0.5, seed=4)
    b = with_threads(1, lambda: synthesize_features(graph, classes, 16, 0.25, 0.5, seed=4))
    np.testing.assert_array_equal(a, b)
    assert torch.from_numpy(a).std().item() == pytest.approx(1.0, abs=0.2)


def test_the_class_order_is_a_stable_argsort_of_the_classes():
    classes = np.random.default_rng(0).integers(0, 40, 10_000) * 3  # two of every three classes empty
    block_ptr = indptr_from_counts(np.bincount(classes, minlength=130))
    np.testing.assert_array_equal(_class_order(classes, block_ptr), np.argsort(classes, kind="stable"))
