"""Bad options, devices and sizes end the tierbench command with one line, never a traceback or a silent run."""

import argparse
import csv

import pytest
import torch

import suite.datasets.build
from suite import cli
from suite.cli import datasets as datasets_commands
from suite.cli import main
from suite.cli.options import DEFAULT_HOT_FRACTION
from suite.measure.devices import resolve_device
from suite.measure.memory_limit import MemoryLimitUnavailable
from suite.registry import LOADERS, check_gpu_memory, create_loader, hot_tier_loaders
from tiering.features.combined import HotTierTooLarge
from tiering.graph.scores import SCORERS


def run(argv, capsys):
    """main(argv) as a user runs it: an argparse exit becomes its status; returns (status, stdout, stderr)."""
    try:
        status = main(argv)
    except SystemExit as exit_info:
        status = exit_info.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_error_line(status, err, *fragments):
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierbench: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def fake_gpus(monkeypatch, count, free_bytes=2**40):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free_bytes, 2 * free_bytes))


# ----------------------------------------------------------------- --device
DEVICE_COMMANDS = [
    ["train", "--dataset", "tiny"],
    ["run", "--experiment", "demo"],
    ["gpubench"],
    ["doctor", "--no-measure"],
]


@pytest.mark.parametrize("command", DEVICE_COMMANDS, ids=lambda c: c[0])
def test_cuda_without_a_gpu_is_one_line(command, capsys, monkeypatch, tmp_path):
    no_cuda(monkeypatch)
    status, _, err = run(command + ["--device", "cuda", "--out" if command[0] != "run" else "--runs", str(tmp_path)],
                         capsys)
    assert_one_error_line(status, err, "--device cuda needs a CUDA GPU")
    assert not list(tmp_path.iterdir())  # nothing was made


@pytest.mark.parametrize("command", DEVICE_COMMANDS, ids=lambda c: c[0])
def test_a_device_torch_cannot_parse_is_one_line(command, capsys, tmp_path):
    status, _, err = run(command + ["--device", "garbage", "--out" if command[0] != "run" else "--runs", str(tmp_path)],
                         capsys)
    assert_one_error_line(status, err, "--device 'garbage' is not a device", "cpu, cuda or cuda:N")


def test_resolve_device_refuses_what_this_machine_lacks(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="runs on cpu or cuda"):
        resolve_device("meta")
    with pytest.raises(ValueError, match="is not a device"):
        resolve_device("cuda:-1")
    no_cuda(monkeypatch)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ValueError, match="built without CUDA"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="sees no GPU here \\(CUDA_VISIBLE_DEVICES=''\\)"):
        resolve_device("cuda:0")
    fake_gpus(monkeypatch, 2)
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"cuda:2: this machine has 2 visible GPUs \(cuda:0 to cuda:1\)"):
        resolve_device("cuda:2")


def test_gpubench_on_the_cpu_is_one_line(capsys, tmp_path):
    status, _, err = run(["gpubench", "--device", "cpu", "--out", str(tmp_path)], capsys)
    assert_one_error_line(status, err, "gpubench measures a CUDA GPU")


# ----------------------------------------------------------------- sizes
@pytest.mark.parametrize("option, value, says", [
    ("--epochs", "0", "must be at least 1"),
    ("--hidden", "0", "must be at least 1"),
    ("--hidden", "-3", "must be at least 1"),
    ("--batch-size", "0", "must be at least 1"),
    ("--lr", "0", "must be above 0"),
    ("--lr", "nan", "finite"),
    ("--dropout", "1", "[0, 1)"),
    ("--dropout", "-0.1", "[0, 1)"),
    ("--hot-fraction", "1.5", "[0, 1]"),
    ("--epochs", "two", "expected an integer"),
])
def test_a_size_out_of_range_is_one_line(option, value, says, capsys):
    status, _, err = run(["train", "--dataset", "tiny", option, value], capsys)
    assert_one_error_line(status, err, f"argument {option}", says, "tierbench train --help")


