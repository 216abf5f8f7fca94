"""Figure 11 of Data Tiering (§5.5): epoch time against the size of the multi-GPU hot tier, CPU vs distributed sampling.

Made by ``tierbench run --experiment fig11 --gpus G`` and then ``tierbench
report --experiment fig11`` (``tox -e fig11``: ``TIERBENCH_GPUS`` processes,
default 2, on ``TIERBENCH_DEVICE``, default the CPU).

One row per setting: the tiered loader as the multi-GPU combined tensor,
its hot tier interleaved over every process's GPU, at each hot fraction and
each sampling (``cpu``, ``uva``, ``distributed``), against the share of rows
in the tier and against the GPU memory in use.  Paper (MAG240M, four V100s):
with CPU sampling a sharp drop at 5% hot and little beyond; distributed GPU
sampling notably faster, its curve shifted right by the graph's share of GPU
memory.  Records of processes on a CPU, or of one GPU, are labelled as not
multi-GPU numbers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.figures import sweep_tables as tables
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption

PAPER = {"cpu": "sharp drop at 5% hot, marginal beyond", "distributed": "notably faster than CPU sampling"}
"""The paper's findings, beside the sampling they are of (on the row of the smallest hot fraction)."""



def _multi_gpu_warning(records: pd.DataFrame) -> str:
    if records["device"].str.startswith("cpu").all():
        return (
            "**Not a multi-GPU measurement.** These processes ran on a CPU, joined by gloo, standing in for GPUs: "
            "the code path of Figure 11, not its hardware. Run `tox -e fig11` on a machine with two or more GPUs "
            "for the figure.\n\n"
        )
    if (records["gpus"] <= 1).all():
        return (
            "**One GPU.** The multi-GPU tier is a single GPU's memory here and nothing crosses a GPU interconnect: "
            "these are not multi-GPU numbers. Figure 11 needs two or more GPUs (`tox -e fig11`).\n\n"
        )
    return ""


def render(records: Path, out: Path) -> list[Path]:
    """Write ``fig11.md``, ``fig11.csv`` and ``fig11.png`` into ``out`` from the tiered loader's records at ``records``."""
    return draw(tables.read_sweep(records), out, tables.report_command(records, out, 11))


def draw(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    """Write the figure's files into ``out_dir`` from ``records``, citing ``command`` as what made them."""
    plt, sns = pyplot()
    tiered = tables.with_footprint(tables.tiered_records(records, 11, "tierbench run --experiment fig11 --gpus G"))
    settings = tables.settings_of(tiered)
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "gpu_bytes_resident",
               *tables.FOOTPRINT]
    table = tables.per_cell(tiered, settings, columns).sort_values(settings).reset_index(drop=True)
    table["paper"] = table["sampling"].map(PAPER).where(table["hot_fraction"] == table["hot_fraction"].min(), "")
    table["paper"] = table["paper"].fillna("")
    record = tables.record_of(tiered)

    shown = tables.varying(table, settings)
    shown = [column for column in settings if column in shown or column in ("sampling", "hot_fraction")]
    display = table[shown].assign(**{"epoch s, mean (min-max)": tables.epoch_text(table)})
    display = pd.concat([display, table[columns[1:]], table[["paper"]]], axis=1)

    styles = tables.varying(tiered, [column for column in settings if column not in ("sampling", "hot_fraction")])
    plotted, style_order = tables.labelled(tiered, styles, "setting")
    plotted = plotted.assign(**{
        "multi-GPU hot tier (% of rows)": 100 * plotted["hot_fraction"],
        "GPU memory in use, all GPUs (GB)": plotted["gpu_bytes_resident"] / 1e9,
    })
    marks, errorbar = tables.spread_marks(table)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, x in zip(axes, ["multi-GPU hot tier (% of rows)", "GPU memory in use, all GPUs (GB)"]):
        sns.lineplot(data=plotted, x=x, y="epoch_s", hue="sampling", style="setting" if styles else None,
                     style_order=style_order, marker="o", errorbar=errorbar, err_style="bars", ax=ax)
        ax.set(ylabel="epoch time (s)")
    fig.suptitle(f"Figure 11: epoch time vs multi-GPU hot tier, CPU vs distributed sampling (tiered loader)\n{marks}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    markdown = (
        f"# Figure 11: epoch time vs size of the multi-GPU hot tier\n\nMade by {command}; {caption(record)}.\n\n"
        f"{_multi_gpu_warning(tiered)}{tables.common_settings(tiered, settings)}{tables.regime_text(tiered)}"
        f"{tables.spread_text(table)}{tables.rounds_text(tiered, settings)}"
        "Each process holds an equal, interleaved share of the hot tier (no replicated tier, Data Tiering §5.5); times "
        "are the slowest process's; hit ratio counts rows served from any GPU's memory; GPU memory in use adds every "
        "process's feature shard and, with distributed sampling on GPUs, its part of the CSR.\n\n"
        + tables.markdown_table(display)
    )
    return write_table_and_figure(out_dir, "fig11", markdown, table, fig, record, index=False)
