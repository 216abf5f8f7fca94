"""Records of tierbench run: typed columns, lines refused by number, appends that never rewrite or lose rows."""

import csv

import pytest

from suite.sweep.records import SCHEMA, read_records, records_path, store_records
from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment

OLD_HEADER = [  # the columns of results/runs/demo.csv, written before sampling, processes and pipeline existed
    "dataset", "num_nodes", "num_edges", "feature_dim", "fanouts", "batch_size", "loader", "scorer", "hot_fraction",
    "gpus", "device", "git_revision", "time", "host", "torch", "epoch", "loss", "valid_accuracy", "sample_s",
    "gather_s", "train_s", "epoch_s", "batches", "sampled_edges", "hit_ratio", "pcie_payload_bytes", "pcie_requests",
    "host_bytes_touched", "gpu_bytes_resident", "pcie_rx_bytes_measured",
]
OLD_LINE = ('tiny,4096,40158,32,"10,10",1024,uva,none,0.0,0,cpu: AMD EPYC,8c002a67e858,2026-11-21T15:13:29+00:00,vm,'
            "2.13.0+cpu,1,1.6396884322166443,0.4853658536585366,0.0042,0.00025,0.0211,0.02569,2,36660,0.0,1744,13,"
            "1744,524288,")


def row(**changes) -> dict:
    """One record as run_cell makes it."""
    values = {
        "dataset": "tiny", "num_nodes": 4096, "num_edges": 40158, "feature_dim": 32, "fanouts": "10,10",
        "batch_size": 1024, "regime": "unscaled", "loader": "tiered", "scorer": "wrpr", "hot_fraction": 0.1,
        "host_fraction": None,
        "sampling": "cpu", "sampler_kernels": None,
        "processes": 1, "gpus": 0, "device": "cpu: AMD EPYC", "git_revision": "48e396741866",
        "source_sha256": "5e1f0c2b9a7d4e36",
        "time": "2026-11-21T15:13:29+00:00", "host": "vm", "torch": "2.13.0+cpu", "machine_profile": None,
        "epoch": 1, "round": 1, "loss": 1.25, "valid_accuracy": 0.5, "sample_s": 0.01, "gather_s": 0.002, "train_s": 0.02,
        "epoch_s": 0.032, "batches": 2, "sampled_edges": 36660, "hit_ratio": 0.3, "rows_gathered": 30, "nodes_touched": 25,
        "row_bytes": 128, "pcie_payload_bytes": 1744, "pcie_requests": 13, "host_bytes_touched": 1744,
        "gpu_bytes_resident": 524288, "disk_bytes_read": 0, "pcie_rx_bytes_measured": None,
        "pcie_measured_scope": "unavailable: cpu",
        "pipeline": False, "sample_event_s": None, "gather_event_s": None, "train_event_s": None, "kernel_variant": "aligned", "variant_basis": "default: no gpubench records for cpu: AMD EPYC",
        "epoch_batches": 2, "batch_limit": None,
    }
    return {**values, **changes}


def test_revisions_stay_strings_and_earlier_lines_are_never_rewritten(tmp_path):
    path = tmp_path / "r.csv"
    store_records(path, [row(git_revision="48e396741866"), row(git_revision="1234567", epoch=2)])
    first = path.read_text()
    store_records(path, [row(git_revision="9e10", pipeline=True, pcie_rx_bytes_measured=2**40)])
    assert path.read_text().startswith(first)  # appended: the earlier lines are as they were
    records = read_records(path)
    assert records["git_revision"].tolist() == ["48e396741866", "1234567", "9e10"]
    assert records["pipeline"].tolist() == [False, False, True]
    assert str(records["pcie_rx_bytes_measured"].dtype) == "Int64"
    assert records["pcie_rx_bytes_measured"].isna().tolist() == [True, True, False]
    assert records["pcie_rx_bytes_measured"].iloc[2] == 2**40 and records["epoch"].dtype == "int64"
    assert records["machine_profile"].isna().all() and records["fanouts"].tolist() == ["10,10"] * 3
    assert set(SCHEMA) == set(records.columns)