def test_profile_refuses_zero_epochs_and_batches(capsys):
    for option in ("--epochs", "--batch-size"):
        status, _, err = run(["profile", "--dataset", "tiny", "--figure", "7", option, "0"], capsys)
        assert_one_error_line(status, err, f"argument {option}")


def test_an_unknown_loader_or_scorer_is_one_line_that_lists_the_registry(capsys):
    status, _, err = run(["train", "--dataset", "tiny", "--loader", "nope"], capsys)
    assert_one_error_line(status, err, "invalid choice: 'nope'", *LOADERS)
    status, _, err = run(["prepare", "--dataset", "tiny", "--scorer", "nope"], capsys)
    assert_one_error_line(status, err, *SCORERS)


# ----------------------------------------------------------------- --hot-fraction
@pytest.mark.parametrize("loader", ["in-memory", "cpu-gather", "uva"])
def test_hot_fraction_given_to_a_loader_without_a_hot_tier_is_warned_about(loader, tiny, capsys):
    status, out, err = run(["train", "--dataset", "tiny", "--loader", loader, "--hot-fraction", "0.3", "--epochs", "1",
                            "--fanout", "3,3", "-q"], capsys)
    assert status == 0
    assert err.startswith("tierbench: warning: --hot-fraction 0.3 is ignored: loader " + loader)
    assert ", ".join(hot_tier_loaders()) in err
    assert f"loader {loader} (hot fraction {1.0 if loader == 'in-memory' else 0.0})" in out


def test_no_warning_without_hot_fraction_and_the_default_for_a_hot_tier(tiny, capsys):
    status, out, err = run(["train", "--dataset", "tiny", "--loader", "degree-cache", "--epochs", "1",
                            "--fanout", "3,3", "-q"], capsys)
    assert status == 0 and err == ""
    assert f"loader degree-cache (hot fraction {DEFAULT_HOT_FRACTION})" in out


# ----------------------------------------------------------------- --scorer default
def test_tiered_without_a_scorer_trains_on_wrpr_and_says_so(tiny, capsys, tmp_path):
    status, out, err = run(["train", "--dataset", "tiny", "--loader", "tiered", "--epochs", "1", "--fanout", "3,3",
                            "--out", str(tmp_path), "-q"], capsys)
    assert status == 0, err
    assert "loader tiered needs a dataset reordered hottest-first: using --scorer wrpr" in out
    assert "epoch 0:" in out
    assert "scorer wrpr" in (tmp_path / "train-tiny-wrpr-tiered.md").read_text()


# ----------------------------------------------------------------- GPU memory
class FakeDataset:
    """What check_gpu_memory reads of a dataset: N, D and the feature dtype."""

    def __init__(self, num_nodes, feature_dim):
        self.num_nodes, self.feature_dim = num_nodes, feature_dim
        self.features = torch.zeros(1, feature_dim)


def test_gpu_memory_needed_by_every_loader_that_keeps_rows_there(monkeypatch):
    dataset = FakeDataset(1000, 256)  # rows of 1 KiB
    seen = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: seen.append(device) or (2**40, 2**41))
    for name in LOADERS:
        check_gpu_memory(name, dataset, 0.5, "cuda:0")
    assert seen == [torch.device("cuda", 0)] * 6  # in-memory, degree-cache, gns, tiered, lookahead, disk-tiered

    def free(nbytes):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (nbytes, 2**41))

    free(1000 * 1024)
    check_gpu_memory("in-memory", dataset, 0.0, "cuda")  # exactly fits
    check_gpu_memory("tiered", dataset, 1.0, "cuda")
    free(1000 * 1024 - 1)
    with pytest.raises(HotTierTooLarge, match=r"in-memory loader's table needs .* \(1000 rows x 1024 B\) .*hot tier"):
        check_gpu_memory("in-memory", dataset, 0.0, "cuda")
    with pytest.raises(HotTierTooLarge, match="the hot tier of tiered needs"):
        check_gpu_memory("tiered", dataset, 1.0, "cuda")
    free(500 * 1024 + 1000 * 8)  # half the rows and the node -> slot map
    for name in ("degree-cache", "gns"):
        check_gpu_memory(name, dataset, 0.5, "cuda")
    free(500 * 1024 + 1000 * 8 - 1)
    for name in ("degree-cache", "gns"):
        with pytest.raises(HotTierTooLarge, match=rf"hot tier of {name} needs .*500 rows x 1024 B \+ a 1000-entry"):
            check_gpu_memory(name, dataset, 0.5, "cuda")
    check_gpu_memory("in-memory", dataset, 0.0, "cpu")  # no GPU: nothing to check, mem_get_info never called


