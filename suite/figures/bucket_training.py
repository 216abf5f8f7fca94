"""``tierbench bucket-train``'s report, drawn from the records of ``suite.experiments.bucket_training``:
``bucket-training.md``, ``.csv``, ``.png`` (Marius §3-§4).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from suite.experiments.bucket_training import PAPER, STEM, read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table

GB = 1e9


def render(records: Path, out: Path) -> list[Path]:
    """``bucket-training.md``, ``.csv`` and ``.png`` in ``out`` from the records at ``records``."""
    measured, raw = read_records(records)
    table, facts, record = measured.table, measured.facts, measured.provenance
    name, partitions, capacity = facts["name"], facts["partitions"], facts["capacity"]
    negatives, batch_edges, dim, repeats = facts["negatives"], facts["batch_edges"], facts["dim"], facts["repeats"]
    warmup = facts["warmup"]
    orders = facts["orders"]
    partition_mb = facts["num_nodes"] / partitions * facts["feature_dim"] * 4 / 1e6
    shown = table.assign(**{"epoch s, median (min-max)": [
        f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in zip(table["epoch_s"], table["epoch_min_s"],
                                                            table["epoch_max_s"])]})
    shown = shown[["edge_fraction", "ordering", "prefetch", "epoch s, median (min-max)", "waiting_s", "computing s",
                   "epoch / BETA prefetching", "swaps", "bound", "disk GB", "read at sequential ceiling s", "edges",
                   "loss", "mrr"]].rename(columns={"edge_fraction": "share of edges", "waiting_s": "waiting s",
                                                   "mrr": "held-out MRR"})
    chance = float(np.mean(1.0 / np.arange(1, negatives + 2)))
    markdown = (
        f"# Link prediction through the partition buffer, {name}\n\nMade by `{facts['command']}`; "
        f"{caption(record)}.\n\n"
        f"{name}'s {facts['num_nodes']:,} x {facts['feature_dim']} feature table ({facts['table_bytes'] / GB:.2f} GB) "
        f"in p = {partitions} partitions of {partition_mb:.3g} MB, c = {capacity} in the host buffer "
        f"({100 * capacity / partitions:g}% of the table, plus the partitions being read ahead); disk I/O mode "
        f"{facts['io_mode']}, the file dropped from the page cache before each epoch. A cold sequential read of the "
        f"file, in "
        f"the same run: {facts['sequential_bytes_per_s'] / GB:.2f} GB/s. One epoch trains a share of the {facts['num_edges']:,} "
        f"edges, {batch_edges:,} per batch, against {negatives:,} negatives from the buffer, embedding width {dim}; "
        f"each setting {repeats} times after {warmup} untimed warm-up epoch{'s' * (warmup != 1)}, alternating; "
        f"epoch and waiting times are the median of the {repeats} (the range beside it). Prefetch 0: synchronous "
        f"swaps; 1: the next partition read while the current state trains. Waiting: the first read and every "
        f"swap the training waited for; computing: the rest of the epoch. Held-out MRR against {negatives:,} uniform negatives "
        f"(chance: {chance:.4f}).\n\nThe paper: {PAPER}. Our nearest analogue is the ratio of synchronous "
        f"Hilbert (or row-major) to BETA with prefetching, in the column `epoch / BETA prefetching`; PBG's own "
        f"ordering, buffer and checkpoints differ, and Freebase86m's embeddings are written back, ours are "
        f"read-only features.\n\n"
        + shown.to_markdown(index=False, floatfmt=".3f") + "\n"
    )
    plt, sns = pyplot()
    long = raw.assign(setting=raw["ordering"] + ", prefetch " + raw["prefetch"].astype(str),
                      computing_s=raw["epoch_s"] - raw["waiting_s"])
    fractions = list(dict.fromkeys(long["edge_fraction"]))
    fig, axes = plt.subplots(2, len(fractions), figsize=(5.5 * len(fractions), 7), squeeze=False)
    for column, fraction in enumerate(fractions):
        part = long[long["edge_fraction"] == fraction]
        for row, (y, label) in enumerate((("epoch_s", "epoch seconds"), ("waiting_s", "seconds waiting for reads"))):
            ax = axes[row][column]
            sns.barplot(data=part, x="ordering", y=y, hue="prefetch", order=list(orders), estimator="median",
                        errorbar=("pi", 100),
                        ax=ax, legend=row == 0 and column == 0)
            ax.set(title=f"{100 * fraction:g}% of the edges per epoch" if row == 0 else "", xlabel="", ylabel=label)
    fig.suptitle(f"Partition buffer on {name}: p = {partitions}, c = {capacity}; bars: median of {repeats} after {warmup} "
                 f"untimed, whiskers: range (this CPU and disk)")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(measured, out), out / f"{STEM}.png"]
    atomic.write_text(paths[0], markdown)
    save_figure(fig, paths[2], record)
    return paths
