"""``tierbench plan``'s report, drawn from the records of ``suite.experiments.plan``.

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

import pandas as pd

from suite.experiments.plan import PROJECTED, STEM, read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table
from suite.policies import planner
from suite.policies.lab import POLICIES

GB = 1e9


def _comparison_text(comparison: pd.DataFrame, facts: dict) -> str:
    """The projection against the measured GPU epochs of the same dataset, batch and fanouts, as markdown."""
    name, batch, fanouts = facts["name"], facts["batch"], tuple(facts["fanouts"])
    if not facts["measured_machine"]:
        return ("\nNo measured machine profile: nothing to compare with (`tierbench doctor` on a GPU machine, then "
                "`tierbench gpu-suite`).\n")
    sampled = _sampled(facts)
    if comparison.empty:
        return (f"\nNo GPU epochs of {name} at batch {batch} and fanouts {fanouts}{sampled} measured on "
                f"{facts['device']} in {planner.GPU_RESULTS}: nothing to compare with yet.\n")
    overhead = facts["overhead"]
    if overhead is None:
        fitted = "Too few other GPU epochs to fit the per-minibatch and per-row overhead."
    else:
        others = ", ".join(facts["fitted_on"])
        fitted = (f"The overhead, fitted by least squares on the GPU epochs of {others} (not {name}'s): "
                  f"{overhead[0] * 1e3:.3f} ms per minibatch + {overhead[1] * 1e9:.2f} ns per row.")
    return (f"\n## Projected against measured, {facts['device']}\n\nGather time of the committed GPU epochs of {name} "
            f"(batch {batch}, fanouts {fanouts}{sampled}; `uva` keeps nothing, `tiered` keeps the top wR-PR rows; one "
            f"row per revision of the code that measured them, oldest first), against the "
            f"bound projected from this trace, and the bound plus the overhead every gather pays. {fitted}"
            f"{_measured_costs_text(comparison)} Error: "
            f"projected / measured - 1; the goal is within 15%.\n\n"
            + comparison.to_markdown(index=False, floatfmt=".3f") + "\n")


def _measured_costs_text(comparison: pd.DataFrame) -> str:
    """What the fixed-cost columns of the comparison are, where the profile had the costs."""
    if "fixed cost error" not in comparison.columns:
        return ""
    return (" Beside it, the bound plus the fixed cost `tierbench costs` measured across batch sizes on that GPU "
            "(bound + fixed cost s; fixed cost error).")


def _sampled(facts: dict) -> str:
    """The planned epochs' sampler, as the text names it ("" in plans made before it was recorded)."""
    return f", sampled on {facts['sampling']}" if "sampling" in facts else ""


def _fixed_text(costs, facts: dict) -> str:
    """How the fixed cost of the profile's minibatches is added, where it holds one, or why it holds none that
    fits the planned epochs."""
    if costs is None:
        note = facts.get("costs_note")
        return f"; the profile's fixed costs are not added: {note}" if note else ""
    basis = facts.get("fixed_basis") or (f"{costs[0] * 1e3:.3f} ms per minibatch + {costs[1] * 1e9:.2f} ns per row "
                                         "read above the bound")  # plans made before the medians were read
    return (f"; to which every projection here adds the fixed cost `tierbench costs` measured on that GPU, {basis}: "
            f"{facts['fixed_s_per_epoch']:.3f} s per epoch")


def plot(table: pd.DataFrame, title: str, projection: str):
    plt, sns = pyplot()
    order = [POLICIES[p].label for p in POLICIES if POLICIES[p].label in set(table["policy"])]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    sns.lineplot(data=table, x="capacity (%)", y=PROJECTED, hue="policy", hue_order=order, style="kind", markers=True,
                 dashes=False, ax=ax)
    ax.set(ylabel=f"data loading s / epoch ({projection})", xlabel="capacity (% of rows)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def render(records: Path, out: Path) -> list[Path]:
    """``plan.md``, ``plan.csv`` and ``plan.png`` in ``out`` from the records at ``records``."""
    plan, comparison = read_records(records)
    table, facts, record = plan.table, plan.facts, plan.provenance
    name, gpu_memory = facts["name"], facts["gpu_memory"]
    costs = facts.get("minibatch_costs")  # absent in plans made before `tierbench costs` existed
    markdown = (
        f"# Placement plan, {name}, {gpu_memory} of GPU memory\n\nMade by `{facts['command']}` on "
        f"{caption(record)}.\n\n**{facts['recommendation']}**\n\n"
        f"Ceilings: {facts['device']}, {facts['ceilings_source']}: misses at "
        f"{facts['zero_copy_bytes_per_s'] / GB:.1f} GB/s (zero-copy read), hits and rows admitted at "
        f"{facts['d2d_bytes_per_s'] / GB:.0f} GB/s (D2D copy). Budget: {facts['budget_bytes'] / GB:.2f} GB, of which "
        f"training needs about {facts['model_bytes'] / GB:.2f} GB (GraphSAGE, hidden 256, Adam; the largest "
        f"minibatch's rows and activations; 1 GiB for the CUDA context), leaving {facts['fits']:,} rows of "
        f"{facts['row_bytes']} B. Trace: fanouts {tuple(facts['fanouts'])}, {facts['trace']}, {facts['epochs']} "
        f"epoch(s) of {facts['batches_per_epoch']:,} minibatches{_sampled(facts)}. Projected: PCIe bytes / zero-copy "
        f"ceiling + (hits + rows admitted) x row bytes / D2D ceiling, per epoch: a bound that leaves out each gather's "
        f"fixed costs, the same for every policy{_fixed_text(costs, facts)}.\n\n"
        + table.to_markdown(index=False, floatfmt=".3f", intfmt=",") + "\n"
        + _comparison_text(comparison, facts)
    )
    gpu = facts["device"].removeprefix("cuda: ")
    fig = plot(table, f"{name} in {gpu_memory}: data loading per epoch projected with {gpu}'s ceilings",
               "projected bound" if costs is None else "projected bound + fixed cost")
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(plan, out), out / f"{STEM}.png"]
    atomic.write_text(paths[0], markdown)
    save_figure(fig, paths[2], record)
    return paths
