"""``tierbench samplerbench`` end to end on ``tiny`` with tiny sizes: the CPU sampler from the command line, and the
GPU samplers' path under numba's CUDA simulator (tests/conftest.py) where no GPU is visible."""

import pytest

from suite.cli import main
from suite.experiments import sampler_bench
from suite.figures import redraw
from suite.figures.sampler_bench import render

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


def test_the_gpu_samplers_sample_what_the_cpu_sampler_does(tiny, tmp_path, monkeypatch):
    # where no GPU is visible the simulator runs the fused sampler: tiny sizes, every sampler, the same edges
    device = "cuda" if sampler_bench.torch.cuda.is_available() else "cpu"
    monkeypatch.setattr(sampler_bench, "samplers", lambda device: ["cpu", "gpu", "uva"])
    path = sampler_bench.measure(tiny, tmp_path, device, seeds=12, batch_size=2, repeat=1, command="test")
    table = sampler_bench.read_records(path).table
    assert list(table["sampler"]) == ["cpu", "gpu", "uva"] * 2
    for _, case in table.groupby("case"):
        assert case["sampled_edges"].nunique() == 1
    assert render(path, tmp_path / "report")[0].read_text().count("| uva ") == 2


def test_more_seeds_than_nodes_are_refused_in_one_line(tiny, tmp_path, capsys):
    assert main(["samplerbench", "--dataset", "tiny", "--device", "cpu", "--seeds", "5000", "--out",
                 str(tmp_path), "-q"]) == 2
    assert capsys.readouterr().err.strip() == "tierbench: error: --seeds 5000 is more than tiny's 4,096 nodes"
