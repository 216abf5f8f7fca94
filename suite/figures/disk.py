"""``tierbench disk``'s report, drawn from the records of ``suite.experiments.disk``: ``disk.md``, ``.csv``, ``.png``,
one bar per loader and setting (Marius).
"""

from __future__ import annotations

from pathlib import Path

from suite.experiments.disk import STEM, read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table
from tiering.disk.table import BLOCK

GB = 1e9


def render(records: Path, out: Path) -> list[Path]:
    """``disk.md``, ``.csv`` and ``.png`` in ``out`` from the records at ``records``."""
    measured = read_records(records)
    table, facts, record = measured.table, measured.facts, measured.provenance
    name = facts["name"]
    enforcement = (
        f"a memory cgroup limited to the budget plus {facts['cgroup_slack_bytes'] >> 20} MiB for the gathers' own allocations holds "
        f"`mmap`'s page cache for real in the rows marked enforced (the kernel chooses which pages to keep; the "
        f"limit and the most the cgroup was charged beside), on the first {facts['enforced_batches']} minibatches, with the "
        f"emulated budget on the same ones above each" if facts['unenforced_because'] is None
        else f"no budget could be enforced on this machine ({facts['unenforced_because']})")
    markdown = (
        f"# Disk-backed loaders, {name}\n\nMade by `{facts['command']}`; "
        f"{caption(record)}.\n\n{name} reordered by weighted R-PR: {facts['num_nodes']:,} rows, a "
        f"{facts['table_bytes'] / GB:.2f} GB feature file; one epoch of the paper's regime "
        f"({facts['trace']}), its first {facts['measured']:,} of {facts['num_batches']:,} minibatches "
        f"({facts['reads']:,} row reads), gathers only, no training: the times are for those minibatches, not the whole "
        f"epoch. Disk I/O mode: {facts['io_mode']}. Ceilings measured in the same run: a cold sequential read of the file at "
        f"{facts['sequential_bytes_per_s'] / GB:.2f} GB/s, random single-block reads at {facts['random_reads_per_s']:,.0f} blocks/s "
        f"({facts['random_reads_per_s'] * BLOCK / GB:.2f} GB/s) with {facts['in_flight']} in flight, so a gap of up to {facts['gap_bytes'] // 1024} KiB is "
        f"cheaper to read through than to skip. Host budgets below 100% are emulated where marked (the machine "
        f"could hold the whole table: the loader is told to keep only that share); {enforcement}. "
        f"Disk bytes: measured at the file (`disk-tiered`, its traffic "
        f"model's count beside) or by the kernel's per-process accounting (`mmap`).\n\n"
        + table.drop(columns=["disk_bytes"]).rename(columns={
            "modelled_disk_bytes": "modelled disk bytes", "cgroup_limit_bytes": "cgroup limit bytes",
            "cgroup_peak_bytes": "cgroup peak bytes"}).to_markdown(index=False, floatfmt=".3f") + "\n"
    )
    plt, sns = pyplot()
    per_batch = {"ms per minibatch": 1e3 * table["seconds"] / table["minibatches"],
                 "disk MB per minibatch": table["disk_bytes"] / table["minibatches"] / 1e6}
    shown = table.assign(bar=table["loader"] + ": " + table["setting"] + " (" + table["minibatches"].astype(str)
                         + " minibatches)", **per_batch)
    fig, axes = plt.subplots(1, 2, figsize=(19, 0.45 * len(shown) + 2), sharey=True)
    sns.barplot(data=shown, y="bar", x="ms per minibatch", hue="loader", dodge=False, legend=False, ax=axes[0])
    axes[0].set(xlabel="gather milliseconds per minibatch (this CPU)", ylabel="", xscale="log")
    sns.barplot(data=shown, y="bar", x="disk MB per minibatch", hue="loader", dodge=False, legend=False, ax=axes[1])
    axes[1].set(xlabel="MB read from disk per minibatch", ylabel="", xscale="symlog")
    fig.suptitle(f"Disk-backed loaders on {name}: one bar per loader and setting (this CPU and disk)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.94))
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(measured, out), out / f"{STEM}.png"]
    atomic.write_text(paths[0], markdown)
    save_figure(fig, paths[2], record)
    return paths
