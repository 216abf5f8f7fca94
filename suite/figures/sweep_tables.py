"""What the tables and figures of ``tierbench report`` share: one row per setting, its spread, the gather bound.

Figures 8, 10 and 11 (``suite.figures.fig8``, ``fig10``, ``fig11``) and the
demo turn the records of ``tierbench run`` (``read_sweep``) into a table and
a figure each, naming the command that drew them (``report_command``).  A *cell*
is one value of every setting (``SETTINGS``): its recorded epochs are
averaged, never mixed with another cell's, and the spread of its epoch time
(fastest-slowest epoch) is shown beside the mean and as error bars; a
difference between two cells whose spreads overlap is marked as noise.  A
plot has no axis for some settings: those are told apart by a label
(``labelled``) used as hue or style, so no mark averages different settings.

Figures 8 and 10 also judge the gather time against the data-loading
lower bound (Data Tiering §4.1: hot rows from GPU memory, cold rows over PCIe;
PyTorch-Direct §3.2: ``cudaMemcpy`` is the ceiling a zero-copy gather is measured
against): per epoch, ``gather bound s`` = cold bytes / the H2D memcpy ceiling
+ hot bytes / the D2D copy ceiling, both ceilings as ``tierbench doctor``
measured them into the machine profile each record names.  Cold bytes are the
modelled PCIe payload (``pcie_payload_bytes``: the dense bytes a DMA loader
copies, the 32-byte sectors a zero-copy gather reads); hot bytes are hit ratio
x rows gathered x row bytes.  ``gather / bound`` is the cell's mean gather time
over its mean bound (goal <= 1.2).  A cell has a bound only when every one of
its records ran on a GPU in one process, names a profile with measured
ceilings and carries ``rows_gathered`` and ``row_bytes``; where no cell has
one (every CPU run, records made before these columns) the columns are left
out and one line says why.

Every table gives the batch's regime (``suite.datasets.regime``) and its
footprint as measured: ``footprint %``, the unique input nodes of a
minibatch as a share of the nodes (rows gathered / minibatches / N), and
``touched %``, the share of the nodes an epoch's minibatches gathered at
least once.

Numbers measured on a CPU are labelled so (``cpu_warning``): there the "GPU"
tier is host memory, no byte crosses PCIe, and times compare code paths, not
the paper's hardware effect.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from suite.datasets import regime as regimes
from suite.errors import BadValue
from suite.measure.ceilings import profile_candidates, profile_ceilings, ran_under
from suite.sweep import RUNS_DIR
from suite.sweep.records import read_records

SETTINGS = ["dataset", "device", "processes", "gpus", "pipeline", "sampling", "sampler_kernels", "fanouts", "batch_size",
            "regime", "loader", "scorer", "hot_fraction", "host_fraction", "batch_limit"]
"""The columns that make two records different measurements: epochs are averaged within one value of each, never across."""
SPREAD_COLUMNS = ["epoch_s", "epoch_s min", "epoch_s max", "epochs"]
FOOTPRINT = ["footprint %", "touched %"]
"""Measured per record: the share of the nodes one minibatch gathers, and the share an epoch gathers."""
MARKS = "mean of the recorded epochs; error bars: fastest-slowest epoch"
ONE_EPOCH_MARKS = "one recorded epoch per mark: no spread to show"
BOUND = "gather bound s"
RATIO = "gather / bound"
BOUND_GOAL = 1.2
"""The goal for the gather time over its bound (the data-loading lower bound)."""
CEILINGS = ("h2d_memcpy_bytes_per_s", "d2d_copy_bytes_per_s")
"""The measured ceilings of a machine profile (``suite.measure.ceilings``) the bound divides cold and hot bytes by."""
RERUN = "`tierbench run --rerun` records a cell again"
NO_CEILINGS = ("there are no measured ceilings for these records: run `tierbench doctor` on the machine that made them "
               f"before their sweep ({RERUN})")
SEVERAL_PROCESSES = "they ran in several processes, whose summed bytes no one GPU's ceilings bound"
ON_CPU = "they ran on a CPU, where no byte crosses PCIe (the machine's GPU ceilings do not apply)"
NO_ROW_COUNTS = f"they were recorded before rows_gathered and row_bytes existed ({RERUN})"
NO_ROWS = "no row was gathered"
PROFILE_REPLACED = ("the machine profile they name was written after them, by a later `tierbench doctor` on a machine of "
                    "the same name, whose ceilings are not the ones they ran under")
BOUND_TEXT = (
    f"Gather bound (`{BOUND}`, per epoch) = cold bytes / the H2D memcpy ceiling + hot bytes / the D2D copy ceiling, "
    "with the ceilings `tierbench doctor` measured into the records' machine profile; cold bytes are the modelled PCIe "
    "payload (the dense bytes a DMA loader copies, the 32-byte sectors a zero-copy gather reads), hot bytes hit ratio "
    f"x rows gathered x row bytes. `{RATIO}` = mean gather time / mean bound; goal <= {BOUND_GOAL:g}."
)
_NAMES = {
    "dataset": "dataset {}".format,
    "loader": "loader {}".format,
    "device": "device {}".format,
    "hot_fraction": lambda value: f"hot {100 * value:g}%",
    "host_fraction": lambda value: "no disk tier" if pd.isna(value) else f"host budget {100 * value:g}%",
    "pipeline": lambda value: "pipeline" if value else "no pipeline",
    "sampling": "{} sampling".format,
    "sampler_kernels": lambda value: "" if pd.isna(value) else f"{value} kernels",  # none: said by the sampling
    "processes": lambda value: f"{value} process" + ("" if value == 1 else "es"),
    "gpus": lambda value: f"{value} GPU" + ("" if value == 1 else "s"),
    "batch_size": "batch {}".format,
    "batch_limit": lambda value: "whole epochs" if pd.isna(value) else f"first {value} minibatches",
    "regime": "{} regime".format,
    "fanouts": "fanouts {}".format,
    "scorer": "scorer {}".format,
}


def read_sweep(records: Path) -> pd.DataFrame:
    """The records of a sweep at ``records`` (``suite.sweep.records``); ``ValueError`` where there are none."""
    frame = read_records(records)
    if frame.empty:
        raise BadValue(f"no records in {records}: run `tierbench run --experiment {records.stem}` first")
    return frame


def report_command(records: Path, out: Path, figure: int | None) -> str:
    """The ``tierbench report`` command that draws Figure ``figure`` (``None``: the demo) of the sweep whose records
    are ``records`` into ``out``, as the tables cite it."""
    chosen = f" --figure {figure}" if figure is not None else ""
    runs = "" if Path(records).parent == Path(RUNS_DIR) else f" --runs {Path(records).parent}"
    return f"`tierbench report --experiment {records.stem}{chosen}{runs} --out {out}` from {records}"


def record_of(records: pd.DataFrame) -> dict:
    """The provenance of a set of records: one device, the revisions and the time span they came from."""
    return {
        "device": " / ".join(sorted(records["device"].unique())),
        "git_revision": " / ".join(sorted(records["git_revision"].astype(str).unique())),
        "time": f"{records['time'].min()} to {str(records['time'].max())[11:]}",
    }


def cpu_warning(records: pd.DataFrame) -> str:
    """The line that opens a table measured on a CPU only ("" for any other)."""
    if records["device"].str.startswith("cpu").all():
        return (
            "**Measured on a CPU.** The GPU tier is host memory here and nothing crosses PCIe: the times "
            "compare code paths, not the paper's GPU effect; PCIe columns are the model.\n\n"
        )
    return ""


def with_footprint(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` with their measured ``FOOTPRINT`` columns (empty where a record predates the counts)."""
    def column(name):
        return pd.to_numeric(records[name], errors="coerce").astype(float) if name in records else math.nan

    minibatches = column("batches") * column("processes")
    return records.assign(**{
        FOOTPRINT[0]: 100 * regimes.footprint_share(column("rows_gathered"), minibatches, column("num_nodes")),
        FOOTPRINT[1]: 100 * column("nodes_touched") / column("num_nodes"),
    })


