"""``tierbench datasets cost``'s report, drawn from the records of ``suite.experiments.build_cost``:
``build-cost.md`` / ``.csv`` / ``.png``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.experiments.build_cost import (
    COSTS,
    LINEAR,
    MIN_FIT_POINTS,
    SCORER,
    STEM,
    TARGET_CORES,
    TARGET_MEMORY_BYTES,
    read_records,
)
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import PROVENANCE_COLUMNS, copy_table


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the markdown shows it: GB and seconds, one row per dataset and core count."""
    shown = pd.DataFrame({
        "dataset": table["dataset"],
        "rows": table["rows"],
        "cores": table["cores"],
        "nodes": table["nodes"].map("{:,.0f}".format),
        "list entries": table["list_entries"].map("{:,.0f}".format),
        "size on disk (GB)": table["size_on_disk_bytes"] / 1e9,
        "build (s)": table["build_s"],
        "build peak (GB)": table["build_peak_bytes"] / 1e9,
        "prepare (s)": table["prepare_s"],
        "prepare peak (GB)": table["prepare_peak_bytes"] / 1e9,
    })
    shown["prepare peak / size"] = table["prepare_peak_bytes"] / table["size_on_disk_bytes"]
    shown["load before build, prepare"] = [f"{b:.1f}, {p:.1f}" if pd.notna(b) else "" for b, p in
                                           zip(table["load_before_build"], table["load_before_prepare"])]
    return shown.set_index("dataset")


def _figure(table: pd.DataFrame):
    """Time and peak memory of build and prepare against nodes, log-log, measured and projected."""
    plt, sns = pyplot()
    long = pd.concat([
        pd.DataFrame({"nodes": table["nodes"], "step": step, "how": table["rows"] + ", " + table["cores"].astype(str)
                      + " cores", "time (s)": table[f"{step}_s"], "peak memory (GB)": table[f"{step}_peak_bytes"] / 1e9})
        for step in ("build", "prepare")
    ], ignore_index=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, y in zip(axes, ("time (s)", "peak memory (GB)")):
        sns.scatterplot(data=long, x="nodes", y=y, hue="step", style="how", s=60, ax=ax)
        ax.set(xscale="log", yscale="log", title=f"{y.split(' (')[0]} against nodes")
    axes[1].axhline(TARGET_MEMORY_BYTES / 1e9, color="0.5", linestyle=":", linewidth=1)
    axes[0].get_legend().remove()
    axes[1].legend(fontsize=7, loc="upper left")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def _linear_notes(table: pd.DataFrame) -> list[str]:
    """What the report says of the paper-scale rows: projected linearly, not built."""
    if "projected_from" not in table:  # records without paper-scale rows
        return []
    linear = table[table["rows"] == LINEAR]
    return [f"{name}: a projection of the CPU builder, not a build (it is built on the GPU machine: `tierbench "
            f"gpu-suite`'s datasets-{name} step): {source}'s list entries per second, and its bytes scaled by the "
            f"arrays' bytes (the feature table is never written to disk)." for name, source in zip(linear["dataset"], linear["projected_from"])]


def _notes(table: pd.DataFrame, facts: dict) -> list[str]:
    """What the report says under its table: Amdahl's factors, the fitted model, the projected peaks too large."""
    if facts["coefficients"] is None:
        return [f"No projection: it needs measured rows of at least {MIN_FIT_POINTS} datasets on all cores."]
    factors = facts["factors"]
    notes = [f"Amdahl's law on {facts['one_thread']} at 1 and {facts['cores']} threads: a time here times "
             f"{factors['build_s']:.2f} (build) and {factors['prepare_s']:.2f} (prepare) on {TARGET_CORES} cores."
             if factors else f"No one-thread run (--one-thread): no projection to {TARGET_CORES} cores."]
    coefficients = pd.DataFrame.from_dict(facts["coefficients"], orient="index",
                                          columns=["c0", "c1 (per entry)", "c2 (per feature byte)"]).loc[list(COSTS)]
    notes.append("Fitted over the measured rows on all cores, cost = c0 + c1 * E + c2 * F (E list entries, "
                 "F feature bytes; times in s, sizes and peaks in bytes):\n\n" + coefficients.to_markdown(floatfmt=".3g"))
    projected = table[table["rows"] == "projected"]
    over = projected[projected["build_peak_bytes"].combine(projected["prepare_peak_bytes"], max) > TARGET_MEMORY_BYTES]
    notes.append(f"Projected peaks above the {TARGET_MEMORY_BYTES / 1e9:.0f} GB of the {TARGET_CORES}-core machine: "
                 + (", ".join(over["dataset"]) if len(over) else "none") + ".")
    return notes


def render(records: Path, out: Path) -> list[Path]:
    """``build-cost.md``, ``.csv`` and ``.png`` in ``out`` from the records at ``records``."""
    measured = read_records(records)
    facts, record = measured.facts, measured.provenance
    table = measured.table.drop(columns=list(PROVENANCE_COLUMNS), errors="ignore")
    markdown = (
        f"# What building and preparing a dataset costs\n\nMade by `{facts['command']}`; {caption(record)}.\n"
        f"This machine: {facts['cpu_count']} cores, {facts['memory_bytes'] / 1e9:.0f} GB of memory.\n\n"
        "Measured rows: wall time of the child process that ran `tierbench datasets generate NAME --force` (build) "
        f"and then `tierbench prepare --dataset NAME --scorer {SCORER} --force` (prepare), start to exit; peak: its "
        "`ru_maxrss` from `os.wait4` (resident memory, mapped file pages included); size: the built entry on disk. "
        "The load average before each child shows other work on the machine. Projected rows: the fitted model "
        f"below; on {TARGET_CORES} cores scaled by Amdahl's law (an assumption: see `suite/experiments/build_cost.py`).\n\n"
        + _shown(table).to_markdown(floatfmt=".3g") + "\n\n" + "\n\n".join(_linear_notes(table) + _notes(table, facts))
        + "\n"
    )
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(measured, out), out / f"{STEM}.png"]
    atomic.write_text(paths[0], markdown)
    save_figure(_figure(table), paths[2], record)
    return paths
