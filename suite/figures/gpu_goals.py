"""The goals of the second GPU visit, judged from what one ``tierbench gpu-suite`` visit recorded in its device folder:
``goals.md``, ``goals.csv`` and ``goals.png`` (``tierbench report --figure gpu-goals --records DIR``).

Each goal's measured value is computed here from the visit's records, read through their experiments' readers, the
way the goal's own report computes it: the samplers' rates over the CPU sampler's as ``suite.figures.sampler_bench``
does, the gather over its bandwidth bound as ``suite.figures.sweep_tables.cells_with_bound`` does for Figure 8, the
fixed costs as ``suite.experiments.costs`` fitted them, the build's wall time from the state file ``gpu-suite.json``.
A goal whose records are missing (or predate the columns it needs) says "not yet run" and names the ``gpu-suite``
step that measures it; no number is ever filled in.  A measured goal says "met" or "missed"; a number shown beside
the judged one (the best loader's gather, a CPU sampler on fewer cores than the goal's) says "report only".  Rows of
different settings (CPU and GPU sampling, say) are judged apart, never averaged; a ratio whose side matches several
cells (two scorers) is not judged, and rows of epochs cut to their first minibatches say so.  A negative fitted fixed
cost is not judged either: the fit's line does not describe the small batches.

The goals (``GOALS``) are those of the second visit: the fused GPU sampler against the CPU one, the fixed cost per
minibatch, the in-epoch gather against the data-loading bound (Data Tiering §4.1, PyTorch-Direct §3.2), Figures 8
and 10 of Data Tiering (§5.3-5.4) at the paper's scale, the reach of cold rows over papers-100m's whole table, and
the lookahead loader against the tiered one in the same GPU memory.  The gather's goal here (1.3) is the second
visit's, for the gather inside an epoch; the Figure 8 tables keep the first visit's 1.2 for data loading
(``sweep_tables.BOUND_GOAL``).
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import pandas as pd

from suite.errors import BadValue
from suite.experiments import costs, gpu, launch_costs, sampler_bench
from suite.figures import fig10
from suite.figures import sweep_tables as tables
from suite.figures.sampler_bench import rates
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.provenance import caption
from suite.sweep import gpu_suite
from suite.sweep.records import read_records
from suite.training.sampling import describe_sampling

STEM = "goals"
SAMPLER_SPEEDUP = 10.0
"""The fused GPU sampler over the CPU sampler on every core, one hop, sampled edges per second: at least this."""
CPU_THREADS = 16
"""The cores of the goal's CPU sampler (the GPU machine's); a CPU sampler on fewer threads is reported, not judged."""
MINIBATCH_MS = 1.0
"""A (12,12,12) minibatch of 1,024 seeds on papers-s, sampled and relabelled on the GPU: at most this many ms."""
FIXED_COST_MS = 0.5
"""The fixed cost of one minibatch outside the model, ms: at most this."""
GATHER_OVER_BOUND = 1.3
"""The in-epoch gather time over its bandwidth bound, papers-s: at most this."""
BUILD_S = 300.0
"""papers-100m built, scored and reordered (``prepare``): at most this many seconds."""
UVA_OVER_CPU_GATHER = 2.5
"""Figure 8 at paper scale: CPU gather's epoch time over UVA's, at least this (the paper: 2.5-4.6x)."""
TIERED_OVER_UVA = 1.6
"""Figure 8 at paper scale: UVA's epoch time over tiered's at 10% hot, at least this (the paper: 1.6-2.1x)."""
FIG10_HOT_FRACTION = 0.25
"""The hot fraction goal 7 judges, the paper's largest in Figure 10."""
FIG10_REDUCTION = -fig10.PAPER_CHANGES[FIG10_HOT_FRACTION]["time"]
"""Figure 10 at paper scale: the epoch time at 25% hot falls by at least this share of 0% hot's (the paper's)."""
REACH_ROW_BYTES = 512
"""The reach study's row size reported (no goal: the first visit saw 0.36 of memcpy over a 4 GiB table)."""
PLANNER_TOLERANCE = 0.15
"""The planner's projected epoch within this share of the measured one (``tox -e plan``, not from the visit)."""
DATASET = "papers-s"
GOALS = {
    1: ("fused GPU sampler ÷ CPU sampler, one hop, edges/s", f">= {SAMPLER_SPEEDUP:g}x", "samplerbench-papers-s"),
    2: ("(12,12,12) minibatch of 1,024 seeds, sample + relabel, on the GPU", f"<= {MINIBATCH_MS:g} ms",
        "samplerbench-papers-s"),
    3: ("fixed cost per minibatch outside the model (a of sample + gather)", f"<= {FIXED_COST_MS:g} ms",
        "costs-papers-s"),
    4: (f"in-epoch gather ÷ bandwidth bound, {DATASET}", f"<= {GATHER_OVER_BOUND:g}",
        "fig8-papers-s, fig8-gpu-sampling-papers-s"),
    5: (f"{gpu_suite.PAPER_SCALE} build + score + reorder", f"<= {BUILD_S:g} s", f"datasets-{gpu_suite.PAPER_SCALE}"),
    6: ("Figure 8 at paper scale", f"UVA ÷ CPU gather >= {UVA_OVER_CPU_GATHER:g}x; tiered ÷ UVA at 10% hot >= "
        f"{TIERED_OVER_UVA:g}x", gpu_suite.PAPER_SCALE_SWEEPS),
    7: ("Figure 10 at paper scale: epoch time at 25% hot vs 0% hot",
        f"<= -{FIG10_REDUCTION:.0%} (paper -{FIG10_REDUCTION:.0%})", gpu_suite.PAPER_SCALE_SWEEPS),
    8: (f"cold gather ÷ pinned memcpy, {REACH_ROW_BYTES} B rows, the whole table", "report only (first visit: 0.36 "
        "over 4 GiB)", "paper-scale-reach"),
    9: ("lookahead loader vs tiered at equal GPU memory", "PCIe bytes lower; epoch time no worse",
        "lookahead-papers-s, lookahead-pipeline-papers-s"),
    10: ("planner projection vs measured epoch", f"within {PLANNER_TOLERANCE:.0%}",
         "costs-cpu-sampling-papers-s, then `tox -e plan`"),
}
"""Every goal by its number: what is measured, the goal, and the ``gpu-suite`` steps that measure it."""
SAMPLING_STEPS = {"cpu": "fig8-papers-s", "gpu": "fig8-gpu-sampling-papers-s"}
"""Goal 4's samplings, each judged apart, and the step that measures it."""
NOT_YET_RUN, MET, MISSED, REPORT_ONLY = "not yet run", "met", "missed", "report only"
NOT_HERE = "not computed here"
SCORE = "measured ÷ goal (>= 1: met)"
COLUMNS = ["goal", "measurement", "setting", "target", "measured", "verdict", "step", "source", "value", SCORE]


