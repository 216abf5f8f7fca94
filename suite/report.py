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

Figures 8 and 10 also judge the gather time against the data-loading
lower bound (seeds/000 §4.1: hot rows from GPU memory, cold rows over PCIe;
seeds/004 §3.2: ``cudaMemcpy`` is the ceiling a zero-copy gather is measured
against): per epoch, ``gather bound s`` = cold bytes / the H2D memcpy ceiling
+ hot bytes / the D2D copy ceiling, both ceilings as ``tierbench doctor``
measured them into the machine profile each record names.  Cold bytes are the
modelled PCIe payload (``pcie_payload_bytes``: the dense bytes a DMA loader
copies, the 32-byte sectors a zero-copy gather reads); hot bytes are hit ratio
x rows gathered x row bytes.  ``gather / bound`` is the cell's mean gather time
over its mean bound (goal <= 1.2).  A cell has a bound only when every one of
its records ran on a GPU in one process, names a profile with measured
ceilings and carries ``rows_gathered`` and ``row_bytes``; where no cell has
one (every CPU run, records made before these columns) the columns are left
out and one line says why.

Numbers measured on a CPU are labelled so: there the "GPU" tier is host
memory, no byte crosses PCIe, and times compare code paths, not the paper's
hardware effect.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from .records import read_records, records_path
from .plotting import pyplot, write_table_and_figure
from .provenance import caption

PAPER_FIG8 = {"uva": "2.5-4.6x over CPU gather", "tiered": "1.6-2.1x over zero-copy"}
PAPER_FIG11 = {"cpu": "sharp drop at 5% hot, marginal beyond", "distributed": "notably faster than CPU sampling"}
PAPER_FIG10 = {0.05: "-33% time", 0.25: "-97% traffic, -42% time"}
LOADER_ORDER = ["cpu-gather", "uva-naive", "uva", "degree-cache", "gns", "tiered", "in-memory"]
SETTINGS = ["dataset", "device", "processes", "gpus", "pipeline", "sampling", "fanouts", "batch_size", "loader", "scorer",
            "hot_fraction"]
"""The columns that make two records different measurements: epochs are averaged within one value of each, never across."""
SPREAD_COLUMNS = ["epoch_s", "epoch_s min", "epoch_s max", "epochs"]
MARKS = "mean of the recorded epochs; error bars: fastest-slowest epoch"
BOUND = "gather bound s"
RATIO = "gather / bound"
BOUND_GOAL = 1.2
"""The goal for the gather time over its bound (the data-loading lower bound)."""
CEILINGS = ("h2d_memcpy_bytes_per_s", "d2d_copy_bytes_per_s")
"""The measured ceilings of a machine profile (``suite.ceilings``) the bound divides cold and hot bytes by."""
RERUN = "`tierbench run --rerun` records a cell again"
NO_CEILINGS = ("there are no measured ceilings for these records: run `tierbench doctor` on the machine that made them "
               f"before their sweep ({RERUN})")
SEVERAL_PROCESSES = "they ran in several processes, whose summed bytes no one GPU's ceilings bound"
ON_CPU = "they ran on a CPU, where no byte crosses PCIe (the machine's GPU ceilings do not apply)"
NO_ROW_COUNTS = f"they were recorded before rows_gathered and row_bytes existed ({RERUN})"
NO_ROWS = "no row was gathered"
BOUND_TEXT = (
    f"Gather bound (`{BOUND}`, per epoch) = cold bytes / the H2D memcpy ceiling + hot bytes / the D2D copy ceiling, "
    "with the ceilings `tierbench doctor` measured into the records' machine profile; cold bytes are the modelled PCIe "
    "payload (the dense bytes a DMA loader copies, the 32-byte sectors a zero-copy gather reads), hot bytes hit ratio "
    f"x rows gathered x row bytes. `{RATIO}` = mean gather time / mean bound; goal <= {BOUND_GOAL:g}."
)
_NAMES = {
    "dataset": "dataset {}".format,
    "loader": "loader {}".format,
    "device": "device {}".format,
    "hot_fraction": lambda value: f"hot {100 * value:g}%",
    "pipeline": lambda value: "pipeline" if value else "no pipeline",
    "sampling": "{} sampling".format,
    "processes": lambda value: f"{value} process" + ("" if value == 1 else "es"),
    "gpus": lambda value: f"{value} GPU" + ("" if value == 1 else "s"),
    "batch_size": "batch {}".format,
    "fanouts": "fanouts {}".format,
    "scorer": "scorer {}".format,
}


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


