"""The records of ``tierbench run``: one CSV per experiment, one row per recorded epoch, with a typed schema.

Every row carries what docs/design.md's metrics section asks of a record (dataset
and sizes, fanouts, batch size, loader, scorer, hot fraction, GPU count,
device, git revision and time) beside the epoch's measurements (Data Tiering
§5.3-5.4: epoch time split into sample / gather / train, hit ratio, PCIe
bytes).

* **Typed.** ``SCHEMA`` gives each column its type: provenance is text (the
  revision ``48e396741866`` stays a string, never the float ``inf``),
  ``pipeline`` is exactly ``True`` or ``False``, counts are integers
  (pandas' nullable ``Int64`` where a value may be missing), times and
  ratios are floats.  A value that does not parse for its column, or a line
  with the wrong number of fields, is refused with the file, its line number
  (1-based, the header is line 1) and the column.  Columns this module does
  not know are kept as text.
* **Appended, never rewritten.** New rows are appended to the file, whose
  header is written once, under an exclusive lock on ``<csv>.lock``; the
  rows already there are never parsed and written back.  Replacing a cell's
  rows (``tierbench run --rerun``) rewrites the file under the same lock
  through a temporary file and a rename, copying every other line as text.
  When new rows bring a column the header lacks, the header gains it at its
  end and every earlier line gains an empty field, its text otherwise kept.
* **Concurrent sweeps** on one file never lose rows: every append and
  rewrite holds the lock, and readers take it too (where they can create the
  lock file), so none sees half an append.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

import filelock
import numpy as np
import pandas as pd

from suite.errors import BadValue
from suite.io import atomic
from suite.io.records import RANGES


@dataclasses.dataclass(frozen=True)
class Column:
    """A column's type: ``str``, ``int``, ``float`` or ``bool``.

    ``nullable``: an empty value is a missing one (``None`` for text, ``<NA>``
    for integers; an empty float is NaN in every float column).  ``default``:
    the value of rows written before the column existed, both where the column
    is absent and where a later header gave older rows an empty field.
    """

    kind: str
    nullable: bool = False
    default: object = None
    within: str | None = None  # "share", "seconds" or "count": the range of its values (suite.io.records.RANGES)


def _share(**kw) -> Column:
    return Column("float", within="share", **kw)


def _seconds() -> Column:
    return Column("float", within="seconds")


def _count(**kw) -> Column:
    return Column("int", within="count", **kw)


SCHEMA = {
    "dataset": Column("str"),
    "num_nodes": _count(),
    "num_edges": _count(),
    "feature_dim": _count(),
    "fanouts": Column("str"),
    "batch_size": _count(),
    "regime": Column("str", default="unscaled"),
    "loader": Column("str"),
    "scorer": Column("str"),
    "hot_fraction": _share(),
    "host_fraction": _share(nullable=True),
    "sampling": Column("str", default="cpu"),
    "sampler_kernels": Column("str", nullable=True),  # the fused GPU sampler's, where it sampled: numba or cupy
    "processes": _count(default=1),
    "gpus": _count(),
    "device": Column("str"),
    "git_revision": Column("str"),
    "source_sha256": Column("str", nullable=True),
    "time": Column("str"),
    "host": Column("str"),
    "torch": Column("str"),
    "machine_profile": Column("str", nullable=True),
    "epoch": _count(),
    "round": _count(default=1),  # the sweep's round the epoch ran in (``suite.sweep.run``)
    "loss": Column("float"),
    "valid_accuracy": _share(nullable=True),  # empty where the run skipped validation (--no-validation)
    "sample_s": _seconds(),
    "gather_s": _seconds(),
    "train_s": _seconds(),
    "epoch_s": _seconds(),
    "batches": _count(),
    "sampled_edges": _count(),
    "hit_ratio": _share(),
    "rows_gathered": _count(nullable=True),
    "nodes_touched": _count(nullable=True),
    "row_bytes": _count(nullable=True),
    "pcie_payload_bytes": _count(),
    "pcie_requests": _count(),
    "host_bytes_touched": _count(),
    "gpu_bytes_resident": _count(),
    "disk_bytes_read": _count(default=0),
    "pcie_rx_bytes_measured": _count(nullable=True),
    "pcie_measured_scope": Column("str", nullable=True),
    "pipeline": Column("bool", default=False),
    "sample_event_s": Column("float", nullable=True, within="seconds"),  # CUDA events (suite.measure.stage_events)
    "gather_event_s": Column("float", nullable=True, within="seconds"),
    "train_event_s": Column("float", nullable=True, within="seconds"),
    "kernel_variant": Column("str", nullable=True),  # the gather kernel's variant, where the loader chose one
    "variant_basis": Column("str", nullable=True),  # why: each tier's fastest in gpubench's records, or the default
    "epoch_batches": _count(nullable=True),  # a whole epoch's minibatches; empty in rows written before it existed
    "batch_limit": _count(nullable=True),  # the minibatches each epoch stopped at (tierbench run --minibatches)
}
"""Column -> type of a record; rows written before ``sampling``, ``processes`` and ``pipeline`` existed ran
with CPU sampling, in one process, without a pipeline, and those written before ``regime`` with the paper's batch
unscaled; those written before ``rows_gathered``, ``nodes_touched`` and ``row_bytes`` existed miss them
(``<NA>``); those written before ``disk_bytes_read`` existed read nothing from disk (0).  ``host_fraction`` is the host
budget of a loader that reads from disk, empty for the others and in rows written before it existed; likewise
``kernel_variant`` and ``variant_basis`` for the loader that chooses its gather kernel's variant (``tiered``), and
``source_sha256`` (``suite.io.provenance``) in rows written before it existed.  ``sample_event_s``, ``gather_event_s``
and ``train_event_s`` are the stages timed by CUDA events on their streams: empty on a CPU and in rows written before
they existed.  ``gather_s`` is the gather's host wall time, the GPU waited for, except in a pipelined run on CUDA
(``pipeline`` true): there the gather thread's busy time is taken by the same CUDA events on its stream as
``gather_event_s`` (``suite.training.pipeline``), and the two are equal.  ``batch_limit`` is empty for whole epochs,
and ``epoch_batches`` in rows written before it existed (whole epochs too: their ``batches``); ``valid_accuracy`` is
empty where the run skipped validation (``--no-validation``).  ``sampler_kernels`` names the kernels the fused GPU
sampler launched (``gpu`` and ``uva`` sampling, ``tierbench run --sampler-kernels``), empty where the fused sampler
did not sample and in rows written before it existed.  ``round`` is the sweep's round the cell ran in (1 in rows
written before sweeps had rounds)."""

_EXTRA = Column("str", nullable=True)  # a column this version does not know: kept as text
_INTEGER = re.compile(r"[+-]?\d+(?:\.0*)?")  # pandas wrote an integer column with a gap as floats: 1744078336.0
_EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def records_path(runs_dir, experiment: str) -> Path:
    """The CSV of ``experiment`` in ``runs_dir``; an experiment name is a plain file stem, never a path."""
    if not _EXPERIMENT_NAME.fullmatch(experiment):
        raise BadValue(
            f"experiment name {experiment!r} is not a plain name: use letters, digits, '.', '_' and '-', "
            "starting with a letter or a digit (e.g. fig8, mine-2); its records go to <runs>/<name>.csv"
        )
    return Path(runs_dir) / f"{experiment}.csv"


def check_writable(path) -> None:
    """Refuse, before anything runs, a records CSV whose directory cannot be created or written."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise BadValue(f"cannot write records into {path.parent}: {err.strerror or err}; "
                       "give a writable directory (--runs DIR)") from None
    if path.exists() and (not path.is_file() or not os.access(path, os.W_OK)):
        raise BadValue(f"cannot write records to {path}: it is not a writable file; give another --runs directory")