def regime_text(records: pd.DataFrame) -> str:
    """Which regime each dataset's batch is in, as the table's text says it (``suite.datasets.regime.describe``)."""
    columns = [c for c in ("dataset", "batch_size", "regime") if c in records]
    if len(columns) < 3:
        return ""
    settings = records[columns].drop_duplicates().sort_values(columns)
    lines = [f"{row.dataset}: {regimes.describe(row.dataset, row.batch_size, row.regime)}." for row in settings.itertuples()]
    return ("Regime (`footprint %`: unique input nodes per minibatch / nodes, `touched %`: nodes an epoch gathered / "
            "nodes, both measured): " + " ".join(lines) + "\n\n" + partial_epoch_text(records)
            + unvalidated_text(records))


def partial_epoch_text(records: pd.DataFrame) -> str:
    """What the records' partial epochs timed (``tierbench run --minibatches``): their times are of those
    minibatches, never scaled to a whole epoch."""
    if "batch_limit" not in records or records["batch_limit"].isna().all():
        return ""
    limited = records[records["batch_limit"].notna()][["dataset", "batches", "epoch_batches"]].drop_duplicates()
    lines = [f"{row.dataset}: {row.batches:,} of {row.epoch_batches:,}." for row in limited.itertuples()]
    return ("Partial epochs (`--minibatches`): the times are of the first minibatches of each epoch only, not scaled "
            "to a whole epoch; minibatches timed of an epoch's: " + " ".join(lines) + "\n\n")


