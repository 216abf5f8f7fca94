"""The feature loaders' range check: at once for ids in host memory, on the device (read once) for ids on a GPU."""

import pytest
import torch

from baselines.in_memory import InMemoryLoader
from tiering.features.combined import CombinedTensor


def table(rows=10, dim=4):
    return torch.arange(rows * dim, dtype=torch.float32).reshape(rows, dim)


def test_ids_in_host_memory_out_of_range_raise_at_the_gather():
    loader = InMemoryLoader(table())
    with pytest.raises(IndexError, match=r"ids\[1\] = 10 is not a row of the 10-row feature table"):
        loader.gather(torch.tensor([0, 10]))
    loader.check()  # nothing left to report: the gather reported it


def test_device_ids_are_clamped_counted_and_reported_once_by_check():
    """The device path (``_clamped``) on CPU tensors: the count waits in a counter until ``check`` reads it."""
    features = table()
    loader = CombinedTensor(features, hot_rows=3)
    clamped = loader._clamped(torch.tensor([-2, 4, 10, 12, 9]))
    assert clamped.tolist() == [0, 4, 9, 9, 9]
    assert torch.equal(loader._gather(clamped), features[clamped])
    loader._clamped(torch.tensor([1, 2]))
    with pytest.raises(IndexError, match=r"^3 ids gathered on cpu were not rows of the 10-row feature table"):
        loader.check()
    loader.check()  # reported once
    loader._clamped(torch.tensor([-1]))
    with pytest.raises(IndexError, match="^1 ids gathered"):
        loader.stats()  # stats() checks first
    assert loader.stats().accesses == 5


@pytest.mark.gpu
def test_a_bad_id_on_the_gpu_is_reported_by_stats_without_synchronising_the_gather():
    features = table()
    loader = CombinedTensor(features, hot_rows=3, device="cuda")
    ids = torch.tensor([1, 10, 9], device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = loader.gather(ids)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(out.cpu(), features[[1, 9, 9]])
    with pytest.raises(IndexError, match="^1 ids gathered on cuda:0"):
        loader.stats()
    loader.close()