def _lock(path: Path) -> filelock.FileLock:
    return filelock.FileLock(f"{path}.lock")


def _can_lock(path: Path) -> bool:
    """Whether this process can create (or open) the lock file; where it cannot, no process of this user writes."""
    lock = Path(f"{path}.lock")
    return os.access(path.parent, os.W_OK) and (not lock.exists() or os.access(lock, os.W_OK))


@dataclasses.dataclass
class _Table:
    """A records file as text: its header, and each row's line number (1-based) and fields."""

    lines: list[str]  # the physical lines, without their line ends
    header: list[str]
    rows: list[tuple[int, list[str]]]
    complete: bool = True  # the last line has its line end


def _read_table(path: Path) -> _Table:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BadValue(f"{path}: byte {err.start} is not UTF-8 text; it is not a records file of tierbench run") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file ends with a line end
    reader = csv.reader(lines, strict=True)
    header, rows = [], []
    previous = 0
    try:
        for fields in reader:
            if reader.line_num != previous + 1:
                raise BadValue(f"{path}, line {previous + 1}: a quoted value runs past the end of the line; "
                               "every record is one line")
            previous = reader.line_num
            if not fields:
                continue  # a blank line
            if not header:
                header = fields
                if len(set(header)) != len(header):
                    raise BadValue(f"{path}, line {previous}: the header names a column twice")
            elif len(fields) != len(header):
                raise BadValue(f"{path}, line {previous}: {len(fields)} fields where the header has {len(header)}")
            else:
                rows.append((previous, fields))
    except csv.Error as err:
        raise BadValue(f"{path}, line {previous + 1}: not a CSV record ({err})") from None
    return _Table(lines, header, rows, text.endswith("\n") or not text)


