"""The torch draw of the DC-SBM's edges, and the graph sorted from them, equal the numba builder's exactly, on any device."""

import dataclasses
import itertools

import numba
import numpy as np
import pytest
import torch

from suite.datasets import PRESETS, build
from suite.datasets.dcsbm import block_model, guided_search
from suite.datasets.dcsbm_torch import TorchBlockModel, search
from tiering.rng import stream_hashes, uniform, uniform_from_hashes


@numba.njit(cache=True)
def _uniforms(seed, stream, counters):
    out = np.empty(len(counters), dtype=np.float64)
    for i in range(len(counters)):
        out[i] = uniform(seed, stream, counters[i])
    return out


def _preset_model(preset):
    seed = preset.sub_seed("graph")
    return block_model(preset.num_nodes, preset.num_classes, preset.degree_exponent, preset.homophily,
                       preset.class_skew, preset.symmetric, seed)


def _drawn(preset) -> int:
    return round(preset.num_nodes * preset.avg_degree / (2 if preset.symmetric else 1))


def _assert_same_edges(model, torch_model, first, count):
    src, dst = torch_model.draw(first, count)
    want_src, want_dst = model.draw(first, count)
    np.testing.assert_array_equal(src.cpu().numpy(), want_src)
    np.testing.assert_array_equal(dst.cpu().numpy(), want_dst)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 - 1, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15])
def test_torch_hash_is_bit_identical_to_numba(seed):
    rng = np.random.default_rng(seed % 2**32)
    counters = np.concatenate([np.arange(1000, dtype=np.int64), rng.integers(0, 2**62, 20_000, dtype=np.int64),
                               np.array([2**62, 2**63 - 1], dtype=np.int64)])
    for stream in (0, 3, 2**31 + 7):
        hashes = stream_hashes(seed, torch.tensor(stream))
        got = uniform_from_hashes(hashes, torch.from_numpy(counters)).numpy()
        want = _uniforms(np.uint64(seed), np.uint64(stream), counters.astype(np.uint64))
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
        assert got.min() >= 0.0 and got.max() < 1.0


def test_search_takes_the_guided_search_side_on_ties():
    cum = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 2.5, 3.0, 3.0])
    xs = np.array([-1.0, 0.0, 0.5, 1.0, 1.5, 2.5, 2.9, 3.0, 4.0])
    got = search(torch.from_numpy(cum), torch.from_numpy(xs)).numpy()
    for x, k in zip(xs, got):
        for lo, hi in [(0, len(cum)), (2, 5), (0, 1), (6, 8)]:  # right, and wrong, guide buckets
            assert guided_search(cum, lo, hi, x) == k
    np.testing.assert_array_equal(got, [0, 2, 2, 5, 5, 6, 6, 8, 8])
    block_ptr = np.array([0, 0, 3, 3, 7])  # empty classes: a position belongs to the class after them
    got = search(torch.from_numpy(block_ptr), torch.arange(7)).numpy() - 1
    np.testing.assert_array_equal(got, [1, 1, 1, 3, 3, 3, 3])


def test_tiny_preset_edges_equal_the_numba_builder_over_every_chunk():
    preset = PRESETS["tiny"]
    model = _preset_model(preset)
    torch_model = TorchBlockModel.from_model(model, "cpu")
    drawn = _drawn(preset)
    want_src, want_dst = model.draw(0, drawn)
    bounds = [0, 1, 255, 256, 257, 1000, 4096, 9999, drawn - 1, drawn]  # inside and across the kernel's batches
    chunks = [torch_model.draw(a, b - a) for a, b in itertools.pairwise(bounds)]
    src, dst = (torch.cat(part) for part in zip(*chunks, strict=True))
    np.testing.assert_array_equal(src.numpy(), want_src)
    np.testing.assert_array_equal(dst.numpy(), want_dst)