@dataclasses.dataclass(frozen=True)
class Row:
    """One judged row of a goal: ``value`` the measured number (``None``: none), ``score`` the value over the goal
    oriented so that 1 or more is met (``None`` where the goal has no threshold or no value)."""

    goal: int
    setting: str
    measured: str
    verdict: str
    source: str
    value: float | None = None
    score: float | None = None

    def cells(self) -> dict:
        measurement, target, step = GOALS[self.goal]
        return {"goal": self.goal, "measurement": measurement, "setting": self.setting, "target": target,
                "measured": self.measured, "verdict": self.verdict, "step": step, "source": self.source,
                "value": self.value, SCORE: self.score}


def _not_yet(goal: int, why: str, setting: str = "") -> Row:
    return Row(goal, setting, NOT_YET_RUN, NOT_YET_RUN, f"run step {GOALS[goal][2]}: {why}")


def _verdict(met: bool) -> str:
    return MET if met else MISSED


class Sources:
    """The provenance of every record the table read: their devices, revisions and times."""

    def __init__(self):
        self.devices, self.revisions, self.times = set(), set(), []

    def add(self, device, revision, *times) -> None:
        self.devices.add(str(device))
        self.revisions.add(str(revision))
        self.times += [str(t) for t in times if isinstance(t, str) and t]

    def add_sweep(self, rows: pd.DataFrame) -> None:
        for device, revision in rows[["device", "git_revision"]].drop_duplicates().itertuples(index=False):
            self.add(device, revision)
        self.times += [str(t) for t in rows["time"].dropna()]

    def record(self, folder: Path) -> dict:
        if not self.devices:
            return {"device": f"none (no records in {folder} yet)", "git_revision": "none", "time": "none"}
        first, last = min(self.times), max(self.times)
        return {"device": " / ".join(sorted(self.devices)), "git_revision": " / ".join(sorted(self.revisions)),
                "time": first if first == last else f"{first} to {last}"}


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(Path(path).relative_to(folder))
    except ValueError:
        return str(path)