def unvalidated_text(records: pd.DataFrame) -> str:
    """Which datasets' rows ran without a validation pass (``tierbench run --no-validation``)."""
    if "valid_accuracy" not in records or records["valid_accuracy"].notna().all():
        return ""
    datasets = records.loc[records["valid_accuracy"].isna(), "dataset"].unique()
    return (f"Not validated (`--no-validation`): the rows of {', '.join(datasets)} ran no validation pass, so their "
            "`valid_accuracy` is empty; epoch times never include that pass.\n\n")


SAID_WHERE_SET = ("sampler_kernels", "batch_limit")
"""Settings a table names only where some record has one: records of whole epochs say nothing of a minibatch limit,
and records sampled without the fused GPU sampler nothing of its kernels."""


def settings_of(records: pd.DataFrame) -> list[str]:
    """The ``SETTINGS`` the records have a column for (older records lack some); those of ``SAID_WHERE_SET`` only
    where a record has one."""
    return [column for column in SETTINGS if column in records.columns
            and not (column in SAID_WHERE_SET and records[column].isna().all())]


def describe(column: str, value) -> str:
    """A setting's value as a reader names it: "hot 10%", "pipeline", "2 processes" ("" where another says it)."""
    return _NAMES.get(column, str)(value)


def _words(row, columns: list[str]) -> str:
    """``row``'s values of ``columns`` as a reader names them, comma-separated."""
    return ", ".join(filter(None, (describe(column, row[column]) for column in columns)))


def varying(records: pd.DataFrame, columns: list[str], within: list[str] | None = None) -> list[str]:
    """Those of ``columns`` that take more than one value in ``records`` (in some group of ``within``, if given)."""
    columns = [column for column in columns if column not in (within or [])]
    if not columns:
        return []
    if not within:
        return [column for column in columns if records[column].nunique(dropna=False) > 1]
    counts = records.groupby(within, dropna=False)[columns].nunique(dropna=False)
    return [column for column in columns if counts[column].max() > 1]


def common_settings(records: pd.DataFrame, settings: list[str]) -> str:
    """The settings every record shares, as a sentence of the table's text ("" where none is shared)."""
    shared = [column for column in settings if records[column].nunique(dropna=False) == 1]
    if not shared:
        return ""
    return "Every row: " + _words(records.iloc[0], shared) + ".\n\n"


