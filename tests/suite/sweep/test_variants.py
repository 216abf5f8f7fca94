"""The tiered loader's gather kernel variant, chosen per tier from gpubench records (fakes on the CPU)."""

import pytest
import torch

from suite.experiments import gpu as gpu_bench
from suite.io.provenance import device_name, slug
from suite.sweep import variants
from suite.sweep.variants import (
    choose,
    gpubench_records,
    kernel_variant,
    measured_row_bytes,
)
from tiering.features.zero_copy import DEFAULT_VARIANT

CEILINGS = {"h2d_memcpy_bytes_per_s": 50e9, "zero_copy_read_bytes_per_s": 40e9, "d2d_copy_bytes_per_s": 1500e9}


def _speed_table():
    """As on the first H100: wide fastest on hot rows (1500 GB/s), aligned on cold ones (40 GB/s)."""
    results = []
    for config in gpu_bench.configurations():
        if config.study == "hot":
            ours = {"naive": 900e9, "aligned": 1200e9, "wide": 1500e9}[config.variant]
        else:
            ours = {"naive": 30e9, "aligned": 40e9, "wide": 39e9}[config.variant]
        results.append((config, ours, 50e9))
    return gpu_bench.speed_table(results, CEILINGS)


def _write(root, device):
    folder = root / "results" / "gpu" / slug(device) / "microbench"
    checks = gpu_bench.model_check_table([], None)
    reached = gpu_bench.reach_table([], 1 << 30, CEILINGS)
    record = {"device": device, "git_revision": "abc", "time": "2026-01-01T00:00:00+00:00"}
    facts = {"command": "tierbench gpubench", "ceilings": CEILINGS, "table_bytes": 1 << 30, "repeat": 1,
             "default_variant": DEFAULT_VARIANT}
    return gpu_bench.write_records(folder, _speed_table(), checks, reached, record, facts)


def test_a_table_is_judged_by_the_largest_measured_row_size_not_above_its_own():
    assert measured_row_bytes([128, 256, 512, 1024, 4096], 512) == 512
    assert measured_row_bytes([128, 256, 512, 1024, 4096], 400) == 256  # products-s: 100 fp32 features
    assert measured_row_bytes([128, 256, 512, 1024, 4096], 64) == 128


def test_the_cold_tier_dominates_unless_nearly_every_row_is_hot():
    table = _speed_table()
    tenth = choose(table, 512, "float32", hot_rows=100, num_rows=1000, basis="records")
    assert (tenth.variant, tenth.hot, tenth.cold) == ("aligned", "wide", "aligned")
    assert "hot tier wide, cold tier aligned" in tenth.basis and "takes the cold tier's" in tenth.basis
    # hot rows are 1500 / 40 = 37.5 times faster: the hot tier's time is larger only past 37.5 hot rows per cold one
    assert choose(table, 512, "float32", hot_rows=990, num_rows=1000, basis="records").variant == "wide"
    assert choose(table, 512, "float32", hot_rows=1000, num_rows=1000, basis="records").variant == "wide"
    assert choose(table, 512, "float32", hot_rows=0, num_rows=1000, basis="records").variant == "aligned"


def test_a_row_size_measured_in_one_tier_only_is_passed_over():
    table = _speed_table()
    no_hot_512 = table[~((table["study"] == "hot") & (table["row bytes"] == 512))]
    choice = choose(no_hot_512, 512, "float32", hot_rows=990, num_rows=1000, basis="records")
    assert choice.variant == "wide" and choice.basis.startswith("fastest at 256 B float32 rows in records")
    only_cold = table[table["study"] == "cold"]
    choice = choose(only_cold, 512, "float32", hot_rows=100, num_rows=1000, basis="records")
    assert (choice.variant, choice.hot, choice.cold) == (DEFAULT_VARIANT, None, None)
    assert choice.basis == "default: records has no float32 rows measured in both tiers"