def _one_seed_ms(path: Path, sampler: str) -> float | None:
    """Fused ``sampler``'s (12,12,12) minibatch of one seed, in host milliseconds (``launch_costs``, beside the
    rates): its fixed costs, the floor under a minibatch of any size; ``None`` where it was not measured."""
    fixed = launch_costs.records_beside(path)
    if fixed is None:
        return None
    table = fixed.table[(fixed.table["what"] == launch_costs.ONE_SEED) & (fixed.table["sampler"] == sampler)]
    return None if table.empty else float(table["host_us"].iloc[0]) / 1e3


def sampler_rows(folder: Path, sources: Sources) -> list[Row]:
    """Goals 1 and 2, one row per GPU sampler: its one-hop rate over the CPU sampler's (``rates``) and its
    minibatch's milliseconds, with its minibatch of one seed beside where it was measured (``_one_seed_ms``)."""
    path = folder / "sampler-bench"
    if not (path / f"{sampler_bench.STEM}.csv").exists():
        return [_not_yet(1, f"no {_relative(path, folder)}/"), _not_yet(2, f"no {_relative(path, folder)}/")]
    measured = sampler_bench.read_records(path)
    sources.add(measured.provenance["device"], measured.provenance["git_revision"], measured.provenance["time"])
    table = rates(measured.table)
    source = f"{_relative(measured.path, folder)}, {measured.facts['dataset']}, CPU on {measured.facts['cpu_threads']} threads"
    rows = []
    gpu_rows = table[table["sampler"] != "cpu"]
    for case, goal in (("one hop", 1), ("minibatch", 2)):
        chosen = gpu_rows[gpu_rows["case"] == case]
        if chosen.empty:
            rows.append(_not_yet(goal, f"{_relative(measured.path, folder)} has no GPU sampler's {case} (measured on "
                                       f"{measured.provenance['device']})"))
        for _, row in chosen.iterrows():
            setting = f"{row['sampler']} sampler, {row['seeds']:,} seeds, fanouts {row['fanouts']}"
            if goal == 1:
                speedup = row["over cpu"]
                if pd.isna(speedup):
                    rows.append(_not_yet(goal, f"{_relative(measured.path, folder)} has no CPU {case} row", setting))
                    continue
                text = f"{speedup:.3g}x ({row['M edges/s']:.4g} M edges/s)"
                if measured.facts["cpu_threads"] < CPU_THREADS:  # a weaker CPU than the goal's: not judged
                    rows.append(Row(goal, setting, text, REPORT_ONLY,
                                    f"{source}; the goal's CPU sampler runs on {CPU_THREADS}", speedup))
                    continue
                rows.append(Row(goal, setting, text, _verdict(speedup >= SAMPLER_SPEEDUP), source, speedup,
                                speedup / SAMPLER_SPEEDUP))
            else:
                ms, floor = row["ms_per_batch"], _one_seed_ms(path, row["sampler"])
                beside = "" if floor is None else f" (one seed: {floor:.3g} ms of fixed costs, {launch_costs.STEM}.csv)"
                rows.append(Row(goal, setting, f"{ms:.3g} ms{beside}", _verdict(ms <= MINIBATCH_MS), source, ms,
                                MINIBATCH_MS / ms if ms > 0 else math.inf))
    return rows


