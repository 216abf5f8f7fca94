"""Synthetic feature tables generated into page-aligned memory, also straight in a reordered graph's order, on the
CPU and on a GPU (without one, numba's CUDA simulator runs the GPU kernels: tests/conftest.py)."""

import dataclasses
import gc

import numpy as np
import pytest
import torch

from suite.datasets import host_copy, node_data_cuda
from suite.datasets.build import generate_arrays, generate_graph
from suite.datasets.feature_table import generate_feature_table
from suite.datasets.node_data import class_centroids, synthesize_features, table_centroids
from suite.datasets.node_data_cuda import FeatureRows, long_list_sums
from suite.datasets.presets import get_preset
from tiering.graph.csr import CSRGraph
from tiering.graph.reorder import reorder_graph
from tiering.graph.scores import degree, weighted_reverse_pagerank
from tiering.rng import normal


def preset_args(preset):
    return preset.feature_dim, preset.signal, preset.neighbor_signal, preset.sub_seed("features")


@pytest.fixture(scope="module")
def tiny():
    preset = get_preset("tiny")
    graph, features, _, splits = generate_arrays(preset)
    _, classes = generate_graph(preset)
    return preset, graph, classes, features, splits


@pytest.fixture(scope="module")
def papers_like():
    """The papers presets' generator at 65,536 nodes (a quarter of papers-xs): its graph, classes and table."""
    preset = dataclasses.replace(get_preset("papers-xs"), name="papers-64k", num_nodes=1 << 16)
    graph, classes = generate_graph(preset)
    return preset, graph, classes, synthesize_features(graph, classes, *preset_args(preset))


def reference_row(graph, classes, centroids, signal, neighbor_signal, seed, v, noise_id):
    """Row v as the kernel makes it, one float64 operation at a time in plain Python."""
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    row = np.zeros(centroids.shape[1])
    for u in indices[indptr[v] : indptr[v + 1]]:
        row += centroids[classes[u]]
    if indptr[v + 1] > indptr[v]:
        row *= neighbor_signal / (indptr[v + 1] - indptr[v])
    row += signal * centroids[classes[v]]
    return np.array([row[k] + normal(np.uint64(seed), noise_id, k) for k in range(len(row))], dtype=np.float32)


def small_table(n=60):
    """A random graph of ``n`` nodes, classes, a permutation and (dim, seed), small enough for the CUDA simulator."""
    rng = np.random.default_rng(0)
    graph = CSRGraph.from_edges(rng.integers(0, n, 5 * n), rng.integers(0, n, 5 * n), n).coalesce()
    return graph, rng.integers(0, 5, n), rng.permutation(n), 8, 11


def test_rows_are_made_from_their_own_list_and_the_noise_of_the_given_id():
    graph, classes, noise_ids, dim, seed = small_table()
    n = graph.num_nodes
    centroids = class_centroids(5, dim, seed)
    plain = synthesize_features(graph, classes, dim, 0.3, 0.6, seed)
    renamed = synthesize_features(graph, classes, dim, 0.3, 0.6, seed, noise_ids=noise_ids)
    for v in range(n):
        expected = reference_row(graph, classes, centroids, 0.3, 0.6, seed, v, v)
        np.testing.assert_array_equal(plain[v].view(np.uint32), expected.view(np.uint32))
        expected = reference_row(graph, classes, centroids, 0.3, 0.6, seed, v, noise_ids[v])
        np.testing.assert_array_equal(renamed[v].view(np.uint32), expected.view(np.uint32))
    identity = synthesize_features(graph, classes, dim, 0.3, 0.6, seed, noise_ids=np.arange(n))
    np.testing.assert_array_equal(identity.view(np.uint32), plain.view(np.uint32))


