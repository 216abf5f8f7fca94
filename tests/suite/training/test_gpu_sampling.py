"""Training with the fused GPU sampler (``--sampling gpu`` / ``uva``): the same minibatches, losses and hit ratio as
with the CPU sampler, with either set of its kernels, and the refusals on a CPU device.

Without a GPU the fused sampler's numba kernels run in numba's CUDA simulator (tests/conftest.py), one Python thread
per CUDA thread, and its C++ kernels compiled for the host: the epochs here are a few small minibatches of ``tiny``,
trained on the CPU.  With a GPU the same epochs train there, on the real kernels.
"""

import dataclasses
import importlib.util

import pytest
import torch

from suite.cli import main
from suite.registry import create_loader
from suite.training.sampling import build_sampler, check_kernels, simulated
from suite.training.trainer import Trainer
from tests.tiering.sampling import host_kernels
from tiering.sampling.fused import DEFAULT_KERNELS, FusedNeighborSampler
from tiering.sampling.neighbors import NeighborSampler

pytestmark = pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")


def small(tiny):
    """``tiny`` with 40 training and 12 validation nodes: three training minibatches of 16 and one validation one."""
    splits = {"train": tiny.splits["train"][:40], "valid": tiny.splits["valid"][:12], "test": tiny.splits["test"][:4]}
    return dataclasses.replace(tiny, splits=splits)


DEVICE = "cpu" if simulated() else "cuda"
"""Where the trainers here train: the CPU where numba's simulator stands in for a GPU, else the GPU."""


def trainer(dataset, sampling, sampler_kernels=DEFAULT_KERNELS):
    loader = create_loader("degree-cache", dataset, 0.3, DEVICE, progress=False)  # a cache: the hit ratio says something
    return Trainer(dataset, loader, (3, 2), batch_size=16, hidden=16, seed=5, sampling=sampling,
                   sampler_kernels=sampler_kernels)


def assert_same_training(got, expected):
    """The same epoch: equal on the CPU; on a GPU the model's scatter sums atomically, in no fixed order, so the
    losses agree to rounding and the validation accuracy to within one of the 12 nodes."""
    assert got.batches == expected.batches == 3
    if DEVICE == "cpu":
        assert got.losses == expected.losses and got.valid_accuracy == expected.valid_accuracy
    else:
        assert got.losses == pytest.approx(expected.losses, rel=1e-4)
        assert got.valid_accuracy == pytest.approx(expected.valid_accuracy, abs=1 / 12)


@pytest.mark.parametrize("pipeline", [False, True])
def test_an_epoch_with_gpu_sampling_is_the_epoch_with_cpu_sampling(tiny, pipeline):
    dataset = small(tiny)
    cpu, gpu = trainer(dataset, "cpu"), trainer(dataset, "gpu")
    assert isinstance(cpu.sampler, NeighborSampler) and isinstance(gpu.sampler, FusedNeighborSampler)
    for want, got in zip(cpu._batches("train", 1, shuffle=True)[0], gpu._batches("train", 1, shuffle=True)[0],
                         strict=True):
        assert torch.equal(got.input_nodes.cpu(), want.input_nodes)
        for have, expected in zip(got.blocks, want.blocks, strict=True):
            assert torch.equal(have.edge_index.cpu(), expected.edge_index)
    # each trainer seeds torch when built, and dropout draws from torch's generator: build each just before its epoch
    expected = trainer(dataset, "cpu").train_epoch(1, progress=False)
    got = trainer(dataset, "gpu").train_epoch(1, progress=False, pipeline=pipeline)
    assert_same_training(got, expected)
    assert (got.hit_ratio, got.sampled_edges, got.rows_gathered, got.nodes_touched) == (
        expected.hit_ratio, expected.sampled_edges, expected.rows_gathered, expected.nodes_touched)
    assert 0 < got.hit_ratio < 1


def test_an_epoch_sampled_by_the_cuda_cpp_kernels_is_the_epoch_sampled_by_the_numba_ones(tiny, tmp_path_factory):
    # without a GPU the C++ kernels compiled for the host stand in for CuPy's (tests/tiering/sampling/host_kernels.py)
    dataset, kernels = small(tiny), host_kernels.cuda_cpp_kernels(tmp_path_factory)
    expected = trainer(dataset, "gpu").train_epoch(1, progress=False)
    built = trainer(dataset, "gpu", kernels)
    got = built.train_epoch(1, progress=False)
    assert built.sampler.kernels == "cupy"  # CuPy's kernels, or the same compiled for the host
    assert_same_training(got, expected)
    assert (got.sampled_edges, got.rows_gathered) == (expected.sampled_edges, expected.rows_gathered)