def _settings(records: pd.DataFrame) -> list[str]:
    return [column for column in SETTINGS if column in records.columns]


def _describe(column: str, value) -> str:
    """A setting's value as a reader names it: "hot 10%", "pipeline", "2 processes"."""
    return _NAMES.get(column, str)(value)


def _varying(records: pd.DataFrame, columns: list[str], within: list[str] | None = None) -> list[str]:
    """Those of ``columns`` that take more than one value in ``records`` (in some group of ``within``, if given)."""
    columns = [column for column in columns if column not in (within or [])]
    if not columns:
        return []
    if not within:
        return [column for column in columns if records[column].nunique(dropna=False) > 1]
    counts = records.groupby(within, dropna=False)[columns].nunique(dropna=False)
    return [column for column in columns if counts[column].max() > 1]


def _common_settings(records: pd.DataFrame, settings: list[str]) -> str:
    """The settings every record shares, as a sentence of the table's text ("" where none is shared)."""
    shared = [column for column in settings if records[column].nunique(dropna=False) == 1]
    if not shared:
        return ""
    return "Every row: " + ", ".join(_describe(column, records[column].iloc[0]) for column in shared) + ".\n\n"


def _labelled(records: pd.DataFrame, columns: list[str], name: str) -> tuple[pd.DataFrame, list[str] | None]:
    """``records`` with a column ``name`` naming each row's values of ``columns``, and those names in order.

    The figures separate the settings a plot has no axis for by this label (as hue or style), so that no mark
    averages records of different settings; without ``columns`` the records come back as they are, with ``None``.
    """
    if not columns:
        return records, None

    def text(row) -> str:
        return ", ".join(_describe(column, row[column]) for column in columns)

    order = [text(row) for _, row in records[columns].drop_duplicates().sort_values(columns).iterrows()]
    return records.assign(**{name: records.apply(text, axis=1)}), order


def _epoch_range(values):
    """The error bar of every figure: the fastest and the slowest recorded epoch (min-max)."""
    return values.min(), values.max()


def _per_cell(records: pd.DataFrame, settings: list[str], columns: list[str]) -> pd.DataFrame:
    """One row per cell (one value of every setting): ``columns`` averaged over its recorded epochs, and the spread
    of its epoch time: its fastest (``epoch_s min``) and slowest (``epoch_s max``) of ``epochs`` recorded epochs."""
    grouped = records.groupby(settings, sort=False, dropna=False)
    means = grouped[columns].mean()
    spread = grouped["epoch_s"].agg(["min", "max", "size"]).set_axis(SPREAD_COLUMNS[1:], axis=1)
    return pd.concat([means[["epoch_s"]], spread, means.drop(columns="epoch_s")], axis=1).reset_index()


def _matching(table: pd.DataFrame, reference: pd.DataFrame, same: list[str], columns: list[str]) -> pd.DataFrame:
    """``reference``'s ``columns`` for each row of ``table``: from its row with the same values of ``same``, else NaN."""
    matched = table[same].merge(reference[same + columns], on=same, how="left", validate="many_to_one")
    return matched[columns].set_axis(table.index)


def _within_spread(table: pd.DataFrame, reference: pd.DataFrame) -> pd.Series:
    """Whether each cell's epoch times overlap its reference's (min-max): a difference smaller than the noise."""
    overlap = (reference["epoch_s min"] <= table["epoch_s max"]) & (table["epoch_s min"] <= reference["epoch_s max"])
    return overlap.astype("boolean").mask(reference["epoch_s"].isna())


