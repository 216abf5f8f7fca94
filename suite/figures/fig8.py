"""Figure 8 of Data Tiering (§5.3): epoch time by feature loader.

Made by ``tierbench run --experiment fig8`` and then ``tierbench report
--experiment fig8`` (``tox -e fig8``; on a GPU ``TIERBENCH_DEVICE=cuda tox -e
fig8``).  The same table reports the pipeline sweep (``tierbench run
--experiment pipeline``, with and without ``--pipeline``, then ``tierbench
report --experiment pipeline``) and any other sweep over several loaders.

One row per setting: epoch time per loader and dataset with its spread over
epochs, the sample, gather and train times, hit ratio and validation
accuracy; speedups over CPU gather and over plain zero-copy (``uva``) in the
same setting; and the gather time against its data-loading lower bound where
the records allow one (``suite.figures.sweep_tables``).  Loaders appear in
``suite.registry.LOADERS``'s order.  Paper: zero-copy is 2.5-4.6x faster
than CPU gather, tiering 1.6-2.1x faster than zero-copy.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.figures import sweep_tables as tables
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption
from suite.registry import LOADERS

PAPER = {"uva": "2.5-4.6x over CPU gather", "tiered": "1.6-2.1x over zero-copy"}
"""The paper's speedups, beside the loader they are of."""



TITLE = "epoch time by feature loader"


NOT_RUN = "not run"
"""What stands in a panel's slot of a loader that its dataset has no records of: the panels share one loader order,
and an empty slot would read as a bar of height zero."""


def mark_not_run(grid, plotted: pd.DataFrame, order: list[str]) -> None:
    """Write ``NOT_RUN`` into each dataset's panel at the loaders of ``order`` it has no rows of."""
    for dataset, ax in grid.axes_dict.items():
        present = set(plotted.loc[plotted["dataset"] == dataset, "loader"])
        for slot, label in enumerate(order):
            if label not in present:
                ax.text(slot, 0.03, NOT_RUN, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                        rotation=90, color="0.45", fontsize=10)


def render(records: Path, out: Path) -> list[Path]:
    """Write ``fig8.md``, ``fig8.csv`` and ``fig8.png`` into ``out`` from the sweep records at ``records``."""
    return draw(tables.read_sweep(records), out, tables.report_command(records, out, 8), Path(records).stem)


def draw(records: pd.DataFrame, out_dir, command: str, experiment: str = "fig8") -> list[Path]:
    """Write the figure's files into ``out_dir`` from ``records``, citing ``command`` as what made them; the title
    names Figure 8 for the sweep ``fig8`` and the sweep's own name for any other."""
    title = f"Figure 8: {TITLE}" if experiment == "fig8" else f"Sweep {experiment}: {TITLE} (Figure 8's table)"
    plt, sns = pyplot()
    records = tables.with_footprint(records)
    settings = tables.settings_of(records)
    disk = ["disk_bytes_read"] if "disk_bytes_read" in records and records["disk_bytes_read"].gt(0).any() else []
    columns = ["epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio", "pcie_payload_bytes", *disk,
               *tables.FOOTPRINT, "valid_accuracy"]
    table, bound_text = tables.cells_with_bound(records, settings, columns)
    same = [column for column in settings if column not in ("loader", "scorer", "hot_fraction", "host_fraction")]
    notes = []
    for reference in ("cpu-gather", "uva"):  # compared within the same setting: every setting but the loader's own
        rows = table[table["loader"] == reference]
        if rows.empty:
            notes.append(f"No {reference} records in this sweep: speedup over {reference} omitted.")
            continue
        base = tables.matching(table, rows, same, tables.SPREAD_COLUMNS[:3])
        table[f"speedup over {reference}"] = base["epoch_s"] / table["epoch_s"]
        table[f"within spread of {reference}"] = tables.within_spread(table, base)
        if base["epoch_s"].isna().any():
            notes.append(f"{int(base['epoch_s'].isna().sum())} rows have no {reference} cell in the same setting: "
                         f"their speedup over {reference} is empty.")
    table["paper"] = table["loader"].map(PAPER).fillna("")
    order = [name for name in LOADERS if name in set(table["loader"])]
    order += sorted(set(table["loader"]) - set(order))
    table["loader"] = pd.Categorical(table["loader"], order, ordered=True)
    table = table.sort_values(same + ["loader", "hot_fraction"]).reset_index(drop=True)
    record = tables.record_of(records)

    shown = tables.varying(table, settings)
    shown = [column for column in settings if column in shown or column == "loader"]
    display = table[shown].assign(**{"epoch s, mean (min-max)": tables.epoch_text(table)})
    display = pd.concat([display, table[columns[1:]]], axis=1)
    display = tables.bound_columns(display, table)
    for reference in ("cpu-gather", "uva"):
        if f"speedup over {reference}" in table:
            text = tables.flagged(table[f"speedup over {reference}"], "{:.2f}x", table[f"within spread of {reference}"])
            display[f"speedup over {reference}"] = text.where(table["loader"] != reference, "reference")
    display["paper"] = table["paper"]

    hue = tables.varying(records, settings, within=["dataset", "loader"])
    plotted, hue_order = tables.labelled(records, hue, "setting")
    labels = tables.loader_labels(records)
    plotted = plotted.assign(loader=plotted["loader"].map(labels))
    marks, errorbar = tables.spread_marks(table)
    datasets = records["dataset"].nunique()
    shown_order = [labels[name] for name in order if name in labels]
    grid = sns.catplot(data=plotted, x="loader", y="epoch_s", col="dataset", col_wrap=3 if datasets > 3 else None,
                       hue="setting" if hue else None, hue_order=hue_order, kind="bar", order=shown_order,
                       errorbar=errorbar, capsize=0.2, height=4.2, aspect=1.7, sharey=False)
    mark_not_run(grid, plotted, shown_order)
    grid.set_axis_labels("", "epoch time (s)")
    grid.set_xticklabels(rotation=20)
    grid.figure.suptitle(f"{title}\n{marks}")
    grid.figure.subplots_adjust(top=0.8 - 0.06 * marks.count("\n"), bottom=0.2)  # a line more for partial epochs
    markdown = (
        f"# {title}\n\nMade by {command}; {caption(record)}.\n\n{tables.cpu_warning(records)}"
        f"{tables.common_settings(records, settings)}{tables.regime_text(records)}{tables.spread_text(table)}"
        f"{tables.rounds_text(records, settings)}"
        "PCIe bytes per epoch are the model's (docs/design.md, Metrics). Speedup = mean epoch time of the reference loader in the same setting / this row's."
        + "".join(f" {note}" for note in notes) + "\n\n" + bound_text + tables.markdown_table(display)
    )
    return write_table_and_figure(out_dir, "fig8", markdown, table, grid.figure, record, index=False)
