"""The sort-based CSR build on a torch device gives ``CSRGraph.from_edge_chunks``'s arrays exactly."""

import itertools

import numpy as np
import pytest
import torch

from tiering.graph import csr
from tiering.graph.csr import CSRGraph
from tiering.graph.csr_sort import (
    BYTES_PER_PART_ENTRY,
    CPU_PART_ENTRIES,
    coalesced_csr,
    default_part_entries,
    owner_parts,
)


def _chunked(src, dst, size):
    def chunks():
        for start in range(0, len(src), size):
            yield torch.as_tensor(src[start: start + size]), torch.as_tensor(dst[start: start + size])

    return chunks


def _assert_same_graph(got, want):
    assert got.indptr.dtype == torch.int64 and got.indices.dtype == want.indices.dtype
    assert got.indptr.device.type == got.indices.device.type == "cpu"
    assert torch.equal(got.indptr, want.indptr)
    assert torch.equal(got.indices, want.indices)
    got.validate()


def _duplicated_edges(n=300, e=30_000, seed=0):
    """Many duplicates and self-loops, a long list, and isolated nodes (no edges at the ids from 250 on)."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 40, e), rng.integers(0, 250, e)  # 40 sources: many duplicates
    dst[: e // 10] = 3  # a list far longer than any small part budget
    loops = rng.random(e) < 0.05
    src[loops] = dst[loops]
    return src, dst


@pytest.mark.parametrize("both_ways", [False, True])
@pytest.mark.parametrize("drop_self_loops", [True, False])
@pytest.mark.parametrize("part_entries", [1, 7, 1000, None])
def test_equals_from_edge_chunks_for_any_part_budget(both_ways, drop_self_loops, part_entries):
    src, dst = _duplicated_edges()
    chunks = _chunked(src, dst, 4099)
    want = CSRGraph.from_edge_chunks(chunks, 300, both_ways=both_ways, drop_self_loops=drop_self_loops)
    got = coalesced_csr(chunks, 300, both_ways=both_ways, drop_self_loops=drop_self_loops, part_entries=part_entries)
    _assert_same_graph(got, want)
    assert (got.degrees()[250:] == 0).all()  # isolated nodes


def test_a_budget_of_one_entry_makes_every_list_a_part_and_the_long_list_one_too(monkeypatch):
    src, dst = _duplicated_edges()
    chunks = _chunked(src, dst, 5000)
    seen = []
    real_parts = owner_parts

    def recording_parts(indptr, part_entries, max_owners):
        parts = real_parts(indptr, part_entries, max_owners)
        seen.extend(parts)
        return parts

    monkeypatch.setattr("tiering.graph.csr_sort.owner_parts", recording_parts)
    _assert_same_graph(coalesced_csr(chunks, 300, part_entries=1), CSRGraph.from_edge_chunks(chunks, 300))
    lengths = np.bincount(dst, minlength=300)
    nonempty = [(lo, hi) for lo, hi in seen if lengths[lo:hi].sum() > 0]
    assert all(hi - lo == 1 for lo, hi in nonempty)
    assert (3, 4) in seen and lengths[3] > 1000


def test_owner_parts_cover_every_list_once_within_the_budget():
    lengths = np.array([0, 3, 0, 0, 10, 2, 2, 2, 0, 5, 0])
    indptr = csr.indptr_from_counts(lengths)
    parts = owner_parts(indptr, 4, max_owners=100)
    assert parts[0][0] == 0 and parts[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    assert parts == [(0, 4), (4, 5), (5, 7), (7, 9), (9, 10), (10, 11)]
    assert owner_parts(indptr, 100, max_owners=3) == [(0, 3), (3, 6), (6, 9), (9, 11)]
    assert owner_parts(csr.indptr_from_counts([]), 5, 1) == []


def test_int64_indices_when_the_graph_needs_them(monkeypatch):
    monkeypatch.setattr(csr, "INT32_LIMIT", 100)  # 300 nodes now need int64 ids
    src, dst = _duplicated_edges()
    chunks = _chunked(src, dst, 7000)
    want = CSRGraph.from_edge_chunks(chunks, 300, both_ways=True)
    assert want.index_dtype == torch.int64
    _assert_same_graph(coalesced_csr(chunks, 300, both_ways=True, part_entries=5000), want)


def test_empty_graphs_and_empty_chunks():
    empty = torch.empty(0, dtype=torch.int64)
    for n in (0, 5):
        got = coalesced_csr(lambda: [(empty, empty)], n, part_entries=3)
        assert got.indptr.tolist() == [0] * (n + 1) and got.num_edges == 0
        assert got.index_dtype == torch.int32
        _assert_same_graph(coalesced_csr(list, n), CSRGraph.from_edge_chunks(list, n))
    only_loops = lambda: [(torch.tensor([1, 2, 2]), torch.tensor([1, 2, 2])), (empty, empty)]
    got = coalesced_csr(only_loops, 4, part_entries=1)
    assert got.num_edges == 0 and got.indptr.tolist() == [0] * 5


def test_int32_numpy_chunks_are_accepted():
    src, dst = _duplicated_edges()
    chunks = lambda: [(src.astype(np.int32), dst.astype(np.int32))]
    _assert_same_graph(coalesced_csr(chunks, 300, part_entries=999), CSRGraph.from_edge_chunks(chunks, 300))


@pytest.mark.parametrize("src, dst, message", [
    ([0, 1], [1, 3], r"dst\[1\] = 3 of a chunk is not a node id in \[0, 3\)"),
    ([0, -1], [1, 1], r"src\[1\] = -1 of a chunk is not a node id in \[0, 3\)"),
    ([0, 1, 2], [1, 1], "src has 3 entries but dst has 2"),
])
def test_bad_ids_are_refused(src, dst, message):
    with pytest.raises(ValueError, match=message):
        coalesced_csr(lambda: [(torch.tensor(src), torch.tensor(dst))], 3)


def test_float_ids_and_a_bad_budget_are_refused():
    with pytest.raises(TypeError, match="must hold integers"):
        coalesced_csr(lambda: [(torch.tensor([0.0]), torch.tensor([1]))], 3)
    with pytest.raises(ValueError, match="part_entries must be at least 1"):
        coalesced_csr(list, 3, part_entries=0)


@pytest.mark.parametrize("second, message", [([1, 1, 1, 1], r"the lists \[1, 2\) more edges"),
                                             ([1, 1], r"the lists \[1, 2\) fewer edges"),
                                             ([1, 1, 2], r"the lists \[1, 2\) fewer edges"),  # same total
                                             ([1, 1, 1, 2], r"the lists \[2, 3\) more edges")])
def test_chunks_that_change_between_the_draws_are_refused(second, message):
    calls = []

    def chunks():
        calls.append(1)
        dst = [1, 1, 1] if len(calls) == 1 else second
        yield torch.zeros(len(dst), dtype=torch.int64), torch.tensor(dst)

    with pytest.raises(ValueError, match=f"chunks\\(\\) gave {message} the second time than the first"):
        coalesced_csr(chunks, 3, part_entries=1)


def test_a_bad_id_in_a_later_draw_is_refused():
    calls = []

    def chunks():
        calls.append(1)
        yield torch.tensor([0, 1]), torch.tensor([1, 2 if len(calls) == 1 else 9])

    with pytest.raises(ValueError, match=r"dst\[1\] = 9 of a chunk is not a node id"):
        coalesced_csr(chunks, 3)


def test_default_budget_on_the_cpu():
    assert default_part_entries("cpu") == CPU_PART_ENTRIES


@pytest.mark.parametrize("free, entries", [(4 * 32 * 1000, 1000), (4 * 32 * 1000 + 127, 1000), (10, 1),
                                           (1 << 50, 1 << 30)])
def test_the_cuda_budget_is_a_quarter_of_the_free_memory_at_32_bytes_an_entry_within_bounds(monkeypatch, free,
                                                                                              entries):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free, 2 * free))
    assert default_part_entries("cuda") == entries


@pytest.mark.gpu
def test_cuda_build_equals_from_edge_chunks_with_chunks_on_either_device():
    src, dst = _duplicated_edges(e=200_000)
    chunks = _chunked(src, dst, 30_001)
    want = CSRGraph.from_edge_chunks(chunks, 300, both_ways=True)
    _assert_same_graph(coalesced_csr(chunks, 300, device="cuda", both_ways=True, part_entries=10_000), want)

    def cuda_chunks():
        for s, d in chunks():
            yield s.cuda(), d.cuda()

    _assert_same_graph(coalesced_csr(cuda_chunks, 300, device="cuda", both_ways=True), want)


@pytest.mark.gpu
def test_a_part_s_sort_takes_at_most_its_planned_bytes_an_entry_on_the_gpu():
    e, n = 4_000_000, 1 << 20
    generator = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, n, (e,), generator=generator), torch.randint(0, n, (e,), generator=generator)
    chunks = _chunked(src.cuda(), dst.cuda(), 1 << 20)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    coalesced_csr(chunks, n, device="cuda", part_entries=e)  # one part of every entry
    torch.cuda.synchronize()
    # the first draw's two counts per node and one chunk with its filter come on top of the part's sort
    beside = 16 * n + 40 * (1 << 20)
    per_entry = (torch.cuda.max_memory_allocated() - before - beside) / e
    assert per_entry <= BYTES_PER_PART_ENTRY, f"{per_entry:.1f} bytes an entry"