def _spread_text(table: pd.DataFrame) -> str:
    """What the numbers and their spread are, for a table's text."""
    fewest, most = int(table["epochs"].min()), int(table["epochs"].max())
    epochs = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    text = (
        f"One row per setting: its numbers are the mean over its {epochs} recorded epochs; the epoch time's spread, in "
        "parentheses and as the figure's error bars, is its fastest and slowest epoch (min-max). A difference whose two "
        "cells' spreads overlap is marked (noise): it is smaller than the variation from epoch to epoch."
    )
    if fewest < 2:
        text += (" A cell with one recorded epoch has no spread, so a difference from it cannot be told from noise: "
                 "record more epochs (`--epochs`).")
    return text + "\n\n"


def _epoch_text(table: pd.DataFrame) -> pd.Series:
    return table.apply(lambda row: f"{row['epoch_s']:.3g} ({row['epoch_s min']:.3g}-{row['epoch_s max']:.3g})", axis=1)


def _flagged(values: pd.Series, fmt: str, noise: pd.Series | None = None) -> pd.Series:
    """``values`` as ``fmt`` makes them text, "(noise)" after those ``noise`` marks as within the spread, empty where
    there is nothing to compare with."""
    noise = noise.fillna(False) if noise is not None else pd.Series(False, index=values.index)
    return pd.Series(["" if pd.isna(value) else fmt.format(value) + (" (noise)" if flag else "")
                      for value, flag in zip(values, noise)], index=values.index)


def _measured_ceilings(path) -> tuple[float, float] | None:
    """The H2D memcpy and D2D copy ceilings (bytes/s) of the machine profile at ``path``; ``None`` where there is
    no such file (a path is relative to the working directory, as ``suite.provenance`` writes it) or it holds no
    measured ceilings (a CPU machine's, or one made with ``--no-measure``)."""
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    try:
        profile = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not a machine profile of tierbench doctor ({err}); run `tierbench doctor` "
                         "again to rewrite it") from None
    ceilings = profile.get("ceilings") if isinstance(profile, dict) else None
    if not isinstance(ceilings, dict):
        return None
    values = [ceilings.get(name) for name in CEILINGS]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in values):
        return values[0], values[1]
    return None


def _with_bound(records: pd.DataFrame, settings: list[str]) -> tuple[pd.DataFrame, str]:
    """``records`` with each one's data-loading lower bound in seconds as column ``BOUND``, and the sentence the
    table's text gives it.

    A cell's records all have a bound or none has (``_per_cell`` averages what it is given); where no cell has
    one the column is left out and the sentence says why.
    """
    def column(name):
        values = records[name] if name in records else pd.Series(math.nan, index=records.index)
        return pd.to_numeric(values, errors="coerce").astype(float)

    profiles = records["machine_profile"] if "machine_profile" in records else pd.Series(None, index=records.index)
    ceilings = {path: _measured_ceilings(path) for path in profiles.dropna().unique()}
    measured = profiles.map(lambda path: ceilings.get(path) if isinstance(path, str) else None)
    h2d = measured.map(lambda pair: math.nan if pair is None else pair[0]).astype(float)
    d2d = measured.map(lambda pair: math.nan if pair is None else pair[1]).astype(float)
    hot_bytes = column("hit_ratio") * column("rows_gathered") * column("row_bytes")
    bound = column("pcie_payload_bytes") / h2d + hot_bytes / d2d
    reasons = pd.Series("", index=records.index).mask(bound.isna(), NO_ROWS)
    reasons = reasons.mask(column("rows_gathered").isna() | column("row_bytes").isna(), NO_ROW_COUNTS)
    reasons = reasons.mask(records["device"].astype(str).str.startswith("cpu"), ON_CPU)
    reasons = reasons.mask(measured.isna(), NO_CEILINGS)
    reasons = reasons.mask(column("processes") > 1, SEVERAL_PROCESSES)
    bound = bound.mask(reasons != "")
    complete = bound.notna().groupby([records[name] for name in settings], dropna=False, sort=False).transform("all")
    bound = bound.where(complete)
    why = "; ".join(reason for reason in dict.fromkeys(reasons[~complete]) if reason)
    if bound.isna().all():
        return records, f"No gather bound, as {why}.\n\n"
    cells = records[~complete].groupby(settings, dropna=False).ngroups
    missing = f" {cells} rows have no bound, as {why}." if cells else ""
    return records.assign(**{BOUND: bound}), f"{BOUND_TEXT}{missing}\n\n"


