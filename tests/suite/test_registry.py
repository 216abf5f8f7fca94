"""The registry: a new loader is one class and one ``LoaderSpec``; a new scorer is one function and one ``ScorerSpec``.

Each is registered here, in the test alone, and flows through a sweep, its
records, a report and the command line without any other edit.
"""

import pandas as pd
import pytest
import torch

from suite import registry
from suite.cli import main
from suite.figures import write_report
from suite.registry import LoaderSpec, ScorerSpec
from suite.sweep.records import read_records
from suite.sweep.run import run_sweep
from tiering.features.loader import FeatureLoader


class HalfCachedLoader(FeatureLoader):
    """A toy loader: rows below the hot count are hits, the rest misses; the rows themselves come from the table."""

    def __init__(self, features: torch.Tensor, hot_rows: int, device="cpu"):
        super().__init__(features.shape[0], features.shape[1], device)
        self.features, self.hot_rows = features, hot_rows

    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        self._stats.accesses += len(ids)
        self._stats.hits += int((ids < self.hot_rows).sum())
        return self.features[ids].to(self.device)


def reverse_id(graph, **params) -> torch.Tensor:
    """A toy scorer: the lowest id is the hottest, scaled by ``scale``."""
    return params["scale"] * torch.arange(graph.num_nodes, 0, -1, dtype=torch.float64)


@pytest.fixture
def toy_loader(monkeypatch):
    spec = LoaderSpec("half-cached", lambda features, dataset, hot, device, **o: HalfCachedLoader(features, hot, device),
                      hot_tier=True)
    monkeypatch.setitem(registry.LOADERS, spec.name, spec)
    return spec


@pytest.fixture
def toy_scorer(monkeypatch):
    spec = ScorerSpec("reverse-id", "reverse node id", reverse_id, {"scale": 1.0})
    monkeypatch.setitem(registry.SCORERS, spec.name, spec)
    return spec


SWEEP = dict(datasets=["tiny"], fanouts=[(4, 4)], epochs=1, warmup=0, progress=False)


def test_a_registered_loader_runs_in_a_sweep_at_every_hot_fraction_and_is_reported(tmp_path, toy_loader):
    path, _ = run_sweep("toy", tmp_path, loaders=["cpu-gather", "half-cached"], hot_fractions=[0.0, 0.5], **SWEEP)
    records = read_records(path)
    toy = records[records["loader"] == "half-cached"].sort_values("hot_fraction")
    assert toy["hot_fraction"].tolist() == [0.0, 0.5]  # a hot tier: swept over the hot fractions
    assert toy["hit_ratio"].iloc[0] == 0.0 < toy["hit_ratio"].iloc[1]
    assert records.loc[records["loader"] == "cpu-gather", "hot_fraction"].tolist() == [0.0]

    write_report("toy", tmp_path, tmp_path / "report", "fig8")
    table = pd.read_csv(tmp_path / "report" / "fig8.csv")
    assert table["loader"].tolist() == ["cpu-gather", "half-cached", "half-cached"]  # registry order: last registered
    assert table["epoch_s"].notna().all()
    assert table.loc[table["loader"] == "half-cached", "speedup over cpu-gather"].notna().all()


def test_a_registered_loader_is_a_choice_of_the_command_line(tmp_path, toy_loader, capsys):
    assert main(["train", "--dataset", "tiny", "--loader", "half-cached", "--hot-fraction", "0.5", "--epochs", "1",
                 "--fanout", "4,4", "-q"]) == 0
    assert "loader half-cached (hot fraction 0.5)" in capsys.readouterr().out


def test_a_registered_scorer_orders_the_dataset_the_tiered_loader_runs_on(tmp_path, toy_scorer):
    path, _ = run_sweep("toy-scorer", tmp_path, loaders=["tiered"], hot_fractions=[0.25], scorer="reverse-id", **SWEEP)
    records = read_records(path)
    assert records["scorer"].tolist() == ["reverse-id"]
    # the toy order keeps the original numbering (lowest id hottest), so the hot tier is the first quarter of ids
    assert 0.0 < records["hit_ratio"].iloc[0] < 1.0
    write_report("toy-scorer", tmp_path, tmp_path / "report", "fig10")
    assert (tmp_path / "report" / "fig10.md").read_text().count("reverse-id") >= 1


def test_a_registered_scorer_is_a_choice_of_prepare_with_its_parameters(tmp_path, toy_scorer, capsys):
    assert main(["prepare", "--dataset", "tiny", "--scorer", "reverse-id", "-q"]) == 0
    assert "tiny reordered by reverse-id {'scale': 1.0}" in capsys.readouterr().out
    assert registry.scorer_params("reverse-id", scale=2) == {"scale": 2.0}


def test_every_registered_scorer_is_in_figure_7(tmp_path, toy_scorer):
    assert main(["profile", "--dataset", "tiny", "--figure", "7", "--out", str(tmp_path), "-q"]) == 0
    table = (tmp_path / "fig7.md").read_text()
    assert all(spec.label in table for spec in registry.SCORERS.values())
