"""Side-by-side statistics of prepared datasets: a table and a figure, drawn from what
``suite.experiments.datasets`` recorded (``tierbench datasets info NAME... --out DIR``).

The figure has two panels: the complementary CDF of how many neighbour lists
a node appears in (log-log; a straight tail is a power law), and the share of
all list entries held by the top x% of nodes.
"""

from __future__ import annotations

from pathlib import Path

from suite.experiments.datasets import read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table


def render(records: Path, out: Path) -> list[Path]:
    """``summary.md``, ``summary.csv`` and (where the curves were recorded) ``degree-ccdf.png`` in ``out``, from the
    records in the folder ``records``."""
    measured = read_records(records)
    out, provenance = Path(out), measured.summary.provenance
    paths = [out / "summary.md", copy_table(measured.summary, out)]
    header = (
        "# Dataset summary\n\n"
        f"Made by `{measured.summary.facts['command']}`; {caption(provenance)}.\n"
        "Statistics are properties of the data, computed on the CPU.\n\n"
    )
    atomic.write_text(paths[0], header + measured.statistics.to_markdown(floatfmt=".3g") + "\n")
    if measured.curves is not None:
        plt, sns = pyplot()
        curves = measured.curves
        ccdf, share = curves[curves["curve"] == "ccdf"], curves[curves["curve"] == "share"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        sns.lineplot(data=ccdf, x="x", y="y", hue="dataset", ax=axes[0])
        axes[0].set(xscale="log", yscale="log", title="How many lists a node appears in (CCDF)",
                    xlabel="appearances k", ylabel="P(appearances >= k)")
        sns.lineplot(data=share, x="x", y="y", hue="dataset", ax=axes[1])
        axes[1].set(title="Share of list entries held by the top nodes", xlabel="top nodes (%)",
                    ylabel="share of list entries (%)")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        paths.append(out / "degree-ccdf.png")
        save_figure(fig, paths[-1], provenance)
    return paths
