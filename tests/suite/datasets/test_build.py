"""The streamed build of synthetic presets and the streamed feature permutation of prepare.

The streamed build must give exactly the arrays of the in-memory route the
presets were first built by (drawing every edge at once, ``from_edges`` and
``coalesce``, one ``synthesize_features`` call), written here as the
reference, so that existing cache entries and results stay valid; and its
memory must not grow with the feature table.
"""

import dataclasses
import hashlib
import io

import numba
import numpy as np
import pytest
import torch

from suite.datasets import PRESETS, build, load_dataset, reordered
from suite.datasets.dcsbm import block_model, dcsbm_edges
from suite.datasets.node_data import random_splits, synthesize_features, visible_labels
from suite.datasets.rmat import rmat_communities, rmat_edges, shuffle_ids
from tiering.graph.csr import CSRGraph
from tiering.rng import uniform


def in_memory_reference(preset):
    """``(graph, features, labels, splits)`` as the builder made them before it streamed: all edges at once."""
    n = preset.num_nodes
    drawn = int(round(n * preset.avg_degree / (2 if preset.symmetric else 1)))
    seed = preset.sub_seed("graph")
    if preset.generator == "rmat":
        src, dst = rmat_edges(n.bit_length() - 1, drawn, seed)
        src, dst, classes = shuffle_ids(src, dst, rmat_communities(n, preset.num_classes), seed)
    else:
        src, dst, classes = dcsbm_edges(n, drawn, preset.num_classes, preset.degree_exponent, preset.homophily,
                                        preset.class_skew, preset.symmetric, seed)
    if preset.symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    graph = CSRGraph.from_edges(src, dst, n).coalesce(drop_self_loops=True)
    fractions = (preset.train_fraction, preset.valid_fraction, preset.test_fraction)
    splits = random_splits(n, fractions, preset.sub_seed("splits"))
    features = synthesize_features(graph, classes, preset.feature_dim, preset.signal, preset.neighbor_signal,
                                   preset.sub_seed("features"))
    return graph, features, visible_labels(classes, splits), splits


def npy_sha256(array) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return hashlib.sha256(buffer.getvalue()).hexdigest()


SMALL = {
    "papers-like": dataclasses.replace(PRESETS["papers-s"], name="papers-test", num_nodes=6000),
    "products-like": dataclasses.replace(PRESETS["products-s"], name="products-test", num_nodes=5000),
    "rmat": dataclasses.replace(PRESETS["graph500-s"], name="graph500-test", num_nodes=1 << 12),
}


@pytest.mark.parametrize("kind", list(SMALL))
def test_the_streamed_build_equals_the_in_memory_reference(kind, monkeypatch):
    preset = SMALL[kind]
    monkeypatch.setitem(PRESETS, preset.name, preset)
    monkeypatch.setattr(build, "EDGE_CHUNK", 10_007)  # many chunks, the last one short
    monkeypatch.setattr(build, "FEATURE_CHUNK_BYTES", 999 * 4 * preset.feature_dim)
    dataset = load_dataset(preset.name, progress=False)
    graph, features, labels, splits = in_memory_reference(preset)
    assert dataset.graph.indices.dtype == torch.int32
    assert torch.equal(dataset.graph.indptr, graph.indptr) and torch.equal(dataset.graph.indices, graph.indices)
    np.testing.assert_array_equal(dataset.features.numpy(), features)
    np.testing.assert_array_equal(dataset.labels.numpy(), labels)
    for name, ids in splits.items():
        np.testing.assert_array_equal(dataset.splits[name].numpy(), ids)
    # byte for byte what np.save writes, so the checksums of entries built before streaming still match
    files = dataset.manifest["files"]
    assert files["features.npy"]["sha256"] == npy_sha256(features)
    assert files["indices.npy"]["sha256"] == npy_sha256(graph.indices.numpy())


@numba.njit(parallel=True)
def _plain_search_edges(order, block_ptr, classes, cum_src, cum_dst, cum_block_dst, homophily, seed, src, dst):
    """The DC-SBM edge kernel as it was before the guide tables: full binary searches, one edge at a time."""
    n = len(order)
    num_blocks = len(block_ptr) - 1
    for e in numba.prange(len(src)):
        k = np.searchsorted(cum_src, uniform(seed, 3, 4 * e) * cum_src[-1], side="right")
        s = order[min(max(k, 0), n - 1)]
        r = classes[s]
        if uniform(seed, 3, 4 * e + 1) >= homophily:
            k = np.searchsorted(cum_block_dst, uniform(seed, 3, 4 * e + 2) * cum_block_dst[-1], side="right")
            r = min(max(k, 0), num_blocks - 1)
        lo, hi = block_ptr[r], block_ptr[r + 1]
        base = cum_dst[lo - 1] if lo > 0 else 0.0
        x = base + uniform(seed, 3, 4 * e + 3) * (cum_dst[hi - 1] - base)
        src[e] = s
        dst[e] = order[min(max(np.searchsorted(cum_dst, x, side="right"), lo), hi - 1)]