@pytest.mark.gpu
def test_the_real_gpu_checks_its_device_count_and_free_memory():
    count = torch.cuda.device_count()
    assert resolve_device(f"cuda:{count - 1}") == torch.device("cuda", count - 1)
    with pytest.raises(ValueError, match=f"this machine has {count} visible GPU"):
        resolve_device(f"cuda:{count}")
    _, total = torch.cuda.mem_get_info(0)
    check_gpu_memory("in-memory", FakeDataset(1024, 256), 0.0, "cuda:0")  # 1 MiB fits
    rows = total // 1024 + 1  # more 1 KiB rows than the GPU has bytes
    with pytest.raises(HotTierTooLarge, match="cuda:0 has"):
        check_gpu_memory("in-memory", FakeDataset(rows, 256), 0.0, "cuda:0")
    with pytest.raises(HotTierTooLarge, match="lower the hot fraction"):
        check_gpu_memory("tiered", FakeDataset(rows, 256), 1.0, "cuda:0")


@pytest.mark.parametrize("loader", ["in-memory", "degree-cache", "gns", "tiered"])
def test_create_loader_refuses_a_gpu_tier_larger_than_free_memory_before_copying(loader, tiny, monkeypatch):
    fake_gpus(monkeypatch, 1, free_bytes=1024)
    monkeypatch.setattr(tiny, "scorer", "wrpr")  # as if reordered
    monkeypatch.setattr("suite.registry.host_table", lambda *args, **kwargs: pytest.fail("the table was copied"))
    with pytest.raises(HotTierTooLarge, match="GiB free"):
        create_loader(loader, tiny, 0.5, "cuda")


def test_a_hot_tier_larger_than_gpu_memory_is_one_line(tiny, capsys, monkeypatch):
    fake_gpus(monkeypatch, 1, free_bytes=16 * 1024)  # room for a model of --hidden 1 (1.4 KiB), not for its rows
    status, _, err = run(["train", "--dataset", "tiny", "--loader", "degree-cache", "--device", "cuda", "--hidden", "1",
                          "-q"], capsys)
    assert_one_error_line(status, err, "the hot tier of degree-cache needs", "lower the hot fraction")


