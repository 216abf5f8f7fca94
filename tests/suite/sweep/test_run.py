"""tierbench run / report: records with every field, resumable sweeps, tables with the paper beside ours."""

import contextlib
import dataclasses
import weakref

import pandas as pd
import pytest
import torch

import suite.sweep.run as harness
from baselines.page_cache import MmapLoader
from suite.cli import main
from suite.datasets.dataset import array_file
from suite.figures import write_report
from suite.sweep.cells import cells
from suite.sweep.records import read_records, store_records
from suite.sweep.run import run_sweep
from suite.sweep.sampler_choice import KernelChoice
from tiering.features.zero_copy import DEFAULT_VARIANT

FIELDS = [
    "dataset", "num_nodes", "num_edges", "feature_dim", "fanouts", "batch_size", "loader", "scorer", "hot_fraction",
    "gpus", "device", "git_revision", "time", "epoch_s", "sample_s", "gather_s", "train_s", "hit_ratio",
    "pcie_payload_bytes", "pcie_requests", "pcie_rx_bytes_measured", "host_bytes_touched", "gpu_bytes_resident",
    "valid_accuracy",
]
SWEEP = dict(datasets=["tiny"], loaders=["cpu-gather", "uva", "degree-cache", "tiered"], hot_fractions=[0.0, 0.25],
             fanouts=[(5, 5)], epochs=1, warmup=0, progress=False)


def test_cells_run_hot_fractions_only_where_there_is_a_hot_tier():
    got = [(c.loader, c.hot_fraction, c.scorer) for c in cells(["tiny"], ["cpu-gather", "tiered", "in-memory"], [0.1, 0.2], [(5,)])]
    assert got == [("cpu-gather", 0.0, "none"), ("tiered", 0.1, "wrpr"), ("tiered", 0.2, "wrpr"), ("in-memory", 1.0, "none")]
    assert cells(["papers-s"], ["uva"], [0.1], [None])[0].fanouts == (12, 12, 12)


def test_disk_loaders_run_at_every_host_budget_and_the_others_have_none():
    got = [(c.loader, c.hot_fraction, c.host_fraction)
           for c in cells(["tiny"], ["cpu-gather", "mmap", "disk-tiered"], [0.1], [(5,)], host_fractions=[0.2, 0.5])]
    assert got == [("cpu-gather", 0.0, None), ("mmap", 0.0, 0.2), ("mmap", 0.0, 0.5), ("disk-tiered", 0.1, 0.2),
                   ("disk-tiered", 0.1, 0.5)]


def reads_are_counted(dataset) -> bool:
    """Whether this machine's kernel counts a cold read of the dataset's table file (not on tmpfs or in some
    containers)."""
    mapped = MmapLoader(array_file(dataset.path, "features"))
    mapped.drop_cache()
    mapped.gather(torch.arange(dataset.num_nodes))
    counted = mapped.stats().disk_bytes_read > 0
    mapped.close()
    return counted


def test_a_sweep_of_disk_loaders_records_their_budgets_and_disk_bytes(tiny, tmp_path):
    sweep = dict(SWEEP, loaders=["cpu-gather", "mmap", "disk-tiered"], hot_fractions=[0.05], host_fractions=[0.1, 0.6])
    path, summary = run_sweep("d", tmp_path, **sweep)
    records = read_records(path)
    assert len(records) == 5 and len(summary) == 5
    assert records.loc[records["loader"] == "cpu-gather", "host_fraction"].isna().all()
    assert (records["loader"] == "cpu-gather").sum() == 1
    tiered = records[records["loader"] == "disk-tiered"].set_index("host_fraction")
    assert 0 < tiered.loc[0.6, "disk_bytes_read"] < tiered.loc[0.1, "disk_bytes_read"]
    assert records.loc[records["loader"] == "cpu-gather", "disk_bytes_read"].eq(0).all()
    if reads_are_counted(tiny):  # after cpu-gather mapped the table, mmap still starts cold
        assert records.loc[records["loader"] == "mmap", "disk_bytes_read"].gt(0).all()
    # the same rows, whichever loader brings them (disk-tiered trains on the reordered graph)
    assert records.groupby("scorer")["loss"].nunique().eq(1).all()
    before = path.read_bytes()
    run_sweep("d", tmp_path, **sweep)
    assert path.read_bytes() == before  # each budget's cell was found again
    write_report("d", tmp_path, tmp_path / "report")
    text = (tmp_path / "report" / "fig8.md").read_text()
    assert "disk_bytes_read" in text and text.count("| disk-tiered") == 2 and text.count("| mmap") == 2