def fixed_cost_row(folder: Path, sources: Sources) -> list[Row]:
    """Goal 3: the sample and gather stages' fitted fixed costs per minibatch (``a``), summed: the minibatch's cost
    outside the model (the train stage is the model's)."""
    path = folder / "costs" / DATASET
    if not (path / f"{costs.STEM}.csv").exists():
        return [_not_yet(3, f"no {_relative(path, folder)}/")]
    measured = costs.read_records(path)
    sources.add(measured.provenance["device"], measured.provenance["git_revision"], measured.provenance["time"])
    fits = measured.facts["fits"]
    ms = 1e3 * (fits["sample"]["a_s"] + fits["gather"]["a_s"])
    parts = f"sample {1e3 * fits['sample']['a_s']:.3g} ms + gather {1e3 * fits['gather']['a_s']:.3g} ms"
    if min(fits["sample"]["a_s"], fits["gather"]["a_s"]) < 0:
        return [_not_yet(3, f"{_relative(measured.path, folder)}: a fitted fixed cost is negative ({parts}): the "
                            "line through the batches does not describe the small ones")]
    source = (f"{_relative(measured.path, folder)}: fitted a of {parts} (gather above "
              f"{measured.facts['gather_above']}), {measured.facts['loader']} loader, batches of "
              f"{measured.facts['batch_sizes'][0]}-{measured.facts['batch_sizes'][-1]}")
    sampled_by = describe_sampling(measured.facts["sampling"], measured.facts["sampler_kernels"])
    setting = f"{measured.facts['dataset']}, {measured.facts['device']}, {sampled_by}"
    return [Row(3, setting, f"{ms:.3g} ms", _verdict(ms <= FIXED_COST_MS), source, ms,
                FIXED_COST_MS / ms if ms > 0 else math.inf)]


def _sweep(folder: Path, experiment: str, dataset: str, sources: Sources) -> tuple[pd.DataFrame, Path]:
    """The rows of ``dataset`` in the visit's sweep records ``runs/<experiment>.csv`` (empty where none)."""
    path = folder / "runs" / f"{experiment}.csv"
    records = read_records(path)
    if records.empty:
        return records, path
    rows = records[records["dataset"] == dataset].reset_index(drop=True)
    if not rows.empty:
        sources.add_sweep(rows)
    return rows, path


def _settings_text(cells: pd.DataFrame, columns: list[str], always: tuple[str, ...] = ()) -> pd.Series:
    """Each cell's values of those ``columns`` that vary among ``cells`` and of ``always``, in words
    (``sweep_tables.labelled``)."""
    varying = [column for column in columns if column in always or column in tables.varying(cells, columns)]
    if not varying:
        return pd.Series("", index=cells.index)
    labelled, _ = tables.labelled(cells, varying, "setting")
    return labelled["setting"]


def gather_bound_rows(folder: Path, sources: Sources) -> list[Row]:
    """Goal 4: Figure 8's ``gather / bound`` (``sweep_tables.cells_with_bound``) on papers-s without a pipeline
    over whole epochs, the tiered loader's (judged) and the best loader's (reported beside it), one pair per setting
    (CPU or GPU sampling)."""
    records, path = _sweep(folder, "fig8", DATASET, sources)
    if records.empty:
        return [_not_yet(4, f"no {DATASET} rows in {_relative(path, folder)}")]
    records = records[~records["pipeline"].astype(bool) & records["batch_limit"].isna()].reset_index(drop=True)
    if records.empty:
        return [_not_yet(4, f"no {DATASET} rows without a pipeline over whole epochs in {_relative(path, folder)}")]
    settings = tables.settings_of(records)
    cells, bound_text = tables.cells_with_bound(records, settings, ["epoch_s", "gather_s"])
    if tables.RATIO not in cells:
        return [_not_yet(4, f"{_relative(path, folder)} gives no bound: {bound_text.strip()}")]
    same = [column for column in settings if column not in ("loader", "scorer", "hot_fraction")]
    labels = _settings_text(cells, same, always=("sampling",))
    missing = [Row(4, f"{sampling} sampling", NOT_YET_RUN, NOT_YET_RUN, f"run step {step}: no {sampling}-sampled {DATASET} "
                f"rows in {_relative(path, folder)}")
            for sampling, step in SAMPLING_STEPS.items() if sampling not in set(cells["sampling"])]
    source = f"{_relative(path, folder)}, `{tables.RATIO}` as Figure 8's table computes it (mean gather / mean bound)"
    rows = []
    for _, group in cells.groupby(same, sort=True, dropna=False):
        setting = labels[group.index[0]]
        judged = group[group[tables.RATIO].notna()]
        tiered = judged[judged["loader"] == "tiered"]
        if tiered.empty:
            rows.append(_not_yet(4, "no tiered cell with a bound", setting))
        for _, cell in tiered.iterrows():
            ratio = cell[tables.RATIO]
            rows.append(Row(4, ", ".join(filter(None, [setting, f"tiered, hot {100 * cell['hot_fraction']:g}%"])),
                            f"{ratio:.3g}", _verdict(ratio <= GATHER_OVER_BOUND), source, ratio,
                            GATHER_OVER_BOUND / ratio))
        if not judged.empty:
            best = judged.loc[judged[tables.RATIO].idxmin()]
            ratio = best[tables.RATIO]
            rows.append(Row(4, ", ".join(filter(None, [setting, f"best: {best['loader']}"])), f"{ratio:.3g}",
                            REPORT_ONLY, f"{source}; beside the tiered loader's, which the goal judges", ratio))
    return rows + missing


