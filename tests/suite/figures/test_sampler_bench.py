"""``tierbench samplerbench`` end to end on ``tiny`` with tiny sizes: the CPU sampler from the command line, and the
GPU samplers' path under numba's CUDA simulator (tests/conftest.py) where no GPU is visible."""

import pytest
import torch

from suite.cli import main
from suite.experiments import launch_costs, sampler_bench
from suite.figures import redraw
from suite.figures.sampler_bench import render
from tests.tiering.sampling import host_kernels
from tiering.sampling import fused

SMALL_CASES = {"one hop": (4,), "minibatch": (4, 4, 4)}
"""The benchmark's cases at fanout 4 instead of 12, as many hops: what numba's CUDA simulator runs in seconds."""

pytestmark = pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")


def test_samplerbench_on_a_cpu_measures_the_cpu_sampler_and_draws_its_report(tiny, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["samplerbench", "--dataset", "tiny", "--device", "cpu", "--seeds", "500", "--batch-size", "32",
                 "--repeat", "2", "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "# Neighbour sampling, tiny" in printed and "tierbench samplerbench --dataset tiny" in printed
    table = sampler_bench.read_records(out).table
    assert list(table["case"]) == ["one hop", "minibatch"] and set(table["sampler"]) == {"cpu"}
    assert list(table["seeds"]) == [500, 32] and list(table["fanouts"]) == ["12", "12,12,12"]
    assert (table["sampled_edges"] > 0).all() and (table["best_s"] > 0).all()
    assert (table["sampled_edges_per_second"] - table["sampled_edges"] / table["best_s"]).abs().max() < 1e-6 * \
        table["sampled_edges_per_second"].max()
    assert {p.name for p in out.iterdir()} >= {"sampler-bench.csv", "sampler-bench.json", "sampler-bench.md",
                                                "sampler-bench.png"}
    again = tmp_path / "again"
    assert [p.name for p in redraw("sampler-bench", out, again)] == ["sampler-bench.md", "sampler-bench.csv",
                                                                    "sampler-bench.png"]


def test_the_gpu_samplers_sample_what_the_cpu_sampler_does(tiny, tmp_path, tmp_path_factory, monkeypatch):
    # where no GPU is visible the simulator runs the fused sampler's numba kernels and the CUDA C++ ones run compiled
    # for the host: tiny sizes, every sampler, the same edges
    device = "cuda" if torch.cuda.is_available() else "cpu"
    cupy_kernels = host_kernels.cuda_cpp_kernels(tmp_path_factory)
    assert list(sampler_bench.samplers("cuda")) == ["cpu", *sampler_bench.FUSED_SAMPLERS]
    fused = {name: (sampling, cupy_kernels if kernels == "cupy" else kernels)
             for name, (sampling, kernels) in sampler_bench.FUSED_SAMPLERS.items()}
    monkeypatch.setattr(sampler_bench, "samplers", lambda device: {"cpu": ("cpu", None), **fused})
    monkeypatch.setattr(launch_costs, "LAUNCHES", 2)  # the simulator runs each launch's threads in Python,
    monkeypatch.setattr(sampler_bench, "CASES", SMALL_CASES)  # one thread of them per candidate neighbour
    monkeypatch.setattr(launch_costs, "MINIBATCH_FANOUTS", SMALL_CASES["minibatch"])
    path = sampler_bench.measure(tiny, tmp_path, device, seeds=12, batch_size=2, repeat=1, command="test")
    table = sampler_bench.read_records(path).table
    assert list(table["sampler"]) == ["cpu", "gpu", "uva", "gpu-cupy"] * 2
    for _, case in table.groupby("case"):
        assert case["sampled_edges"].nunique() == 1
    fixed = launch_costs.read_records(tmp_path)
    rows = ["hop kernels, tensors at each launch", "hop kernels, arguments made once", "hop scans",
            "minibatch of one seed"]
    assert list(fixed.table["what"]) == rows * 2
    assert list(fixed.table["sampler"]) == ["gpu"] * 4 + ["gpu-cupy"] * 4
    assert list(fixed.table["kernels"]) == ["numba"] * 4 + ["cupy"] * 4
    assert list(fixed.table["launches"]) == [3, 3, 2, 16] * 2 and (fixed.table["host_us"] > 0).all()
    assert (fixed.table["us_per_launch"] * fixed.table["launches"] - fixed.table["host_us"]).abs().max() < 1e-6
    assert fixed.facts == {"command": "test", "dataset": "tiny", "repeat": 1, "repetitions": 2}
    if device == "cpu":  # the C++ hop kernels ran: one untimed run and 2 timed of each of the two hop rows
        assert cupy_kernels.launched.count("marks") >= 2 * (1 + 2)
    written = render(path, tmp_path / "report")
    assert [p.name for p in written] == ["sampler-bench.md", "sampler-bench.csv", "sampler-bench.png",
                                         "launch-costs.csv", "launch-costs.png"]
    markdown = written[0].read_text()
    assert markdown.count("| uva ") == 2 and markdown.count("| gpu-cupy ") == 2 + 4
    assert "## Fixed costs of the fused sampler" in markdown
    assert "| minibatch of one seed " in markdown and "best of 1 timings of 2 repetitions" in markdown


def test_a_sampler_that_fails_leaves_what_was_measured_before_it(tiny, tmp_path, monkeypatch):
    class Failing(fused.NumbaLaunches):
        def launch(self, name, blocks, stream, *args):
            raise RuntimeError("planted")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    monkeypatch.setattr(sampler_bench, "samplers", lambda device: {
        "cpu": ("cpu", None), "gpu": ("gpu", "numba"), "gpu-failing": ("gpu", Failing())})
    monkeypatch.setattr(launch_costs, "LAUNCHES", 2)
    monkeypatch.setattr(sampler_bench, "CASES", SMALL_CASES)
    monkeypatch.setattr(launch_costs, "MINIBATCH_FANOUTS", SMALL_CASES["minibatch"])
    with pytest.raises(RuntimeError, match="planted"):  # an internal failure keeps its traceback
        sampler_bench.measure(tiny, tmp_path, device, seeds=12, batch_size=2, repeat=1, command="test")
    table = sampler_bench.read_records(tmp_path).table
    assert list(table["sampler"]) == ["cpu", "gpu"] * 2 and list(table["case"]) == ["one hop"] * 2 + ["minibatch"] * 2
    assert set(launch_costs.read_records(tmp_path).table["sampler"]) == {"gpu"}  # measured right after its rates


def test_more_seeds_than_nodes_are_refused_in_one_line(tiny, tmp_path, capsys):
    assert main(["samplerbench", "--dataset", "tiny", "--device", "cpu", "--seeds", "5000", "--out",
                 str(tmp_path), "-q"]) == 2
    assert capsys.readouterr().err.strip() == "tierbench: error: --seeds 5000 is more than tiny's 4,096 nodes"
