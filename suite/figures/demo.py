"""The demo: what data tiering does to one epoch, loader by loader, in the paper's regime (Data Tiering §5.3-5.4).

Made by ``tierbench run --experiment demo`` and then ``tierbench report
--experiment demo`` (``tox -e demo``, about four minutes on two cores).  The
graph is ``papers-xs``, shaped like ogbn-papers100M, trained at the batch of
the paper's regime (``suite.datasets.regime``), so that a minibatch touches
the share of the graph it touches in the paper and a hot tier pays as it
does there.  One bar per loader and hot fraction (never averaged together),
each with its value printed on it (a hit ratio of 0 is a bar of no length),
in four panels:

* hit ratio: the share of gathered rows served from GPU memory;
* PCIe bytes per epoch, from the traffic model (docs/design.md, Metrics);
* epoch time on this machine, labelled with its device (on a CPU the GPU
  tier is host memory and nothing crosses PCIe), the mean of the recorded
  epochs after an untimed warm-up one, with their range as error bars; as in
  Figure 8's table, the epoch time against cpu-gather's and uva's is marked
  (noise) where the two cells' ranges overlap;
* where a GPU's machine profile with measured ceilings exists
  (``tierbench doctor``, ``results/machines``), the data-loading time of
  the epoch *projected* for that GPU: cold bytes / its H2D ceiling + hot
  bytes / its D2D ceiling (the bound of ``suite.figures.sweep_tables``),
  labelled with the profile's device and date.  It is a projection, never a
  measurement.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.figures import sweep_tables as tables
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption
from suite.measure.ceilings import newest_gpu_profile
from suite.registry import LOADERS

MACHINES = Path("results/machines")
"""Where ``tierbench doctor`` writes machine profiles; the newest GPU profile with ceilings gives the projection."""
PROJECTED = "data loading s, projected"
REFERENCES = ("cpu-gather", "uva")
"""The loaders whose epoch time every other one is compared with (the baselines of Data Tiering §5.3)."""


def _bar(row) -> str:
    hot = f" {100 * row['hot_fraction']:g}%" if LOADERS[row["loader"]].hot_tier else ""
    return f"{row['loader']}{hot}"


def render(records: Path, out: Path, machines=MACHINES) -> list[Path]:
    """Write ``demo.md``, ``demo.csv`` and ``demo.png`` into ``out`` from the sweep records at ``records``; the
    projection takes the newest GPU profile in ``machines``."""
    return draw(tables.read_sweep(records), out, tables.report_command(records, out, None), machines)


def draw(records: pd.DataFrame, out_dir, command: str, machines=MACHINES) -> list[Path]:
    """Write the demo's files into ``out_dir`` from its ``records``, citing ``command`` as what made them."""
    plt, sns = pyplot()
    records = tables.with_footprint(records)
    settings = tables.settings_of(records)
    columns = ["epoch_s", "hit_ratio", "pcie_payload_bytes", "rows_gathered", "row_bytes", *tables.FOOTPRINT]
    table = tables.per_cell(records, settings, columns)
    order = [name for name in LOADERS if name in set(table["loader"])]
    table["loader"] = pd.Categorical(table["loader"], order, ordered=True)
    table = table.sort_values(["dataset", "loader", "hot_fraction"]).reset_index(drop=True)
    table["loader"] = table["loader"].astype(str)
    table["bar"] = table.apply(_bar, axis=1)
    device = " / ".join(sorted(records["device"].unique()))
    profile = newest_gpu_profile(machines, tables.CEILINGS)
    projection = "No GPU machine profile with measured ceilings in results/machines: no projection (`tierbench doctor`)."
    if profile is not None:
        path, machine = profile
        h2d, d2d = tables.measured_ceilings(str(path))
        hot_bytes = table["hit_ratio"] * table["rows_gathered"] * table["row_bytes"]
        table[PROJECTED] = table["pcie_payload_bytes"] / h2d + hot_bytes / d2d
        projection = (f"`{PROJECTED}`: the epoch's cold bytes / the H2D ceiling + hot bytes / the D2D ceiling of "
                      f"{machine['device']} as `tierbench doctor` measured them on {machine['time']} ({path}): a "
                      "bound projected from the traffic model, not a measurement; measured gathers take longer "
                      "(README, \"GPU results\").")

    shown = ["dataset"] * (table["dataset"].nunique() > 1) + ["bar"]
    display = table[shown].rename(columns={"bar": "loader"}).assign(**{
        f"epoch s ({device}), mean (min-max)": tables.epoch_text(table),
        "hit ratio": table["hit_ratio"],
        "PCIe bytes / epoch (model)": table["pcie_payload_bytes"],
        **{name: table[name] for name in tables.FOOTPRINT},
    })
    if PROJECTED in table:
        display[PROJECTED] = table[PROJECTED]
    if table["epochs"].max() > 1:  # one recorded epoch has no spread: no difference could be told from noise
        same = ["dataset"]
        for reference in REFERENCES:
            rows = table[table["loader"] == reference]
            if rows.empty:
                continue
            base = tables.matching(table, rows, same, tables.SPREAD_COLUMNS[:3])
            text = tables.flagged(base["epoch_s"] / table["epoch_s"], "{:.2f}x", tables.within_spread(table, base))
            display[f"speedup over {reference}"] = text.where(table["loader"] != reference, "reference")

    panels = [("hit_ratio", "hit ratio (rows from GPU memory)"), ("pcie_gb", "PCIe GB / epoch (model)"),
              ("epoch_s", f"epoch time (s), measured on\n{device}")]
    plotted = table.assign(pcie_gb=table["pcie_payload_bytes"] / 1e9)
    epochs = records.assign(bar=records.apply(_bar, axis=1))
    marks, errorbar = tables.spread_marks(table)
    if PROJECTED in table:
        gpu = profile[1]["device"].removeprefix("cuda: ")
        panels.append((PROJECTED, f"data loading (s), bound projected\nfor {gpu}, {profile[1]['time'][:10]}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.6), squeeze=False, sharey=True)
    for ax, (column, label) in zip(axes[0], panels):
        if column == "epoch_s":  # every recorded epoch, so that the error bars are their range
            sns.barplot(data=epochs, y="bar", x=column, hue="loader", dodge=False, legend=False, orient="h", ax=ax,
                        order=list(table["bar"]), errorbar=errorbar, capsize=0.2)
        else:
            sns.barplot(data=plotted, y="bar", x=column, hue="loader", dodge=False, legend=False, orient="h", ax=ax)
        inside = column == "epoch_s" and errorbar is not None  # past the bar's end, its error bar would cover it
        for bars in ax.containers:  # the value on each bar: a zero draws no bar at all
            ax.bar_label(bars, fmt="{:.3g}", padding=0 if inside else 2, fontsize=8,
                         label_type="center" if inside else "edge")
        ax.margins(x=0.25)
        ax.set(ylabel="", xlabel=label)
    fig.suptitle(f"What tiering does to one epoch: one bar per loader and hot fraction\n{marks}")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    record = tables.record_of(records)
    markdown = (
        f"# Demo: feature loaders in the paper's regime\n\nMade by {command}; {caption(record)}.\n\n"
        f"{tables.cpu_warning(records)}{tables.common_settings(records, settings)}{tables.regime_text(records)}"
        f"{tables.spread_text(table)}{tables.rounds_text(records, settings)}"
        f"Hit ratio: rows served from GPU memory / rows gathered. PCIe bytes per epoch are "
        f"the traffic model's (docs/design.md, Metrics): what the loader would move over PCIe on a GPU. {projection}\n\n"
        + tables.markdown_table(display)
    )
    return write_table_and_figure(out_dir, "demo", markdown, table.drop(columns="bar"), fig, record, index=False)