def test_the_table_is_the_presets_own_bit_for_bit_in_page_aligned_memory(tiny, monkeypatch):
    preset, graph, classes, features, _ = tiny
    rows = 1000  # chunks that do not divide the 4096 rows: the last one is short
    monkeypatch.setattr(host_copy, "CHUNK_BYTES", rows * 4 * preset.feature_dim)
    table = generate_feature_table(graph, classes, *preset_args(preset))
    assert table.dtype == torch.float32 and table.shape == features.shape and table.is_contiguous()
    assert table.data_ptr() % host_copy.PAGE_BYTES == 0
    assert torch.equal(table.view(torch.int32), torch.from_numpy(features).view(torch.int32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_table_is_the_float32_table_rounded(tiny, monkeypatch, dtype):
    preset, graph, classes, features, _ = tiny
    monkeypatch.setattr(host_copy, "CHUNK_BYTES", 999 * 4 * preset.feature_dim)
    table = generate_feature_table(graph, classes, *preset_args(preset), dtype=dtype)
    assert table.dtype == dtype and table.data_ptr() % host_copy.PAGE_BYTES == 0
    assert torch.equal(table, torch.from_numpy(features).to(dtype))


def sorted_lists(graph: CSRGraph) -> CSRGraph:
    """The same graph with every list in ascending order (a summation order other than the reordered lists')."""
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    owner = np.repeat(np.arange(graph.num_nodes), np.diff(indptr))
    return CSRGraph(graph.indptr, torch.from_numpy(indices[np.lexsort((indices, owner))]))


def assert_is_permuted_base(table: torch.Tensor, base: np.ndarray, new_to_old: torch.Tensor):
    """``table`` = ``base[new_to_old]`` within one float32 ulp, and bit for bit on nearly every row.

    The rows differ only in the order the neighbour mean adds its float64
    terms, a few float64 ulps at most, so a float32 entry can only round the
    other way at a float32 rounding boundary: one ulp, and rarely.
    """
    expected = base[new_to_old.numpy()]
    got = table.numpy()
    ulp = np.spacing(np.maximum(np.abs(got), np.abs(expected)))
    assert (np.abs(got - expected) <= ulp).all()
    identical_rows = (got.view(np.uint32) == expected.view(np.uint32)).all(axis=1).mean()
    assert identical_rows >= 0.999, identical_rows


def test_a_reordered_tiny_graph_gives_the_table_in_the_new_order(tiny):
    preset, graph, classes, features, splits = tiny
    new_graph, _, new_to_old = reorder_graph(graph, weighted_reverse_pagerank(graph, torch.from_numpy(splits["train"])))
    assert not torch.equal(new_to_old, torch.arange(graph.num_nodes))
    for renamed in (new_graph, sorted_lists(new_graph)):
        table = generate_feature_table(renamed, classes[new_to_old.numpy()], *preset_args(preset),
                                       noise_ids=new_to_old)
        assert_is_permuted_base(table, features, new_to_old)


def test_a_reordered_papers_like_graph_gives_the_table_in_the_new_order(papers_like):
    preset, graph, classes, features = papers_like
    new_graph, _, new_to_old = reorder_graph(graph, degree(graph))
    table = generate_feature_table(sorted_lists(new_graph), classes[new_to_old.numpy()], *preset_args(preset),
                                   dtype=torch.float32, noise_ids=new_to_old)
    assert table.data_ptr() % host_copy.PAGE_BYTES == 0
    assert_is_permuted_base(table, features, new_to_old)


@pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")  # the simulator's wrapping hash
@pytest.mark.parametrize("renamed", [False, True], ids=["own-noise", "renamed-noise"])
def test_rows_made_on_a_gpu_equal_the_cpus(monkeypatch, renamed):
    graph, classes, perm, dim, seed = small_table(50)
    noise_ids = torch.from_numpy(perm) if renamed else None
    monkeypatch.setattr(host_copy, "CHUNK_BYTES", 17 * 4 * dim)  # three chunks and a short one
    args = (graph, classes, dim, 0.3, 0.6, seed)
    cpu = generate_feature_table(*args, noise_ids=noise_ids)
    gpu = generate_feature_table(*args, noise_ids=noise_ids, device="cuda")
    assert gpu.dtype == torch.float32 and gpu.device.type == "cpu" and gpu.data_ptr() % host_copy.PAGE_BYTES == 0
    assert_is_permuted_base(gpu, cpu.numpy(), torch.arange(graph.num_nodes))
    half = generate_feature_table(*args, noise_ids=noise_ids, device="cuda", dtype=torch.float16)
    assert half.data_ptr() % host_copy.PAGE_BYTES == 0
    assert torch.equal(half, gpu.to(torch.float16))


def test_long_lists_are_summed_beforehand_as_class_counts_times_the_centroids():
    graph, classes, _, dim, seed = small_table(80)
    lengths = np.diff(graph.indptr.numpy())
    longest = int(np.sort(lengths)[-10])  # some ten lists are longer
    centroids = table_centroids(classes, dim, seed)
    arrays = [torch.as_tensor(a) for a in (graph.indptr, graph.indices.int(), classes, centroids)]
    for piece in (1, 25, 10**6):  # a list each (each longer than the piece), a few at a time, all at once
        slot, sums = long_list_sums(*arrays, longest=longest, piece=piece)
        long = np.flatnonzero(lengths > longest)
        assert slot.dtype == torch.int32 and slot[long].tolist() == list(range(len(long)))
        assert (slot.numpy()[lengths <= longest] == -1).all() and sums.shape == (len(long), dim)
        for row, v in enumerate(long):
            in_order = np.zeros(dim)
            for u in graph.indices[graph.indptr[v]:graph.indptr[v + 1]].numpy():
                in_order += centroids[classes[u]]
            np.testing.assert_allclose(sums[row].numpy(), in_order, rtol=1e-12, atol=1e-12)
    slot, sums = long_list_sums(*arrays, longest=int(lengths.max()), piece=25)
    assert (slot == -1).all() and torch.equal(sums, torch.zeros(1, dim, dtype=torch.float64))  # never empty


@pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")  # the simulator's wrapping hash
def test_rows_with_long_lists_made_on_a_gpu_equal_the_cpus(monkeypatch):
    graph, classes, perm, dim, seed = small_table(50)
    monkeypatch.setattr(node_data_cuda, "LONG_LIST", 5)
    monkeypatch.setattr(node_data_cuda, "LONG_LIST_PIECE", 20)
    assert (np.diff(graph.indptr.numpy()) > 5).sum() >= 10  # the long path is taken, several lists a piece
    args = (graph, classes, dim, 0.3, 0.6, seed)
    for noise_ids in (None, torch.from_numpy(perm)):
        cpu = generate_feature_table(*args, noise_ids=noise_ids)
        gpu = generate_feature_table(*args, noise_ids=noise_ids, device="cuda")
        assert_is_permuted_base(gpu, cpu.numpy(), torch.arange(graph.num_nodes))


def test_rows_outside_the_table_and_misshapen_noise_ids_are_refused(tiny):
    preset, graph, classes, _, _ = tiny
    n, dim = graph.num_nodes, preset.feature_dim
    args = (graph, classes, *preset_args(preset))
    with pytest.raises(ValueError, match="are not rows of a table"):
        synthesize_features(*args, out=np.empty((10, dim), np.float32), first=n - 5)
    with pytest.raises(ValueError, match="are not rows of a table"):
        synthesize_features(*args, out=np.empty((10, dim), np.float32), first=-1)
    with pytest.raises(ValueError, match="one id per node"):
        synthesize_features(*args, noise_ids=np.arange(n - 1))
    with pytest.raises(ValueError, match="one id per node"):
        generate_feature_table(*args, noise_ids=np.arange(n + 1))
    with pytest.raises(ValueError, match="holds floats"):
        generate_feature_table(*args, dtype=torch.int32)
    gpu_rows = FeatureRows(*args, device="cuda")
    with pytest.raises(ValueError, match="are not rows of a table"):
        gpu_rows.fill(torch.empty((10, dim), device=gpu_rows.device), n - 5)
    with pytest.raises(ValueError, match="must be float32 rows"):
        gpu_rows.fill(torch.empty((10, dim), dtype=torch.float16, device=gpu_rows.device), 0)


@pytest.mark.gpu
def test_rows_made_for_the_unindexed_cuda_device_fill_a_buffer_made_there():
    # a tensor made on "cuda" is on "cuda:0", and torch.device("cuda") != torch.device("cuda:0")
    graph, classes, _, dim, seed = small_table()
    gpu_rows = FeatureRows(graph, classes, dim, 0.3, 0.6, seed, device="cuda")
    out = torch.empty((graph.num_nodes, dim), device="cuda")
    assert gpu_rows.device == out.device
    cpu = synthesize_features(graph, classes, dim, 0.3, 0.6, seed)
    assert_is_permuted_base(gpu_rows.fill(out, 0).cpu(), cpu, torch.arange(graph.num_nodes))


@pytest.mark.gpu
def test_a_table_made_on_the_gpu_hands_its_device_memory_back():
    # the loaders size their GPU tier by torch.cuda.mem_get_info's free memory, which the caching allocator's
    # reserved blocks are not part of
    graph, classes, _, dim, seed = small_table()
    gc.collect()  # earlier tests' CUDA tensors freed now, not by a collection during the call
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    generate_feature_table(graph, classes, dim, 0.3, 0.6, seed, device=torch.device("cuda"))
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.memory_reserved() == reserved
