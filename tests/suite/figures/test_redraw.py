"""Every committed figure of a sweep, a reuse profile and a policy replay is drawn again from its committed records.

Each figure module's ``render(records, out)`` runs on the records committed
under ``results/`` into a fresh directory laid out like the repository's
(the tables name the command that made them, with its paths); every PNG and
table committed beside the figure must come out, and the markdown tables
byte for byte.  Drawing never measures: the experiments' measuring functions
are made to raise while it runs.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
GPU = "results/gpu/cuda-nvidia-h100-80gb-hbm3"
SECOND_VISIT = "results/gpu/cuda-nvidia-h200"

REDRAWN = [
    ("results/runs/fig8.csv", "fig8", "results/fig8"),
    ("results/runs/pipeline.csv", "fig8", "results/pipeline"),
    ("results/runs/fig10.csv", "fig10", "results/fig10"),
    ("results/runs/fig11.csv", "fig11", "results/fig11"),
    ("results/runs/demo.csv", "demo", "results/demo"),
    ("results/runs/disk.csv", "fig8", "results/disk/sweep"),
    (f"{GPU}/runs/fig8.csv", "fig8", f"{GPU}/fig8"),
    (f"{GPU}/runs/fig10.csv", "fig10", f"{GPU}/fig10"),
    (f"{GPU}/runs-1gpu/fig11.csv", "fig11", f"{GPU}/fig11-1gpu"),
    (f"{SECOND_VISIT}/runs/fig8.csv", "fig8", f"{SECOND_VISIT}/fig8"),
    (f"{SECOND_VISIT}/runs/fig10.csv", "fig10", f"{SECOND_VISIT}/fig10"),
    (f"{SECOND_VISIT}/runs/lookahead.csv", "fig8", f"{SECOND_VISIT}/lookahead"),
]
"""(committed records, figure module of ``suite.figures``, committed output directory) of every figure redrawn."""

INPUTS = ["results/machines"]
"""What the figures read besides their records: the machine profiles the records name (gather bound, projection)."""
NOT_COMMITTED_HERE = {"REMAINING.md"}
"""Files of an output directory that no figure writes (notes written by hand)."""


def _link(tmp: Path, relative: str) -> None:
    """Make ``relative`` of the repository visible at the same path under ``tmp``."""
    target = tmp / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(REPO / relative)


def _made_by(markdown: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("Made by"))


@pytest.fixture
def no_measuring(monkeypatch):
    """Measuring, training or launching a process while a figure draws fails the test."""
    import suite.sweep.run

    def refuse(*args, **kwargs):
        raise AssertionError("a figure measured")

    for name in ("run_sweep", "run_planned", "train_cell", "plan_sweep"):
        monkeypatch.setattr(suite.sweep.run, name, refuse)
    monkeypatch.setattr("subprocess.run", refuse)
    monkeypatch.setattr("subprocess.Popen", refuse)


@pytest.mark.parametrize(("records", "figure", "out"), REDRAWN, ids=[out for _, _, out in REDRAWN])
def test_a_committed_figure_is_drawn_again_from_its_committed_records(records, figure, out, tmp_path, monkeypatch,
                                                                     no_measuring):
    for relative in [str(Path(records).parent), *INPUTS]:
        _link(tmp_path, relative)
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(f"suite.figures.{figure}")
    written = module.render(Path(records), Path(out))
    assert all(path.is_relative_to(out) for path in written)
    committed = sorted(name for name in os.listdir(REPO / out) if name not in NOT_COMMITTED_HERE)
    assert committed and sorted(path.name for path in written) == committed
    for name in committed:
        if name.endswith(".md"):
            drawn, kept = (tmp_path / out / name).read_text(), (REPO / out / name).read_text()
            assert _made_by(drawn) == _made_by(kept)
            assert drawn == kept, f"{out}/{name}"
        if name.endswith(".png"):
            assert (tmp_path / out / name).read_bytes()[:4] == b"\x89PNG"


REDRAWN_BESIDE_RECORDS = [
    (f"results/profile/{name}/fig{figure}-curves.csv", f"{figure}") for name in ("papers-s", "products-s")
    for figure in (7, 9)
] + [(f"results/policies/{name}/policies-epochs.csv", "policies") for name in ("papers-s", "products-s")]
"""(committed records, name of the figure in ``suite.figures.FIGURES``) of the figures drawn into the folder of their
records, several to a folder (``tierbench report --figure NAME --records PATH``)."""


@pytest.mark.parametrize(("records", "figure"), REDRAWN_BESIDE_RECORDS, ids=[r for r, _ in REDRAWN_BESIDE_RECORDS])
def test_a_figure_beside_its_records_is_drawn_again_from_them(records, figure, tmp_path, no_measuring, capsys):
    from suite.cli import main

    assert main(["report", "--figure", figure, "--records", str(REPO / records), "--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.iterdir())
    assert written and all(path.suffix in (".md", ".csv", ".png") for path in written)
    for path in written:
        kept = REPO / Path(records).parent / path.name
        assert kept.exists(), f"{path.name} is not committed beside {records}"
        if path.suffix in (".md", ".csv"):
            assert path.read_text() == kept.read_text(), f"{records}: {path.name}"


GOALS_DRAWN = [SECOND_VISIT]
"""The gpu-suite device folders whose committed goals report is drawn again from the records in them."""


@pytest.mark.parametrize("folder", GOALS_DRAWN)
def test_a_committed_goals_report_is_drawn_again_from_its_device_folder(folder, tmp_path, monkeypatch, no_measuring):
    from suite.figures import gpu_goals

    shutil.copytree(REPO / folder, tmp_path / folder)  # the report is written into the folder it reads
    _link(tmp_path, "results/machines")
    monkeypatch.chdir(tmp_path)
    written = gpu_goals.render(Path(folder), Path(folder))
    assert [path.name for path in written] == ["goals.md", "goals.csv", "goals.png"]
    for name in ("goals.md", "goals.csv"):
        assert (tmp_path / folder / name).read_text() == (REPO / folder / name).read_text(), f"{folder}/{name}"


def test_every_committed_figure_is_drawn_again_by_a_test_or_named_as_not():
    """Each PNG under results/ is one that a test redraws from committed records, or one named here with why not."""
    from tests.benchmarks.test_gpu_diagnostics import REDRAWN_DIAGNOSTICS
    from tests.suite.figures import test_redraw_experiments as experiments

    drawn = {f"{out}/{name}" for _, _, out in REDRAWN for name in os.listdir(REPO / out) if name.endswith(".png")}
    drawn |= {f"{Path(records).parent}/fig{figure}.png" if figure.isdigit() else f"{Path(records).parent}/{figure}.png"
              for records, figure in REDRAWN_BESIDE_RECORDS}
    drawn |= {f"results/{out}/{name}" for _, module, out in experiments.REDRAWN for name in experiments.OUTPUTS[module]
              if name.endswith(".png") and f"{out}/{name}" not in experiments.NOT_REDRAWN}
    drawn |= {"results/peers/peers.png", *REDRAWN_DIAGNOSTICS, *(f"{folder}/goals.png" for folder in GOALS_DRAWN)}
    committed = {str(path.relative_to(REPO)) for path in (REPO / "results").rglob("*.png")}
    assert committed - drawn == set(NOT_REDRAWN), "a committed figure no test draws again"


NOT_REDRAWN = {
    "results/scorers/papers-s/concentration.png": "its curves were not recorded before suite.experiments.scorers",
    "results/scorers/products-s/concentration.png": "the same",
    "results/marius/papers-s/bucket-training.png": "its per-run records were not written before "
                                                   "suite.experiments.bucket_training",
}
"""Committed figures no test can draw again from committed records, and why: each is drawn from records at its
next measurement (``tierbench scorers --dataset NAME --out results/scorers/NAME``; ``tox -e fig-marius``)."""


@pytest.mark.parametrize("figure", [7, 9])
def test_a_reuse_figure_is_drawn_again_from_what_tierbench_profile_recorded(figure, tiny, tmp_path, monkeypatch):
    import suite.experiments.reuse as reuse
    from suite.cli import main

    measured = tmp_path / "measured"
    assert main(["profile", "--dataset", "tiny", "--figure", str(figure), "--out", str(measured), "-q"]) == 0
    for name in ("measure", "measure_scorers", "measure_depths", "access_counts", "open_run"):
        monkeypatch.setattr(reuse, name, lambda *args, **kwargs: pytest.fail("a figure measured"))
    module = importlib.import_module(f"suite.figures.fig{figure}")
    drawn = module.render(measured / f"fig{figure}-curves.csv", tmp_path / "drawn")
    assert [path.name for path in drawn] == [f"fig{figure}.md", f"fig{figure}.csv", f"fig{figure}.png"]
    for name in (f"fig{figure}.md", f"fig{figure}.csv"):
        assert (tmp_path / "drawn" / name).read_text() == (measured / name).read_text()


def test_the_policies_figure_is_drawn_again_from_what_tierbench_policies_recorded(tiny, tmp_path, monkeypatch):
    import suite.experiments.policies as experiment
    from suite.cli import main
    from suite.figures import policies

    measured = tmp_path / "measured"
    assert main(["policies", "--dataset", "tiny", "--out", str(measured), "-q"]) == 0
    monkeypatch.setattr(experiment, "measure", lambda *args, **kwargs: pytest.fail("a figure measured"))
    drawn = policies.render(measured / "policies-epochs.csv", tmp_path / "drawn")
    assert [path.name for path in drawn] == ["policies.md", "policies.csv", "policies.png"]
    for name in ("policies.md", "policies.csv"):
        assert (tmp_path / "drawn" / name).read_text() == (measured / name).read_text()
