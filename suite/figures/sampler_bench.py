"""``tierbench samplerbench``'s report, drawn from the records of ``suite.experiments.sampler_bench``:
``sampler-bench.md`` / ``.csv`` / ``.png``, sampled edges per second and milliseconds per minibatch of the CPU
sampler, the fused GPU sampler over the CSR in GPU memory and over UVA, and with its CUDA C++ kernels; where the
records hold the fused samplers' fixed costs (``suite.experiments.launch_costs``), their table follows in
``sampler-bench.md``, with ``launch-costs.csv`` and ``.png`` beside."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.experiments import launch_costs
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
                "over the CSR in pinned host memory (both with numba-cuda kernels), `gpu-cupy` the fused sampler over "
                "the CSR in GPU memory with its CUDA C++ kernels launched by CuPy.\n\n"
                + shown.to_markdown(index=False, floatfmt=".4g") + "\n")
    out.mkdir(parents=True, exist_ok=True)
    fixed = launch_costs.records_beside(measured.path.parent)
    if fixed is not None:
        markdown += _launch_costs_markdown(fixed)
    md = out / f"{STEM}.md"
    atomic.write_text(md, markdown)
    csv = copy_table(measured, out)
    extra = [] if fixed is None else [copy_table(fixed, out), _launch_costs_figure(fixed, out)]
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.barplot(data=shown, x="case", y="M edges/s", hue="sampler", ax=ax)
    ax.set(yscale="log", title=f"Sampled edges per second, {facts['dataset']}")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1, 1), frameon=False)
    fig.tight_layout()
    png = out / f"{STEM}.png"
    save_figure(fig, png, record)
    return [md, csv, png, *extra]


def _launch_costs_markdown(fixed) -> str:
    table = fixed.table.drop(columns=list(PROVENANCE_COLUMNS), errors="ignore")
    return (f"\n## Fixed costs of the fused sampler\n\nThe host's microseconds per repetition, the best of "
            f"{fixed.facts['repeat']} timings of {fixed.facts['repetitions']} repetitions launched back to back "
            "(`suite.experiments.launch_costs`), for each fused sampler over the CSR in GPU memory: a hop's three "
            "kernels on empty inputs with every torch tensor made into what the kernels take (a numba array, or an "
            "address and a size for CuPy) at each launch and once beforehand (the sampler makes each once, but for "
            "a minibatch's seeds and each hop's two outputs); a hop's two torch scans; and a "
            f"({','.join(map(str, launch_costs.MINIBATCH_FANOUTS))}) minibatch of one seed; "
            f"{caption(fixed.provenance)}.\n\n" + table.to_markdown(index=False, floatfmt=".4g") + "\n")


def _launch_costs_figure(fixed, out: Path) -> Path:
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.barplot(data=fixed.table, y="what", x="host_us", hue="sampler", ax=ax)
    ax.set(xscale="log", xlabel="host µs per repetition", ylabel="",
           title=f"Fixed costs of the fused sampler, {fixed.facts['dataset']}")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1, 1), frameon=False)
    fig.tight_layout()
    png = out / f"{launch_costs.STEM}.png"
    save_figure(fig, png, fixed.provenance)
    return png
