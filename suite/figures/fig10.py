"""Figure 10 of Data Tiering (§5.4): PCIe traffic and epoch time against the hot fraction.

Made by ``tierbench run --experiment fig10`` and then ``tierbench report
--experiment fig10`` (``tox -e fig10``; on a GPU ``TIERBENCH_DEVICE=cuda tox
-e fig10``); ``tierbench report --figure 10`` draws it for any sweep of the
tiered loader over hot fractions.

The tiered loader's PCIe bytes (modelled, and measured where NVML gave
them), hit ratio and epoch time at each hot fraction, as changes from the
0% hot tier of the same setting, with the gather time against its
data-loading lower bound where the records allow one
(``suite.figures.sweep_tables``).  Paper (ogbn-papers100M): -97% traffic at
25% hot, -33% / -42% epoch time at 5% / 25%.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from suite.figures import sweep_tables as tables
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption

PAPER_CHANGES = {0.05: {"time": -0.33}, 0.25: {"traffic": -0.97, "time": -0.42}}
"""The paper's changes from 0% hot (ogbn-papers100M), by the hot fraction they are at."""
ZERO_HOT_CHANGE = "epoch time vs 0% hot (%)"


def paper_text(hot_fraction: float) -> str:
    """The paper's changes at ``hot_fraction``, as the table's ``paper`` column gives them; empty where it has none."""
    changes = PAPER_CHANGES.get(round(hot_fraction, 2), {})
    return ", ".join(f"{change:+.0%} {measure}" for measure, change in changes.items())


def render(records: Path, out: Path) -> list[Path]:
    """Write ``fig10.md``, ``fig10.csv`` and ``fig10.png`` into ``out`` from the tiered loader's records at ``records``."""
    return draw(tables.read_sweep(records), out, tables.report_command(records, out, 10))