def labelled(records: pd.DataFrame, columns: list[str], name: str) -> tuple[pd.DataFrame, list[str] | None]:
    """``records`` with a column ``name`` naming each row's values of ``columns``, and those names in order.

    The figures separate the settings a plot has no axis for by this label (as hue or style), so that no mark
    averages records of different settings; without ``columns`` the records come back as they are, with ``None``.
    """
    if not columns:
        return records, None

    def text(row) -> str:
        return _words(row, columns)

    order = [text(row) for _, row in records[columns].drop_duplicates().sort_values(columns).iterrows()]
    return records.assign(**{name: records.apply(text, axis=1)}), order


def epoch_range(values):
    """The error bar of every figure: the fastest and the slowest recorded epoch (min-max)."""
    return values.min(), values.max()


def spread_marks(table: pd.DataFrame) -> tuple[str, object]:
    """What a figure's marks are, for its title, and its ``errorbar``, from its cells (``per_cell``): the epoch range
    where some cell recorded more than one epoch, none where every cell recorded one (one epoch has no spread); cells
    of partial epochs (``batch_limit``) are named with their limit, the most minibatches an epoch of theirs timed (an
    epoch shorter than it timed all of its own, which the table's text counts)."""
    partial = ""
    if "batch_limit" in table and table["batch_limit"].notna().any():
        limited = table[table["batch_limit"].notna()][["dataset", "batch_limit"]].drop_duplicates()
        partial = ("\nepochs cut after their first minibatches, not scaled: " +
                   ", ".join(f"{row.dataset} at most {row.batch_limit:g}" for row in limited.itertuples()))
    if table["epochs"].max() > 1:
        return MARKS + partial, epoch_range
    return ONE_EPOCH_MARKS + partial, None


def loader_labels(records: pd.DataFrame) -> dict[str, str]:
    """Each loader's name on an axis, with its hot tier and its host budget where it has one of each in
    ``records`` (several are a setting of their own, told apart by ``labelled``)."""
    labels = {}
    for name, rows in records.groupby("loader", sort=False):
        hot = rows["hot_fraction"].unique()
        budgets = rows["host_fraction"].dropna().unique() if "host_fraction" in rows else []
        tiers = ([f"hot {hot[0]:.0%}"] if len(hot) == 1 and hot[0] > 0 else []) + \
            ([f"host {budgets[0]:.0%}"] if len(budgets) == 1 else [])
        labels[name] = "\n".join([name, ", ".join(tiers)]) if tiers else name
    return labels


def per_cell(records: pd.DataFrame, settings: list[str], columns: list[str]) -> pd.DataFrame:
    """One row per cell (one value of every setting): ``columns`` averaged over its recorded epochs, and the spread
    of its epoch time: its fastest (``epoch_s min``) and slowest (``epoch_s max``) of ``epochs`` recorded epochs."""
    grouped = records.groupby(settings, sort=False, dropna=False)
    means = grouped[columns].mean()
    spread = grouped["epoch_s"].agg(["min", "max", "size"]).set_axis(SPREAD_COLUMNS[1:], axis=1)
    return pd.concat([means[["epoch_s"]], spread, means.drop(columns="epoch_s")], axis=1).reset_index()


def matching(table: pd.DataFrame, reference: pd.DataFrame, same: list[str], columns: list[str]) -> pd.DataFrame:
    """``reference``'s ``columns`` for each row of ``table``: from its row with the same values of ``same``, else NaN."""
    matched = table[same].merge(reference[same + columns], on=same, how="left", validate="many_to_one")
    return matched[columns].set_axis(table.index)


def within_spread(table: pd.DataFrame, reference: pd.DataFrame) -> pd.Series:
    """Whether each cell's epoch times overlap its reference's (min-max): a difference smaller than the noise."""
    overlap = (reference["epoch_s min"] <= table["epoch_s max"]) & (table["epoch_s min"] <= reference["epoch_s max"])
    return overlap.astype("boolean").mask(reference["epoch_s"].isna())


