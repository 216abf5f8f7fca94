"""``tierbench samplerbench``'s report, drawn from the records of ``suite.experiments.sampler_bench``:
``sampler-bench.md`` / ``.csv`` / ``.png``, sampled edges per second and milliseconds per minibatch of the CPU
sampler, the fused GPU sampler over the CSR in GPU memory and over UVA."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.experiments.sampler_bench import STEM, read_records
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.io.records import PROVENANCE_COLUMNS, copy_table


def rates(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (the records' rows) with each sampler's rate in ``M edges/s`` and over the CPU sampler's in the same
    case (``over cpu``; empty where the case has no CPU row)."""
    cpu = table[table["sampler"] == "cpu"].set_index("case")["sampled_edges_per_second"]
    return table.assign(**{"M edges/s": table["sampled_edges_per_second"] / 1e6,
                           "over cpu": table["sampled_edges_per_second"] / table["case"].map(cpu)})


def render(records: Path, out: Path) -> list[Path]:
    """The markdown table, the records' CSV and a bar chart of the sampling rates in ``out``."""
    measured = read_records(records)
    table = measured.table.drop(columns=list(PROVENANCE_COLUMNS), errors="ignore")
    facts, record = measured.facts, measured.provenance
    shown = rates(table)[["case", "fanouts", "seeds", "sampler", "sampled_edges", "M edges/s", "ms_per_batch",
                          "over cpu"]]
    markdown = (f"# Neighbour sampling, {facts['dataset']}\n\nMade by `{facts['command']}`; {caption(record)}.\n\n"
                f"Best of {facts['repeat']} after an untimed run; `cpu` is the numba sampler on "
                f"{facts['cpu_threads']} threads, `gpu` the fused sampler over the CSR in GPU memory, `uva` the same "
                "over the CSR in pinned host memory.\n\n" + shown.to_markdown(index=False, floatfmt=".4g") + "\n")
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{STEM}.md"
    atomic.write_text(md, markdown)
    csv = copy_table(measured, out)
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    sns.barplot(data=shown, x="case", y="M edges/s", hue="sampler", ax=ax)
    ax.set(yscale="log", title=f"Sampled edges per second, {facts['dataset']}")
    fig.tight_layout()
    png = out / f"{STEM}.png"
    save_figure(fig, png, record)
    return [md, csv, png]