def test_uva_sampling_is_the_fused_sampler_over_the_graph_in_host_memory(tiny):
    sampler = build_sampler("uva", tiny.graph, (3,), DEVICE)
    assert isinstance(sampler, FusedNeighborSampler) and sampler.graph_memory == "host"
    assert build_sampler("gpu", tiny.graph, (3,), DEVICE).graph_memory == "gpu"


def test_a_gpu_sampling_without_a_gpu_or_the_simulator_is_refused(tiny, monkeypatch):
    monkeypatch.setattr("suite.training.sampling.simulated", lambda: False)
    for sampling in ("gpu", "uva"):
        with pytest.raises(ValueError, match=f"^{sampling} sampling runs the fused sampler's kernels on a GPU.*CUDA"):
            build_sampler(sampling, tiny.graph, (3,), "cpu")
    with pytest.raises(ValueError, match="sampling must be one of cpu, gpu, uva in one process"):
        build_sampler("distributed", tiny.graph, (3,), "cpu")


def test_the_cuda_cpp_kernels_are_refused_without_a_gpu_even_under_the_simulator_or_without_cupy(monkeypatch):
    # the simulator runs numba kernels only
    with pytest.raises(ValueError, match="^gpu sampling runs the fused sampler's kernels on a GPU.*--device cuda"):
        check_kernels("gpu", "cupy", "cpu")
    with pytest.raises(ValueError, match="kernels are numba or cupy, got 'triton'"):
        check_kernels("gpu", "triton", "cuda")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(ValueError, match=r"^--sampler-kernels cupy launches the kernels through CuPy, which is not "
                                         r"installed: install tierbench's gpu extra \(pip install 'tierbench\[gpu\]'\)$"):
        check_kernels("uva", "cupy", "cuda")


def test_gns_brings_its_own_cpu_sampler_and_refuses_a_gpu_one(tiny):
    loader = create_loader("gns", tiny, 0.0, "cpu", progress=False)
    with pytest.raises(ValueError, match="its own sampler.*gpu sampling"):
        Trainer(tiny, loader, (3,), sampling="gpu")


@pytest.mark.parametrize("command", [["train", "--dataset", "tiny", "--epochs", "1"],
                                     ["run", "--experiment", "gpusampling", "--datasets", "tiny", "--loaders",
                                      "in-memory", "--epochs", "1", "--warmup", "0"]])
@pytest.mark.parametrize("sampling", ["gpu", "uva"])
def test_the_cli_refuses_a_gpu_sampling_on_a_cpu_device_in_one_line(tiny, tmp_path, capsys, command, sampling):
    rc = main([*command, "--sampling", sampling, "--device", "cpu", *(["--runs", str(tmp_path)]
                                                                       if command[0] == "run" else [])])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"tierbench: error: {sampling} sampling runs the fused sampler's kernels on a GPU")
    assert "--device cuda" in err[0]
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_train_refuses_the_cuda_cpp_kernels_with_cpu_sampling_in_one_line(tiny, capsys):
    assert main(["train", "--dataset", "tiny", "--epochs", "1", "--sampler-kernels", "cupy"]) == 2
    assert capsys.readouterr().err == ("tierbench: error: --sampler-kernels cupy chooses the fused GPU sampler's "
                                       "kernels, which cpu sampling does not run: use it with --sampling gpu or uva\n")


@pytest.mark.gpu
@pytest.mark.parametrize("kernels", ["numba", "cupy"])
def test_train_with_gpu_sampling_names_its_kernels_in_the_report(tiny, tmp_path, capsys, kernels):
    assert main(["train", "--dataset", "tiny", "--epochs", "1", "--sampling", "gpu", "--sampler-kernels", kernels,
                 "--device", "cuda", "--minibatches", "2", "--no-validation", "--out", str(tmp_path), "-q"]) == 0
    assert f"gpu sampling ({kernels} kernels)" in capsys.readouterr().out
    assert f"sampler_kernels {kernels}" in (tmp_path / "train-tiny.md").read_text()


@pytest.mark.gpu
def test_a_sweep_with_gpu_sampling_records_its_kernels_and_resumes_each_set_apart(tiny, tmp_path):
    from suite.sweep.records import read_records

    command = ["run", "--experiment", "kernels", "--datasets", "tiny", "--loaders", "in-memory", "--fanout", "4,4",
               "--epochs", "1", "--warmup", "0", "--minibatches", "2", "--no-validation", "--sampling", "cpu,gpu",
               "--device", "cuda", "--runs", str(tmp_path), "-q"]
    for kernels in ("numba", "cupy", "cupy"):  # the second cupy sweep finds its cells recorded
        assert main([*command, "--sampler-kernels", kernels]) == 0
    records = read_records(tmp_path / "kernels.csv")
    got = sorted(zip(records["sampling"], records["sampler_kernels"].fillna("")))
    assert got == [("cpu", ""), ("gpu", "cupy"), ("gpu", "numba")]  # the CPU-sampled cell was found again too