@pytest.mark.parametrize("column, bad, message", [
    ("pipeline", "Tru", "'Tru' is not True or False"),
    ("epoch", "1.5", "'1.5' is not an integer"),
    ("hit_ratio", "high", "'high' is not a number"),
    ("dataset", "", "it is empty"),
    ("hot_fraction", "inf", r"'inf' is not a share in \[0, 1\]"),
    ("hit_ratio", "7.5", r"'7.5' is not a share in \[0, 1\]"),
    ("epoch_s", "-1e308", "'-1e308' is not a time in seconds, finite and at least 0"),
    ("gather_s", "inf", "'inf' is not a time in seconds"),
    ("pcie_payload_bytes", "-4", "'-4' is not a count, at least 0"),
])
def test_a_value_that_does_not_parse_is_refused_with_its_line_and_column(tmp_path, column, bad, message):
    path = tmp_path / "r.csv"
    store_records(path, [row(epoch=1), row(epoch=2), row(epoch=3)])
    header, *rows = csv.reader(path.read_text().splitlines())
    rows[1][header.index(column)] = bad  # the second record: line 3
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    with pytest.raises(ValueError, match=f"r.csv, line 3, column {column}: {message}"):
        read_records(path)


def test_a_line_with_the_wrong_number_of_fields_is_refused(tmp_path):
    path = tmp_path / "r.csv"
    store_records(path, [row(), row(epoch=2)])
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0], text[1] + ",extra", text[2]]) + "\n")
    with pytest.raises(ValueError, match=rf"r.csv, line 2: {len(SCHEMA) + 1} fields where the header has {len(SCHEMA)}"):
        read_records(path)
    path.write_text("\n".join([text[0], text[1], text[2].rsplit(",", 3)[0]]) + "\n")
    with pytest.raises(ValueError, match=rf"line 3: {len(SCHEMA) - 3} fields"):
        read_records(path)
    path.write_text("\n".join([text[0], 'tiny,"10', '10",uva', text[1]]) + "\n")
    with pytest.raises(ValueError, match="line 2: a quoted value runs past the end of the line"):
        read_records(path)
    path.write_text("\n".join([text[0], 'tiny,"10,10']) + "\n")
    with pytest.raises(ValueError, match="line 2: not a CSV record"):
        read_records(path)


def test_a_file_that_is_not_utf8_text_is_refused_naming_it(tmp_path):
    path = tmp_path / "r.csv"
    store_records(path, [row()])
    path.write_bytes(path.read_bytes().replace(b"tiny", b"t\xffny"))
    with pytest.raises(ValueError, match="r.csv: byte .* is not UTF-8 text"):
        read_records(path)


def test_values_of_the_wrong_type_are_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "r.csv"
    for bad, message in ((row(pipeline="yes"), "pipeline holds True or False"), (row(epoch=1.0), "epoch holds integers"),
                         (row(loader=None), "loader needs a value"), (row(host="a\nb"), "line break")):
        with pytest.raises(ValueError, match=message):
            store_records(path, [bad])
    assert not path.exists()


