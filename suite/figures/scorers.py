"""``tierbench scorers``'s report, drawn from the records of ``suite.experiments.scorers``: ``concentration.md`` /
``.csv`` / ``.png`` (the png where the records keep the curves) and ``speed.md`` / ``.csv``."""

from __future__ import annotations

from pathlib import Path

from suite.experiments.scorers import CONCENTRATION, SPEED, read_records
from suite.figures.fig7 import PAPER as FIGURE_7
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table


PAPER_REORDER = {"edges": 3.2e9, "seconds": 31.0, "machine": "2x Xeon 6230 (40 cores)"}
"""Data Tiering §3.2: reordering ogbn-papers100M took 31 s on two 20-core Xeon 6230."""


def _with_paper(concentration, speed):
    """The tables with the paper's numbers beside ours: Figure 7's shares of accesses after the score mass at the
    same shares, the reorder rate after ours (records made before the figure kept them are read without theirs)."""
    concentration = concentration.drop(columns=[c for c in concentration if c.startswith("paper Fig. 7")])
    at = concentration.columns.get_loc(f"score mass, top {max(FIGURE_7)}%") + 1
    for offset, (p, paper) in enumerate(FIGURE_7.items()):
        concentration.insert(at + offset, f"paper Fig. 7, top {p}%", f"{paper} of accesses")
    speed = speed.drop(columns=["paper edges/s"], errors="ignore")
    rate = f"{PAPER_REORDER['edges'] / PAPER_REORDER['seconds']:.3g}"
    speed.insert(speed.columns.get_loc("ours edges/s") + 1, "paper edges/s",
                 [rate if name == "reorder_graph" else "" for name in speed.index])
    return concentration, speed


def render(records: Path, out: Path) -> list[Path]:
    """The concentration and speed reports in ``out`` from the records in the folder ``records``."""
    concentration, curves, speed = read_records(records)
    facts, record = concentration.facts, concentration.provenance
    name, out = facts["name"], Path(out)
    command = f"`{facts['command']}`"
    shape = f"{name}: {facts['num_nodes']:,} nodes, {facts['num_edges']:,} list entries"
    shares, rates = _with_paper(concentration.table, speed.table)
    markdown = (
        f"# Score concentration by scorer\n\nMade by {command}; {caption(record)}.\n{shape}.\n\n"
        "Share of the total score held by the top-scored nodes. The paper's Figure 7 column gives shares of "
        "*measured accesses* (a different quantity, measured by `tierbench profile`), for orientation only.\n\n"
        + shares.to_markdown(floatfmt=".3f") + "\n"
    )
    paths = [out / f"{CONCENTRATION}.md", copy_table(concentration, out)]
    atomic.write_text(paths[0], markdown)
    if curves is not None:
        plt, sns = pyplot()
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        sns.lineplot(data=curves, x="top nodes (%)", y="share of score mass (%)", hue="scorer", ax=ax)
        ax.set(title=f"Score concentration, {name}")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        paths.append(out / f"{CONCENTRATION}.png")
        save_figure(fig, paths[-1], record)
    paths += [out / f"{SPEED}.md", copy_table(speed, out)]
    atomic.write_text(
        paths[-2],
        f"# Scoring and reordering speed\n\nMade by {command}; {caption(record)}.\n{shape}.\n\n"
        "Each row times ours and its SciPy peer on the same data in the same run (best of 3 for reorder). "
        f"Paper: reordering ogbn-papers100M ({PAPER_REORDER['edges']:.1e} edges) took {PAPER_REORDER['seconds']:.0f} s "
        f"on {PAPER_REORDER['machine']}.\n\n" + rates.to_markdown(floatfmt=".3g") + "\n",
    )
    return paths
