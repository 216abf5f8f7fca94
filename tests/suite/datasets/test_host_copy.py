"""The zero-copy loaders' host table on a GPU: read from the memory-mapped cache file into memory, then pinned."""

import dataclasses

import numpy as np
import pytest
import torch

from suite import registry as loaders
from suite.datasets import host_copy
from suite.datasets.host_copy import read_into_memory


def mapping_of(address: int) -> str:
    """The file behind the mapping holding ``address`` ("" for anonymous memory), from /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            low, high = (int(bound, 16) for bound in fields[0].split("-"))
            if low <= address < high:
                return fields[5].strip() if len(fields) > 5 else ""
    raise AssertionError(f"{address:#x} is not mapped")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_memory_mapped_table_is_copied_exactly_into_fresh_page_aligned_memory(tmp_path, monkeypatch, dtype):
    monkeypatch.setattr(host_copy, "CHUNK_BYTES", 1000)  # many chunks, the last one short
    table = torch.randn(301, 37, generator=torch.Generator().manual_seed(0)).to(dtype)
    np.save(tmp_path / "features.npy", table.view(torch.int16 if dtype != torch.float32 else torch.int32).numpy())
    mapped = torch.from_numpy(np.load(tmp_path / "features.npy", mmap_mode="c")).view(dtype)
    assert mapping_of(mapped.data_ptr()).endswith("features.npy")
    copy = read_into_memory(mapped, progress=False)
    assert copy.dtype == dtype and copy.shape == table.shape and copy.is_contiguous()
    assert torch.equal(copy.view(torch.uint8), table.view(torch.uint8))  # bit-exact
    assert copy.data_ptr() % 4096 == 0
    assert mapping_of(copy.data_ptr()) in ("", "[heap]")  # anonymous memory, not the file
    copy[0, 0] = 7  # and it is the loader's own: writing it leaves the table alone
    assert not torch.equal(copy[0], mapped[0])


def test_the_copy_reports_its_progress_unless_asked_not_to(capsys):
    read_into_memory(torch.zeros(10, 4), progress=False)
    assert capsys.readouterr().err == ""
    read_into_memory(torch.zeros(10, 4))
    assert "loading the host tier into memory" in capsys.readouterr().err


def test_only_a_2d_cpu_table_is_read():
    with pytest.raises(ValueError, match="2-D CPU feature table"):
        read_into_memory(torch.zeros(5))


@pytest.mark.parametrize("name", loaders.LOADERS)
def test_only_the_zero_copy_loaders_on_a_gpu_read_the_table_into_memory(name, tiny):
    features = tiny.features
    assert loaders.host_table(name, tiny, "cpu") is features  # no pinning on the CPU: nothing changes
    on_gpu = loaders.host_table(name, tiny, torch.device("cuda", 0), progress=False)
    if name in ("uva", "uva-naive", "tiered", "lookahead"):
        assert on_gpu is not features and torch.equal(on_gpu, features) and on_gpu.data_ptr() % 4096 == 0
    else:
        assert on_gpu is features


@pytest.mark.parametrize("name", loaders.LOADERS)
def test_a_table_made_in_memory_is_pinned_where_it_is(name, tiny):
    made = dataclasses.replace(tiny, manifest={**tiny.manifest, "generated_features": {"dtype": "float32"}})
    assert made.features_in_memory and not tiny.features_in_memory
    assert loaders.host_table(name, made, torch.device("cuda", 0), progress=False) is made.features


class Recorder:
    """Stands in for a loader class: records the table it was built over."""

    built = []

    def __init__(self, features, *args, **kwargs):
        Recorder.built.append(features)


@pytest.mark.parametrize("name", ["uva", "uva-naive", "cpu-gather"])
def test_create_loader_builds_a_zero_copy_loader_on_a_gpu_over_the_copy(name, tiny, monkeypatch):
    monkeypatch.setattr(loaders, "UVALoader", Recorder)
    monkeypatch.setattr(loaders, "CPUGatherLoader", Recorder)
    Recorder.built = []
    loaders.create_loader(name, tiny, device="cuda:0", progress=False)
    loaders.create_loader(name, tiny, device="cpu")
    on_gpu, on_cpu = Recorder.built
    assert on_cpu is tiny.features
    assert (on_gpu is tiny.features) == (name == "cpu-gather") and torch.equal(on_gpu, tiny.features)


def test_the_tiered_loader_on_a_gpu_is_built_over_the_copy(tiny, monkeypatch):
    from suite.datasets.reordered import load_reordered

    reordered = load_reordered("tiny", "wrpr", progress=False)
    monkeypatch.setattr(loaders, "CombinedTensor", Recorder)
    monkeypatch.setattr(loaders, "check_gpu_memory", lambda *args: None)  # no GPU here to ask for free memory
    Recorder.built = []
    loaders.create_loader("tiered", reordered, 0.1, "cuda", progress=False)
    [features] = Recorder.built
    assert features is not reordered.features and torch.equal(features, reordered.features)
    with pytest.raises(ValueError, match="reordered hottest-first"):  # refused before the table is copied
        loaders.create_loader("tiered", tiny, 0.1, "cuda", progress=False)