_PARTIAL = ("batch_limit",)
"""Named in every paper-scale row's setting: epochs cut to their first minibatches are no whole epochs."""


def _several(cells: pd.DataFrame, path: Path, folder: Path) -> str:
    """Why a ratio is not judged where one side matches several cells (scorers, say): one row needs one cell."""
    scorers = ", ".join(sorted(map(str, cells["scorer"].unique()))) if "scorer" in cells else "?"
    return (f"{len(cells)} cells of {_relative(path, folder)} match one side (scorers {scorers}): a ratio needs one "
            "cell a side")


def paper_fig8_rows(folder: Path, sources: Sources) -> list[Row]:
    """Goal 6: the mean epoch times of papers-100m's Figure 8 cells, CPU gather's over UVA's and UVA's over tiered's
    at 10% hot, each pair in the same setting (sampling, batch, fanouts, minibatches timed)."""
    records, path = _sweep(folder, "fig8", gpu_suite.PAPER_SCALE, sources)
    if records.empty:
        return [_not_yet(6, f"no {gpu_suite.PAPER_SCALE} rows in {_relative(path, folder)}")]
    settings = tables.settings_of(records)
    cells = tables.per_cell(records, settings, ["epoch_s"])
    same = [column for column in settings if column not in ("loader", "scorer", "hot_fraction")]
    labels = _settings_text(cells, same, always=_PARTIAL)
    source = f"{_relative(path, folder)}, mean epoch_s per cell"
    rows = []
    pairs = (("cpu-gather", "uva", 0.0, UVA_OVER_CPU_GATHER, "UVA ÷ CPU gather"),
             ("uva", "tiered", 0.1, TIERED_OVER_UVA, "tiered ÷ UVA at 10% hot"))
    for _, group in cells.groupby(same, sort=True, dropna=False):
        setting = labels[group.index[0]]
        for slower, faster, hot, goal, name in pairs:
            base = group[group["loader"] == slower]
            ours = group[group["loader"] == faster]
            if hot:  # the tiered loader's cell at this hot fraction
                ours = ours[(ours["hot_fraction"] - hot).abs() < 1e-9]
            label = ", ".join(filter(None, [setting, name]))
            if base.empty or ours.empty:
                missing = slower if base.empty else faster
                rows.append(_not_yet(6, f"no {missing} cell in {_relative(path, folder)}", label))
                continue
            if len(base) > 1 or len(ours) > 1:
                rows.append(_not_yet(6, _several(base if len(base) > 1 else ours, path, folder), label))
                continue
            speedup = base["epoch_s"].iloc[0] / ours["epoch_s"].iloc[0]
            rows.append(Row(6, label, f"{speedup:.3g}x ({base['epoch_s'].iloc[0]:.3g} s / {ours['epoch_s'].iloc[0]:.3g} s)",
                            _verdict(speedup >= goal), source, speedup, speedup / goal))
    return rows