def test_a_sweep_records_every_field_and_resumes_without_rerunning(tiny, tmp_path):
    path, summary = run_sweep("t", tmp_path, **SWEEP)
    records = read_records(path)
    assert set(FIELDS) <= set(records.columns)
    assert len(records) == 6 and len(summary) == 6  # cpu-gather, uva once; degree-cache, tiered at 0 and 25%
    assert records["device"].str.startswith("cpu: ").all() and (records["gpus"] == 0).all()
    assert records["pcie_rx_bytes_measured"].isna().all()  # unavailable, never 0
    tiered = records[records["loader"] == "tiered"].set_index("hot_fraction")
    assert tiered.loc[0.0, "hit_ratio"] == 0 and tiered.loc[0.25, "hit_ratio"] > 0.25  # hottest rows first
    assert tiered.loc[0.25, "pcie_payload_bytes"] < tiered.loc[0.0, "pcie_payload_bytes"]
    assert set(tiered["kernel_variant"]) == {DEFAULT_VARIANT}  # no gpubench records for a CPU: the default, said so
    assert tiered["variant_basis"].str.startswith("default: no gpubench records for cpu: ").all()
    assert records.loc[records["loader"] != "tiered", "kernel_variant"].isna().all()
    assert (records["source_sha256"].str.len() == 16).all()
    before = path.read_bytes()
    run_sweep("t", tmp_path, **SWEEP)
    assert path.read_bytes() == before  # every cell was found, nothing ran again
    run_sweep("t", tmp_path, **{**SWEEP, "loaders": ["uva"]}, rerun=True)
    again = read_records(path)
    assert len(again) == 6 and again["loader"].tolist()[-1] == "uva"  # replaced, not added


