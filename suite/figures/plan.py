"""``tierbench plan``: which placement policy and hot fraction to use within a GPU memory budget, and why.

For one dataset, the planner (``suite.policies.planner``) projects the
data-loading time of one epoch for every policy of the lab at every
capacity that fits the budget left after the model, and recommends the
fastest.  Written into ``--out``:

* ``plan.md`` / ``plan.csv``: per policy and capacity, hit ratio, PCIe bytes
  and rows admitted per epoch, and the projected seconds; the recommendation
  and the ceilings used (measured, or nominal and labelled so) above the
  table; where GPU epochs of the same device are committed, the projection
  beside their measured gather time, with its error;
* ``plan.png``: projected seconds per epoch against capacity, one line per
  policy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.errors import BadValue
from suite.experiments.policies import trace_options
from suite.figures.policies import display, summarise
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption, provenance
from suite.policies import planner
from suite.policies.lab import POLICIES, LabSettings, capacities_of, lab_traces, run_lab, scorer_order

PROJECTED = "projected s / epoch"
GB = 1e9


def _budget_rows(dataset, fanouts, max_rows: int, row_bytes: int, gpu_memory: int) -> tuple[int, int]:
    """``(model bytes, rows the rest holds)`` for ``gpu_memory`` bytes of GPU memory."""
    needed = planner.model_bytes(dataset.feature_dim, dataset.num_classes, len(fanouts), 256, max_rows, row_bytes)
    rows = min(dataset.num_nodes, (gpu_memory - needed) // row_bytes)
    if rows < 1:
        raise BadValue(f"{gpu_memory / GB:.1f} GB of GPU memory leaves no room for a cache: training {dataset.name} "
                       f"needs about {needed / GB:.2f} GB of it (model, minibatch, CUDA context)")
    return needed, int(rows)


def _comparison_text(comparison: pd.DataFrame, machine: planner.Machine, name: str, batch: int, fanouts) -> str:
    """The projection against the measured GPU epochs of the same dataset, batch and fanouts, as markdown."""
    if not machine.measured:
        return ("\nNo measured machine profile: nothing to compare with (`tierbench doctor` on a GPU machine, then "
                "`tierbench gpu-suite`).\n")
    if comparison.empty:
        return (f"\nNo GPU epochs of {name} at batch {batch} and fanouts {fanouts} measured on {machine.device} in "
                f"{planner.GPU_RESULTS}: nothing to compare with yet.\n")
    overhead = comparison.attrs["overhead"]
    if overhead is None:
        fitted = "Too few other GPU epochs to fit the per-minibatch and per-row overhead."
    else:
        others = ", ".join(comparison.attrs["fitted_on"])
        fitted = (f"The overhead, fitted by least squares on the GPU epochs of {others} (not {name}'s): "
                  f"{overhead[0] * 1e3:.3f} ms per minibatch + {overhead[1] * 1e9:.2f} ns per row.")
    return (f"\n## Projected against measured, {machine.device}\n\nGather time of the committed GPU epochs of {name} "
            f"(batch {batch}, fanouts {fanouts}; `uva` keeps nothing, `tiered` keeps the top wR-PR rows), against the "
            f"bound projected from this trace, and the bound plus the overhead every gather pays. {fitted} Error: "
            f"projected / measured - 1; the goal is within 15%.\n\n"
            + comparison.to_markdown(index=False, floatfmt=".3f") + "\n")


def plot(table: pd.DataFrame, title: str):
    plt, sns = pyplot()
    order = [POLICIES[p].label for p in POLICIES if POLICIES[p].label in set(table["policy"])]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    sns.lineplot(data=table, x="capacity (%)", y=PROJECTED, hue="policy", hue_order=order, style="kind", markers=True,
                 dashes=False, ax=ax)
    ax.set(ylabel="data loading s / epoch (projected bound)", xlabel="capacity (% of rows)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def plan_report(name: str, gpu_memory: str, out_dir, *, machine_path=None, epochs: int = 1, fanouts=None,
                batch_size: int | None = None, regime: str = "paper", seed: int = 0, trace_dir=None, ogb_root=None,
                progress: bool = True) -> tuple[list[Path], str]:
    """Plan ``name`` for ``gpu_memory`` (``40GB``, ``24GiB``); returns the files written and the recommendation."""
    budget = planner.parse_bytes(gpu_memory)
    machine = planner.machine(machine_path)
    batch, regime = regimes.resolve(name, regime, batch_size)
    fanouts = tuple(fanouts) if fanouts else regimes.default_fanouts(name)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    settings = LabSettings(name, fanouts, batch, regime, epochs, 1, seed)
    traces = lab_traces(dataset, settings, trace_dir=trace_dir, progress=progress)
    row_bytes = dataset.feature_dim * dataset.features.element_size()
    largest = int(np.diff(traces.trace.batch_offsets).max())
    model, fits = _budget_rows(dataset, fanouts, largest, row_bytes, budget)
    capacities = [c for c in capacities_of(dataset.num_nodes) if c < fits] + [fits]
    rows, facts = run_lab(dataset, settings, capacities, traces, progress=progress)
    summary = summarise(rows)
    summary["hits"] = summary["hits"] / epochs
    summary[PROJECTED] = planner.projected_seconds(summary["miss_bytes"], summary["hits"], summary["fill_rows"],
                                                   row_bytes, machine.ceilings)
    table = display(summary, row_bytes).assign(**{PROJECTED: summary[PROJECTED]})
    usable = table[table["kind"] != "bound"]
    best = usable.loc[usable[PROJECTED].idxmin()]
    bound = table[(table["policy"] == POLICIES["belady"].label) & (table["capacity (rows)"] == best["capacity (rows)"])]
    if fits == dataset.num_nodes:
        recommendation = (
            f"Recommended for {name} in {gpu_memory} of GPU memory: every one of its {fits:,} rows fits, so keep the "
            f"whole table there (the `in-memory` loader; any static policy at 100%): {best[PROJECTED]:.3f} s of data "
            f"loading per epoch (projected bound).")
    else:
        recommendation = (
            f"Recommended for {name} in {gpu_memory} of GPU memory: {best['policy']} with {best['capacity (rows)']:,} "
            f"rows ({best['capacity (%)']:.1f}% of them) in GPU memory, {best[PROJECTED]:.3f} s of data loading per "
            f"epoch (projected bound, hit ratio {best['hit ratio']:.3f}; Belady's bound at that capacity: "
            f"{float(bound[PROJECTED].iloc[0]):.3f} s).")
    record = provenance(device="cpu")
    markdown = (
        f"# Placement plan, {name}, {gpu_memory} of GPU memory\n\nMade by `tierbench plan --dataset {name} "
        f"--gpu-memory {gpu_memory}{'' if epochs == 1 else f' --epochs {epochs}'}"
        f"{trace_options(regime, batch, fanouts, name)} --out {out_dir}` on {caption(record)}.\n\n"
        f"**{recommendation}**\n\n"
        f"Ceilings: {machine.device}, {machine.source}: misses at {machine.ceilings[planner.ZERO_COPY] / GB:.1f} GB/s "
        f"(zero-copy read), hits and rows admitted at {machine.ceilings[planner.D2D] / GB:.0f} GB/s (D2D copy). "
        f"Budget: {budget / GB:.2f} GB, of which training needs about {model / GB:.2f} GB (GraphSAGE, hidden 256, "
        f"Adam; the largest minibatch's rows and activations; 1 GiB for the CUDA context), leaving "
        f"{fits:,} rows of {row_bytes} B. Trace: fanouts {fanouts}, {regimes.describe(name, batch, regime)}, "
        f"{epochs} epoch(s) of {facts['batches_per_epoch']:,} minibatches. Projected: PCIe bytes / zero-copy ceiling "
        f"+ (hits + rows admitted) x row bytes / D2D ceiling, per epoch: a bound that leaves out each gather's fixed "
        f"costs, the same for every policy.\n\n"
        + table.to_markdown(index=False, floatfmt=".3f", intfmt=",") + "\n"
    )
    comparison = pd.DataFrame()
    if machine.measured:
        comparison = planner.compare_measured(name, batch, fanouts, machine, facts["counts"],
                                              scorer_order(dataset, "wrpr"), facts["row_cost"], row_bytes,
                                              facts["batches_per_epoch"], float(np.mean(facts["reads_per_epoch"])))
    markdown += _comparison_text(comparison, machine, name, batch, fanouts)
    gpu = machine.device.removeprefix("cuda: ")
    fig = plot(table, f"{name} in {gpu_memory}: data loading per epoch projected with {gpu}'s ceilings")
    paths = write_table_and_figure(out_dir, "plan", markdown, table, fig, record, index=False)
    return paths, recommendation
