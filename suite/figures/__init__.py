"""The paper's figures and the suite's other tables, one module each: drawing only.

Every module here draws what an experiment recorded, through one protocol::

    render(records: Path, out: Path) -> list[Path]

``records`` is the path of the records the figure draws (one file, or the
directory its experiment wrote them into); ``out`` is the directory its
tables (``.md``, ``.csv``) and figures (``.png``) go into; it returns the
paths it wrote.  A module reads its records only through the experiment's
reader (``suite.sweep.records.read_records`` for a sweep,
``suite.experiments.<name>.read_records`` for the others), and never
measures, trains or launches a process: what is measured is
``suite.sweep`` and ``suite.experiments``, and each command of the command
line measures first and then renders.  Where a table names the command
that made it, the command is read back from the records (or derived from
their path), so a figure drawn again from committed records is the one
committed.

* ``fig8`` / ``fig10`` / ``fig11`` / ``demo``: a sweep's epoch times, PCIe
  traffic and multi-GPU tier (``tierbench run``, then ``tierbench report``:
  ``write_report`` picks the module by ``SWEEP_FIGURES``; shared tables in
  ``sweep_tables``);
* ``fig7`` / ``fig9``: measured data reuse by scorer and by sampling depth
  (``tierbench profile``; measured by ``suite.experiments.reuse``, drawn by
  their number in ``FIGURES``; their tables' shared opening in ``profile``);
* ``policies``: every placement policy against the optimum
  (``tierbench policies``; replayed by ``suite.experiments.policies``);
* ``datasets``, ``training``: dataset statistics and training epochs;
* ``scorers``, ``build_cost``, ``plan``, ``disk``, ``sar``,
  ``bucket_training``, ``bucket_orders``, ``gpu``: score concentration and
  speed, what building a dataset costs, the projected plan for a GPU memory
  budget, the disk tier, SAR, Marius's buckets and GPU microbenchmarks;
* ``sampler_bench``: the CPU and GPU neighbour samplers' rates (``tierbench samplerbench``);
* ``costs``: the fixed cost of one minibatch per stage, and the operators each stage issues (``tierbench costs``);
* ``gpu_goals``: the second GPU visit's goals, each judged from the records one ``tierbench gpu-suite`` visit wrote
  into its device folder, read through the readers of the experiments that wrote them ("not yet run", with the
  step that measures it, where there are none).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from suite.errors import BadValue
from suite.figures import demo, fig8, fig10, fig11
from suite.sweep import RUNS_DIR
from suite.sweep.records import records_path

SWEEP_FIGURES = {"demo": demo, "fig8": fig8, "fig10": fig10, "fig11": fig11}
"""The figures ``tierbench report`` draws from a sweep's records, by the name ``--figure`` spells with its number."""

FIGURES = {"7": "fig7", "8": "fig8", "9": "fig9", "10": "fig10", "11": "fig11", "demo": "demo",
           "policies": "policies", "plan": "plan", "disk": "disk", "bucket-orders": "bucket_orders",
           "bucket-train": "bucket_training", "sar": "sar", "scorers": "scorers", "build-cost": "build_cost",
           "gpubench": "gpu", "datasets": "datasets", "sampler-bench": "sampler_bench",
           "gpu-goals": "gpu_goals", "costs": "costs"}
"""Every figure by the name ``tierbench report --figure NAME --records PATH`` draws it by, and its module here."""
SWEEP_NAMES = ("8", "10", "11", "demo")
"""The figures whose records are a sweep's CSV under ``results/runs``, not a folder beside their outputs."""


def redraw(name: str, records, out=None) -> list[Path]:
    """Figure ``name`` (a key of ``FIGURES``) drawn again from the records at ``records``, into ``out`` (default:
    the folder the records are in, where their experiment wrote the figure beside them; a sweep's records are in
    ``results/runs``, so a sweep figure needs ``out``)."""
    records = Path(records)
    if not records.exists():
        raise BadValue(f"{records} does not exist: give the records the figure's command wrote")
    if out is None:
        if name in SWEEP_NAMES:
            raise BadValue(f"--figure {name} draws a sweep's records ({records}): give --out, the figure's folder")
        out = records if records.is_dir() else records.parent
    return importlib.import_module(f"suite.figures.{FIGURES[name]}").render(records, Path(out))


def write_report(experiment: str, runs_dir=RUNS_DIR, out_dir=None, figure: str | None = None) -> list[Path]:
    """Tables and figures for ``experiment``'s records in ``runs_dir`` (``tierbench report``), into ``out_dir``
    (default ``out/<experiment>``); ``figure`` picks fig8, fig10 or fig11 (default by name: a predefined sweep
    named after a figure gets that figure, the demo its own, any other Figure 8)."""
    figure = figure or (experiment if experiment in SWEEP_FIGURES else "fig8")
    out = Path(out_dir or f"out/{experiment}")
    return SWEEP_FIGURES[figure].render(records_path(runs_dir, experiment), out)
