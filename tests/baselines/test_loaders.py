"""Feature loaders through the one interface: exact rows, errors, and hand-computed traffic statistics."""

import pytest
import torch

from baselines.cpu_gather import CPUGatherLoader
from baselines.degree_cache import DegreeCacheLoader
from baselines.uva import UVALoader
from suite.datasets.reordered import load_reordered
from suite.measure.pcie import PCIeCounter
from suite.registry import LOADERS, create_loader
from tests.tables import table_at
from tiering.features.addressing import VARIANTS
from tiering.features.combined import CombinedTensor, HotTierTooLarge
from tiering.features.traffic import dma_traffic, zero_copy_traffic


@pytest.fixture(scope="module")
def reordered_tiny(tiny):
    return load_reordered("tiny", "wrpr", progress=False)


def id_sets(n):
    g = torch.Generator().manual_seed(0)
    return {
        "random": torch.randint(0, n, (500,), generator=g),
        "repeated": torch.tensor([3, 3, 0, n - 1, 3, n - 1]),
        "empty": torch.tensor([], dtype=torch.int64),
        "int32": torch.randint(0, n, (100,), generator=g).int(),
    }


@pytest.mark.parametrize("name", LOADERS)
def test_every_loader_returns_exactly_the_requested_rows(name, reordered_tiny):
    loader = create_loader(name, reordered_tiny, hot_fraction=0.1)
    features = reordered_tiny.features
    for kind, ids in id_sets(reordered_tiny.num_nodes).items():
        out = loader.gather(ids)
        assert out.shape == (len(ids), features.shape[1]), kind
        assert torch.equal(out, features[ids.long()]), kind
    with pytest.raises(IndexError, match="is not a row"):
        loader.gather(torch.tensor([0, reordered_tiny.num_nodes]))
    with pytest.raises(IndexError, match=r"ids\[0\] = -1"):
        loader.gather(torch.tensor([-1]))
    stats = loader.stats()
    assert stats.accesses == 606 and 0 <= stats.hits <= stats.accesses
    loader.close()
    loader.close()  # closing twice is safe


def test_the_registry_explains_its_refusals(tiny):
    with pytest.raises(KeyError, match="unknown loader 'gpu'"):
        create_loader("gpu", tiny)
    with pytest.raises(ValueError, match="needs a dataset reordered hottest-first"):
        create_loader("tiered", tiny, 0.1)
    with pytest.raises(ValueError, match=r"hot_fraction must be in \[0, 1\]"):
        create_loader("degree-cache", tiny, 1.5)


def table(dim, rows=4):
    """A float32 table whose row 0 starts on a 128-byte line, as the hand counts below assume."""
    return table_at(rows, dim)


# (row bytes, row read, aligned payload/requests, naive payload/requests), computed by hand:
# a row r of b bytes spans [r*b, (r+1)*b); it touches the 32-byte sectors and 128-byte lines it overlaps,
# and the naive warp reads it in 128-byte steps from its own start.
HAND = [
    (400, 1, (13 * 32, 4), (16 * 32, 7)),  # [400, 800): sectors 12..24, lines 3..6; naive steps 5+5+5+1 sectors, 2+2+2+1 lines
    (512, 3, (16 * 32, 4), (16 * 32, 4)),  # [1536, 2048): line-aligned, both patterns identical
    (516, 1, (17 * 32, 5), (21 * 32, 9)),  # [516, 1032): sectors 16..32, lines 4..8; naive: 4 steps of 5 sectors/2 lines + 1/1
    (1028, 1, (33 * 32, 9), (41 * 32, 17)),  # [1028, 2056): sectors 32..64, lines 8..16; naive: 8 steps of 5/2 + 1/1
]


@pytest.mark.parametrize("row_bytes, row, aligned, naive", HAND)
def test_zero_copy_traffic_matches_hand_counts(row_bytes, row, aligned, naive):
    assert zero_copy_traffic(torch.tensor([row]), row_bytes, variant="aligned") == aligned
    assert zero_copy_traffic(torch.tensor([row]), row_bytes, variant="wide") == aligned  # steps on whole lines too
    assert zero_copy_traffic(torch.tensor([row]), row_bytes, variant="naive") == naive