def _parse(text: str, spec: Column):
    """The value of one field of a ``spec`` column; ``ValueError`` when it does not parse."""
    if text == "":
        if spec.default is not None:
            return spec.default
        if spec.kind == "float":
            return math.nan
        if spec.nullable:
            return pd.NA if spec.kind == "int" else None
        raise ValueError("it is empty")
    if spec.kind == "str":
        return text
    if spec.kind == "bool":
        if text not in ("True", "False"):
            raise ValueError(f"{text!r} is not True or False")
        return text == "True"
    if spec.kind == "int":
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"{text!r} is not an integer")
        value = int(text.split(".")[0])
    else:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    if spec.within is not None and not math.isnan(value):
        within, requirement = RANGES[spec.within]
        if not within(value):
            raise ValueError(f"{text!r} is not {requirement}")
    return value


def _dtype(spec: Column) -> str:
    if spec.kind == "int":
        return "Int64" if spec.nullable else "int64"
    return {"str": "object", "float": "float64", "bool": "bool"}[spec.kind]


def _typed(path: Path, table: _Table) -> pd.DataFrame:
    """The rows of ``table`` as a frame with the schema's types (unknown columns as text)."""
    columns = {}
    for k, name in enumerate(table.header):
        spec = SCHEMA.get(name, _EXTRA)
        values = []
        for line, fields in table.rows:
            try:
                values.append(_parse(fields[k], spec))
            except ValueError as err:
                raise BadValue(f"{path}, line {line}, column {name}: {err}; fix or delete the line") from None
        columns[name] = pd.Series(values, dtype=_dtype(spec))
    for name, spec in SCHEMA.items():
        if name in columns:
            continue
        if spec.default is None and not spec.nullable:
            raise BadValue(f"{path}: the header has no column {name}; it is not a records file of tierbench run")
        fill = spec.default if spec.default is not None else (pd.NA if spec.kind == "int" else None)
        columns[name] = pd.Series([fill] * len(table.rows), dtype=_dtype(spec))
    return pd.DataFrame(columns)


def read_records(path) -> pd.DataFrame:
    """The records at ``path`` with the schema's types; an empty frame when there are none.

    Read under the file's lock, so no append is seen half-written (without
    the lock where this process cannot create the lock file: then no
    process of this user can write the file either).
    """
    path = Path(path)
    if not path.exists():
        return pd.DataFrame()
    if _can_lock(path):
        with _lock(path):
            table = _read_table(path)
    else:
        table = _read_table(path)
    return _typed(path, table) if table.header else pd.DataFrame()


def _field(name: str, value) -> str:
    """The text of ``value`` in column ``name``; refuses a value of the wrong type for the schema."""
    spec = SCHEMA.get(name, _EXTRA)
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        if spec.nullable or spec.kind == "float":
            return ""
        raise ValueError(f"record column {name} needs a value")
    if spec.kind == "bool" and not isinstance(value, bool):
        raise ValueError(f"record column {name} holds True or False, got {value!r}")
    if spec.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"record column {name} holds integers, got {value!r}")
    if spec.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"record column {name} holds numbers, got {value!r}")
        return repr(float(value))
    if spec.kind == "str" and spec is not _EXTRA and not isinstance(value, str):
        raise ValueError(f"record column {name} holds text, got {value!r}")
    text = repr(value) if isinstance(value, float) else str(value)
    if "\n" in text or "\r" in text:
        raise ValueError(f"record column {name}: a value holds a line break ({text!r}); every record is one line")
    return text


def _csv_lines(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def store_records(path, rows: list[dict], replace: Callable[[pd.DataFrame], pd.Series] | None = None) -> None:
    """Append ``rows`` to the records at ``path``, under the file's lock.

    ``replace``, given the records as they are under the lock, selects the
    rows the new ones replace: then the file is rewritten through a temporary
    file and a rename, every line it keeps copied as text.  Otherwise the new
    rows are appended, and the lines already there are not touched.
    """
    if not rows:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path):
        table = _read_table(path) if path.exists() else _Table([], [], [])
        header = table.header or list(SCHEMA)
        added = [name for row in rows for name in row if name not in header]
        added = list(dict.fromkeys(added))  # unique, in order of appearance
        columns = header + added
        new = _csv_lines([[_field(name, row.get(name)) for name in columns] for row in rows])
        drop = set()
        if replace is not None and table.rows:
            selected = replace(_typed(path, table)).to_numpy(dtype=bool)
            drop = {line for (line, _), hit in zip(table.rows, selected) if hit}
        if table.header and not added and not drop:
            with open(path, "ab") as f:  # one write: the rows of a cell arrive together
                f.write((new if table.complete else "\n" + new).encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            return
        kept = "".join(table.lines[line - 1] + "," * len(added) + "\n" for line, _ in table.rows if line not in drop)
        atomic.write_text(path, _csv_lines([columns]) + kept + new)