@pytest.mark.parametrize("exponent, symmetric", [(2.2, False), (3.5, True)])
def test_guided_batched_edge_draws_equal_plain_binary_searches(exponent, symmetric):
    model = block_model(30_000, 50, exponent, 0.6, 0.8, symmetric, seed=11)
    src, dst = model.draw(0, 200_000)
    plain_src, plain_dst = np.empty_like(src), np.empty_like(dst)
    _plain_search_edges(model.order, model.block_ptr, model.classes, model.cum_src, model.cum_dst, model.cum_block_dst,
                        model.homophily, model.seed, plain_src, plain_dst)
    np.testing.assert_array_equal(src, plain_src)
    np.testing.assert_array_equal(dst, plain_dst)
    later_src, later_dst = model.draw(123_457, 1000)  # any range alone gives the same edges
    np.testing.assert_array_equal(later_src, src[123_457:124_457])
    np.testing.assert_array_equal(later_dst, dst[123_457:124_457])


@pytest.mark.parametrize("both_ways, drop_self_loops", [(False, True), (True, True), (True, False)])
def test_a_graph_built_from_chunks_equals_from_edges_then_coalesce(both_ways, drop_self_loops):
    rng = np.random.default_rng(0)
    n = 500
    src, dst = rng.integers(0, n, 20_000), rng.integers(0, n, 20_000)
    dst[:50] = n - 1  # some long lists, some empty ones
    src[src == 7] = 8
    dst[dst == 7] = 8

    def chunks():
        for start in range(0, len(src), 3001):
            yield src[start : start + 3001], dst[start : start + 3001]

    graph = CSRGraph.from_edge_chunks(chunks, n, both_ways=both_ways, drop_self_loops=drop_self_loops)
    all_src, all_dst = (np.concatenate([src, dst]), np.concatenate([dst, src])) if both_ways else (src, dst)
    expected = CSRGraph.from_edges(all_src, all_dst, n).coalesce(drop_self_loops=drop_self_loops)
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)
    graph.validate()


def test_chunks_that_change_between_the_passes_are_refused():
    calls = []

    def chunks():
        calls.append(1)
        yield np.array([0, 1, 2]), np.array([1, 1, 1 if len(calls) == 1 else 2])

    with pytest.raises(ValueError, match="more edges the second time"):
        CSRGraph.from_edge_chunks(chunks, 3)
    with pytest.raises(ValueError, match=r"dst\[0\] = 3 of a chunk is not a node id in \[0, 3\)"):
        CSRGraph.from_edge_chunks(lambda: [(np.array([0]), np.array([3]))], 3)


def test_features_are_permuted_file_to_file_in_parts(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    table = rng.standard_normal((1000, 6)).astype(np.float32)
    path = tmp_path / "features.npy"
    np.save(path, table)
    new_to_old = rng.permutation(len(table))
    old_to_new = np.argsort(new_to_old)
    monkeypatch.setattr(reordered, "PERMUTE_PART_BYTES", 130 * 24)  # 130 rows a part, but at most 4 parts: 250
    monkeypatch.setattr(reordered, "PERMUTE_MAX_PARTS", 4)
    monkeypatch.setattr(reordered, "_READ_BLOCK_BYTES", 77 * 24)
    parts = [part.copy() for part in reordered.permuted_rows(path, old_to_new)]
    assert [len(part) for part in parts] == [250, 250, 250, 250]
    np.testing.assert_array_equal(np.concatenate(parts), table[new_to_old])


def resident_kib() -> dict:
    """``VmRSS`` and ``VmHWM`` (peak) of this process, in KiB: mapped file pages count as well as allocations."""
    with open("/proc/self/status") as status:
        return {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith(("VmRSS", "VmHWM"))}


def peak_growth_bytes(fn) -> int:
    """How far this process's resident memory rose above where it was while ``fn()`` ran."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current VmRSS
    except OSError:
        pytest.skip("the peak resident memory cannot be reset here (/proc/self/clear_refs)")
    before = resident_kib()["VmRSS"]
    fn()
    return (resident_kib()["VmHWM"] - before) * 1024


def test_build_and_prepare_memory_does_not_grow_with_the_feature_table(tiny, monkeypatch):
    reordered.prepare_reordered("tiny", "wrpr", progress=False)  # every kernel loaded before anything is measured
    # a 128 MB feature table (16384 x 2048 float32), made a megabyte at a time and permuted an eighth at a time;
    # the graph (0.6M entries drawn in chunks of 65536) takes a few megabytes
    preset = dataclasses.replace(PRESETS["papers-s"], name="wide-test", num_nodes=16384, feature_dim=2048)
    table_bytes = preset.num_nodes * preset.feature_dim * 4
    monkeypatch.setitem(PRESETS, preset.name, preset)
    monkeypatch.setattr(build, "EDGE_CHUNK", 1 << 16)
    monkeypatch.setattr(build, "FEATURE_CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(reordered, "PERMUTE_PART_BYTES", 1 << 20)  # so a part is table / PERMUTE_MAX_PARTS
    monkeypatch.setattr(reordered, "_READ_BLOCK_BYTES", 1 << 20)
    build_growth = peak_growth_bytes(lambda: build.prepare_dataset(preset.name, progress=False))
    prepare_growth = peak_growth_bytes(lambda: reordered.prepare_reordered(preset.name, "wrpr", progress=False))
    assert build_growth < table_bytes / 4, build_growth
    assert prepare_growth < table_bytes / reordered.PERMUTE_MAX_PARTS + table_bytes / 4, prepare_growth