def paper_fig10_rows(folder: Path, sources: Sources) -> list[Row]:
    """Goal 7: papers-100m's tiered epoch time at 25% hot against 0% hot, in the same setting."""
    records, path = _sweep(folder, "fig10", gpu_suite.PAPER_SCALE, sources)
    records = records[records["loader"] == "tiered"] if not records.empty else records
    if records.empty:
        return [_not_yet(7, f"no tiered {gpu_suite.PAPER_SCALE} rows in {_relative(path, folder)}")]
    settings = tables.settings_of(records)
    cells = tables.per_cell(records, settings, ["epoch_s"])
    same = [column for column in settings if column not in ("hot_fraction", "scorer")]  # no scorer places 0% hot
    labels = _settings_text(cells, same, always=_PARTIAL)
    rows = []
    for _, group in cells.groupby(same, sort=True, dropna=False):
        setting = labels[group.index[0]]
        zero = group[group["hot_fraction"].abs() < 1e-9]
        quarter = group[(group["hot_fraction"] - FIG10_HOT_FRACTION).abs() < 1e-9]
        if zero.empty or quarter.empty:
            rows.append(_not_yet(7, f"no {'0%' if zero.empty else '25%'} hot cell in {_relative(path, folder)}",
                                 setting))
            continue
        if len(zero) > 1 or len(quarter) > 1:
            rows.append(_not_yet(7, _several(zero if len(zero) > 1 else quarter, path, folder), setting))
            continue
        change = quarter["epoch_s"].iloc[0] / zero["epoch_s"].iloc[0] - 1.0
        rows.append(Row(7, setting, f"{change:+.0%} ({zero['epoch_s'].iloc[0]:.3g} s -> "
                                    f"{quarter['epoch_s'].iloc[0]:.3g} s; paper -{FIG10_REDUCTION:.0%})",
                        _verdict(-change >= FIG10_REDUCTION), f"{_relative(path, folder)}, mean epoch_s per cell",
                        change, -change / FIG10_REDUCTION))
    return rows


def build_row(folder: Path, sources: Sources) -> list[Row]:
    """Goal 5: the wall time of the step that built papers-100m from nothing, from the state file: its last run that
    finished with rc 0 into a dataset cache that lacked the dataset (``gpu_suite.last_build``)."""
    state = gpu_suite.read_state(folder)
    name = f"datasets-{gpu_suite.PAPER_SCALE}"
    step = state["steps"].get(name)
    if step is None:
        return [_not_yet(5, f"{gpu_suite.STATE_FILE} has no step {name}")]
    build = gpu_suite.last_build(step)
    if build is None:
        held = " into a dataset cache that held it" if step.get("cache_held") else ""
        return [_not_yet(5, f"its last run {step['status']}{held} (rc {step.get('rc')}, {step.get('seconds')} s): "
                            "no complete build timed")]
    sources.add(build.get("device", state.get("device")), build.get("git_revision", state.get("git_revision")),
                build.get("finished"))
    seconds = float(build["seconds"])
    return [Row(5, "", f"{seconds:.0f} s ({seconds / 60:.1f} min)", _verdict(seconds <= BUILD_S),
                f"{gpu_suite.STATE_FILE}: step {name}, wall time, finished {build.get('finished')}", seconds,
                BUILD_S / seconds if seconds > 0 else math.inf)]


def reach_row(folder: Path, sources: Sources) -> list[Row]:
    """Goal 8: the cold gather of ``REACH_ROW_BYTES`` B rows drawn from the whole host table (the reach study of
    ``suite.experiments.gpu``), over the pinned memcpy ceiling measured in the same run."""
    path = folder / "microbench-paper-scale"
    if not (path / f"{gpu.STEM}.csv").exists():
        return [_not_yet(8, f"no {_relative(path, folder)}/")]
    speeds, _, reached = gpu.read_records(path)
    if reached is None:
        return [_not_yet(8, f"{_relative(path, folder)} predates the reach study")]
    sources.add(speeds.provenance["device"], speeds.provenance["git_revision"], speeds.provenance["time"])
    table = reached.table
    whole = table[(table["row bytes"] == REACH_ROW_BYTES) & (table["window"] == "whole table")]
    memcpy = speeds.facts["ceilings"].get("h2d_memcpy_bytes_per_s")
    if whole.empty or not memcpy:
        return [_not_yet(8, f"{_relative(reached.path, folder)} has no {REACH_ROW_BYTES} B row over the whole table "
                            "or no memcpy ceiling")]
    rate = float(whole["ours (GB/s)"].iloc[0]) * 1e9
    share = rate / memcpy
    size = speeds.facts["table_bytes"] / 2**30
    return [Row(8, f"{REACH_ROW_BYTES} B rows over {size:g} GiB", f"{share:.3g} ({rate / 1e9:.3g} GB/s; "
                f"{float(whole['ours / ceiling'].iloc[0]):.3g} of the zero-copy read ceiling)", REPORT_ONLY,
                f"{_relative(reached.path, folder)} over the pinned memcpy ceiling of {memcpy / 1e9:.3g} GB/s measured "
                "in the same run", share)]


