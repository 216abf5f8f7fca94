"""Figure 7 of Data Tiering (§5.2): the share of measured feature fetches covered by the top-scored nodes, by scorer.

Measured by ``tierbench profile --dataset NAME --figure 7`` (``tox -e fig7``:
papers-s and products-s; ``suite.experiments.reuse``), which draws it;
``tierbench report --figure 7 --dataset NAME`` draws it again from its
records.

Every registered scorer (``suite.registry.SCORERS``, in its order) orders
the nodes, at the dataset's training fanouts (``--fanout`` for others); the
ideal curve orders them by the measured counts.
The table gives each curve's share at the top 10% and 25% of nodes.  Paper:
on every dataset it tried, the top 10% of nodes take at least 35% of
accesses and the top 25% at least 56%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.experiments.reuse import read_records
from suite.figures.profile import intro
from suite.io.plotting import pyplot, write_table_and_figure

PAPER = {10: "≥ 35%", 25: "≥ 56%"}
"""The paper's share of accesses at the top 10% and 25% of nodes (at least, on every dataset)."""


def share_at(curves: pd.DataFrame, percent: float) -> pd.Series:
    """Each curve's share of accesses at the top ``percent``% of nodes, by scorer label."""
    rows = curves[np.isclose(curves["top nodes (%)"], percent)]
    return rows.set_index("scorer")["share of accesses (%)"]


def render(records: Path, out: Path) -> list[Path]:
    """Write ``fig7.md``, ``fig7.csv`` and ``fig7.png`` into ``out`` from the curves at ``records``
    (``fig7-curves.csv`` of ``suite.experiments.reuse``)."""
    reuse = read_records(records)
    curves, name = reuse.curves, reuse.facts["dataset"]
    table = pd.DataFrame({f"top {p}%": share_at(curves, p) for p in PAPER})
    for p, paper in PAPER.items():
        table[f"paper, top {p}%"] = paper
    paper = (f"Fanouts {curves['fanouts'].iloc[0]}. Paper (Data Tiering Fig. 7): at least 35% at top 10% and 56% at top "
             "25% on every dataset.")
    markdown = (f"# Figure 7: share of feature fetches covered by the top-scored nodes, {name}\n\n{intro(reuse)}"
                f"{paper}\n\n" + table.to_markdown(floatfmt=".1f") + "\n")
    return write_table_and_figure(out, "fig7", markdown, table, plot(curves, name), reuse.facts)


def plot(curves: pd.DataFrame, name: str):
    """One line per scorer and the ideal: share of accesses against the share of top-scored nodes."""
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    sns.lineplot(data=curves, x="top nodes (%)", y="share of accesses (%)", hue="scorer", style="scorer", ax=ax)
    ax.set(title=f"Figure 7: access coverage by scorer, {name} {curves['fanouts'].iloc[0]}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