def test_records_that_cannot_be_read_leave_the_default_and_say_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "cuda: Fake GPU 80GB")
    assert set(_speed_table().columns) == set(gpu_bench.SPEED_COLUMNS)  # what the reader checks a file for
    path.write_text("not,a\nspeed table\n")
    monkeypatch.setattr(variants, "device_name", lambda device: "cuda: Fake GPU 80GB")
    choice = kernel_variant("tiered", torch.zeros((1000, 128)), 100, "cuda")
    assert choice.variant == DEFAULT_VARIANT and choice.basis.startswith(f"default: {path.relative_to(tmp_path)} "
                                                                         "cannot be read (")


def test_the_device_s_gpubench_records_are_found_and_used(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "cuda: Fake GPU 80GB")
    assert gpubench_records("cuda: Fake GPU 80GB") == path.relative_to(tmp_path)
    assert gpubench_records("cuda: Other GPU") is None
    monkeypatch.setattr(variants, "device_name", lambda device: "cuda: Fake GPU 80GB")
    features = torch.zeros((1000, 128))
    choice = kernel_variant("tiered", features, 1000, "cuda")
    assert choice.variant == "wide" and str(path.relative_to(tmp_path)) in choice.basis
    assert kernel_variant("uva", features, 0, "cuda") is None  # the baselines keep their variants


def test_without_records_the_default_is_launched_and_the_record_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    choice = kernel_variant("tiered", torch.zeros((10, 4)), 1, "cpu")
    assert choice.variant == DEFAULT_VARIANT and choice.hot is None and choice.cold is None
    assert choice.basis == f"default: no gpubench records for {device_name('cpu')}"


@pytest.mark.gpu
def test_the_tiered_loader_launches_the_chosen_variant_on_the_gpu(tmp_path, monkeypatch):
    from suite.datasets.reordered import load_reordered
    from suite.sweep import run as harness
    from suite.sweep.cells import Cell
    from tiering.features import combined

    monkeypatch.chdir(tmp_path)
    _write(tmp_path, device_name("cuda"))
    launched, launch = [], combined.launch_gather

    def recorded_launch(*args, **options):
        launched.append(options["variant"])
        launch(*args, **options)

    monkeypatch.setattr(combined, "launch_gather", recorded_launch)
    reordered = load_reordered("tiny", "wrpr", progress=False)
    # every row hot: the records' hot-tier variant, not the default the cold tier's would coincide with
    cell = Cell("tiny", "tiered", 1.0, (5, 5), "wrpr", batch_size=256)
    rows = harness.run_cell(cell, reordered, epochs=1, warmup=0, device="cuda", seed=0, pipeline=False, progress=False,
                            batch_limit=2)
    assert DEFAULT_VARIANT != "wide" and {row["kernel_variant"] for row in rows} == {"wide"}
    assert launched and set(launched) == {"wide"}


def test_a_cell_s_variant_is_worked_out_once_and_launched_as_recorded(tmp_path, monkeypatch, tiny):
    from suite.sweep import run as harness
    from suite.sweep.cells import Cell

    asked, launched = [], []
    chosen = variants.VariantChoice("aligned", "wide", "aligned", "the test's records")
    monkeypatch.setattr(harness, "kernel_variant", lambda *args: asked.append(args) or chosen)
    real = harness.create_loader

    def create_loader(*args, variant=None, **options):  # any loader will do: the choice itself is the test's
        launched.append(variant)
        return real(*args, **options)

    monkeypatch.setattr(harness, "create_loader", create_loader)
    rows = harness.run_cell(Cell("tiny", "in-memory", 0.1, (3,), "none", batch_size=256), tiny, epochs=1, warmup=0,
                            device="cpu", seed=0, pipeline=False, progress=False)
    assert len(asked) == 1 and launched == ["aligned"]
    assert {(row["kernel_variant"], row["variant_basis"]) for row in rows} == {("aligned", "the test's records")}
