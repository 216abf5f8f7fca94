"""``tierbench sar``'s report, drawn from the records of ``suite.experiments.sar``: ``sar.md``, ``.csv``, ``.png``
(SAR Figure 1)."""

from __future__ import annotations

from pathlib import Path

from suite.experiments.sar import PAPER, STEM, read_records, steady_steps
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import copy_table


def _minibatch_line(minibatch: dict | None) -> str:
    """Minibatch tiered training of the same model for the same epochs: its accuracy and epoch time, as a sentence."""
    if minibatch is None:
        return ""
    return (f" Minibatch training of the same model by tierbench (`tiered`, 10% hot, fanouts "
            f"{','.join(map(str, minibatch['fanouts']))}, batch {minibatch['batch']}, the paper's regime, the "
            f"trainer's default dropout and learning rate), {minibatch['epochs']} epochs on this CPU: validation "
            f"accuracy {minibatch['valid_accuracy']:.3f}, {minibatch['epoch_s']:.1f} s per epoch.")


def render(records: Path, out: Path) -> list[Path]:
    """``sar.md``, ``.csv`` and ``.png`` in ``out`` from the records at ``records``."""
    measured, steps = read_records(records)
    table, facts, record = measured.table, measured.facts, measured.provenance
    name, workers, epochs = facts["name"], facts["workers"], facts["epochs"]
    steady = steady_steps(steps)
    markdown = (
        f"# Full-batch GraphSAGE, vanilla domain parallelism against SAR, {name}\n\nMade by `{facts['command']}`; "
        f"{caption(record)}.\n\n**Measured on a CPU**, gloo processes on one machine standing in for SAR's "
        f"machines: the memory per worker is what one worker holds whatever runs beside it; the epoch times share "
        f"this machine's cores among all the workers.\n\n"
        f"GraphSAGE, {facts['layers']} layers of width {facts['hidden']}, mean aggregation, no dropout, Adam at "
        f"{facts['lr']}; {epochs} full-"
        f"batch epochs per aggregation from the same initial model, each aggregation in processes of its own. "
        f"METIS parts (edge cut, balance: largest part over the mean). Memory: each worker's resident set at its "
        f"highest during a step (Linux's VmHWM, reset at the step's start), the largest over the workers and the "
        f"epochs after the first (`peak GiB`; the first step's beside it, which also includes what the process "
        f"sets up once); of it, `process GiB` is the worker before it loaded anything (Python, torch), `held GiB` "
        f"its part's features and aggregation matrices, `added GiB` what a step adds on top. Epoch time: the "
        f"slowest worker's, mean (min, max) over "
        f"the epochs after the first.\n\nThe paper: vanilla domain parallelism needs {PAPER['vanilla / SAR']} the "
        f"peak memory per worker that SAR needs; {PAPER['epoch']}.{_minibatch_line(facts['minibatch'])}\n\n"
        + table.to_markdown(index=False, floatfmt=".3f") + "\n"
    )
    plt, sns = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    sns.lineplot(data=table, x="workers", y="peak GiB", hue="aggregation", style="aggregation", markers=True,
                 ax=axes[0])
    axes[0].axhline(table["process GiB"].max(), color="grey", linestyle=":", label="the process alone (Python, torch)")
    axes[0].legend()
    axes[0].set(xscale="log", xticks=list(workers), xticklabels=list(workers), ylabel="peak memory per worker (GiB)",
                title="peak resident memory per worker", ylim=(0, None))
    axes[0].minorticks_off()
    sns.barplot(data=steady, x="workers", y="epoch s", hue="aggregation", errorbar=("pi", 100), ax=axes[1])
    axes[1].set(ylabel="epoch seconds (slowest worker)", title="full-batch epoch time, this CPU's cores shared")
    fig.suptitle(f"SAR against vanilla domain parallelism on {name} (SAR Figure 1), gloo on a CPU")
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    out = Path(out)
    paths = [out / f"{STEM}.md", copy_table(measured, out), out / f"{STEM}.png"]
    atomic.write_text(paths[0], markdown)
    save_figure(fig, paths[2], record)
    return paths