def spread_text(table: pd.DataFrame) -> str:
    """What the numbers and their spread are, for a table's text."""
    fewest, most = int(table["epochs"].min()), int(table["epochs"].max())
    if most < 2:
        return ("One row per setting: its numbers are those of its one recorded epoch, which has no spread, so the "
                "figure has no error bars and a difference between two rows cannot be told from noise: record more "
                "epochs (`--epochs`).\n\n")
    epochs = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    text = (
        f"One row per setting: its numbers are the mean over its {epochs} recorded epochs; the epoch time's spread, in "
        "parentheses and as the figure's error bars, is its fastest and slowest epoch (min-max). A difference whose two "
        "cells' spreads overlap is marked (noise): it is smaller than the variation from epoch to epoch."
    )
    if fewest < 2:
        text += (" A cell with one recorded epoch has no spread, so a difference from it cannot be told from noise: "
                 "record more epochs (`--epochs`).")
    return text + "\n\n"


def rounds_text(records: pd.DataFrame, settings: list[str]) -> str:
    """Where the cells ran in rounds (``tierbench run --rounds``): how, and how the second round's epochs compare with
    the first's over the cells recorded in both, the machine's drift between them ("" for sweeps of one round)."""
    if "round" not in records or records["round"].max() < 2:
        return ""
    rounds = int(records["round"].max())
    means = records.groupby([*settings, "round"], dropna=False)["epoch_s"].mean().unstack("round")
    ratio = (means[2] / means[1]).dropna() if {1, 2} <= set(means.columns) else pd.Series(dtype=float)
    text = (f"The cells ran in up to {rounds} rounds (`--rounds`), each round building the loader and training the "
            "warm-up and recorded epochs again, in the sweep's order and then the reverse by turns: a steady drift of "
            "the machine over the sweep then widens every cell's spread alike instead of setting the first cells "
            "apart from the last.")
    if len(ratio):
        text += (f" Over the {len(ratio)} cells recorded in both of the first two rounds, the second round's epochs "
                 f"took {ratio.median():.3g}x the first's (median; {ratio.min():.3g}-{ratio.max():.3g}x).")
    return text + "\n\n"


def epoch_text(table: pd.DataFrame) -> pd.Series:
    return table.apply(lambda row: f"{row['epoch_s']:.3g} ({row['epoch_s min']:.3g}-{row['epoch_s max']:.3g})", axis=1)


def flagged(values: pd.Series, fmt: str, noise: pd.Series | None = None) -> pd.Series:
    """``values`` as ``fmt`` makes them text, "(noise)" after those ``noise`` marks as within the spread, empty where
    there is nothing to compare with."""
    noise = noise.fillna(False) if noise is not None else pd.Series(False, index=values.index)
    return pd.Series(["" if pd.isna(value) else fmt.format(value) + (" (noise)" if flag else "")
                      for value, flag in zip(values, noise)], index=values.index)


def measured_ceilings(path) -> tuple[float, float] | None:
    """The H2D memcpy and D2D copy ceilings (bytes/s) of the machine profile at ``path``; ``None`` where it has not
    both (``suite.measure.ceilings.profile_ceilings``)."""
    ceilings = profile_ceilings(path)
    if all(name in ceilings for name in CEILINGS):
        return ceilings[CEILINGS[0]], ceilings[CEILINGS[1]]
    return None


