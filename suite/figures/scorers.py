"""``tierbench scorers``'s report, drawn from the records of ``suite.experiments.scorers``: ``concentration.md`` /
``.csv`` / ``.png`` (the png where the records keep the curves) and ``speed.md`` / ``.csv``."""

from __future__ import annotations

from pathlib import Path

from suite.experiments.scorers import CONCENTRATION, PAPER_REORDER, SPEED, read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table


def render(records: Path, out: Path) -> list[Path]:
    """The concentration and speed reports in ``out`` from the records in the folder ``records``."""
    concentration, curves, speed = read_records(records)
    facts, record = concentration.facts, concentration.provenance
    name, out = facts["name"], Path(out)
    command = f"`{facts['command']}`"
    shape = f"{name}: {facts['num_nodes']:,} nodes, {facts['num_edges']:,} list entries"
    markdown = (
        f"# Score concentration by scorer\n\nMade by {command}; {caption(record)}.\n{shape}.\n\n"
        "Share of the total score held by the top-scored nodes. The paper's Figure 7 column gives shares of "
        "*measured accesses* (a different quantity, measured by `tierbench profile`), for orientation only.\n\n"
        + concentration.table.to_markdown(floatfmt=".3f") + "\n"
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
        f"on {PAPER_REORDER['machine']}.\n\n" + speed.table.to_markdown(floatfmt=".3g") + "\n",
    )
    return paths
