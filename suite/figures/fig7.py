"""Figure 7 of seeds/000 (§5.2): the share of measured feature fetches covered by the top-scored nodes, by scorer.

Made by ``tierbench profile --dataset NAME --figure 7`` (``tox -e fig7``:
papers-s and products-s); ``tierbench report --figure 7 --dataset NAME``
draws the figure again from its curves.

Every registered scorer (``suite.registry.SCORERS``, in its order) orders
the nodes, at the dataset's training fanouts (``--fanout`` for others); the
ideal curve orders them by the measured counts (``suite.figures.reuse``).
The table gives each curve's share at the top 10% and 25% of nodes.  Paper:
on every dataset it tried, the top 10% of nodes take at least 35% of
accesses and the top 25% at least 56%.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.datasets.regime import default_fanouts
from suite.figures.reuse import ReuseRun, coverage_table, scores_by_label, share_at
from suite.io.plotting import pyplot
from suite.registry import SCORERS

PAPER = {10: "≥ 35%", 25: "≥ 56%"}
"""The paper's share of accesses at the top 10% and 25% of nodes (at least, on every dataset)."""


def measure(run: ReuseRun) -> list[Path]:
    """Count the fetches of ``run`` at its fanouts, score every node by every scorer, and write the figure."""
    fanouts = run.fanouts or default_fanouts(run.name)
    counts = run.counts(fanouts)
    curves = coverage_table(counts, scores_by_label(run.dataset, SCORERS))
    curves["fanouts"] = str(fanouts)
    table = pd.DataFrame({f"top {p}%": share_at(curves, p) for p in PAPER})
    for p, paper in PAPER.items():
        table[f"paper, top {p}%"] = paper
    paper = (f"Fanouts {fanouts}. Paper (seeds/000 Fig. 7): at least 35% at top 10% and 56% at top 25% on every "
             "dataset.")
    return run.write("Figure 7: share of feature fetches covered by the top-scored nodes", {fanouts: counts}, paper,
                     table, curves, plot)


def plot(curves: pd.DataFrame, name: str):
    """One line per scorer and the ideal: share of accesses against the share of top-scored nodes."""
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    sns.lineplot(data=curves, x="top nodes (%)", y="share of accesses (%)", hue="scorer", style="scorer", ax=ax)
    ax.set(title=f"Figure 7: access coverage by scorer, {name} {curves['fanouts'].iloc[0]}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