def _bound_columns(display: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``display`` with the bound and the gather time over it after its ``gather_s``, where ``table`` has them."""
    if BOUND not in table:
        return display
    at = display.columns.get_loc("gather_s") + 1
    display.insert(at, BOUND, table[BOUND])
    display.insert(at + 1, RATIO, table[RATIO])
    return display


def _markdown(display: pd.DataFrame) -> str:
    """``display`` as a markdown table, numbers to 3 digits, missing values (measured counters, say) empty."""
    return display.astype(object).where(display.notna(), None).to_markdown(index=False, floatfmt=".3g", missingval="") + "\n"


def figure8(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    plt, sns = pyplot()
    settings = _settings(records)
    bounded, bound_text = _with_bound(records, settings)
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "valid_accuracy"]
    table = _per_cell(bounded, settings, columns + [BOUND] * (BOUND in bounded))
    if BOUND in table:
        table[RATIO] = table["gather_s"] / table[BOUND]
    same = [column for column in settings if column not in ("loader", "scorer", "hot_fraction")]
    notes = []
    for reference in ("cpu-gather", "uva"):  # compared within the same setting: every setting but the loader's own
        rows = table[table["loader"] == reference]
        if rows.empty:
            notes.append(f"No {reference} records in this sweep: speedup over {reference} omitted.")
            continue
        base = _matching(table, rows, same, SPREAD_COLUMNS[:3])
        table[f"speedup over {reference}"] = base["epoch_s"] / table["epoch_s"]
        table[f"within spread of {reference}"] = _within_spread(table, base)
        if base["epoch_s"].isna().any():
            notes.append(f"{int(base['epoch_s'].isna().sum())} rows have no {reference} cell in the same setting: "
                         f"their speedup over {reference} is empty.")
    table["paper"] = table["loader"].map(PAPER_FIG8).fillna("")
    order = [name for name in LOADER_ORDER if name in set(table["loader"])]
    order += sorted(set(table["loader"]) - set(order))
    table["loader"] = pd.Categorical(table["loader"], order, ordered=True)
    table = table.sort_values(same + ["loader", "hot_fraction"]).reset_index(drop=True)
    record = _record_of(records)

    shown = _varying(table, settings)
    shown = [column for column in settings if column in shown or column == "loader"]
    display = table[shown].assign(**{"epoch s, mean (min-max)": _epoch_text(table)})
    display = pd.concat([display, table[["sample_s", "gather_s", "train_s", "hit_ratio", "valid_accuracy"]]], axis=1)
    display = _bound_columns(display, table)
    for reference in ("cpu-gather", "uva"):
        if f"speedup over {reference}" in table:
            text = _flagged(table[f"speedup over {reference}"], "{:.2f}x", table[f"within spread of {reference}"])
            display[f"speedup over {reference}"] = text.where(table["loader"] != reference, "reference")
    display["paper"] = table["paper"]

    hue = _varying(records, settings, within=["dataset", "loader"])
    plotted, hue_order = _labelled(records, hue, "setting")
    datasets = records["dataset"].nunique()
    grid = sns.catplot(data=plotted, x="loader", y="epoch_s", col="dataset", col_wrap=3 if datasets > 3 else None,
                       hue="setting" if hue else None, hue_order=hue_order, kind="bar", order=order,
                       errorbar=_epoch_range, capsize=0.2, height=4.2, aspect=1.7, sharey=False)
    grid.set_axis_labels("", "epoch time (s)")
    grid.set_xticklabels(rotation=20)
    grid.figure.suptitle(f"Figure 8: epoch time by feature loader\n{MARKS}")
    grid.figure.subplots_adjust(top=0.8, bottom=0.2)
    markdown = (
        f"# Figure 8: epoch time by feature loader\n\nMade by {command}; {caption(record)}.\n\n{_cpu_warning(records)}"
        f"{_common_settings(records, settings)}{_spread_text(table)}"
        "Speedup = mean epoch time of the reference loader in the same setting / this row's."
        + "".join(f" {note}" for note in notes) + "\n\n" + bound_text + _markdown(display)
    )
    return write_table_and_figure(out_dir, "fig8", markdown, table, grid.figure, record, index=False)


def figure10(records: pd.DataFrame, out_dir, command: str) -> list[Path]:
    plt, sns = pyplot()
    tiered = records[records["loader"] == "tiered"]
    if tiered.empty:
        raise ValueError("Figure 10 needs records of the tiered loader (tierbench run --experiment fig10)")
    settings = _settings(tiered)
    bounded, bound_text = _with_bound(tiered, settings)
    columns = ["epoch_s", "pcie_payload_bytes", "pcie_rx_bytes_measured", "hit_ratio"]
    table = _per_cell(bounded, settings, columns + ["gather_s", BOUND] * (BOUND in bounded))
    same = [column for column in settings if column != "hot_fraction"]
    table = table.sort_values(settings).reset_index(drop=True)
    if BOUND in table:
        table[RATIO] = table["gather_s"] / table[BOUND]
    zero = table[table["hot_fraction"] == 0.0]
    base = _matching(table, zero, same, SPREAD_COLUMNS[:3] + ["pcie_payload_bytes"])
    table["traffic vs 0% (model)"] = table["pcie_payload_bytes"] / base["pcie_payload_bytes"] - 1.0
    table["time vs 0%"] = table["epoch_s"] / base["epoch_s"] - 1.0
    table["time vs 0% within spread"] = _within_spread(table, base)
    table["paper"] = table["hot_fraction"].round(2).map(PAPER_FIG10).fillna("")
    missing = int(base["epoch_s"].isna().sum())
    note = f" {missing} rows have no 0% hot cell in the same setting: their changes are empty." if missing else ""
    record = _record_of(tiered)

    shown = [column for column in settings if column in _varying(table, settings) or column == "hot_fraction"]
    display = table[shown].assign(**{"epoch s, mean (min-max)": _epoch_text(table)})
    display = pd.concat([display, table[["pcie_payload_bytes", "pcie_rx_bytes_measured", "hit_ratio"]]], axis=1)
    if BOUND in table:
        display = _bound_columns(display.assign(gather_s=table["gather_s"]), table)
    reference = table["hot_fraction"] == 0.0
    display["traffic vs 0% (model)"] = _flagged(table["traffic vs 0% (model)"], "{:+.0%}").mask(reference, "reference")
    display["time vs 0%"] = _flagged(table["time vs 0%"], "{:+.0%}", table["time vs 0% within spread"]).mask(
        reference, "reference")
    display["paper"] = table["paper"]

    lines = _varying(tiered, [column for column in settings if column != "hot_fraction"])
    plotted, hue_order = _labelled(tiered, lines, "setting")
    plotted = plotted.assign(**{
        "hot fraction (%)": 100 * plotted["hot_fraction"],
        "PCIe payload (GB, model)": plotted["pcie_payload_bytes"] / 1e9,
        "PCIe RX (GB, NVML)": plotted["pcie_rx_bytes_measured"] / 1e9,
    })
    style = dict(hue="setting" if lines else None, hue_order=hue_order, errorbar=_epoch_range, err_style="bars")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    sns.lineplot(data=plotted, x="hot fraction (%)", y="PCIe payload (GB, model)", marker="o", ax=axes[0], **style)
    if plotted["PCIe RX (GB, NVML)"].notna().any():
        sns.lineplot(data=plotted, x="hot fraction (%)", y="PCIe RX (GB, NVML)", marker="x", linestyle="--", ax=axes[0],
                     legend=False, **style)
    sns.lineplot(data=plotted, x="hot fraction (%)", y="epoch_s", marker="o", ax=axes[1], **style)
    axes[1].set(ylabel="epoch time (s)")
    fig.suptitle(f"Figure 10: PCIe traffic and epoch time vs hot fraction (tiered loader)\n{MARKS}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    markdown = (
        f"# Figure 10: PCIe traffic and epoch time vs hot fraction\n\nMade by {command}; {caption(record)}.\n\n"
        f"{_cpu_warning(tiered)}{_common_settings(tiered, settings)}{_spread_text(table)}"
        f"Changes are relative to the 0% hot tier of the same setting;{note} measured PCIe bytes are NVML's receive "
        "counter, empty where unavailable.\n\n" + bound_text + _markdown(display)
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
    settings = _settings(tiered)
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", "gpu_bytes_resident"]
    table = _per_cell(tiered, settings, columns).sort_values(settings).reset_index(drop=True)
    table["paper"] = table["sampling"].map(PAPER_FIG11).where(table["hot_fraction"] == table["hot_fraction"].min(), "")
    table["paper"] = table["paper"].fillna("")
    record = _record_of(tiered)

    shown = _varying(table, settings)
    shown = [column for column in settings if column in shown or column in ("sampling", "hot_fraction")]
    display = table[shown].assign(**{"epoch s, mean (min-max)": _epoch_text(table)})
    display = pd.concat([display, table[columns[1:]], table[["paper"]]], axis=1)

    styles = _varying(tiered, [column for column in settings if column not in ("sampling", "hot_fraction")])
    plotted, style_order = _labelled(tiered, styles, "setting")
    plotted = plotted.assign(**{
        "multi-GPU hot tier (% of rows)": 100 * plotted["hot_fraction"],
        "GPU memory in use, all GPUs (GB)": plotted["gpu_bytes_resident"] / 1e9,
    })
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, x in zip(axes, ["multi-GPU hot tier (% of rows)", "GPU memory in use, all GPUs (GB)"]):
        sns.lineplot(data=plotted, x=x, y="epoch_s", hue="sampling", style="setting" if styles else None,
                     style_order=style_order, marker="o", errorbar=_epoch_range, err_style="bars", ax=ax)
        ax.set(ylabel="epoch time (s)")
    fig.suptitle(f"Figure 11: epoch time vs multi-GPU hot tier, CPU vs distributed sampling (tiered loader)\n{MARKS}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    markdown = (
        f"# Figure 11: epoch time vs size of the multi-GPU hot tier\n\nMade by {command}; {caption(record)}.\n\n"
        f"{_multi_gpu_warning(tiered)}{_common_settings(tiered, settings)}{_spread_text(table)}"
        "Each process holds an equal, interleaved share of the hot tier (no replicated tier, seeds/000 §5.5); times "
        "are the slowest process's; hit ratio counts rows served from any GPU's memory; GPU memory in use adds every "
        "process's feature shard and, with distributed sampling on GPUs, its part of the CSR.\n\n" + _markdown(display)
    )
    return write_table_and_figure(out_dir, "fig11", markdown, table, fig, record, index=False)


FIGURES = {"fig8": figure8, "fig10": figure10, "fig11": figure11}


def write_report(experiment: str, runs_dir="results/runs", out_dir=None, figure: str | None = None) -> list[Path]:
    """Tables and figures for ``experiment``'s records; ``figure`` picks fig8, fig10 or fig11 (default by name)."""
    path = records_path(runs_dir, experiment)
    records = read_records(path)
    if records.empty:
        raise ValueError(f"no records in {path}: run `tierbench run --experiment {experiment}` first")
    figure = figure or (experiment if experiment in FIGURES else "fig8")
    out_dir = out_dir or f"results/{experiment}"
    command = f"`tierbench report --experiment {experiment} --figure {figure[3:]} --out {out_dir}` from {path}"
    return FIGURES[figure](records, out_dir, command)
