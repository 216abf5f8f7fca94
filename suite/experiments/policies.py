"""``tierbench policies``, measured: every placement policy replayed against the same recorded epochs.

For one dataset in a regime (``suite.datasets.regime``), the lab
(``suite.policies.lab``) records the accesses of ``epochs`` epochs and
replays each policy against them at capacities of 1-40% of the rows.
``measure`` writes ``policies-epochs.csv`` (every epoch of every replay, with
the provenance) and ``policies-epochs.json`` beside it (the command, the
dataset's size, the trace and the replay speeds); ``read_records`` reads
them back for ``suite.figures.policies``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.io import records
from suite.io.provenance import provenance
from suite.policies.lab import (
    POLICIES,
    WINDOWS,
    LabSettings,
    capacities_of,
    lab_traces,
    run_lab,
)

GB = 1e9
TRACE_FACTS = ("row_bytes", "reads_per_epoch", "batches_per_epoch", "trace_file", "trace_bytes_per_epoch",
               "window_bytes_per_batch", "sample_s_per_batch")
"""What the lab reports of a trace that a table shows (beside the replay speeds, policy by policy)."""
FACTS = ("command", "dataset", "num_nodes", "fanouts", "batch_size", "regime", "epochs", "presample_epochs",
         *TRACE_FACTS, "replay_reads_per_s")
"""What the sidecar of a lab's records holds besides the provenance."""


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (policy, capacity): hit ratio over every epoch, fractions of the two references, and the mean
    per-epoch PCIe bytes and rows admitted."""
    total = rows.groupby(["policy", "capacity_rows", "capacity_percent"], sort=False).agg(
        reads=("reads", "sum"), hits=("hits", "sum"), miss_bytes=("miss_bytes", "mean"),
        fill_rows=("fill_rows", "mean")).reset_index()
    total["hit_ratio"] = total["hits"] / total["reads"]
    for reference, column in (("belady", "of Belady"), ("optimum", "of static optimum")):
        best = total[total["policy"] == reference].set_index("capacity_rows")["hits"]
        total[column] = total["hits"] / total["capacity_rows"].map(best)
    total["policy"] = pd.Categorical(total["policy"], list(POLICIES), ordered=True)
    return total.sort_values(["policy", "capacity_rows"]).reset_index(drop=True)


def display(summary: pd.DataFrame, row_bytes: int) -> pd.DataFrame:
    """``summarise``'s rows as a table shows them: policy labels, GB, whole rows."""
    table = summary.assign(policy=summary["policy"].map(lambda p: POLICIES[p].label),
                           kind=summary["policy"].map(lambda p: POLICIES[p].kind),
                           pcie=summary["miss_bytes"] / GB, fill=summary["fill_rows"] * row_bytes / GB,
                           fill_rows=summary["fill_rows"].round().astype(np.int64))
    table = table.rename(columns={
        "capacity_percent": "capacity (%)", "capacity_rows": "capacity (rows)", "hit_ratio": "hit ratio",
        "pcie": "PCIe GB / epoch", "fill_rows": "rows admitted / epoch", "fill": "fill GB / epoch"})
    return table[["policy", "kind", "capacity (%)", "capacity (rows)", "hit ratio", "of Belady", "of static optimum",
                  "PCIe GB / epoch", "rows admitted / epoch", "fill GB / epoch"]]


def window_cost(summary: pd.DataFrame, window_bytes_per_batch: float, sample_s_per_batch: float) -> pd.DataFrame:
    """One row per lookahead window: the ids it holds (MiB), the time to sample it ahead on this CPU, and its hits
    over Belady's bound at every capacity."""
    ahead = summary[summary["policy"].isin(list(WINDOWS))]
    share = ahead.pivot_table(index="policy", columns="capacity_percent", values="of Belady", observed=True)
    share = share.rename(columns=lambda p: f"of Belady at {round(p, 1):g}%")
    windows = share.index.map(WINDOWS)
    table = pd.DataFrame({"window (minibatches)": windows, "ids held (MiB)": windows * window_bytes_per_batch / 2**20,
                          "sampling lead (ms)": windows * sample_s_per_batch * 1e3}, index=share.index)
    return table.join(share).sort_values("window (minibatches)").reset_index(drop=True)


def trace_options(regime: str, batch: int, fanouts, name: str) -> str:
    """The command-line options that chose a trace's batch and fanouts, as a command that made a table spells them."""
    batch_option = {"fixed": f" --batch-size {batch}", "unscaled": " --regime unscaled"}.get(regime, "")
    fanout_option = "" if tuple(fanouts) == regimes.default_fanouts(name) else f" --fanout {','.join(map(str, fanouts))}"
    return batch_option + fanout_option


def measure(name: str, out_dir, *, epochs: int = 3, presample_epochs: int = 1, fanouts=None,
            batch_size: int | None = None, regime: str = "paper", seed: int = 0, trace_dir=None, ogb_root=None,
            progress: bool = True) -> Path:
    """Run the lab on dataset ``name`` and write its records into ``out_dir``; the path of its epochs."""
    batch, regime = regimes.resolve(name, regime, batch_size)
    fanouts = tuple(fanouts) if fanouts else regimes.default_fanouts(name)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    settings = LabSettings(name, fanouts, batch, regime, epochs, presample_epochs, seed)
    traces = lab_traces(dataset, settings, trace_dir=trace_dir, progress=progress)
    rows, facts = run_lab(dataset, settings, capacities_of(dataset.num_nodes), traces, progress=progress)
    record = provenance(device="cpu")
    out_dir = Path(out_dir)
    path = out_dir / "policies-epochs.csv"
    command = (f"`tierbench policies --dataset {name} --epochs {epochs} --presample-epochs {presample_epochs}"
               f"{trace_options(regime, batch, fanouts, name)} --out {out_dir}`")
    return records.write_records(
        path, rows.assign(dataset=name, **{k: record[k] for k in records.PROVENANCE_KEYS}), record, dict(
            command=command, dataset=name, num_nodes=dataset.num_nodes, fanouts=list(fanouts), batch_size=batch,
            regime=regime, epochs=epochs, presample_epochs=presample_epochs, **{key: facts[key] for key in TRACE_FACTS},
            replay_reads_per_s=list(facts["replay_reads_per_s"].items())),  # [policy, reads/s] in the lab's order
        index=False)


@dataclasses.dataclass(frozen=True)
class PolicyRecords:
    """The records of one run of the lab: every epoch of every replay (``epochs``, without provenance) and the
    ``facts`` of the run (``measure``'s sidecar, with the provenance)."""

    epochs: pd.DataFrame
    facts: dict


def read_records(path) -> PolicyRecords:
    """The epochs at ``path`` (``policies-epochs.csv``) and the facts beside them (``policies-epochs.json``);
    ``BadValue`` naming what is missing."""
    stored = records.read_records(path, FACTS, measured_by="tierbench policies")
    return PolicyRecords(stored.table.drop(columns=[*records.PROVENANCE_KEYS, "dataset"]),
                         {**stored.facts, **stored.provenance})
