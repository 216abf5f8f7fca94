"""Every committed figure of the experiments outside the sweeps is redrawn from its committed records, without
measuring: the files committed beside it come out again, and its markdown tables byte for byte."""

import importlib
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[3] / "results"

REDRAWN = [
    # (committed records, figure module, committed output directory)
    ("marius", "bucket_orders", "marius"),
    ("plan/papers-s", "plan", "plan/papers-s"),
    ("plan/products-s", "plan", "plan/products-s"),
    ("disk/papers-s", "disk", "disk/papers-s"),
    ("scorers/papers-s", "scorers", "scorers/papers-s"),
    ("scorers/products-s", "scorers", "scorers/products-s"),
    ("datasets", "build_cost", "datasets"),
    ("datasets", "datasets", "datasets"),
    ("datasets/papers", "datasets", "datasets/papers"),
    ("sar/papers-s", "sar", "sar/papers-s"),
    ("sar/products-s", "sar", "sar/products-s"),
    ("gpu/cuda-nvidia-h100-80gb-hbm3/microbench", "gpu", "gpu/cuda-nvidia-h100-80gb-hbm3/microbench"),
    ("gpu/cuda-nvidia-h200/microbench", "gpu", "gpu/cuda-nvidia-h200/microbench"),
    ("gpu/cuda-nvidia-h200/microbench-paper-scale", "gpu", "gpu/cuda-nvidia-h200/microbench-paper-scale"),
    ("gpu/cuda-nvidia-h200/sampler-bench", "sampler_bench", "gpu/cuda-nvidia-h200/sampler-bench"),
    ("gpu/cuda-nvidia-h200/costs/papers-s", "costs", "gpu/cuda-nvidia-h200/costs/papers-s"),
    ("gpu/cuda-nvidia-h200/costs/papers-s-cpu-sampling", "costs", "gpu/cuda-nvidia-h200/costs/papers-s-cpu-sampling"),
]
"""The committed records each figure module draws, and where its committed outputs are."""

OUTPUTS = {"bucket_orders": ("bucket-orders.md", "bucket-orders.csv", "bucket-orders.png"),
           "costs": ("costs.md", "costs.csv", "costs.png", "costs-operators.csv", "costs-operators.png"),
           "plan": ("plan.md", "plan.csv", "plan.png"), "disk": ("disk.md", "disk.csv", "disk.png"),
           "build_cost": ("build-cost.md", "build-cost.csv", "build-cost.png"),
           "datasets": ("summary.md", "summary.csv", "degree-ccdf.png"),
           "gpu": ("microbench.md", "microbench.csv", "ratios.png", "alignment.png", "pcie-check.csv", "reach.csv",
                   "reach.png"),
           "sampler_bench": ("sampler-bench.md", "sampler-bench.csv", "sampler-bench.png", "launch-costs.csv",
                             "launch-costs.png"),
           "sar": ("sar.md", "sar.csv", "sar.png"),
           "scorers": ("concentration.md", "concentration.csv", "concentration.png", "speed.md", "speed.csv")}
"""The files a figure module writes: those of them committed must come out again."""

NOT_REDRAWN = {"scorers/papers-s/concentration.png", "scorers/products-s/concentration.png"}
"""Committed figures whose records were never written (the scorers' concentration curves, kept since by
``suite.experiments.scorers``): they are drawn again at the next measurement."""


def markdown_tables(text: str) -> list[str]:
    """The lines of a report's markdown tables."""
    return [line for line in text.splitlines() if line.startswith("|")]


@pytest.mark.parametrize(("records", "module", "committed"), REDRAWN)
def test_a_committed_figure_is_redrawn_from_its_committed_records(records, module, committed, tmp_path, monkeypatch):
    experiment = importlib.import_module(f"suite.experiments.{module}")

    def measuring(*args, **kwargs):
        raise AssertionError(f"suite.figures.{module} measured instead of drawing")

    monkeypatch.setattr(experiment, "measure", measuring)
    figure = importlib.import_module(f"suite.figures.{module}")
    written = figure.render(RESULTS / records, tmp_path)
    assert all(path.parent == tmp_path and path.exists() for path in written)
    names = {path.name for path in written}
    expected = [name for name in OUTPUTS[module] if (RESULTS / committed / name).exists()
                and f"{committed}/{name}" not in NOT_REDRAWN]
    assert expected and set(expected) <= names
    for name in expected:
        produced, kept = tmp_path / name, RESULTS / committed / name
        if name.endswith(".png"):
            assert produced.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        elif name.endswith(".md"):
            assert markdown_tables(produced.read_text()) == markdown_tables(kept.read_text())
            assert produced.read_text() == kept.read_text()
        else:
            assert produced.read_bytes() == kept.read_bytes()


@pytest.mark.parametrize("module", sorted(OUTPUTS))
def test_a_figure_module_only_draws(module):
    figure = importlib.import_module(f"suite.figures.{module}")
    source = Path(figure.__file__).read_text()
    assert "measure" not in {name for name in vars(figure)}  # it imports the reader, never the measurement
    for measuring in ("torch", "subprocess", "load_dataset", "suite.training", "suite.measure"):
        assert f"import {measuring}" not in source and f"from {measuring}" not in source