def test_papers_xs_edges_equal_the_numba_builder_at_the_start_middle_and_end():
    preset = PRESETS["papers-xs"]
    model = _preset_model(preset)
    torch_model = TorchBlockModel.from_model(model, "cpu")
    drawn = _drawn(preset)
    for first, count in [(0, 100_000), (drawn // 2 - 777, 50_001), (drawn - 60_000, 60_000)]:
        _assert_same_edges(model, torch_model, first, count)


def test_scaled_down_papers_preset_gives_the_whole_graph_in_chunks():
    preset = dataclasses.replace(PRESETS["papers-xs"], num_nodes=1 << 13)
    model = _preset_model(preset)
    torch_model = TorchBlockModel.from_model(model, "cpu")
    drawn = _drawn(preset)
    chunk = 65_537
    for first in range(0, drawn, chunk):
        _assert_same_edges(model, torch_model, first, min(chunk, drawn - first))


@pytest.mark.parametrize("homophily", [0.0, 0.3, 1.0])
def test_many_empty_classes_and_extreme_homophily(homophily):
    model = block_model(60, 50, 2.1, homophily, 2.0, False, 7)
    assert (np.diff(model.block_ptr) == 0).any()
    _assert_same_edges(model, TorchBlockModel.from_model(model, "cpu"), 3, 20_000)


def test_symmetric_model_shares_one_mass_tensor_and_draws_on_its_device():
    model = _preset_model(PRESETS["tiny"])
    torch_model = TorchBlockModel.from_model(model, "cpu")
    assert torch_model.cum_dst is torch_model.cum_src
    src, dst = torch_model.draw(10, 5)
    assert src.device == dst.device == torch_model.cum_src.device
    assert src.dtype == dst.dtype == torch.int64


@pytest.mark.gpu
def test_gpu_draw_equals_the_numba_builder():
    preset = PRESETS["papers-xs"]
    model = _preset_model(preset)
    torch_model = TorchBlockModel.from_model(model, "cuda")
    src, _ = torch_model.draw(0, 10)
    assert src.is_cuda
    drawn = _drawn(preset)
    for first, count in [(0, 1 << 20), (drawn - 12_345, 12_345)]:
        _assert_same_edges(model, torch_model, first, count)
    tiny = _preset_model(PRESETS["tiny"])
    _assert_same_edges(tiny, TorchBlockModel.from_model(tiny, "cuda"), 0, _drawn(PRESETS["tiny"]))


def _assert_same_graph_as_numba(preset, device, part_entries=None):
    want, want_classes = build.generate_graph(preset)
    got, classes = build.generate_graph_torch(preset, device, part_entries=part_entries)
    assert got.indptr.dtype == torch.int64 and got.index_dtype == want.index_dtype
    assert torch.equal(got.indptr, want.indptr)
    assert torch.equal(got.indices, want.indices)
    np.testing.assert_array_equal(classes, want_classes)


@pytest.mark.parametrize("part_entries", [None, 5_000])
def test_torch_graph_of_the_symmetric_tiny_preset_equals_the_numba_builder(part_entries):
    assert PRESETS["tiny"].symmetric
    _assert_same_graph_as_numba(PRESETS["tiny"], "cpu", part_entries)


def test_torch_graph_of_a_scaled_papers_preset_in_many_parts_equals_the_numba_builder(monkeypatch):
    """papers-xs's own graph, drawn with torch on the CPU, is compared with the numba builder's in
    test_gpu_built (papers-xs-gpu-built); here its directed draw at a smaller size, in many chunks."""
    assert not PRESETS["papers-xs"].symmetric
    monkeypatch.setattr(build, "EDGE_CHUNK", 10_007)  # many chunks, in both builders
    preset = dataclasses.replace(PRESETS["papers-xs"], num_nodes=1 << 13)
    _assert_same_graph_as_numba(preset, "cpu", part_entries=20_000)


def test_torch_graph_refuses_an_rmat_preset():
    with pytest.raises(ValueError, match="tiny-rmat is a rmat preset; only DC-SBM presets are drawn with torch"):
        build.generate_graph_torch(PRESETS["tiny-rmat"], "cpu")


@pytest.mark.gpu
def test_gpu_graph_of_papers_xs_equals_the_numba_builder():
    _assert_same_graph_as_numba(PRESETS["papers-xs"], "cuda")
    _assert_same_graph_as_numba(PRESETS["papers-xs"], "cuda", part_entries=1 << 20)
    _assert_same_graph_as_numba(PRESETS["tiny"], "cuda", part_entries=5_000)
