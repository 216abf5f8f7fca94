"""``tierbench plan``: which placement policy and hot fraction to use within a GPU memory budget, and why.

For one dataset, the planner (``suite.policies.planner``) projects the
data-loading time of one epoch for every policy of the lab at every
capacity that fits the budget left after the model, and recommends the
fastest.  Records: ``plan.csv`` (per policy and capacity: hit ratio, PCIe
bytes and rows admitted per epoch, the projected seconds) with its sidecar
(the recommendation, the ceilings used, the budget), and, where GPU epochs of
the same device and sampler are committed, ``plan-measured.csv``: the
projection beside their measured gather time.  The plan is for epochs whose
minibatches ``sampling`` draws (``cpu`` unless told, as ``tierbench train``
samples).  Where the machine profile holds the fixed cost of minibatches that
sampler drew (``tierbench costs --sampling``), every projection adds it, the
same for every policy: per minibatch, the gather's excess over its bound
interpolated between the batch sizes timed around the planned minibatches'
rows, where the profile holds those sizes' medians and the rows lie below the
largest, else ``a x minibatches + b x row reads`` by the fitted line
(``planner.fixed_seconds``).  The sidecar's ``minibatch_costs`` holds
``[a, b]`` (None without them, and ``costs_note`` why, where the profile
holds another sampler's; both absent, and ``sampling`` too, in plans made
before they existed: those planned with the only costs the profile held) and
``fixed_basis`` which of the two priced the plan (absent in plans made before
the medians).  ``suite.figures.plan`` draws them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.errors import BadValue
from suite.experiments.policies import GB, display, summarise, trace_options
from suite.io import records
from suite.io.provenance import provenance
from suite.policies import planner
from suite.policies.lab import POLICIES, LabSettings, capacities_of, lab_traces, run_lab, scorer_order
from suite.training.sampling import check_single_process_name

STEM = "plan"
MEASURED = "plan-measured"
PROJECTED = "projected s / epoch"
FACTS = ("command", "recommendation", "name", "gpu_memory", "device", "ceilings_source", "measured_machine",
         "zero_copy_bytes_per_s", "d2d_bytes_per_s", "budget_bytes", "model_bytes", "fits", "row_bytes", "batch",
         "fanouts", "trace", "epochs", "batches_per_epoch", "compared_rows", "overhead", "fitted_on")


def _budget_rows(dataset, fanouts, max_rows: int, row_bytes: int, gpu_memory: int) -> tuple[int, int]:
    """``(model bytes, rows the rest holds)`` for ``gpu_memory`` bytes of GPU memory."""
    needed = planner.model_bytes(dataset.feature_dim, dataset.num_classes, len(fanouts), 256, max_rows, row_bytes)
    rows = min(dataset.num_nodes, (gpu_memory - needed) // row_bytes)
    if rows < 1:
        raise BadValue(f"{gpu_memory / GB:.1f} GB of GPU memory leaves no room for a cache: training {dataset.name} "
                       f"needs about {needed / GB:.2f} GB of it (model, minibatch, CUDA context)")
    return needed, int(rows)


def _recommendation(table: pd.DataFrame, name: str, gpu_memory: str, fits: int, num_nodes: int,
                    projection: str) -> str:
    usable = table[table["kind"] != "bound"]
    best = usable.loc[usable[PROJECTED].idxmin()]
    bound = table[(table["policy"] == POLICIES["belady"].label) & (table["capacity (rows)"] == best["capacity (rows)"])]
    if fits == num_nodes:
        return (f"Recommended for {name} in {gpu_memory} of GPU memory: every one of its {fits:,} rows fits, so keep "
                f"the whole table there (the `in-memory` loader; any static policy at 100%): {best[PROJECTED]:.3f} s of "
                f"data loading per epoch ({projection}).")
    return (f"Recommended for {name} in {gpu_memory} of GPU memory: {best['policy']} with {best['capacity (rows)']:,} "
            f"rows ({best['capacity (%)']:.1f}% of them) in GPU memory, {best[PROJECTED]:.3f} s of data loading per "
            f"epoch ({projection}, hit ratio {best['hit ratio']:.3f}; Belady's bound at that capacity: "
            f"{float(bound[PROJECTED].iloc[0]):.3f} s).")


def measure(name: str, gpu_memory: str, records_dir, *, machine_path=None, epochs: int = 1, fanouts=None,
            batch_size: int | None = None, regime: str = "paper", sampling: str = planner.SAMPLING, seed: int = 0,
            trace_dir=None, ogb_root=None, progress: bool = True) -> Path:
    """Plan ``name`` for ``gpu_memory`` (``40GB``, ``24GiB``), its epochs' minibatches drawn by ``sampling``, and
    write the records into ``records_dir``; their path."""
    budget = planner.parse_bytes(gpu_memory)
    check_single_process_name(sampling)  # the machine profile, not this one, ran the sampler
    machine = planner.machine(machine_path, sampling=sampling)
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
    reads = float(np.mean(facts["reads_per_epoch"]))
    fixed = planner.fixed_seconds(machine.minibatch_costs, facts["batches_per_epoch"], reads, machine.gather_by_batch)
    summary[PROJECTED] = planner.projected_seconds(summary["miss_bytes"], summary["hits"], summary["fill_rows"],
                                                   row_bytes, machine.ceilings) + fixed
    projection = "projected bound" if machine.minibatch_costs is None else "projected bound + fixed cost"

    table = display(summary, row_bytes).assign(**{PROJECTED: summary[PROJECTED]})
    comparison = pd.DataFrame()
    if machine.measured:
        comparison = planner.compare_measured(name, batch, fanouts, machine, facts["counts"],
                                              scorer_order(dataset, "wrpr"), facts["row_cost"], row_bytes,
                                              facts["batches_per_epoch"], reads)
    records_dir = Path(records_dir)
    overhead = comparison.attrs.get("overhead")
    record = provenance(device="cpu")
    stored = {
        "command": (f"tierbench plan --dataset {name} --gpu-memory {gpu_memory}"
                    f"{'' if epochs == 1 else f' --epochs {epochs}'}{trace_options(regime, batch, fanouts, name)}"
                    f"{'' if sampling == planner.SAMPLING else f' --sampling {sampling}'} --out {records_dir}"),
        "recommendation": _recommendation(table, name, gpu_memory, fits, dataset.num_nodes, projection),
        "name": name, "gpu_memory": gpu_memory, "device": machine.device, "ceilings_source": machine.source,
        "measured_machine": machine.measured, "zero_copy_bytes_per_s": machine.ceilings[planner.ZERO_COPY],
        "d2d_bytes_per_s": machine.ceilings[planner.D2D], "budget_bytes": budget, "model_bytes": model, "fits": fits,
        "row_bytes": row_bytes, "batch": batch, "fanouts": list(fanouts), "trace": regimes.describe(name, batch, regime),
        "epochs": epochs, "batches_per_epoch": facts["batches_per_epoch"],
        "compared_rows": len(comparison), "overhead": None if overhead is None else [float(v) for v in overhead],
        "fitted_on": list(comparison.attrs.get("fitted_on", [])),
        "sampling": sampling,
        "minibatch_costs": None if machine.minibatch_costs is None else list(machine.minibatch_costs),
        "costs_note": machine.costs_note,
        "fixed_basis": "" if machine.minibatch_costs is None
        else planner.fixed_basis(machine, facts["batches_per_epoch"], reads),
        "fixed_s_per_epoch": fixed,
    }
    if len(comparison):
        records.write_records(records_dir / f"{MEASURED}.csv", comparison, record, {}, index=False)
    return records.write_records(records_dir / f"{STEM}.csv", table, record, stored, index=False)


def read_records(path) -> tuple[records.Records, pd.DataFrame]:
    """The plan in ``path`` (the records' folder or ``plan.csv``), and its projections against the measured GPU
    epochs (empty where there were none)."""
    path = Path(path)
    plan = records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, FACTS)
    beside = plan.path.with_name(f"{MEASURED}.csv")
    measured = records.read_records(beside, ()).table if plan.facts["compared_rows"] else pd.DataFrame()
    return plan, measured