def test_naive_steps_for_516_byte_rows_by_hand():
    # row 1 = [516, 1032); naive steps of 128 bytes: [516,644) [644,772) [772,900) [900,1028) [1028,1032)
    steps = [(516, 644), (644, 772), (772, 900), (900, 1028), (1028, 1032)]
    sectors = sum(-(-e // 32) - s // 32 for s, e in steps)
    lines = sum(-(-e // 128) - s // 128 for s, e in steps)
    assert (sectors, lines) == (21, 9)


@pytest.mark.parametrize("row_bytes, row, aligned, naive", HAND)
def test_combined_tensor_counts_hits_and_traffic_of_cold_rows(row_bytes, row, aligned, naive):
    features = table(row_bytes // 4)
    for variant, expected in (("aligned", aligned), ("wide", aligned), ("naive", naive)):
        loader = CombinedTensor(features, hot_rows=1, variant=variant)
        assert torch.equal(loader.gather(torch.tensor([0, row, 0])), features[[0, row, 0]])
        stats = loader.stats()
        assert (stats.accesses, stats.hits) == (3, 2)
        assert (stats.pcie_payload_bytes, stats.pcie_requests) == expected
        assert stats.host_bytes_touched == expected[0]
        assert stats.gpu_bytes_resident == row_bytes
        loader.reset_stats()
        assert loader.stats().accesses == 0 and loader.stats().gpu_bytes_resident == row_bytes


# a 400-byte row 1 of a table starting at byte `offset` of a line, counted by hand: [400 + offset, 800 + offset)
AT_OFFSET = [
    (0, (13 * 32, 4), (16 * 32, 7)),  # as in HAND
    (16, (13 * 32, 4), (13 * 32, 7)),  # [416, 816): sectors 13..25, lines 3..6; naive steps of 4+4+4+1 sectors
    (64, (13 * 32, 4), (16 * 32, 7)),  # [464, 864): sectors 14..26, lines 3..6; naive steps of 5+5+5+1 sectors
    (100, (14 * 32, 5), (17 * 32, 8)),  # [500, 900): sectors 15..28, lines 3..7; naive 5+5+5+2 sectors, 2+2+2+2 lines
]


@pytest.mark.parametrize("offset, aligned, naive", AT_OFFSET)
def test_traffic_is_counted_at_the_tables_real_offset(offset, aligned, naive):
    features = table_at(4, 100, offset=offset)  # a view starting `offset` bytes into a 128-byte line
    for variant, expected in (("aligned", aligned), ("naive", naive)):
        loader = CombinedTensor(features, hot_rows=1, variant=variant)
        assert loader.host_offset == offset
        assert torch.equal(loader.gather(torch.tensor([0, 1, 0])), features[[0, 1, 0]])
        assert (loader.stats().pcie_payload_bytes, loader.stats().pcie_requests) == expected, variant


def test_dma_loaders_count_dense_bytes():
    features = table(100)
    loader = CPUGatherLoader(features)
    loader.gather(torch.tensor([1, 2, 1]))
    stats = loader.stats()
    assert (stats.pcie_payload_bytes, stats.pcie_requests, stats.hits) == (1200, 10, 0)
    assert dma_traffic(3, 400) == (1200, 10)
    cache = DegreeCacheLoader(features, appearances=torch.tensor([5, 9, 1, 0]), capacity=1)  # caches row 1
    assert torch.equal(cache.gather(torch.tensor([1, 2, 1, 3])), features[[1, 2, 1, 3]])
    stats = cache.stats()
    assert (stats.accesses, stats.hits, stats.pcie_payload_bytes, stats.gpu_bytes_resident) == (4, 2, 800, 400)


def test_uva_serves_nothing_from_the_gpu_tier():
    loader = UVALoader(table(129))
    loader.gather(torch.tensor([1]))
    assert loader.stats().hits == 0 and loader.stats().gpu_bytes_resident == 0
    assert (loader.stats().pcie_payload_bytes, loader.stats().pcie_requests) == (17 * 32, 5)


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match=r"hot_rows must be in \[0, 4\]"):
        CombinedTensor(table(8), hot_rows=5)
    with pytest.raises(TypeError, match="float32"):
        CombinedTensor(table(8).double(), hot_rows=1)
    with pytest.raises(ValueError, match="contiguous CPU tensor"):
        CombinedTensor(table(8).t(), hot_rows=1)
    with pytest.raises(ValueError, match=r"capacity must be in \[0, 4\]"):
        DegreeCacheLoader(table(8), torch.zeros(4), capacity=9)


def test_a_hot_tier_larger_than_free_gpu_memory_is_refused_with_both_sizes(monkeypatch):
    loader = CombinedTensor(torch.zeros(1024, 256), hot_rows=1024)
    loader.device = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (2**19, 2**30))
    with pytest.raises(HotTierTooLarge, match=r"needs 0.00 GiB \(1024 rows x 1024 B\) but cuda has 0.00 GiB free"):
        loader._check_fits()


def test_nvml_counter_says_unavailable_instead_of_zero():
    counter = PCIeCounter(None)
    counter.start()
    assert counter.delta() is None and counter.reason == "no GPU in use"
    if not torch.cuda.is_available():
        nvml = PCIeCounter(torch.device("cuda", 0))
        nvml.start()
        assert nvml.delta() is None and "unavailable" in nvml.reason and nvml.scope == nvml.reason


@pytest.mark.gpu
@pytest.mark.parametrize("name", LOADERS)
def test_gpu_loaders_are_bit_exact_against_index_select(name, reordered_tiny):
    loader = create_loader(name, reordered_tiny, hot_fraction=0.25, device="cuda")
    reference = reordered_tiny.features.cuda()
    for kind, ids in id_sets(reordered_tiny.num_nodes).items():
        out = loader.gather(ids.cuda())
        assert out.is_cuda and torch.equal(out, torch.index_select(reference, 0, ids.cuda().long())), kind
    loader.close()
    loader.close()


@pytest.mark.gpu
@pytest.mark.parametrize("row_bytes", [400, 512, 516, 1028, 1044])
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_gather_kernel_is_exact_for_misaligned_rows(row_bytes, variant):
    features = torch.randn(3000, row_bytes // 4)
    loader = CombinedTensor(features, hot_rows=700, device="cuda", variant=variant, max_blocks=4)
    ids = torch.randint(0, 3000, (5000,), device="cuda")
    assert torch.equal(loader.gather(ids).cpu(), features[ids.cpu()])
    loader.close()


@pytest.mark.gpu
def test_registration_pins_in_place_without_a_second_copy():
    features = torch.randn(10_000, 128)
    address = features.data_ptr()
    loader = CombinedTensor(features, hot_rows=0, device="cuda")
    assert features.is_pinned() and loader.host.data_ptr() == address
    loader.close()
    assert not features.is_pinned()
    loader.close()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where there is no GPU")
def test_gpubench_refuses_clearly_without_a_gpu(capsys, tmp_path):
    from suite.cli import main

    assert main(["gpubench", "--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no numbers were written


def test_the_free_memory_a_hot_tier_is_checked_against_includes_what_torch_keeps_cached(monkeypatch):
    # the caching allocator keeps what a sweep's earlier cell freed (its tier, its training) out of the driver's free
    # memory until it is handed back
    cached = {"bytes": 2**21}
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: cached.update(bytes=0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (2**21 - cached["bytes"], 2**30))
    loader = CombinedTensor(torch.zeros(1024, 256), hot_rows=1024)
    loader.device = torch.device("cuda")
    loader._check_fits()  # 1 MiB of hot rows fits in the 2 MiB free once the cache is handed back