def test_memory_errors_and_gpu_out_of_memory_are_one_line(capsys, monkeypatch):
    def fail(error):
        def command(args):
            raise error
        monkeypatch.setattr(datasets_commands, "_cmd_list", command)
        return run(["datasets", "list"], capsys)

    status, _, err = fail(MemoryError())
    assert_one_error_line(status, err, "out of host memory")
    status, _, err = fail(MemoryLimitUnavailable("no writable memory cgroup: /sys/fs/cgroup is not writable"))
    assert_one_error_line(status, err, "no writable memory cgroup")
    status, _, err = fail(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.\nmore detail"))
    assert_one_error_line(status, err, "CUDA out of memory. Tried to allocate 2.00 GiB.", "lower --batch-size")


# ----------------------------------------------------------------- help
def test_help_shows_defaults_and_the_registries(capsys):
    status, out, _ = run(["train", "--help"], capsys)
    assert status == 0
    for name in LOADERS:
        assert name in out
    assert "(default: paper)" in out and "(default: 256)" in out and "(default: in-memory)" in out
    assert "tiny, tiny-rmat, products-s" in out  # --dataset names the presets
    status, out, _ = run(["prepare", "--help"], capsys)
    assert "damping factor (default 0.85)" in out and "(default: None)" not in out


def test_parser_errors_are_one_line_everywhere():
    parser = cli.build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subcommands.choices.items():
        assert isinstance(sub, cli._Parser), name


# ----------------------------------------------------------------- bugs
@pytest.mark.parametrize("error", [ValueError("an internal value"), KeyError("an internal key")])
def test_an_internal_error_in_a_command_shows_its_traceback(error, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(suite.datasets.build, "entry_path", broken)  # a callee of `datasets list`, failing as a bug does
    with pytest.raises(type(error)) as raised:
        main(["datasets", "list"])
    assert raised.value is error
    assert "tierbench: error:" not in capsys.readouterr().err


# ----------------------------------------------------------------- checked numbers
@pytest.mark.parametrize("argv, option, says", [
    (["run", "--experiment", "demo", "--gpus", "0"], "--gpus", "must be at least 1"),
    (["run", "--experiment", "demo", "--epochs", "two"], "--epochs", "expected an integer"),
    (["run", "--experiment", "demo", "--seed", "-1"], "--seed", "must be at least 0"),
    (["run", "--experiment", "demo", "--hot-fractions", "0.1,x"], "--hot-fractions", "comma-separated numbers"),
    (["disk", "--dataset", "tiny", "--hot-fraction", "1.5"], "--hot-fraction", "[0, 1]"),
    (["doctor", "--host-tier-bytes", "1e9"], "--host-tier-bytes", "expected an integer"),
    (["gpu-suite", "--max-minutes", "0"], "--max-minutes", "must be above 0"),
    (["prepare", "--dataset", "tiny", "--scorer", "wrpr", "--damping", "1"], "--damping", "[0, 1)"),
    (["prepare", "--dataset", "tiny", "--scorer", "wrpr", "--max-iter", "0"], "--max-iter", "must be at least 1"),
    (["train", "--dataset", "tiny", "--seed", "-3"], "--seed", "must be at least 0"),
    (["bucket-train", "--dataset", "tiny", "--seed", "nan"], "--seed", "expected an integer"),
    (["train", "--dataset", "tiny", "--seed", str(2**70)], "--seed", "must be at least 0 and at most 4294967295"),
    (["train", "--dataset", "tiny", "--fanout", "99999999999999999999"], "--fanout", "neighbour counts of at most 2147483647"),
    (["run", "--experiment", "demo", "--fanout", "5,99999999999999999999"], "--fanout", "at most 2147483647"),
    (["train", "--dataset", "tiny", "--fanout", "5,0"], "--fanout", "neighbour counts of at least 1"),
    (["profile", "--dataset", "tiny", "--figure", "7", "--fanout", "-3"], "--fanout", "neighbour counts of at least 1"),
    (["policies", "--dataset", "tiny", "--fanout", "0"], "--fanout", "neighbour counts of at least 1"),
    (["doctor", "--host-tier-bytes", str(10**20)], "--host-tier-bytes", "must be at most this machine's RAM"),
    (["gpu-suite", "--max-minutes", "-5"], "--max-minutes", "must be above 0"),
    (["gpu-suite", "--max-minutes", "nan"], "--max-minutes", "finite"),
    (["prepare", "--dataset", "tiny", "--scorer", "wrpr", "--tol", "-1"], "--tol", "must be above 0"),
])
def test_a_formerly_unchecked_number_is_refused_in_one_line(argv, option, says, capsys):
    status, _, err = run(argv, capsys)
    assert_one_error_line(status, err, f"argument {option}", says, f"tierbench {argv[0]} --help")



WRITING_COMMANDS = [
    ["report", "--experiment", "fig8"], ["train", "--dataset", "tiny"], ["profile", "--dataset", "tiny", "--figure", "7"],
    ["policies", "--dataset", "tiny"], ["plan", "--dataset", "tiny", "--gpu-memory", "1GB"], ["disk", "--dataset", "tiny"],
    ["bucket-orders"], ["bucket-train", "--dataset", "tiny"], ["sar", "--dataset", "tiny"], ["datasets", "info", "tiny"],
    ["datasets", "cost", "tiny"], ["doctor", "--no-measure"], ["scorers", "--dataset", "tiny"], ["gpubench"],
    ["gpu-suite"], ["run", "--experiment", "fig8"], ["costs", "--dataset", "tiny"],
]
"""Every command that writes files into a folder it is given."""


def _destination_options(command: list[str]) -> list[str]:
    """The folder options (``--out``, ``--runs``) the subcommand ``command`` takes."""
    action = cli.build_parser()._subparsers._group_actions[0]
    parser = action.choices[command[0]].complete()  # a subcommand's options are added when first needed
    if command[0] == "datasets":
        parser = parser._subparsers._group_actions[0].choices[command[1]].complete()
    return [f"--{a.dest}" for a in parser._actions if a.dest in ("out", "runs")]


@pytest.mark.parametrize(("command", "option"), [(c, o) for c in WRITING_COMMANDS for o in _destination_options(c)],
                         ids=lambda value: " ".join(value) if isinstance(value, list) else value)
def test_an_output_folder_that_is_a_file_is_refused_before_any_work(command, option, tmp_path, capsys):
    not_a_folder = tmp_path / "results.txt"
    not_a_folder.write_text("kept")
    status, _, err = run([*command, option, str(not_a_folder)], capsys)
    assert_one_error_line(status, err, f"into {not_a_folder}: it is a file, not a folder", f"({option} DIR)")
    assert not_a_folder.read_text() == "kept"
    status, _, err = run([*command, option, str(not_a_folder / "below")], capsys)
    assert_one_error_line(status, err, f"into {not_a_folder / 'below'}: {not_a_folder} is a file, not a folder")


# ----------------------------------------------------------------- records read back
@pytest.mark.parametrize("column, bad", [("hot_fraction", "inf"), ("epoch_s", "-1e308"), ("hit_ratio", "7.5")])
def test_report_refuses_a_record_out_of_range_naming_file_line_and_column(column, bad, tmp_path, capsys):
    from suite.sweep.records import store_records
    from tests.suite.sweep.test_records import row

    path = tmp_path / "runs" / "mine.csv"
    store_records(path, [row()])
    header, fields = csv.reader(path.read_text().splitlines())
    fields[header.index(column)] = bad
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, fields])
    status, _, err = run(["report", "--experiment", "mine", "--runs", str(tmp_path / "runs"),
                          "--out", str(tmp_path / "out")], capsys)
    assert_one_error_line(status, err, f"mine.csv, line 2, column {column}: '{bad}' is not")


