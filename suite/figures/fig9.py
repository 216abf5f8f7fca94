"""Figure 9 of seeds/000 (§5.4): the share of measured feature fetches covered by the top 10% of nodes vs sampling depth.

Made by ``tierbench profile --dataset NAME --figure 9`` (``tox -e fig9``:
papers-s and products-s); ``tierbench report --figure 9 --dataset NAME``
draws the figure again from its curves.

Fetches are counted at depths 2 to 5, fanouts (10,) x depth, and the nodes
ordered by degree and by weighted reverse PageRank, and by the measured
counts for the ideal (``suite.figures.reuse``).  Paper (ogbn-papers100M): at
depth 5 the top 10% by weighted reverse PageRank still take 52% of accesses,
by degree 28%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.figures.reuse import IDEAL, ReuseRun, coverage_table, scores_by_label
from suite.io.plotting import pyplot

FANOUTS = [(10,) * depth for depth in range(2, 6)]
"""The sampling depths compared: fanouts (10, 10) to (10, 10, 10, 10, 10)."""
SCORERS = ("degree", "wrpr")
PAPER = {"wrpr": "52%", "degree": "28%"}
"""The paper's share of accesses at the top 10% of nodes at depth 5, by scorer (ogbn-papers100M)."""


def measure(run: ReuseRun) -> list[Path]:
    """Count the fetches of ``run`` at every depth of ``FANOUTS`` (its own fanouts are not used) and write the
    figure."""
    frames, counted = [], {}
    scores = scores_by_label(run.dataset, SCORERS)
    for depth_fanouts in FANOUTS:
        counts = run.counts(depth_fanouts)
        counted[depth_fanouts] = counts
        curve = coverage_table(counts, scores)
        curve["fanouts"] = str(depth_fanouts)
        curve["depth"] = len(depth_fanouts)
        frames.append(curve)
    curves = pd.concat(frames, ignore_index=True)
    at10 = curves[np.isclose(curves["top nodes (%)"], 10)]
    table = at10.pivot(index="depth", columns="scorer", values="share of accesses (%)")
    table.columns = [f"top 10%, {c}" for c in table.columns]
    table["paper, top 10% (wrpr / degree)"] = ""
    table.loc[5, "paper, top 10% (wrpr / degree)"] = f"{PAPER['wrpr']} / {PAPER['degree']}"
    paper = ("Fanouts (10,) x depth. Paper (seeds/000 Fig. 9, ogbn-papers100M): at depth 5 the top 10% by weighted "
             "reverse PageRank take 52% of accesses, by degree 28%.")
    return run.write("Figure 9: share of feature fetches covered by the top 10% of nodes vs sampling depth", counted,
                     paper, table, curves, plot)


def plot(curves: pd.DataFrame, name: str):
    """One panel per scorer, one line per depth: share of accesses against the share of top-scored nodes."""
    _, sns = pyplot()
    grid = sns.relplot(
        data=curves[curves["scorer"] != IDEAL], x="top nodes (%)", y="share of accesses (%)",
        hue="fanouts", col="scorer", kind="line", height=4, aspect=1.1,
    )
    grid.figure.suptitle(f"Figure 9: access coverage vs sampling depth, {name}")
    grid.figure.subplots_adjust(top=0.85, bottom=0.18)
    return grid.figure
