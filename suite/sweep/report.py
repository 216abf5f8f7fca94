"""``tierbench report``: a sweep's records (``tierbench run``) into the table and figure of Figure 8, 10 or 11, or the demo.

The records are read from ``<runs>/<experiment>.csv`` (``suite.sweep.records``)
and handed to the figure's renderer in ``suite.figures.SWEEP_FIGURES``; a
predefined sweep named after a figure gets that figure, any other Figure 8
unless ``--figure`` says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from suite.errors import BadValue
from suite.figures import SWEEP_FIGURES
from suite.sweep.records import read_records, records_path


def write_report(experiment: str, runs_dir="results/runs", out_dir=None, figure: str | None = None) -> list[Path]:
    """Tables and figures for ``experiment``'s records; ``figure`` picks fig8, fig10 or fig11 (default by name: the
    demo's own for ``demo``)."""
    path = records_path(runs_dir, experiment)
    records = read_records(path)
    if records.empty:
        raise BadValue(f"no records in {path}: run `tierbench run --experiment {experiment}` first")
    figure = figure or (experiment if experiment in SWEEP_FIGURES else "fig8")
    out_dir = out_dir or f"results/{experiment}"
    chosen = f" --figure {figure[3:]}" if figure.startswith("fig") else ""
    command = f"`tierbench report --experiment {experiment}{chosen} --out {out_dir}` from {path}"
    return SWEEP_FIGURES[figure](records, out_dir, command)
