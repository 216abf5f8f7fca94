"""Figure 9 of Data Tiering (§5.4): the share of measured feature fetches covered by the top 10% of nodes vs sampling depth.

Measured by ``tierbench profile --dataset NAME --figure 9`` (``tox -e fig9``:
papers-s and products-s; ``suite.experiments.reuse``), which draws it;
``tierbench report --figure 9 --dataset NAME`` draws it again from its
records.

Fetches are counted at depths 2 to 5, fanouts (10,) x depth, and the nodes
ordered by degree and by weighted reverse PageRank, and by the measured
counts for the ideal.  Paper (ogbn-papers100M): at
depth 5 the top 10% by weighted reverse PageRank still take 52% of accesses,
by degree 28%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from suite.experiments.reuse import IDEAL, read_records
from suite.figures.profile import intro
from suite.io.plotting import pyplot, write_table_and_figure

PAPER = {"wrpr": "52%", "degree": "28%"}
"""The paper's share of accesses at the top 10% of nodes at depth 5, by scorer (ogbn-papers100M)."""


def render(records: Path, out: Path) -> list[Path]:
    """Write ``fig9.md``, ``fig9.csv`` and ``fig9.png`` into ``out`` from the curves at ``records``
    (``fig9-curves.csv`` of ``suite.experiments.reuse``)."""
    reuse = read_records(records)
    curves, name = reuse.curves, reuse.facts["dataset"]
    at10 = curves[np.isclose(curves["top nodes (%)"], 10)]
    table = at10.pivot(index="depth", columns="scorer", values="share of accesses (%)")
    table.columns = [f"top 10%, {c}" for c in table.columns]
    table["paper, top 10% (wrpr / degree)"] = ""
    table.loc[5, "paper, top 10% (wrpr / degree)"] = f"{PAPER['wrpr']} / {PAPER['degree']}"
    paper = ("Fanouts (10,) x depth. Paper (Data Tiering Fig. 9, ogbn-papers100M): at depth 5 the top 10% by weighted "
             "reverse PageRank take 52% of accesses, by degree 28%.")
    markdown = (f"# Figure 9: share of feature fetches covered by the top 10% of nodes vs sampling depth, {name}\n\n"
                f"{intro(reuse)}{paper}\n\n" + table.to_markdown(floatfmt=".1f") + "\n")
    return write_table_and_figure(out, "fig9", markdown, table, plot(curves, name), reuse.facts)


def plot(curves, name: str):
    """One panel per scorer, one line per depth: share of accesses against the share of top-scored nodes."""
    _, sns = pyplot()
    grid = sns.relplot(
        data=curves[curves["scorer"] != IDEAL], x="top nodes (%)", y="share of accesses (%)",
        hue="fanouts", col="scorer", kind="line", height=4, aspect=1.1,
    )
    grid.figure.suptitle(f"Figure 9: access coverage vs sampling depth, {name}")
    grid.figure.subplots_adjust(top=0.85, bottom=0.18)
    return grid.figure