def test_an_interrupted_sweep_keeps_the_cells_it_finished(tiny, tmp_path, monkeypatch):
    real = harness.run_cell
    calls = []

    def flaky(cell, dataset, **kwargs):
        calls.append(cell)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(cell, dataset, **kwargs)

    monkeypatch.setattr(harness, "run_cell", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_sweep("t", tmp_path, **SWEEP)
    assert read_records(tmp_path / "t.csv")["loader"].tolist() == ["cpu-gather", "uva"]
    monkeypatch.setattr(harness, "run_cell", real)
    path, _ = run_sweep("t", tmp_path, **SWEEP)  # picks up where it stopped
    assert len(read_records(path)) == 6


def test_reports_put_the_papers_numbers_beside_ours(tiny, tmp_path):
    run_sweep("t", tmp_path, **SWEEP)
    fig8 = write_report("t", tmp_path, tmp_path / "out8", figure="fig8")
    table = pd.read_csv(fig8[1])
    cpu = table[table["loader"] == "cpu-gather"]
    assert cpu["speedup over cpu-gather"].iloc[0] == pytest.approx(1.0)
    text = fig8[0].read_text()
    assert "2.5-4.6x over CPU gather" in text and "1.6-2.1x over zero-copy" in text and "Measured on a CPU" in text
    fig10 = write_report("t", tmp_path, tmp_path / "out10", figure="fig10")
    table = pd.read_csv(fig10[1])
    assert table.loc[table["hot_fraction"] == 0.0, "traffic vs 0% (model)"].iloc[0] == 0
    assert table.loc[table["hot_fraction"] == 0.25, "traffic vs 0% (model)"].iloc[0] < 0
    assert "-97% traffic, -42% time" in fig10[0].read_text()
    assert fig10[2].read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no records"):
        write_report("missing", tmp_path)


def test_run_and_report_commands(tiny, tmp_path, capsys):
    runs = str(tmp_path / "runs")
    assert main(["run", "--experiment", "c", "--datasets", "tiny", "--loaders", "uva,tiered", "--hot-fractions", "0.1",
                 "--fanout", "4,4", "--epochs", "1", "--warmup", "0", "--runs", runs, "-q"]) == 0
    assert "records:" in capsys.readouterr().out
    assert main(["report", "--experiment", "c", "--runs", runs, "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "fig8.png").exists()
    assert main(["run", "--experiment", "new", "--runs", runs, "-q"]) == 2
    assert "give datasets and loaders" in capsys.readouterr().err


def test_figure_7_is_redrawn_from_its_csv(tiny, tmp_path, capsys):
    out = tmp_path / "profile"
    assert main(["profile", "--dataset", "tiny", "--figure", "7", "--out", str(out), "-q"]) == 0
    (out / "fig7.png").unlink()
    assert main(["report", "--figure", "7", "--dataset", "tiny", "--out", str(out)]) == 0
    assert (out / "fig7.png").read_bytes()[:4] == b"\x89PNG"


def test_pipelined_and_plain_runs_are_separate_cells_with_the_same_losses(tiny, tmp_path):
    sweep = {**SWEEP, "loaders": ["uva", "tiered"], "hot_fractions": [0.25]}
    run_sweep("p", tmp_path, **sweep)
    path, _ = run_sweep("p", tmp_path, **sweep, pipeline=True)
    records = read_records(path)
    assert sorted(records["pipeline"].tolist()) == [False, False, True, True]
    plain = records[~records["pipeline"]].set_index("loader")
    piped = records[records["pipeline"]].set_index("loader")
    assert (plain["loss"] == piped["loss"]).all() and (plain["valid_accuracy"] == piped["valid_accuracy"]).all()
    table = pd.read_csv(write_report("p", tmp_path, tmp_path / "rep", figure="fig8")[1])
    assert table.groupby("pipeline")["speedup over uva"].apply(lambda s: (s > 0).all()).all()
    assert len(table) == 4


def test_a_batch_limit_makes_partial_epochs_of_their_own_that_the_report_names(tiny, tmp_path):
    sweep = {**SWEEP, "loaders": ["tiered"], "hot_fractions": [0.25], "batch_size": 64}
    path, _ = run_sweep("b", tmp_path, **sweep, batch_limit=2)
    run_sweep("b", tmp_path, **sweep)  # not the same cell: it runs whole epochs
    run_sweep("b", tmp_path, **sweep, batch_limit=2)  # recorded already
    records = read_records(path).set_index("batch_limit", drop=False)
    whole = -(-len(tiny.splits["train"]) // 64)
    assert len(records) == 2 and (records["epoch_batches"] == whole).all()
    limited = records[records["batch_limit"].notna()]
    assert limited["batches"].tolist() == [2] and records[records["batch_limit"].isna()]["batches"].tolist() == [whole]
    written = write_report("b", tmp_path, tmp_path / "rep", figure="fig8")
    markdown = next(p for p in written if p.suffix == ".md").read_text()
    assert f"tiny: 2 of {whole}." in markdown and "not scaled to a whole epoch" in markdown


def test_a_run_without_validation_records_no_accuracy_and_runs_no_pass(tiny, tmp_path, monkeypatch):
    passes = []
    count_correct = harness.Trainer.count_correct
    monkeypatch.setattr(harness.Trainer, "count_correct",
                        lambda self, *args, **kw: passes.append(args) or count_correct(self, *args, **kw))
    sweep = {**SWEEP, "loaders": ["tiered"], "hot_fractions": [0.25], "batch_size": 64}
    path, _ = run_sweep("v", tmp_path, **sweep, batch_limit=2, validate=False)
    assert passes == []
    records = read_records(path)
    assert len(records) == 1 and records["valid_accuracy"].isna().all() and (records["batches"] == 2).all()
    run_sweep("v", tmp_path, **sweep, batch_limit=2)  # the same cell: validation is not a setting of it
    assert passes == [] and len(read_records(path)) == 1
    written = write_report("v", tmp_path, tmp_path / "rep", figure="fig8")
    markdown = next(p for p in written if p.suffix == ".md").read_text()
    assert "Not validated (`--no-validation`): the rows of tiny ran no validation pass" in markdown
    run_sweep("v", tmp_path, **sweep, batch_limit=2, rerun=True)
    assert len(passes) == 1 and read_records(path)["valid_accuracy"].notna().all()


def test_records_name_the_fused_samplers_kernels_and_each_sweep_finds_only_its_own(tiny, tmp_path):
    path, summary = run_sweep("k", tmp_path, **dict(SWEEP, loaders=["tiered"], hot_fractions=[0.25]))
    records = read_records(path)
    assert records["sampler_kernels"].isna().all() and summary["sampler_kernels"].isna().all()  # sampled on the CPU
    write_report("k", tmp_path, tmp_path / "cpu", figure="fig8")
    assert "sampler kernels" not in (tmp_path / "cpu" / "fig8.md").read_text()  # named only where some record has one
    # the same cell's row as the fused sampler's two sets of kernels would record it, each with its own epoch time
    gpu = [dict(row, sampling="gpu", sampler_kernels=kernels, epoch_s=seconds)
           for row in records.to_dict("records") for kernels, seconds in (("numba", 4.0), ("cupy", 2.0))]
    store_records(path, gpu)
    cell = cells(["tiny"], ["tiered"], [0.25], [(5, 5)])[0]
    for sampling, kernels, found in [("cpu", "numba", 1), ("cpu", "cupy", 1), ("gpu", "numba", 1), ("gpu", "cupy", 1),
                                     ("uva", "numba", 0)]:
        sweep = harness.Sweep(path, [cell], 1, 0, "cpu", False, 1, kernels=KernelChoice(kernels, "named"))
        sampled = dataclasses.replace(cell, sampling=sampling)
        assert sweep.rows_of(sampled)(read_records(path)).sum() == found, (sampling, kernels)
    assert len(harness.summarize_runs(read_records(path))) == 3  # never averaged across kernels
    write_report("k", tmp_path, tmp_path / "mixed", figure="fig8")
    rows = [[cell.strip() for cell in line.split("|")[1:4]] + [line.split("|")[4].split()[0]]
            for line in (tmp_path / "mixed" / "fig8.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert sorted(rows) == [["cpu", "", "tiered", f"{records['epoch_s'].iloc[0]:.3g}"], ["gpu", "cupy", "tiered", "2"],
                            ["gpu", "numba", "tiered", "4"]]


RUN = ["--datasets", "tiny", "--loaders", "in-memory,tiered", "--fanout", "4,4", "--epochs", "1", "--warmup", "0",
       "-q"]


@pytest.mark.parametrize("change, message", [
    (["--datasets", "tiny,papers-s,tinyy"], "unknown dataset 'tinyy'; synthetic presets are tiny, "),
    (["--datasets", "tiny,ogbn-products"], "ogbn-products is a real OGB dataset: give the directory that holds it"),
    (["--loaders", "in-memory,tiered,uvaa"], "unknown loader 'uvaa'; choose from cpu-gather, uva-naive, uva, "),
    (["--hot-fractions", "0.1,1.5"], "hot fractions are shares of the rows, in [0, 1]; got 1.5"),
    (["--loaders", "mmap", "--host-fractions", "0.1,2"], "host fractions are shares of the rows, in [0, 1]; got 2.0"),
    (["--epochs", "0"], "epochs (--epochs) must be an integer of at least 1, got 0"),
    (["--warmup", "-1"], "warmup (--warmup) must be an integer of at least 0, got -1"),
    (["--batch-size", "0"], "batch size (--batch-size) must be an integer of at least 1, got 0"),
    (["--minibatches", "0"], "minibatches per epoch (--minibatches) must be an integer of at least 1, got 0"),
    (["--fanout", "4,0"], "fanouts are one or more neighbour counts of at least 1"),
    (["--loaders", "disk-tiered", "--hot-fractions", "0.9", "--host-fractions", "0.9"],
     "disk-tiered's GPU and host tiers are shares of one table: hot fraction 0.9 + host fraction 0.9 is more than 1"),
    (["--sampling", "distributed"], "distributed sampling is for multi-process runs: add --gpus G"),
    (["--sampler-kernels", "cupy"], ("--sampler-kernels cupy chooses the fused GPU sampler's kernels, which no cell "
                                     "of this sweep runs (cpu sampling): add --sampling gpu or uva")),
    (["--experiment", "../../x"], "experiment name '../../x' is not a plain name"),
    (["--and-then", "e"], "--and-then names the experiment --experiment runs (e): name another"),
    (["--and-then", "fig10", "--gpus", "2"], "--and-then runs the second sweep in this one process"),
    (["--and-then", "nope"], "give datasets and loaders"),  # its own loaders: a new name has none
    (["--and-then", "fig10", "--hot-fractions", "0.1", "--epochs", "0"], "epochs (--epochs) must be an integer"),
])
def test_run_refuses_a_bad_setting_in_one_line_before_any_cell_runs(tmp_path, capsys, monkeypatch, change, message):
    def never(*args, **kwargs):
        raise AssertionError("a cell ran")

    monkeypatch.setattr(harness, "run_cell", never)
    monkeypatch.setattr(harness, "open_dataset", never)
    runs = tmp_path / "runs"
    argv = ["run", "--experiment", "e", *RUN, "--runs", str(runs)]
    for k in range(0, len(change), 2):  # a later option replaces an earlier one
        argv += change[k:k + 2]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: ") and err.count("\n") == 1
    assert message in err, err
    assert not list(tmp_path.rglob("*.csv"))  # nothing recorded, no file left behind


def test_and_then_runs_a_second_sweep_with_its_own_loaders_and_fractions_on_the_datasets_left_open(tiny, tmp_path,
                                                                                                 capsys, monkeypatch):
    real_open, real_plan = harness.open_dataset, harness.plan_sweep
    opened, planned = [], []
    monkeypatch.setattr(harness, "open_dataset", lambda cell, *args, **kwargs: opened.append(cell.scorer) or real_open(
        cell, *args, **kwargs))
    monkeypatch.setattr(harness, "plan_sweep", lambda name, *args, **kwargs: planned.append(name) or real_plan(
        name, *args, **kwargs))
    runs = tmp_path / "runs"
    assert main(["run", "--experiment", "first", "--datasets", "tiny", "--loaders", "cpu-gather,tiered",
                 "--hot-fractions", "0.1", "--fanout", "4,4", "--epochs", "1", "--warmup", "0", "--and-then", "fig10",
                 "--runs", str(runs), "-q"]) == 0
    assert opened == ["none", "wrpr"]  # Figure 10's six tiered cells find the reordered tiny still open
    assert planned == ["first", "fig10"]  # each checked once, both before the first cell runs
    first, fig10 = read_records(runs / "first.csv"), read_records(runs / "fig10.csv")
    assert list(first["loader"]) == ["cpu-gather", "tiered"] and set(first["hot_fraction"]) == {0.0, 0.1}
    # Figure 10's own two rounds, the second in the reverse order; one epoch each (this command's --epochs)
    fractions = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25]
    assert set(fig10["loader"]) == {"tiered"} and list(fig10["hot_fraction"]) == fractions + fractions[::-1]
    assert list(fig10["round"]) == [1] * 6 + [2] * 6 and set(first["round"]) == {1}  # the first sweep's one round
    assert set(fig10["dataset"]) == {"tiny"} and set(fig10["fanouts"]) == {"4,4"}
    assert capsys.readouterr().out.count("records: ") == 2


def test_rounds_run_every_cell_again_in_the_reverse_order_and_resume_and_rerun_round_by_round(tiny, tmp_path):
    runs = tmp_path / "runs"
    command = ["run", "--experiment", "e", "--datasets", "tiny", "--loaders", "cpu-gather,uva", "--fanout", "4,4",
               "--epochs", "1", "--warmup", "0", "--runs", str(runs), "-q"]

    def rows():
        records = read_records(runs / "e.csv")
        return list(zip(records["round"], records["loader"], strict=True))

    assert main([*command, "--rounds", "3"]) == 0
    order = [(1, "cpu-gather"), (1, "uva"), (2, "uva"), (2, "cpu-gather"), (3, "cpu-gather"), (3, "uva")]
    assert rows() == order
    assert main([*command, "--rounds", "4"]) == 0  # the rounds recorded are skipped: only the fourth runs
    assert rows() == order + [(4, "uva"), (4, "cpu-gather")]
    assert main([*command, "--rounds", "1", "--rerun"]) == 0  # the first round of a rerun replaces every round's rows
    assert sorted(rows()) == [(1, "cpu-gather"), (1, "uva")]
    assert main([*command, "--rounds", "2", "--rerun"]) == 0
    assert sorted(rows()) == [(1, "cpu-gather"), (1, "uva"), (2, "cpu-gather"), (2, "uva")]


def test_rounds_on_a_table_made_in_memory_finish_one_order_before_opening_the_next(tmp_path, monkeypatch):
    """A paper-scale dataset's table is made again at every open: its cells in each order run all their rounds before
    the other order's, so that it is made once per order (papers-100m: twice, not four times)."""
    sweep = harness.plan_sweep("e", tmp_path, datasets=["tiny"], loaders=["cpu-gather", "uva", "tiered"],
                               hot_fractions=[0.1], rounds=2)
    cells = [(cell.loader, cell.scorer) for cell in sweep.cells]
    assert cells == [("cpu-gather", "none"), ("uva", "none"), ("tiered", "wrpr")]
    everything = [(r, cell.loader) for r, cell in sweep.runs()]
    assert everything == [(1, "cpu-gather"), (1, "uva"), (1, "tiered"), (2, "tiered"), (2, "uva"), (2, "cpu-gather")]
    monkeypatch.setattr(harness, "is_paper_scale", lambda name: name == "tiny")
    assert [(r, cell.loader) for r, cell in sweep.runs()] == [
        (1, "cpu-gather"), (1, "uva"), (2, "uva"), (2, "cpu-gather"), (1, "tiered"), (2, "tiered")]


def test_a_sweep_of_no_rounds_is_refused_in_one_line(tmp_path, capsys):
    assert main(["run", "--experiment", "e", "--datasets", "tiny", "--loaders", "uva", "--rounds", "0", "--runs",
                 str(tmp_path / "runs"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: ") and "rounds (--rounds)" in err and err.count("\n") == 1


def test_the_tiered_loader_without_a_scorer_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs a dataset reordered by a scorer, got scorer None"):
        harness.plan_sweep("e", tmp_path, datasets=["tiny"], loaders=["tiered"], scorer=None)
    assert harness.plan_sweep("e", tmp_path, datasets=["tiny"], loaders=["uva"], scorer=None).cells[0].scorer == "none"


def test_run_refuses_a_runs_directory_it_cannot_write(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", "--experiment", "e", *RUN, "--runs", str(blocker / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tierbench: error: cannot write records into {blocker / 'runs'}: ") and err.count("\n") == 1
    assert "give a writable directory (--runs DIR)" in err


def test_run_refuses_a_records_file_that_does_not_parse_before_any_cell_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(harness, "run_cell", lambda *args, **kwargs: pytest.fail("a cell ran"))
    (tmp_path / "e.csv").write_text("dataset,loader\ntiny\n")
    assert main(["run", "--experiment", "e", *RUN, "--runs", str(tmp_path)]) == 2
    assert "e.csv, line 2: 1 fields where the header has 2" in capsys.readouterr().err


def test_an_interrupted_run_says_what_it_kept_and_how_to_resume(tiny, tmp_path, capsys, monkeypatch):
    runs = tmp_path / "runs"
    assert main(["run", "--experiment", "e", *RUN, "--loaders", "in-memory", "--runs", str(runs)]) == 0
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "run_planned", interrupted)
    assert main(["run", "--experiment", "e", *RUN, "--runs", str(runs)]) == 130
    err = capsys.readouterr().err
    assert err == (f"tierbench: interrupted: 1 of 2 cells recorded in {runs / 'e.csv'}; run the same command again "
                   "to resume (finished cells are skipped)\n")
    assert main(["run", "--experiment", "e", *RUN, "--runs", str(runs), "--rerun"]) == 130
    assert "; run it again without --rerun to resume" in capsys.readouterr().err
    assert main(["run", "--experiment", "e", *RUN, "--runs", str(runs), "--rounds", "2"]) == 130
    assert capsys.readouterr().err.startswith("tierbench: interrupted: 1 of 4 cell rounds (2 cells x 2 rounds) "
                                              f"recorded in {runs / 'e.csv'}; ")


def test_an_interrupted_multi_process_run_says_so_in_the_launching_process(tiny, tmp_path, capsys, monkeypatch):
    import types

    import suite.cli.sweeps

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(suite.cli.sweeps, "subprocess", types.SimpleNamespace(run=interrupted))  # torchrun, interrupted
    argv = ["run", "--experiment", "e", *RUN, "--loaders", "in-memory", "--gpus", "2", "--runs", str(tmp_path)]
    assert main(argv) == 130
    assert capsys.readouterr().err == (f"tierbench: interrupted: 0 of 1 cells recorded in {tmp_path / 'e.csv'}; run "
                                       "the same command again to resume (finished cells are skipped)\n")


def test_a_table_made_in_memory_is_pinned_once_for_the_sweep_on_cuda_and_unpinned_after(tiny, monkeypatch):
    calls = []
    monkeypatch.setattr(harness, "register_host_memory", lambda table: calls.append(("pin", table)) or True)
    monkeypatch.setattr(harness, "unregister_host_memory", lambda table: calls.append(("unpin", table)))
    monkeypatch.setattr(harness.torch.cuda, "synchronize", lambda device: calls.append(("sync", device)))
    made = dataclasses.replace(tiny, manifest={**tiny.manifest, "generated_features": {"dtype": "float32"}})
    with harness.pinned_for_the_sweep(made, "cuda"):
        assert calls == [("pin", made.features)]
    assert calls == [("pin", made.features), ("sync", "cuda"), ("unpin", made.features)]
    calls.clear()
    for dataset, device in ((tiny, "cuda"), (made, "cpu")):  # a mapped table, or no GPU: nothing to pin
        with harness.pinned_for_the_sweep(dataset, device):
            pass
    assert calls == []


def test_a_table_made_in_memory_is_unpinned_and_freed_before_another_dataset_is_opened(tiny, tmp_path, monkeypatch):
    # papers-100m's original order (cpu-gather, uva) and its reordered order (tiered) each make a 57 GB table in
    # memory: two side by side do not fit in 128 GiB, so the sweep lets one go before it opens the other
    real_open, real_run = harness.open_dataset, harness.run_cell
    events, made = [], []

    def open_made(cell, ogb_root=None, progress=True):
        alive = [ref() for ref in made if ref() is not None]
        events.append(("open", cell.scorer, len(alive)))
        dataset = real_open(cell, ogb_root, progress=progress)
        dataset = dataclasses.replace(dataset, manifest={**dataset.manifest, "generated_features": {"dtype": "float32"}})
        made.append(weakref.ref(dataset))
        return dataset

    @contextlib.contextmanager
    def pinned(dataset, device):
        events.append(("pin", dataset.scorer))
        yield
        events.append(("unpin", dataset.scorer))

    monkeypatch.setattr(harness, "open_dataset", open_made)
    monkeypatch.setattr(harness, "pinned_for_the_sweep", pinned)
    monkeypatch.setattr(harness, "run_cell", lambda cell, dataset, **kw: events.append(cell.loader) or real_run(
        cell, dataset, **kw))
    run_sweep("m", tmp_path, **dict(SWEEP, loaders=["cpu-gather", "tiered", "uva"], hot_fractions=[0.25]))
    assert events == [("open", "none", 0), ("pin", None), "cpu-gather", ("unpin", None),
                      ("open", "wrpr", 0), ("pin", "wrpr"), "tiered", ("unpin", "wrpr"),
                      ("open", "none", 0), ("pin", None), "uva", ("unpin", None)]


def test_the_launcher_of_a_multi_process_run_prepares_its_datasets_without_opening_them(tiny, monkeypatch):
    # opening a paper-scale dataset makes its 57 GB table in memory, which the launcher would hold while its
    # processes make their own
    monkeypatch.setattr(harness, "open_dataset", lambda *args, **kwargs: pytest.fail("a dataset was opened"))
    todo = cells(["tiny"], ["cpu-gather", "tiered"], [0.1], [(5,)])
    assert harness.prepare_datasets(todo, progress=False) is None
    assert [cell.scorer for cell in todo] == ["none", "wrpr"]