def test_report_refuses_records_that_are_not_utf8_naming_the_file(tmp_path, capsys):
    (tmp_path / "mine.csv").write_bytes(b"dataset,\xff\n")
    status, _, err = run(["report", "--experiment", "mine", "--runs", str(tmp_path), "--out", str(tmp_path / "o")],
                         capsys)
    assert_one_error_line(status, err, "mine.csv: byte 8 is not UTF-8 text")


@pytest.mark.parametrize("command", [
    ["plan", "--dataset", "tiny", "--gpu-memory", "1GB", "--trace-dir", "{tmp}/traces"],
    ["costs", "--dataset", "tiny", "--batch-sizes", "8", "32", "--repeats", "1"],
])
def test_a_machine_profile_that_is_not_utf8_is_refused_naming_the_file(command, tiny, tmp_path, capsys):
    profile = tmp_path / "machine.json"
    profile.write_bytes(b'{"device": "\xff"}')
    argv = [part.format(tmp=tmp_path) for part in command]
    status, _, err = run([*argv, "--machine", str(profile), "--out", str(tmp_path / "o"), "-q"], capsys)
    assert_one_error_line(status, err, f"{profile} is not a machine profile of tierbench doctor (not UTF-8 text)")


@pytest.mark.parametrize("command", ["disk", "bucket-train", "sar"])
def test_a_command_without_ogb_root_does_not_offer_it_in_its_help(command, capsys):
    status, out, _ = run([command, "--help"], capsys)
    assert status == 0 and "--ogb-root" not in out and "tiny, tiny-rmat" in out
    status, _, err = run([command, "--dataset", "tiny", "--ogb-root", "x"], capsys)
    assert_one_error_line(status, err, "unrecognized arguments: --ogb-root")


