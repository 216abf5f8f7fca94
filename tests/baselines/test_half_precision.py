"""float16 and bfloat16 feature tables: every loader returns them bit for bit in their own dtype, and the traffic
model counts their real row bytes (D * 2); other dtypes are refused."""

import types

import numpy as np
import pytest
import torch

from baselines.cpu_gather import CPUGatherLoader
from baselines.degree_cache import DegreeCacheLoader
from baselines.gns import GNSLoader
from baselines.in_memory import InMemoryLoader
from baselines.uva import UVALoader
from suite.registry import LOADERS, create_loader
from tests.gloo import run_gloo
from tests.tables import bits, table_at
from tiering.features.addressing import VARIANTS
from tiering.features.combined import CombinedTensor
from tiering.features.multi_gpu import MultiGPUCombinedTensor
from tiering.features.placement import plan_placement
from tiering.features.traffic import dma_traffic, zero_copy_traffic

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
N = 300


def fake_dataset(features: torch.Tensor):
    """What ``create_loader`` reads of a dataset, over ``features`` (a reordered one, so ``tiered`` accepts it): a
    cached table, not one made in memory, so a zero-copy loader on a GPU pins a page-aligned copy of it."""
    appearances = torch.arange(len(features), 0, -1)
    graph = types.SimpleNamespace(appearances=lambda: appearances)
    return types.SimpleNamespace(features=features, num_nodes=len(features), feature_dim=features.shape[1],
                                 scorer="degree", graph=graph, features_in_memory=False)


def with_table_file(dataset, name, dtype, directory):
    """A loader that reads the table's file (``disk``) gets one: the table saved as ``features.npy``."""
    if LOADERS[name].disk:
        if dtype == torch.bfloat16:
            pytest.skip("a .npy file cannot hold bfloat16, so no disk loader reads such a table")
        np.save(directory / "features.npy", dataset.features.numpy())
        dataset.path = directory
    return dataset


def ids():
    return torch.randint(0, N, (400,), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", LOADERS)
def test_every_loader_returns_the_tables_own_bits(name, dtype, tmp_path):
    features = table_at(N, 7, dtype, offset=4 if dtype == torch.float32 else 6)  # half rows of 14 bytes
    loader = create_loader(name, with_table_file(fake_dataset(features), name, dtype, tmp_path), hot_fraction=0.2)
    for requested in (ids(), ids().int(), torch.tensor([], dtype=torch.int64)):
        out = loader.gather(requested)
        assert out.dtype == dtype and out.shape == (len(requested), 7)
        assert torch.equal(bits(out), bits(features[requested.long()]))
    loader.close()


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_copy_traffic_counts_half_precision_rows_at_their_size(dtype, variant):
    # D = 200 half-precision values are 400-byte rows: tests/baselines/test_loaders.py's hand counts for 400-byte float32 rows
    features = table_at(4, 200, dtype)
    loader = CombinedTensor(features, hot_rows=1, variant=variant)
    assert torch.equal(bits(loader.gather(torch.tensor([0, 1, 0]))), bits(features[[0, 1, 0]]))
    stats = loader.stats()
    assert (stats.pcie_payload_bytes, stats.pcie_requests) == ((16 * 32, 7) if variant == "naive" else (13 * 32, 4))
    assert stats.gpu_bytes_resident == 400
    # D = 7: 14-byte rows move in 2-byte units; the uva loader counts every row it reads at that size
    odd = table_at(N, 7, dtype, offset=2)
    uva = UVALoader(odd, variant=variant)
    uva.gather(ids())
    assert (uva.stats().pcie_payload_bytes, uva.stats().pcie_requests) == zero_copy_traffic(ids(), 14, 2, variant)


@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16))
def test_dma_loaders_count_half_precision_rows_at_their_size(dtype):
    features = table_at(N, 100, dtype)
    loader = CPUGatherLoader(features)
    loader.gather(ids())
    assert loader.stats().pcie_payload_bytes == dma_traffic(400, 200)[0] == 400 * 200
    cache = DegreeCacheLoader(features, torch.arange(N, 0, -1), capacity=100)  # caches rows 0..99
    requested = ids()
    assert torch.equal(bits(cache.gather(requested)), bits(features[requested]))
    misses = int((requested >= 100).sum())
    assert (cache.stats().hits, cache.stats().pcie_payload_bytes) == (400 - misses, misses * 200)
    assert cache.stats().gpu_bytes_resident == 100 * 200


@pytest.mark.parametrize("dtype", (torch.float64, torch.int32, torch.uint8))
def test_other_table_dtypes_are_refused_by_every_loader(dtype):
    features = torch.zeros(N, 8, dtype=dtype)
    appearances = torch.ones(N)
    for build in (lambda: CombinedTensor(features, 10), lambda: UVALoader(features), lambda: CPUGatherLoader(features),
                  lambda: DegreeCacheLoader(features, appearances, 10), lambda: GNSLoader(features, appearances, 10),
                  lambda: InMemoryLoader(features)):
        with pytest.raises(TypeError, match=f"float32, float16 or bfloat16, got {dtype}"):
            build()


def gather_half_precision(rank, world, shm_dir):
    """On each rank, a multi-GPU tensor over a float16 and a bfloat16 table (the CPU emulation): rows and counts."""
    results = {}
    for dtype in (torch.float16, torch.bfloat16):
        placement = plan_placement(N, 7 * 2, world, replicated=3, interleaved=40)
        loader = MultiGPUCombinedTensor(table_at(N, 7, dtype), placement, shm_dir=shm_dir)
        out = loader.gather(ids())
        results[str(dtype)] = {"bits": bits(out), "dtype": str(out.dtype), "stats": loader.stats().as_dict(),
                               "host_from": loader.host_from}
        loader.close()
    return results


def test_the_multi_gpu_tensor_serves_half_precision_tables(tmp_path):
    shm_dir = tmp_path / "shm"
    shm_dir.mkdir()
    results = run_gloo(gather_half_precision, 2, tmp_path, str(shm_dir))
    for rank, result in enumerate(results):
        for dtype in (torch.float16, torch.bfloat16):
            got = result[str(dtype)]
            assert got["dtype"] == str(dtype) and torch.equal(got["bits"], bits(table_at(N, 7, dtype)[ids()]))
            host_rows = ids()[ids() >= got["host_from"]] - got["host_from"]
            assert got["host_from"] == 43  # every peer mapped: the segment holds rows [R + M, N)
            expected = zero_copy_traffic(host_rows, 14, 0, "aligned")  # the segment starts on a page
            assert (got["stats"]["pcie_payload_bytes"], got["stats"]["pcie_requests"]) == expected, (rank, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", LOADERS)
def test_every_gpu_loader_returns_the_tables_own_bits(name, dtype, tmp_path):
    features = table_at(N, 7, dtype, offset=4 if dtype == torch.float32 else 6)
    dataset = with_table_file(fake_dataset(features), name, dtype, tmp_path)
    loader = create_loader(name, dataset, hot_fraction=0.2, device="cuda", progress=False)
    for requested in (ids(), ids().int()):
        out = loader.gather(requested.cuda())
        assert out.is_cuda and out.dtype == dtype
        assert torch.equal(bits(out.cpu()), bits(features[requested.long()]))
    loader.close()
