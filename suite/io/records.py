"""An experiment's records: its table (CSV) and a sidecar JSON beside it with the provenance and the facts its report
needs (settings, the command that made it, ceilings measured in the same run).

An experiment (``suite.experiments``) writes them; its figure (``suite.figures``) reads them back through the
experiment's ``read_records`` and draws, without measuring again.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from suite.errors import BadValue
from suite.io import atomic

PROVENANCE_KEYS = ("device", "git_revision", "time")
"""What every record carries at least: where, from which code, and when it was measured."""
PROVENANCE_COLUMNS = {"device": str, "git_revision": str, "source_sha256": str, "time": str, "host": str,
                      "torch": str, "machine_profile": str}
"""The provenance columns a table may carry beside its numbers, read as strings (a git revision of digits only
stays a string)."""


@dataclasses.dataclass(frozen=True)
class Records:
    """A measurement read back: its table, its provenance record and the facts its report needs."""

    table: pd.DataFrame
    provenance: dict
    facts: dict
    path: Path
    """The table's CSV: the records themselves, copied unchanged into a report's folder."""


def sidecar_path(table_path) -> Path:
    return Path(table_path).with_suffix(".json")


def write_records(table_path, table: pd.DataFrame, provenance: dict, facts: dict, **csv_options) -> Path:
    """``table`` as CSV at ``table_path`` and its sidecar JSON beside it, both crash-safe; the CSV's path."""
    table_path = Path(table_path)
    atomic.write_csv(table_path, table, **csv_options)
    atomic.write_json(sidecar_path(table_path), {"provenance": provenance, "facts": facts})
    return table_path


RANGES = {
    "share": (lambda v: (0 <= v) & (v <= 1), "a share in [0, 1]"),
    "seconds": (lambda v: (0 <= v) & np.isfinite(v), "a time in seconds, finite and at least 0"),
    "bytes": (lambda v: 0 <= v, "a size in bytes, at least 0"),
    "count": (lambda v: 0 <= v, "a count, at least 0"),
}
"""The ranges of recorded numbers: whether a value (or each of an array's) is in it, and what it is in words.  A
missing value (empty, NaN, <NA>) is in every range."""

RANGE_BY_NAME = (
    (lambda c: c.endswith(("_fraction", "_ratio")), "share"),
    (lambda c: c.endswith("_s"), "seconds"),
    (lambda c: c.endswith("_bytes"), "bytes"),
)
"""The range of a table's column, by its name: ``*_fraction`` and ``*_ratio`` are shares, ``*_s`` times and
``*_bytes`` sizes."""


def _check_ranges(path: Path, table: pd.DataFrame) -> None:
    for column in table.columns:
        values = table[column]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        for applies, trait in RANGE_BY_NAME:
            if applies(str(column)):
                within, requirement = RANGES[trait]
                outside = values.notna() & ~within(values.astype(float))
                if outside.any():
                    row = int(np.flatnonzero(outside.to_numpy())[0])
                    raise BadValue(f"{path}, line {row + 2}, column {column}: {values.iloc[row]} is not "
                                   f"{requirement}; fix or delete the line")


def read_table(path, **options) -> pd.DataFrame:
    """A CSV written by ``write_records``, with its provenance columns as strings, its numbers checked to be in their
    columns' ``RANGES``."""
    path = Path(path)
    try:
        header = pd.read_csv(path, nrows=0).columns
        dtype = {**{c: t for c, t in PROVENANCE_COLUMNS.items() if c in header}, **options.pop("dtype", {})}
        table = pd.read_csv(path, dtype=dtype, **options)
    except UnicodeDecodeError:
        raise BadValue(f"{path} is not UTF-8 text: it is not a table of tierbench's records") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise BadValue(f"{path}: not a CSV table ({str(err).strip().splitlines()[0]})") from None
    _check_ranges(path, table)
    return table


def read_records(table_path, facts: tuple[str, ...], measured_by: str | None = None, **options) -> Records:
    """The table at ``table_path`` and its sidecar, checked to hold the provenance and ``facts``; a missing or
    incomplete one is the user's ``BadValue`` (``measured_by``: the command that writes them, to name in it)."""
    table_path = Path(table_path)
    sidecar = sidecar_path(table_path)
    hint = f": measure it with `{measured_by}` first" if measured_by else ""
    if not table_path.exists():
        raise BadValue(f"{table_path} does not exist{hint}")
    try:
        stored = json.loads(sidecar.read_text())
    except FileNotFoundError:
        raise BadValue(f"{sidecar} does not exist: {table_path} lacks the sidecar of an experiment's records"
                       f"{hint}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadValue(f"{sidecar}: not the JSON sidecar of an experiment's records ({err}){hint}") from None
    provenance, known = stored.get("provenance", {}), stored.get("facts", {})
    missing = [k for k in PROVENANCE_KEYS if not isinstance(provenance.get(k), str)]
    missing += [f"facts.{k}" for k in facts if k not in known]
    if missing:
        raise BadValue(f"{sidecar} lacks {', '.join(missing)}")
    return Records(read_table(table_path, **options), provenance, known, table_path)


def copy_table(records: Records, out_dir, name: str | None = None) -> Path:
    """The records' CSV, unchanged, in ``out_dir`` (nothing to do where it already is); its path there."""
    target = Path(out_dir) / (name or records.path.name)
    if target.resolve() != records.path.resolve():
        with atomic.atomic_path(target) as tmp:
            shutil.copyfile(records.path, tmp)
    return target
