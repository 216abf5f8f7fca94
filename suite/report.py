"""``tierbench report``: records of ``tierbench run`` into tables and figures, the paper's numbers beside ours.

* **Figure 8** (``--experiment fig8``, or any sweep over several loaders):
  epoch time per loader and dataset, speedups over CPU gather and over plain
  zero-copy, and validation accuracy; paper (seeds/000 Fig. 8): zero-copy is
  2.5-4.6x faster than CPU gather, tiering 1.6-2.1x faster than zero-copy.
* **Figure 10** (``--experiment fig10``): the tiered loader's PCIe bytes
  (modelled, and measured where NVML gave them) and epoch time against the
  hot fraction, as reductions from 0% hot; paper (ogbn-papers100M): -97%
  traffic at 25% hot, -33% / -42% epoch time at 5% / 25%.
* **Figure 11** (``--experiment fig11``, records of ``tierbench run --gpus
  G``): epoch time against the size of the multi-GPU hot tier, with CPU
  sampling and with distributed GPU sampling; paper (MAG240M, four V100s):
  with CPU sampling a sharp drop at 5% hot and little beyond, distributed
  GPU sampling notably faster, its curve shifted right by the graph's share
  of GPU memory.

Numbers measured on a CPU are labelled so: there the "GPU" tier is host
memory, no byte crosses PCIe, and times compare code paths, not the paper's
hardware effect.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .harness import read_records
from .plotting import pyplot, write_table_and_figure
from .provenance import caption

PAPER_FIG8 = {"uva": "2.5-4.6x over CPU gather", "tiered": "1.6-2.1x over zero-copy"}
PAPER_FIG11 = {"cpu": "sharp drop at 5% hot, marginal beyond", "distributed": "notably faster than CPU sampling"}
PAPER_FIG10 = {0.05: "-33% time", 0.25: "-97% traffic, -42% time"}
LOADER_ORDER = ["cpu-gather", "uva-naive", "uva", "degree-cache", "gns", "tiered", "in-memory"]


def _record_of(records: pd.DataFrame) -> dict:
    """The provenance of a set of records: one device, the revisions and the time span they came from."""
    return {
        "device": " / ".join(sorted(records["device"].unique())),
        "git_revision": " / ".join(sorted(records["git_revision"].astype(str).unique())),
        "time": f"{records['time'].min()} to {str(records['time'].max())[11:]}",
    }


def _cpu_warning(records: pd.DataFrame) -> str:
    if records["device"].str.startswith("cpu").all():
        return (
            "**Measured on a CPU.** The GPU tier is host memory here and nothing crosses PCIe: the times "
            "compare code paths, not the paper's GPU effect; PCIe columns are the model.\n\n"
        )
    return ""


def figure8(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    plt, sns = pyplot()
    keys = ["dataset", "pipeline", "loader", "hot_fraction"]
    table = records.groupby(keys, sort=False)[["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "valid_accuracy"]].mean()
    table = table.reset_index()
    for reference in ("cpu-gather", "uva"):  # compared within the same dataset and pipeline setting
        base = table[table["loader"] == reference].set_index(["dataset", "pipeline"])["epoch_s"]
        index = pd.MultiIndex.from_frame(table[["dataset", "pipeline"]])
        table[f"speedup over {reference}"] = base.reindex(index).to_numpy() / table["epoch_s"].to_numpy()
    table["paper"] = table["loader"].map(PAPER_FIG8).fillna("")
    order = [name for name in LOADER_ORDER if name in set(table["loader"])]
    table["loader"] = pd.Categorical(table["loader"], order, ordered=True)
    table = table.sort_values(["dataset", "pipeline", "loader"])
    record = _record_of(records)

    hue = "pipeline" if table["pipeline"].nunique() > 1 else None
    grid = sns.catplot(data=table, x="loader", y="epoch_s", col="dataset", hue=hue, kind="bar", order=order, height=4.2,
                       aspect=1.7, sharey=False)
    grid.set_axis_labels("", "epoch time (s)")
    grid.set_xticklabels(rotation=20)
    grid.figure.suptitle("Figure 8: epoch time by feature loader")
    grid.figure.subplots_adjust(top=0.85, bottom=0.2)
    markdown = (
        f"# Figure 8: epoch time by feature loader\n\nMade by {command}; {caption(record)}.\n\n{_cpu_warning(records)}"
        "Mean over the recorded epochs of each cell; speedup = epoch time of the reference / this loader's.\n\n"
        + table.to_markdown(index=False, floatfmt=".3g") + "\n"
    )
    return write_table_and_figure(out_dir, "fig8", markdown, table, grid.figure, record, index=False)


def figure10(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    plt, sns = pyplot()
    tiered = records[records["loader"] == "tiered"]
    if tiered.empty:
        raise ValueError("Figure 10 needs records of the tiered loader (tierbench run --experiment fig10)")
    columns = ["epoch_s", "pcie_payload_bytes", "pcie_rx_bytes_measured", "hit_ratio"]
    table = tiered.groupby(["dataset", "hot_fraction"])[columns].mean().reset_index()
    for _, rows in table.groupby("dataset"):
        zero = rows[rows["hot_fraction"] == 0.0]
        if zero.empty:
            continue
        for column, label in (("pcie_payload_bytes", "traffic vs 0% (model)"), ("epoch_s", "time vs 0%")):
            table.loc[rows.index, label] = rows[column] / float(zero[column].iloc[0]) - 1.0
    table["paper"] = table["hot_fraction"].round(2).map(PAPER_FIG10).fillna("")
    record = _record_of(tiered)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    long = table.assign(**{"hot fraction (%)": 100 * table["hot_fraction"], "PCIe payload (GB, model)": table["pcie_payload_bytes"] / 1e9})
    sns.lineplot(data=long, x="hot fraction (%)", y="PCIe payload (GB, model)", hue="dataset", marker="o", ax=axes[0])
    if long["pcie_rx_bytes_measured"].notna().any():
        measured = long.assign(**{"PCIe RX (GB, NVML)": long["pcie_rx_bytes_measured"] / 1e9})
        sns.lineplot(data=measured, x="hot fraction (%)", y="PCIe RX (GB, NVML)", hue="dataset", marker="x", linestyle="--", ax=axes[0], legend=False)
    sns.lineplot(data=long, x="hot fraction (%)", y="epoch_s", hue="dataset", marker="o", ax=axes[1])
    axes[1].set(ylabel="epoch time (s)")
    fig.suptitle("Figure 10: PCIe traffic and epoch time vs hot fraction (tiered loader)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    markdown = (
        f"# Figure 10: PCIe traffic and epoch time vs hot fraction\n\nMade by {command}; {caption(record)}.\n\n"
        f"{_cpu_warning(tiered)}Changes are relative to the 0% hot tier of the same dataset; measured PCIe bytes "
        "are NVML's receive counter, empty where unavailable.\n\n" + table.to_markdown(index=False, floatfmt=".3g") + "\n"
    )
    return write_table_and_figure(out_dir, "fig10", markdown, table, fig, record, index=False)


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


def figure11(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    plt, sns = pyplot()
    tiered = records[records["loader"] == "tiered"]
    if tiered.empty:
        raise ValueError("Figure 11 needs records of the tiered loader (tierbench run --experiment fig11 --gpus G)")
    keys = ["dataset", "device", "processes", "gpus", "sampling", "hot_fraction"]
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "gpu_bytes_resident"]
    table = tiered.groupby(keys)[columns].mean().reset_index()
    table["paper"] = table["sampling"].map(PAPER_FIG11).where(table["hot_fraction"] == table["hot_fraction"].min(), "")
    table["paper"] = table["paper"].fillna("")
    record = _record_of(tiered)

    long = table.assign(**{
        "multi-GPU hot tier (% of rows)": 100 * table["hot_fraction"],
        "GPU memory in use, all GPUs (GB)": table["gpu_bytes_resident"] / 1e9,
        "processes": table["processes"].astype(str),
    })
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, x in zip(axes, ["multi-GPU hot tier (% of rows)", "GPU memory in use, all GPUs (GB)"]):
        sns.lineplot(data=long, x=x, y="epoch_s", hue="sampling", style="processes", marker="o", ax=ax)
        ax.set(ylabel="epoch time (s)")
    fig.suptitle("Figure 11: epoch time vs multi-GPU hot tier, CPU vs distributed sampling (tiered loader)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    markdown = (
        f"# Figure 11: epoch time vs size of the multi-GPU hot tier\n\nMade by {command}; {caption(record)}.\n\n"
        f"{_multi_gpu_warning(tiered)}Each process holds an equal, interleaved share of the hot tier (no replicated "
        "tier, seeds/000 §5.5); times are the slowest process's; hit ratio counts rows served from any GPU's memory; "
        "GPU memory in use adds every process's feature shard and, with distributed sampling on GPUs, its part of the "
        "CSR.\n\n" + table.to_markdown(index=False, floatfmt=".3g") + "\n"
    )
    return write_table_and_figure(out_dir, "fig11", markdown, table, fig, record, index=False)


FIGURES = {"fig8": figure8, "fig10": figure10, "fig11": figure11}


def write_report(experiment: str, runs_dir="results/runs", out_dir=None, figure: str | None = None) -> list[Path]:
    """Tables and figures for ``experiment``'s records; ``figure`` picks fig8, fig10 or fig11 (default by name)."""
    path = Path(runs_dir) / f"{experiment}.csv"
    records = read_records(path)
    if records.empty:
        raise ValueError(f"no records in {path}: run `tierbench run --experiment {experiment}` first")
    figure = figure or (experiment if experiment in FIGURES else "fig8")
    out_dir = out_dir or f"results/{experiment}"
    command = f"`tierbench report --experiment {experiment} --figure {figure[3:]} --out {out_dir}` from {path}"
    return FIGURES[figure](records, out_dir, command)