# ----------------------------------------------------------------- the partition buffer (Marius)
@pytest.mark.parametrize("options, says", [
    (["--partitions", "4", "--capacity", "2", "--prefetch", "99"], "at most the p - c = 4 - 2 = 2 partitions outside the buffer, got 99"),
    (["--partitions", "8", "--capacity", "4", "--prefetch", "0", "5"], "p - c = 8 - 4 = 4 partitions"),
    (["--partitions", "100000"], "--partitions 100000 makes 10,000,000,000 edge buckets"),
])
def test_bucket_train_refuses_a_buffer_it_cannot_hold_before_any_work(options, says, tmp_path, capsys, monkeypatch):
    from suite.experiments import bucket_training

    monkeypatch.setattr(bucket_training, "load_dataset", lambda *a, **k: pytest.fail("loaded the dataset"))
    status, _, err = run(["bucket-train", "--dataset", "tiny", *options, "--out", str(tmp_path / "o"), "-q"], capsys)
    assert_one_error_line(status, err, says)


def test_bucket_train_refuses_more_partitions_than_nodes(tiny, tmp_path, capsys, monkeypatch):
    from suite.experiments import bucket_training

    monkeypatch.setattr(bucket_training, "available_bytes", lambda: 2**60)
    status, _, err = run(["bucket-train", "--dataset", "tiny", "--partitions", "5000", "--out", str(tmp_path / "o"),
                          "-q"], capsys)
    assert_one_error_line(status, err, "--partitions 5000 is more than tiny's 4,096 nodes")


def test_a_model_larger_than_the_memory_left_is_refused_naming_both_sizes(tiny, capsys):
    status, _, err = run(["train", "--dataset", "tiny", "--hidden", "1000000000", "-q"], capsys)
    assert_one_error_line(status, err, "--hidden 1000000000: GraphSAGE's weights, gradients and Adam's two moments "
                          "take 1207.0 GiB, and the host has ", "GiB available: give a smaller --hidden")




def test_a_model_larger_than_the_gpu_memory_free_is_refused_before_it_is_allocated(tiny, capsys, monkeypatch):
    import suite.sweep.run

    fake_gpus(monkeypatch, 1, free_bytes=2**30)
    monkeypatch.setattr(suite.sweep.run, "train_cell", lambda *a, **k: pytest.fail("allocated on the GPU"))
    status, _, err = run(["train", "--dataset", "tiny", "--device", "cuda", "--hidden", "1000000", "-q"], capsys)
    assert_one_error_line(status, err, "--hidden 1000000: GraphSAGE's weights, gradients and Adam's two moments take "
                          "1.2 GiB, and cuda has 1.0 GiB free: give a smaller --hidden")

def test_sar_refuses_a_model_larger_than_the_memory_left_before_any_work(capsys, tmp_path, monkeypatch):
    from suite.experiments import sar

    monkeypatch.setattr(sar, "load_dataset", lambda *a, **k: pytest.fail("loaded the dataset"))
    status, _, err = run(["sar", "--dataset", "tiny", "--hidden", "1000000000", "--out", str(tmp_path / "o"), "-q"],
                         capsys)
    assert_one_error_line(status, err, "--hidden 1000000000: GraphSAGE's weights, gradients and Adam's two moments "
                          "take 29802323609.6 GiB, and the host has ", "GiB available: give a smaller --hidden")

def test_disk_refuses_a_hot_tier_that_leaves_no_room_for_the_host_tier(capsys, tmp_path, monkeypatch):
    from suite.experiments import disk

    monkeypatch.setattr(disk, "load_dataset", lambda *a, **k: pytest.fail("loaded the dataset"))
    status, _, err = run(["disk", "--dataset", "tiny", "--hot-fraction", "0.9", "--out", str(tmp_path / "o")], capsys)
    assert_one_error_line(status, err, "--hot-fraction 0.9 leaves 10% of the rows, less than the largest host tier "
                          "measured, 40%; give --hot-fraction at most 0.6")


@pytest.mark.parametrize("figure", ["gpu-goals", "policies", "sampler-bench"])
def test_a_figure_drawn_from_records_without_records_is_one_line(figure, capsys):
    status, _, err = run(["report", "--figure", figure], capsys)
    assert_one_error_line(status, err, f"--figure {figure} needs --records")