def lookahead_rows(folder: Path, sources: Sources) -> list[Row]:
    """Goal 9: the lookahead loader's cells against tiered's in the same setting (the same hot fraction, so the same
    GPU memory), without and with the pipeline apart: mean PCIe payload per epoch lower, mean epoch time no higher;
    "(noise)" marks an epoch time within the two cells' epoch-to-epoch spread."""
    records, path = _sweep(folder, "lookahead", DATASET, sources)
    if records.empty:
        return [_not_yet(9, f"no {DATASET} rows in {_relative(path, folder)}")]
    settings = tables.settings_of(records)
    cells = tables.per_cell(records, settings, ["epoch_s", "pcie_payload_bytes"])
    same = [column for column in settings if column not in ("loader", "scorer")]
    ours, base = cells[cells["loader"] == "lookahead"], cells[cells["loader"] == "tiered"]
    if ours.empty or base.empty:
        return [_not_yet(9, f"no {'lookahead' if ours.empty else 'tiered'} cell in {_relative(path, folder)}")]
    ours = ours.reset_index(drop=True)
    matched = tables.matching(ours, base, same, tables.SPREAD_COLUMNS[:3] + ["pcie_payload_bytes"])
    noise = tables.within_spread(ours, matched)
    labels = _settings_text(ours, [column for column in same if column != "dataset"], always=("pipeline",))
    source = f"{_relative(path, folder)}, means per cell, lookahead ÷ tiered in the same setting"
    rows = [_not_yet(9, f"no lookahead cell {'with' if pipeline else 'without'} the pipeline in "
                        f"{_relative(path, folder)}", tables.describe("pipeline", pipeline))
            for pipeline in (False, True) if not ours["pipeline"].astype(bool).eq(pipeline).any()]
    for k, cell in ours.iterrows():
        setting = labels[k]
        if pd.isna(matched.loc[k, "epoch_s"]):
            rows.append(_not_yet(9, "no tiered cell in the same setting", setting))
            continue
        traffic = cell["pcie_payload_bytes"] / matched.loc[k, "pcie_payload_bytes"]
        epoch = cell["epoch_s"] / matched.loc[k, "epoch_s"]
        within = bool(noise[k]) if not pd.isna(noise[k]) else False
        rows.append(Row(9, ", ".join(filter(None, [setting, "PCIe bytes"])), f"{traffic:.3g} of tiered's",
                        _verdict(traffic < 1.0), source, traffic, 1 / traffic if traffic > 0 else math.inf))
        rows.append(Row(9, ", ".join(filter(None, [setting, "epoch time"])),
                        f"{epoch:.3g} of tiered's" + (" (noise)" if within else ""),
                        _verdict(epoch <= 1.0), source, epoch, 1 / epoch))
    return rows


def planner_row() -> list[Row]:
    """Goal 10: not computed from the visit's folder; ``tox -e plan`` compares after the visit."""
    return [Row(10, "", "", NOT_HERE, "needs `tox -e plan` after the visit, with the fixed costs of CPU-sampled "
                                      "minibatches (Figure 10's epochs are) in the machine profile: not computed "
                                      "from the visit's folder")]


def goal_rows(folder: Path) -> tuple[list[Row], dict]:
    """Every goal's rows from the visit's device folder ``folder``, and the provenance of the records read."""
    sources = Sources()
    rows = [*sampler_rows(folder, sources), *fixed_cost_row(folder, sources), *gather_bound_rows(folder, sources),
            *build_row(folder, sources), *paper_fig8_rows(folder, sources), *paper_fig10_rows(folder, sources),
            *reach_row(folder, sources), *lookahead_rows(folder, sources), *planner_row()]
    return sorted(rows, key=lambda row: row.goal), sources.record(folder)