def with_bound(records: pd.DataFrame, settings: list[str]) -> tuple[pd.DataFrame, str]:
    """``records`` with each one's data-loading lower bound in seconds as column ``BOUND``, and the sentence the
    table's text gives it.

    A cell's records all have a bound or none has (``per_cell`` averages what it is given); where no cell has
    one the column is left out and the sentence says why.
    """
    def column(name):
        values = records[name] if name in records else pd.Series(math.nan, index=records.index)
        return pd.to_numeric(values, errors="coerce").astype(float)

    profiles = records["machine_profile"] if "machine_profile" in records else pd.Series(None, index=records.index)
    made = pd.to_datetime(records["time"], utc=True, errors="coerce") if "time" in records else None
    made = made if made is not None else pd.Series(pd.NaT, index=records.index)
    pairs = [(path if isinstance(path, str) else None, None if pd.isna(when) else when.to_pydatetime())
             for path, when in zip(profiles, made)]
    candidates = {path: profile_candidates(path) for path, _ in set(pairs)}  # each file read once
    found = [ran_under(candidates[path], when) for path, when in pairs]  # the profile each record ran under
    ceilings = {profile: measured_ceilings(profile) for profile in set(found) if profile is not None}
    measured = pd.Series([ceilings.get(profile) for profile in found], index=records.index, dtype=object)
    # a profile of that name exists, but every one was written after the record: a later doctor's
    replaced = pd.Series([profile is None and bool(candidates[path]) for profile, (path, _) in zip(found, pairs)],
                         index=records.index)
    h2d = measured.map(lambda pair: math.nan if pair is None else pair[0]).astype(float)
    d2d = measured.map(lambda pair: math.nan if pair is None else pair[1]).astype(float)
    hot_bytes = column("hit_ratio") * column("rows_gathered") * column("row_bytes")
    bound = column("pcie_payload_bytes") / h2d + hot_bytes / d2d
    reasons = pd.Series("", index=records.index).mask(bound.isna(), NO_ROWS)
    reasons = reasons.mask(column("rows_gathered").isna() | column("row_bytes").isna(), NO_ROW_COUNTS)
    reasons = reasons.mask(records["device"].astype(str).str.startswith("cpu"), ON_CPU)
    reasons = reasons.mask(measured.isna(), NO_CEILINGS)
    reasons = reasons.mask(replaced, PROFILE_REPLACED)
    reasons = reasons.mask(column("processes") > 1, SEVERAL_PROCESSES)
    bound = bound.mask(reasons != "")
    complete = bound.notna().groupby([records[name] for name in settings], dropna=False, sort=False).transform("all")
    bound = bound.where(complete)
    why = "; ".join(reason for reason in dict.fromkeys(reasons[~complete]) if reason)
    if bound.isna().all():
        return records, f"No gather bound, as {why}.\n\n"
    cells = records[~complete].groupby(settings, dropna=False).ngroups
    missing = f" {cells} rows have no bound, as {why}." if cells else ""
    return records.assign(**{BOUND: bound}), f"{BOUND_TEXT}{missing}\n\n"


def cells_with_bound(records: pd.DataFrame, settings: list[str], columns: list[str]) -> tuple[pd.DataFrame, str]:
    """One row per cell of ``columns`` (``per_cell``) with, where the records allow one (``with_bound``), its mean
    gather time and bound and the one over the other (``RATIO``: mean gather time / mean bound); and the sentence the
    table's text gives the bound."""
    bounded, text = with_bound(records, settings)
    bound = [column for column in ("gather_s", BOUND) if BOUND in bounded]
    table = per_cell(bounded, settings, list(dict.fromkeys(columns + bound)))
    if BOUND in table:
        table[RATIO] = table["gather_s"] / table[BOUND]
    return table, text


def bound_columns(display: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``display`` with the bound and the gather time over it after its ``gather_s``, where ``table`` has them."""
    if BOUND not in table:
        return display
    at = display.columns.get_loc("gather_s") + 1
    display.insert(at, BOUND, table[BOUND])
    display.insert(at + 1, RATIO, table[RATIO])
    return display


def markdown_table(display: pd.DataFrame) -> str:
    """``display`` as a markdown table, numbers to 3 digits, missing values (measured counters, say) empty."""
    return display.astype(object).where(display.notna(), None).to_markdown(index=False, floatfmt=".3g", missingval="") + "\n"


def tiered_records(records: pd.DataFrame, figure: int, command: str) -> pd.DataFrame:
    """The tiered loader's records, the ones Figures 10 and 11 plot; ``ValueError`` naming ``command`` where there
    are none."""
    tiered = records[records["loader"] == "tiered"]
    if tiered.empty:
        raise BadValue(f"Figure {figure} needs records of the tiered loader ({command})")
    return tiered
