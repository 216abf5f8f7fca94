"""``tierbench costs``' report, drawn from the records of ``suite.experiments.costs``: ``costs.md`` and ``costs.png``,
each stage's seconds per minibatch against the batch size with the fixed cost fitted per stage; where operators were
profiled (``--operators``), ``costs-operators.png`` beside: what each stage of the smallest minibatches issues,
operator by operator, on the host and on the device (the fixed costs of PyTorch-Direct §3.3 taken apart)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.experiments.costs import (
    OPERATORS_STEM,
    STEM,
    loaded_by,
    outside_operators,
    read_operators,
    read_records,
    sampled_by,
    trained_by,
)
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table

STAGE_SECONDS = {"sample": "sample_s", "gather": "gather_s", "gather above the bound": "gather_excess_s",
                 "train": "train_s"}
"""The stages drawn, and their records' column."""
MEDIANS_FORMAT = (".0f", ".0f", ".0f", *[".4g"] * len(STAGE_SECONDS))
"""Batch sizes, rows and edges whole; milliseconds to four figures."""
TOP_OPERATORS = 8
"""The operators shown per stage (by host time), beside the stage's time outside operators."""


def medians(table: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: the medians of the minibatches' input rows, sampled edges and each stage's milliseconds."""
    grouped = table.groupby("batch_size")
    shown = grouped[["input_rows", "sampled_edges"]].median()
    for stage, column in STAGE_SECONDS.items():
        shown[f"{stage} ms"] = grouped[column].median() * 1e3
    return shown.reset_index()


def stage_totals(operators: pd.DataFrame) -> pd.DataFrame:
    """Per batch size and stage: the top-level operators a minibatch issues, its host time in and outside them, and
    the kernels (copies included) and device time of all its device work, in milliseconds (empty where no device was
    profiled)."""
    keys = ["batch_size", "stage"]
    every = operators.groupby(keys, sort=False)
    outside = operators[outside_operators(operators)].set_index(keys)["host_us"]
    totals = pd.DataFrame({
        "operators": operators[~outside_operators(operators)].groupby(keys, sort=False)["calls"].sum(),
        "host ms in operators": (every["host_us"].sum() - outside) / 1e3,
        "host ms outside": outside / 1e3,
        "kernels": every["kernels"].sum(min_count=1),
        "device ms": every["device_us"].sum(min_count=1) / 1e3,
    })
    return totals.reindex(every.size().index).reset_index()


def top_operators(operators: pd.DataFrame) -> pd.DataFrame:
    """The smallest batch size's ``TOP_OPERATORS`` operators of each stage by host time, and its row of time outside
    operators."""
    smallest = operators[operators["batch_size"] == operators["batch_size"].min()]
    inside = smallest[~outside_operators(smallest)]
    top = inside.sort_values("host_us", ascending=False, kind="stable").groupby("stage").head(TOP_OPERATORS)
    shown = pd.concat([top, smallest[outside_operators(smallest)]], ignore_index=True)
    order = {stage: i for i, stage in enumerate(dict.fromkeys(smallest["stage"]))}
    return shown.iloc[shown["stage"].map(order).argsort(kind="stable")].reset_index(drop=True)


def render(records: Path, out: Path) -> list[Path]:
    """``costs.md``, the records' CSVs and ``costs.png`` (and ``costs-operators.png``) in ``out``."""
    measured = read_records(records)
    operators = read_operators(measured.path)
    facts, record = measured.facts, measured.provenance
    fits = pd.DataFrame([{"stage": stage, "ms per minibatch": fit["a_s"] * 1e3, "ns per row": fit["b_s"] * 1e9,
                          "row": fit["per"]} for stage, fit in facts["fits"].items()])
    clock = "CUDA events" if facts["device"].startswith("cuda") else "the host clock"
    fanouts = ",".join(map(str, facts["fanouts"]))
    settings = (f"Minibatches sampled by {sampled_by(facts)}, gathered by {loaded_by(facts)}, trained by the "
                f"{trained_by(facts)}, fanouts {fanouts}; {facts['repeats']} timed per batch size after an untimed "
                f"one, each stage on its own by {clock}. The gather above the bound is its time above "
                f"{facts['gather_above']}.")
    parts = [f"# Fixed cost of one minibatch, {facts['dataset']}", f"Made by `{facts['command']}`; {caption(record)}.",
             settings, "## Medians per batch size",
             medians(measured.table).to_markdown(index=False, floatfmt=MEDIANS_FORMAT),
             "## Fitted lines: seconds = a + b x rows", fits.to_markdown(index=False, floatfmt=".4g")]
    out.mkdir(parents=True, exist_ok=True)
    paths = [copy_table(measured, out), _stages_figure(measured, out)]
    if operators is not None:
        profiled = (f"{facts['operators']} more minibatches of each size run under torch's profiler, untimed "
                    "otherwise; per minibatch, the top-level operators each stage issues (inclusive times: an "
                    "operator's host time spans the operators it calls, its device time their kernels), and the "
                    "stage's time outside them: on the host Python, the CPU sampler and waits, on the device the "
                    "work within the stage that the profiler tied to no operator.")
        parts += ["## Operators per stage", profiled,
                  stage_totals(operators.table).dropna(axis=1, how="all").to_markdown(index=False, floatfmt=".4g"),
                  f"### The top operators of a minibatch of {int(operators.table['batch_size'].min())} seeds",
                  top_operators(operators.table).drop(columns="batch_size").dropna(axis=1, how="all")
                  .to_markdown(index=False, floatfmt=".4g")]
        paths += [copy_table(operators, out), _operators_figure(operators, out)]
    else:  # an earlier report's operators would sit beside a report of records without them
        for stale in (out / f"{OPERATORS_STEM}.csv", out / f"{OPERATORS_STEM}.png"):
            stale.unlink(missing_ok=True)
    markdown = out / f"{STEM}.md"
    atomic.write_text(markdown, "\n\n".join(parts) + "\n")
    return [markdown, *paths]


def _stages_figure(measured, out: Path) -> Path:
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    plt, sns = pyplot()
    drawn = [column for stage, column in STAGE_SECONDS.items()
             if column != "gather_excess_s" or measured.table["gather_bound_s"].gt(0).any()]  # else it is the gather
    long = measured.table.melt(id_vars="batch_size", value_vars=drawn, var_name="stage", value_name="seconds")
    long["stage"] = long["stage"].map({column: stage for stage, column in STAGE_SECONDS.items()})
    long["ms"] = long["seconds"] * 1e3
    fig, ax = plt.subplots(figsize=(9, 4.2))
    sns.lineplot(long, x="batch_size", y="ms", hue="stage", estimator="median", errorbar=("pi", 100), marker="o",
                 ax=ax)
    ax.set(xscale="log", yscale="log", xlabel="seeds per minibatch", ylabel="ms per minibatch (median; band: all)",
           title=f"Stages of one minibatch, {measured.facts['dataset']}\n{loaded_by(measured.facts)}, "
                 f"{sampled_by(measured.facts)}, {trained_by(measured.facts)}")
    for axis, subs in ((ax.xaxis, (1.0,)), (ax.yaxis, (1.0, 2.0, 5.0))):
        axis.set_major_locator(LogLocator(subs=subs))
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1, 1), frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    png = out / f"{STEM}.png"
    save_figure(fig, png, measured.provenance)
    return png