def draw(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    """Write the figure's files into ``out_dir`` from ``records``, citing ``command`` as what made them."""
    plt, sns = pyplot()
    tiered = tables.with_footprint(tables.tiered_records(records, 10, "tierbench run --experiment fig10"))
    settings = tables.settings_of(tiered)
    columns = ["epoch_s", "pcie_payload_bytes", "pcie_rx_bytes_measured", "hit_ratio", *tables.FOOTPRINT]
    table, bound_text = tables.cells_with_bound(tiered, settings, columns)
    same = [column for column in settings if column != "hot_fraction"]
    table = table.sort_values(settings).reset_index(drop=True)
    zero = table[table["hot_fraction"] == 0.0]
    base = tables.matching(table, zero, same, tables.SPREAD_COLUMNS[:3] + ["pcie_payload_bytes"])
    table["traffic vs 0% (model)"] = table["pcie_payload_bytes"] / base["pcie_payload_bytes"] - 1.0
    table["time vs 0%"] = table["epoch_s"] / base["epoch_s"] - 1.0
    table["time vs 0% within spread"] = tables.within_spread(table, base)
    table["paper"] = table["hot_fraction"].map(paper_text)
    missing = int(base["epoch_s"].isna().sum())
    note = f" {missing} rows have no 0% hot cell in the same setting: their changes are empty." if missing else ""
    record = tables.record_of(tiered)

    shown = [column for column in settings if column in tables.varying(table, settings) or column == "hot_fraction"]
    display = table[shown].assign(**{"epoch s, mean (min-max)": tables.epoch_text(table)})
    display = pd.concat([display, table[columns[1:]]], axis=1)
    if tables.BOUND in table:
        display = tables.bound_columns(display.assign(gather_s=table["gather_s"]), table)
    reference = table["hot_fraction"] == 0.0
    display["traffic vs 0% (model)"] = tables.flagged(table["traffic vs 0% (model)"], "{:+.0%}").mask(reference, "reference")
    display["time vs 0%"] = tables.flagged(table["time vs 0%"], "{:+.0%}", table["time vs 0% within spread"]).mask(
        reference, "reference")
    display["paper"] = table["paper"]

    lines = tables.varying(tiered, [column for column in settings if column != "hot_fraction"])
    plotted, hue_order = tables.labelled(tiered, lines, "setting")
    plotted = plotted.assign(**{
        "hot fraction (%)": 100 * plotted["hot_fraction"],
        "PCIe payload (GB, model)": plotted["pcie_payload_bytes"] / 1e9,
        "PCIe RX (GB, NVML)": plotted["pcie_rx_bytes_measured"] / 1e9,
    })
    # each epoch against the mean 0% hot epoch of its own setting (the table's reference cell): settings whose epochs
    # differ by orders of magnitude (a paper-scale epoch's first minibatches, a whole epoch of the paper's regime)
    # share one scale, as the paper's
    zero_hot = zero[same + ["epoch_s"]].rename(columns={"epoch_s": "zero hot epoch_s"})
    plotted = plotted.merge(zero_hot, on=same, how="left")
    plotted[ZERO_HOT_CHANGE] = 100 * (plotted["epoch_s"] / plotted["zero hot epoch_s"] - 1.0)
    marks, errorbar = tables.spread_marks(table)
    style = dict(hue="setting" if lines else None, hue_order=hue_order, errorbar=errorbar, err_style="bars",
                 legend=False)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    sns.lineplot(data=plotted, x="hot fraction (%)", y="PCIe payload (GB, model)", marker="o", ax=axes[0], **style)
    measured = plotted["PCIe RX (GB, NVML)"].notna().any()
    if measured:
        sns.lineplot(data=plotted, x="hot fraction (%)", y="PCIe RX (GB, NVML)", marker="X", linestyle="--",
                     ax=axes[0], **style)
    axes[0].set(ylabel="PCIe bytes per epoch (GB)")
    sns.lineplot(data=plotted, x="hot fraction (%)", y=ZERO_HOT_CHANGE, marker="o", ax=axes[1], **style)
    axes[1].axhline(0.0, color="0.6", linewidth=0.8)
    paper = {100 * fraction: 100 * changes["time"] for fraction, changes in PAPER_CHANGES.items() if "time" in changes}
    axes[1].scatter(list(paper), list(paper.values()), marker="*", s=120, color="black", zorder=3)
    axes[1].set(ylabel=ZERO_HOT_CHANGE)
    # the legends below the panels, never over the data: one entry per setting (colour), one per source (line)
    colours = dict(zip(hue_order or [], sns.color_palette(n_colors=len(hue_order or []))))
    handles = [Line2D([], [], color=colour, marker="o", label=label) for label, colour in colours.items()]
    sources = [Line2D([], [], color="0.3", marker="o", label="modelled payload (traffic model)")]
    if measured:
        sources.append(Line2D([], [], color="0.3", marker="X", linestyle="--", label="measured RX (NVML, whole GPU)"))
    sources.append(Line2D([], [], color="black", marker="*", markersize=10, linestyle="",
                          label="paper's epoch time (ogbn-papers100M)"))
    if handles:
        fig.legend(handles=handles, title="setting", loc="lower center", bbox_to_anchor=(0.5, 0.1),
                   ncols=min(len(handles), 3), frameon=False, fontsize=8, title_fontsize=8)
    fig.legend(handles=sources, loc="lower center", bbox_to_anchor=(0.5, 0.035), ncols=len(sources), frameon=False,
               fontsize=8)
    fig.suptitle(f"Figure 10: PCIe traffic and epoch time vs hot fraction (tiered loader)\n{marks}")
    fig.tight_layout(rect=(0, 0.12 + (0.06 + 0.05 * -(-len(handles) // 3)) * bool(handles), 1, 1))
    markdown = (
        f"# Figure 10: PCIe traffic and epoch time vs hot fraction\n\nMade by {command}; {caption(record)}.\n\n"
        f"{tables.cpu_warning(tiered)}{tables.common_settings(tiered, settings)}{tables.regime_text(tiered)}"
        f"{tables.spread_text(table)}{tables.rounds_text(tiered, settings)}"
        f"Changes are relative to the 0% hot tier of the same setting;{note} measured PCIe bytes are NVML's receive "
        "counter, empty where unavailable.\n\n" + bound_text + tables.markdown_table(display)
    )
    return write_table_and_figure(out_dir, "fig10", markdown, table, fig, record, index=False)