def render(records: Path, out: Path) -> list[Path]:
    """``goals.md``, ``goals.csv`` and ``goals.png`` in ``out`` from the gpu-suite device folder ``records``."""
    folder = Path(records)
    if not folder.is_dir():
        raise BadValue(f"{folder} is not a folder: give the device folder a `tierbench gpu-suite` visit wrote "
                       "(out/gpu/<device>/)")
    rows, record = goal_rows(folder)
    table = pd.DataFrame([row.cells() for row in rows], columns=COLUMNS)
    command = f"tierbench report --figure gpu-goals --records {folder}"
    command += "" if Path(out).resolve() == folder.resolve() else f" --out {out}"
    counts = table["verdict"].value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in (MET, MISSED, REPORT_ONLY, NOT_YET_RUN, NOT_HERE) if v in counts)
    shown = table[["goal", "measurement", "setting", "target", "measured", "verdict", "step", "source"]]
    markdown = (
        f"# The second GPU visit's goals\n\nMade by `{command}`; {caption(record)}.\n\n"
        f"One row per goal and setting, computed from the records in `{folder}` ({tally}). A goal without records "
        "says \"not yet run\" and names the `tierbench gpu-suite` step that measures it; no value is typed in. "
        "Rows of different settings are judged apart, never averaged. The fixed cost outside the model (goal 3) is "
        "the sum of the sample and gather stages' fitted fixed costs per minibatch (`a`, `tierbench costs`; the "
        "gather's above its bandwidth bound where the profile has measured ceilings); the train stage is the "
        "model's. Goal 4's `gather / bound` is Figure 8's (papers-s, no pipeline, whole epochs). Goals 6 and 7 "
        "compare mean epoch times of cells in the same setting (sampling, batch, fanouts, minibatches timed). "
        "Goal 9's epoch time is no worse where its mean is no higher than tiered's; (noise) marks a difference "
        "within the two cells' epoch-to-epoch spread.\n\n"
        + tables.markdown_table(shown)
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, csv, png = out / f"{STEM}.md", out / f"{STEM}.csv", out / f"{STEM}.png"
    atomic.write_text(md, markdown)
    atomic.write_csv(csv, table.assign(**record), index=False)
    _draw(table, record, png)
    return [md, csv, png]


def _draw(table: pd.DataFrame, record: dict, path: Path) -> None:
    """A bar per judged row: measured ÷ goal, oriented so that 1 or more is met, a line at 1; the goals without a
    value listed beneath."""
    plt, sns = pyplot()
    judged = table[table[SCORE].notna() & table["verdict"].isin([MET, MISSED])].copy()
    judged["row"] = [textwrap.fill(f"{goal}. {GOALS[goal][0]}", 44) + (f"\n{setting}" if setting else "")
                     for goal, setting in zip(judged["goal"], judged["setting"])]
    waiting = table[~table.index.isin(judged.index)].drop_duplicates(["goal", "setting"])
    notes = [f"{goal}. {GOALS[goal][0]}" + (f", {setting}" if setting else "") + f": {verdict} ({GOALS[goal][2]})"
             for goal, setting, verdict in zip(waiting["goal"], waiting["setting"], waiting["verdict"])]
    height = 0.55 * max(len(judged), 1) + 0.16 * len(notes) + 2.2
    fig, ax = plt.subplots(figsize=(9, height))
    if judged.empty:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no goal measured yet", ha="center", va="center", transform=ax.transAxes)
    else:
        sns.barplot(data=judged, y="row", x=SCORE, hue="verdict", hue_order=[MET, MISSED],
                    palette={MET: "tab:green", MISSED: "tab:red"}, dodge=False, ax=ax)
        ax.axvline(1.0, color="0.2", linestyle="--", linewidth=1)
        ax.set(ylabel="", xlabel="measured ÷ goal, oriented so that >= 1 means met (line: the goal)")
        ax.tick_params(axis="y", labelsize=8)
    ax.set_title("The second GPU visit's goals")
    bottom = (0.16 * len(notes) + 0.5) / height
    fig.text(0.01, bottom - 0.02, "\n".join(["Without a bar:"] + notes) if notes else "", fontsize=7, va="top")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    save_figure(fig, path, record)
