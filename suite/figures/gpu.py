"""The GPU microbenchmarks' report, drawn from the records of ``suite.experiments.gpu``: ``microbench.md`` /
``.csv``, ``ratios.png``, ``alignment.png``, ``pcie-check.csv``, and ``reach.csv`` / ``reach.png`` where the records
have the reach study (PyTorch-Direct §3, Fig. 8)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.experiments.gpu import (
    CEILINGS_SHOWN,
    COLD_GATHER_BYTES,
    COLD_GOAL,
    HOT_GATHER_BYTES,
    HOT_GOAL,
    HOT_TABLE_BYTES,
    REACH,
    STEM,
    fastest_variants,
    read_records,
    recommend_default,
)
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table


def _figures(table: pd.DataFrame):
    plt, sns = pyplot()
    kernel = table[(table["path"] == "kernel") & table["study"].isin(["cold", "hot"])].copy()
    if kernel.duplicated(["study", "dtype", "row bytes", "variant"]).any():
        raise AssertionError("one bar per measurement: a (study, dtype, row bytes, variant) was measured twice")
    kernel["case"] = kernel["study"].map({"cold": "cold rows / cudaMemcpy H2D", "hot": "hot rows / index_select"})
    grid = sns.catplot(data=kernel, x="row bytes", y="ours / peer", hue="variant", col="dtype", row="case",
                       kind="bar", height=3.4, aspect=1.5, sharey="row", errorbar=None)
    for (case, _), ax in grid.axes_dict.items():
        ax.axhline(COLD_GOAL if case.startswith("cold") else HOT_GOAL, color="0.3", linestyle="--", linewidth=1)
    grid.figure.suptitle("Gather kernel vs its same-run peer (dashed: goal)")
    grid.figure.subplots_adjust(top=0.9, bottom=0.12)

    alignment = table[table["study"] == "alignment"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colours = dict(zip(alignment["variant"].unique(), sns.color_palette()))
    sns.lineplot(data=alignment, x="row bytes", y="ours / peer", hue="variant", palette=colours, marker="o", ax=ax)
    for variant, (low, high) in (("aligned", (0.88, 0.93)), ("naive", (0.78, 0.82))):
        ax.axhspan(low, high, color=colours.get(variant, "0.5"), alpha=0.15,
                   label=f"paper, {variant} ({low:.0%}-{high:.0%})")
    ax.set_xticks(sorted(alignment["row bytes"].unique()))
    ax.legend(fontsize=8)
    ax.set(title="Zero-copy share of cudaMemcpy vs row size (PyTorch-Direct Fig. 8)", ylabel="gather / cudaMemcpy H2D")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return grid.figure, fig


def _reach_figure(table: pd.DataFrame, zero_copy_ceiling: float):
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    order = table.sort_values("window bytes")["window"].unique()
    sns.lineplot(data=table, x="row bytes", y="ours (GB/s)", hue="window", hue_order=order, marker="o", ax=ax)
    ax.axhline(zero_copy_ceiling / 1e9, color="0.3", linestyle="--", linewidth=1, label="sequential zero-copy read")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(table["row bytes"].unique()), [str(v) for v in sorted(table["row bytes"].unique())])
    ax.minorticks_off()
    ax.legend(fontsize=8, title_fontsize=8, title="random rows from the table's")
    ax.set(title="Cold gather of random rows: bandwidth against their reach", xlabel="row bytes",
           ylabel="cold gather GB/s")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def render(records: Path, out: Path) -> list[Path]:
    """The markdown report, the CSVs and the figures in ``out`` from the records at ``records``."""
    speeds, checks, reached = read_records(records)
    table, facts, record = speeds.table, speeds.facts, speeds.provenance
    ceilings = facts["ceilings"]
    fastest = fastest_variants(table)
    default, why = recommend_default(fastest)
    ceiling_line = ", ".join(f"{key.removesuffix('_bytes_per_s').replace('_', ' ')} {ceilings[key] / 1e9:.4g} GB/s"
                             for key in CEILINGS_SHOWN)
    settings = (f"Host tables: views of one {facts['table_bytes'] >> 20} MiB page-aligned buffer registered once (row "
                f"0 on a 4 KiB page); cold gathers read {COLD_GATHER_BYTES >> 20} MiB of random rows, hot gathers "
                f"{HOT_GATHER_BYTES >> 20} MiB from a {HOT_TABLE_BYTES >> 20} MiB GPU table; best of {facts['repeat']} "
                "by CUDA events after a warm-up. Kernel: `CombinedTensor.launch_kernel` into a preallocated output; "
                "peers likewise write into preallocated memory.")
    columns = ["dtype", "row bytes", "variant", "ours (GB/s)", "peer (GB/s)", "ours / peer", "goal", "meets goal",
               "ours / ceiling", "ceiling goal", "meets ceiling goal"]
    sections = [
        f"# Gather microbenchmarks\n\nMade by `{facts['command']}`; {caption(record)}.\n\n{settings}\n\n"
        f"Ceilings measured in the same run: {ceiling_line}.\n\n"
        f"**The default variant should be: {default}** ({why}; now `{facts['default_variant']}`).\n",
    ]
    for title, studies, path in (("Cold rows: kernel", ["cold"], "kernel"), ("Hot rows: kernel", ["hot"], "kernel"),
                                 ("Full `loader.gather` (range check, traffic model, statistics)", ["cold", "hot"],
                                  "full gather")):
        part = table[(table["path"] == path) & table["study"].isin(studies)]
        shown = columns if len(studies) == 1 else ["study"] + columns
        sections.append(f"## {title}\n\nPeer: {', '.join(part['peer'].unique())}; ceiling: "
                        f"{', '.join(part['ceiling'].unique())}.\n\n"
                        + part[shown].to_markdown(index=False, floatfmt=".3g"))
    sections.append("## Fastest variant per case\n\n" + fastest.to_markdown(index=False, floatfmt=".3g"))
    alignment = table[table["study"] == "alignment"][["row bytes", "variant", "ours (GB/s)", "ours / peer", "paper"]]
    sections.append("## Alignment (PyTorch-Direct Fig. 8): share of cudaMemcpy bandwidth\n\n"
                    + alignment.to_markdown(index=False, floatfmt=".3g"))
    shown = checks.table.astype(object).where(checks.table.notna(), "")
    sections.append("## Measured (NVML) vs modelled PCIe bytes\n\nNVML counts the whole device over the link, "
                    "protocol overhead and other processes' traffic included; the memcpy row measures that overhead "
                    "for dense copies.\n\n" + shown.to_markdown(index=False, floatfmt=".4g"))
    if reached is not None:
        sections.append("## Reach: cold gather of random rows from the first 128 MiB, 1 GiB or the whole table\n\n"
                         "The default variant, fp32 rows; the same bytes are read in every case, only how far apart "
                         "the rows are changes. Ceiling: sequential zero-copy read.\n\n"
                         + reached.table.to_markdown(index=False, floatfmt=".3g"))
    ratios, alignment_figure = _figures(table)
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(speeds, out), out / "ratios.png", out / "alignment.png", copy_table(checks, out)]
    atomic.write_text(paths[0], "\n\n".join(sections) + "\n")
    save_figure(ratios, paths[2], record)
    save_figure(alignment_figure, paths[3], record)
    if reached is not None:
        paths += [copy_table(reached, out), out / f"{REACH}.png"]
        save_figure(_reach_figure(reached.table, ceilings["zero_copy_read_bytes_per_s"]), paths[-1], record)
    return paths