def test_older_files_get_the_documented_defaults_and_gain_new_columns_with_their_lines_kept(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text(",".join(OLD_HEADER) + "\n" + OLD_LINE + "\n")
    records = read_records(path)
    assert records["pipeline"].tolist() == [False] and records["sampling"].tolist() == ["cpu"]
    assert records["processes"].tolist() == [1] and records["machine_profile"].isna().all()
    for column in ("rows_gathered", "row_bytes"):  # not counted then: missing, never 0
        assert str(records[column].dtype) == "Int64" and records[column].isna().all()
    store_records(path, [row(pipeline=True, sampling="distributed", processes=2, rows_gathered=2**33, row_bytes=512)])
    lines = path.read_text().splitlines()
    added = [name for name in SCHEMA if name not in OLD_HEADER]
    assert lines[0] == ",".join(OLD_HEADER + added)
    assert lines[1] == OLD_LINE + "," * len(added)  # the old line's text, with an empty field per new column
    records = read_records(path)
    assert records["pipeline"].tolist() == [False, True] and records["sampling"].tolist() == ["cpu", "distributed"]
    assert records["processes"].tolist() == [1, 2] and records["git_revision"].tolist() == ["8c002a67e858", "48e396741866"]
    assert records["rows_gathered"].isna().tolist() == [True, False] and records["rows_gathered"].iloc[1] == 2**33
    assert records["row_bytes"].iloc[1] == 512


def test_unknown_columns_are_kept_as_text(tmp_path):
    path = tmp_path / "r.csv"
    store_records(path, [row(note=12)])
    store_records(path, [row(epoch=2)])
    records = read_records(path)
    assert records["note"].tolist() == ["12", None]


def test_a_rerun_replaces_its_rows_and_copies_every_other_line_as_written(tmp_path):
    path = tmp_path / "r.csv"
    store_records(path, [row(loader="uva", epoch=1), row(loader="tiered", epoch=1), row(loader="uva", epoch=2)])
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace(",0.3,", ",0.30,")  # a float as another writer spelled it: kept, not reformatted
    path.write_text("\n".join(lines) + "\n")
    store_records(path, [row(loader="uva", epoch=9)], replace=lambda records: records["loader"] == "uva")
    after = path.read_text().splitlines()
    assert after[:2] == lines[:1] + lines[2:3] and len(after) == 3
    assert read_records(path)["epoch"].tolist() == [1, 9]


def test_an_empty_file_holds_no_records_and_takes_a_header_with_the_first_rows(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("\n")  # what an --epochs 0 sweep used to leave
    assert read_records(path).empty
    store_records(path, [row()])
    assert len(read_records(path)) == 1


def test_an_experiment_name_is_a_plain_file_stem(tmp_path):
    assert records_path(tmp_path, "fig8") == tmp_path / "fig8.csv"
    assert records_path(tmp_path, "mine-2.b_c") == tmp_path / "mine-2.b_c.csv"
    for bad in ("../../x", "a/b", ".hidden", "", "..", "x y"):
        with pytest.raises(ValueError, match="not a plain name"):
            records_path(tmp_path, bad)


def append_many(path: str, writer: int, start, count: int) -> None:
    start.wait()  # every process begins together, so their appends and rewrites interleave
    for i in range(count):
        replace = None
        if i == count // 2:  # a rewrite in the middle of the others' appends: drops this writer's seed row
            replace = lambda records: records["host"] == f"seed-{writer}"  # noqa: E731
        store_records(path, [row(host=f"w{writer}", epoch=i, git_revision=f"{writer}e{i}")], replace=replace)


def test_three_processes_appending_and_rewriting_at_once_keep_every_row(tmp_path):
    path = tmp_path / "shared.csv"
    store_records(path, [row(host=f"seed-{writer}") for writer in range(3)])
    context = forkserver_context()
    start = context.Barrier(3)
    processes = [context.Process(target=in_callers_environment(append_many), args=(str(path), writer, start, 50))
                 for writer in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [process.exitcode for process in processes] == [0, 0, 0]
    records = read_records(path)
    assert len(records) == 150 and not records["host"].str.startswith("seed").any()
    for writer in range(3):
        mine = records[records["host"] == f"w{writer}"]
        assert sorted(mine["epoch"]) == list(range(50))
        assert set(mine["git_revision"]) == {f"{writer}e{i}" for i in range(50)}  # strings, even "0e1"


def sweep_in_process(runs: str, loaders: list, cache: str) -> int:
    import os

    os.environ["TIERBENCH_DATA"] = cache
    import suite.sweep.run as harness

    real, ran = harness.run_cell, []

    def counted(cell, dataset, **kwargs):
        ran.append(cell)
        return real(cell, dataset, **kwargs)

    harness.run_cell = counted
    harness.run_sweep("shared", runs, datasets=["tiny"], loaders=loaders, hot_fractions=[0.2], fanouts=[(4, 4)],
                      epochs=1, warmup=0, batch_size=4096, progress=False)
    return len(ran)


def test_three_sweeps_on_one_csv_keep_every_row(tiny, tmp_path, isolated_cache):
    runs = str(tmp_path / "runs")
    work = [["in-memory", "cpu-gather"], ["cpu-gather", "degree-cache"], ["degree-cache", "in-memory"]]  # overlapping
    with forkserver_context().Pool(3) as pool:
        ran = pool.starmap(in_callers_environment(sweep_in_process),
                           [(runs, loaders, str(isolated_cache)) for loaders in work])
    records = read_records(tmp_path / "runs" / "shared.csv")
    assert len(records) == sum(ran) >= 3  # one row per cell run: a cell two sweeps both ran is there twice
    assert set(records["loader"]) == {"in-memory", "cpu-gather", "degree-cache"}
