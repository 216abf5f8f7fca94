"""An experiment's records read back: numbers out of their column's range, and files that are not text, are refused
naming the file, the line and the column."""

import pandas as pd
import pytest

from suite.errors import BadValue
from suite.io.records import read_records, write_records

PROVENANCE = {"device": "cpu: test", "git_revision": "abc", "time": "2026-11-25T00:00:00+00:00"}


def written(tmp_path, **columns):
    table = pd.DataFrame({"name": ["a", "b"], "epoch_s": [1.0, 2.0], "hit_ratio": [0.5, 0.25],
                          "disk_bytes": [10, 20], **columns})
    return write_records(tmp_path / "t.csv", table, PROVENANCE, {}, index=False)


def test_values_in_range_are_read_back(tmp_path):
    assert read_records(written(tmp_path), ()).table["hit_ratio"].tolist() == [0.5, 0.25]


@pytest.mark.parametrize("column, values, says", [
    ("hit_ratio", [0.5, 7.5], r"line 3, column hit_ratio: 7.5 is not a share in \[0, 1\]"),
    ("hot_fraction", [float("inf"), 0.1], r"line 2, column hot_fraction: inf is not a share"),
    ("epoch_s", [-1e308, 1.0], "line 2, column epoch_s: -1e\\+308 is not a time in seconds, finite and at least 0"),
    ("disk_bytes", [1, -3], "line 3, column disk_bytes: -3 is not a size in bytes"),
])
def test_a_value_out_of_its_range_is_refused_naming_file_line_and_column(tmp_path, column, values, says):
    path = written(tmp_path, **{column: values})
    with pytest.raises(BadValue, match=f"t.csv, {says}"):
        read_records(path, ())


def test_a_table_or_sidecar_that_is_not_text_is_refused_naming_it(tmp_path):
    path = written(tmp_path)
    path.write_bytes(b"name,epoch_s\n\xff\xfe,1\n")
    with pytest.raises(BadValue, match="t.csv is not UTF-8 text"):
        read_records(path, ())
    path = written(tmp_path)
    path.with_suffix(".json").write_bytes(b"\xff{")
    with pytest.raises(BadValue, match="t.json: not the JSON sidecar"):
        read_records(path, ())
