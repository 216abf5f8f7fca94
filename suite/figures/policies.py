"""``tierbench policies``: every placement policy's hit ratio and PCIe traffic against capacity, beside the optimum.

Drawn from what ``suite.experiments.policies`` recorded (the lab,
``suite.policies.lab``, replaying each policy against the same recorded
epochs at capacities of 1-40% of the rows).  Written into ``--out``:

* ``policies.md``: per policy and capacity, the hit ratio over all replayed
  epochs, the same as a fraction of Belady's bound and of the static
  optimum, the PCIe bytes of the misses per epoch (traffic model) and the
  rows a dynamic cache writes into GPU memory per epoch (its fill traffic;
  a static placement is filled once, before training: C rows);
* ``policies.csv`` (those columns), beside the records
  ``policies-epochs.csv`` (every epoch of every replay, with the provenance);
* ``policies.png``: hit ratio, fraction of Belady's bound, the static
  placements' fraction of the static optimum and PCIe GB per epoch against
  capacity, one line and marker per policy; and the lookahead cache's
  fraction of Belady's bound against its window, one line per capacity.

The lookahead rows come with what their window costs: the ids of W
minibatches held ahead and the time this CPU takes to sample them.

Reading it: a policy's gap to ``Belady MIN`` is what any smarter cache could
still gain at that capacity; its gap to ``static optimum`` what a better
static order could gain.  Dynamic caches start empty, so their first epoch
is their worst (``policies-epochs.csv``).  The lookahead cache closes the
gap to Belady's bound as its window grows: the window panel shows how many
minibatches ahead a capacity needs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets import regime as regimes
from suite.experiments.policies import GB, display, read_records, summarise, window_cost
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption
from suite.policies.lab import POLICIES, WINDOWS


def plot(summary: pd.DataFrame, title: str):
    """Four panels against capacity, one line and one marker per policy: hit ratio, hits over Belady's bound, the
    static placements' hits over the static optimum (on an axis of their own, where the scorers a few per cent
    apart can be told apart) and the PCIe bytes of the misses; a fifth, the lookahead cache's hits over Belady's
    bound against its window, one line per capacity (the lookahead policies in shades of one colour)."""
    plt, sns = pyplot()
    shown = summary.assign(label=summary["policy"].map(lambda p: POLICIES[p].label),
                           kind=summary["policy"].map(lambda p: POLICIES[p].kind),
                           pcie_gb=summary["miss_bytes"] / GB)
    order = [POLICIES[p].label for p in POLICIES if p in set(summary["policy"])]
    static = shown[(shown["kind"] == "static") | (shown["policy"] == "optimum")]  # the scorers and their bound
    panels = [(shown, "hit_ratio", "hit ratio"), (shown, "of Belady", "hits / Belady's bound"),
              (static, "of static optimum", "static placements: hits / static optimum"),
              (shown, "pcie_gb", "PCIe GB / epoch (model)")]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(25, 4.8))
    ahead = [POLICIES[p].label for p in WINDOWS if p in set(summary["policy"])]
    others = [label for label in order if label not in ahead]
    palette = {**dict(zip(others, sns.color_palette(n_colors=len(others)))),
               **dict(zip(ahead, sns.color_palette("crest", n_colors=len(ahead))))}
    for ax, (data, column, label) in zip(axes, panels):
        sns.lineplot(data=data, x="capacity_percent", y=column, hue="label", hue_order=order, style="label",
                     style_order=order, palette=palette, markers=True, dashes=False, ax=ax, legend=ax is axes[0])
        ax.set(xlabel="capacity (% of rows)", ylabel=label)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()
    fig.legend(handles, labels, title="policy", loc="center right", frameon=False)
    windows = shown[shown["policy"].isin(list(WINDOWS))].assign(window=lambda t: t["policy"].map(WINDOWS),
                                                                capacity=lambda t: t["capacity_percent"].map(lambda p: f"{round(p, 1):g}%"))
    ax = axes[-1]
    sns.lineplot(data=windows, x="window", y="of Belady", hue="capacity", palette="flare", marker="o", ax=ax)
    ax.set(xscale="log", xlabel="lookahead window (minibatches sampled ahead)", ylabel="lookahead: hits / Belady's bound")
    ax.set_xticks(sorted(WINDOWS.values()), [str(w) for w in sorted(WINDOWS.values())])
    ax.legend(title="capacity", fontsize="small", ncols=2)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.04, 0.91, 0.95))
    return fig


def render(records: Path, out: Path) -> list[Path]:
    """Write ``policies.md``, ``policies.csv`` and ``policies.png`` into ``out`` from the lab's records at
    ``records`` (``policies-epochs.csv`` of ``suite.experiments.policies``)."""
    lab = read_records(records)
    facts, rows = lab.facts, lab.epochs
    name, fanouts, batch, regime = facts["dataset"], tuple(facts["fanouts"]), facts["batch_size"], facts["regime"]
    epochs, presample_epochs, num_nodes = facts["epochs"], facts["presample_epochs"], facts["num_nodes"]
    summary = summarise(rows)
    speeds = ", ".join(f"{POLICIES[p].label} {v / 1e6:.0f}M" for p, v in facts["replay_reads_per_s"])
    reads = facts["reads_per_epoch"]
    per_batch = np.mean(reads) / facts["batches_per_epoch"]
    one_epoch = ", ".join(f"{POLICIES[p].label} {reads[0] / v:.2f} s" for p, v in facts["replay_reads_per_s"])
    table = display(summary, facts["row_bytes"])
    windows = window_cost(summary, facts["window_bytes_per_batch"], facts["sample_s_per_batch"])
    markdown = (
        f"# Placement policies against the optimum, {name}\n\nMade by {facts['command']}; {caption(facts)}.\n\n"
        f"{name}: {num_nodes:,} rows of {facts['row_bytes']} B; fanouts {fanouts}, "
        f"{regimes.describe(name, batch, regime)}; {epochs} replayed epoch(s) of {facts['batches_per_epoch']:,} "
        f"minibatches, {np.mean(reads):,.0f} row reads each (a minibatch reads each of its rows once); PreSC "
        f"pre-samples {presample_epochs} epoch(s) with another seed. Hit ratio: reads served from the cache, over "
        f"all replayed epochs; *of Belady*, *of static optimum*: hits over that reference's at the same capacity. "
        f"Dynamic caches start empty; the static placements and Belady's bound start filled (once, "
        f"{facts['row_bytes']} B a row). PCIe GB: what the misses read by zero-copy, from the traffic model; rows "
        f"admitted and fill GB: what a dynamic cache writes into GPU memory per epoch, its fill traffic (the misses "
        f"it admits have crossed PCIe already). A minibatch reads {per_batch:,.0f} rows on average "
        f"({100 * per_batch / num_nodes:.2f}% of them): a dynamic cache smaller than that cannot hold one "
        f"minibatch (GraphBolt refuses such a batch); here it admits the misses in ascending id order until every "
        f"cached row is in use, and the rest bypass it.\n\n"
        f"Trace: {facts['trace_bytes_per_epoch'] / 2**20:.1f} MiB per epoch on disk "
        f"(`{Path(facts['trace_file']).name}` in the dataset cache's `traces/`; "
        f"{np.mean(reads) * 4 / 2**20:.1f} MiB as int32 ids). "
        f"Replay speed on this CPU, reads per second: {speeds}; one epoch: {one_epoch}.\n\n"
        + table.to_markdown(index=False, floatfmt=".3f", intfmt=",") + "\n\n"
        f"## What a lookahead window costs\n\nThe lookahead cache keeps, after each minibatch, the rows the next W "
        f"minibatches need soonest (Belady's rule within the window) and ranks the rest by the dataset's scorer; it "
        f"admits only rows a minibatch read from host memory anyway. Sampling W minibatches ahead holds their ids "
        f"({facts['window_bytes_per_batch'] / 2**10:.1f} KiB a minibatch as int64) and must start W minibatches "
        f"early ({1e3 * facts['sample_s_per_batch']:.2f} ms to sample one on this CPU, the lead a window needs "
        f"when nothing else hides it).\n\n"
        + windows.to_markdown(index=False, floatfmt=(".0f", ".2f", ".1f") + (".3f",) * (windows.shape[1] - 3)) + "\n"
    )
    fig = plot(summary, f"Placement policies on {name} (fanouts {','.join(map(str, fanouts))}, batch {batch})")
    return write_table_and_figure(out, "policies", markdown, table, fig, facts, index=False)