def _operators_figure(operators, out: Path) -> Path:
    plt, sns = pyplot()
    top = top_operators(operators.table)
    timed = ["host_us"] + (["device_us"] if top["device_us"].notna().any() else [])  # a CPU's profile: the host's
    long = top.melt(id_vars=["stage", "operator"], value_vars=timed, var_name="time", value_name="µs")
    long["time"] = long["time"].map({"host_us": "host", "device_us": "device"})
    stages = list(dict.fromkeys(top["stage"]))
    fig, axes = plt.subplots(len(stages), 1, figsize=(10, 1.2 + 0.3 * len(top)), squeeze=False, sharex=True,
                             height_ratios=[int((top["stage"] == s).sum()) for s in stages])
    for ax, stage in zip(axes[:, 0], stages):
        sns.barplot(long[long["stage"] == stage], y="operator", x="µs", hue="time", ax=ax, legend=ax is axes[0, 0])
        ax.set(ylabel=stage, xlabel="")
    axes[-1, 0].set_xlabel("µs per minibatch (inclusive)")
    axes[0, 0].set_title(f"What a minibatch of {int(operators.table['batch_size'].min())} seeds issues, "
                         f"{operators.facts['dataset']}")
    sns.move_legend(axes[0, 0], "upper left", bbox_to_anchor=(1, 1), frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    png = out / f"{OPERATORS_STEM}.png"
    save_figure(fig, png, operators.provenance)
    return png
