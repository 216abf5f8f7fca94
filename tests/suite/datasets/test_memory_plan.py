"""The memory plan of the paper-scale presets: its arithmetic against a fake machine, and the one-line refusals
before anything is allocated."""

import os
import subprocess
import sys
import time

import pytest

import suite.datasets.build
from suite.datasets import memory_plan
from suite.datasets.memory_plan import (
    DISK,
    GPU,
    HOST,
    PINNED,
    Machine,
    PlanDoesNotFit,
    RunSetting,
    build_needs,
    check,
    check_build,
    run_needs,
    totals,
)
from suite.datasets.presets import get_preset
from suite.errors import BadValue, UserError
from suite.measure.host_memory import available_bytes
from suite.policies.planner import model_bytes
from tiering.graph.csr_sort import CPU_PART_ENTRIES

GB = 10**9
N = 111_059_956
PAPERS = get_preset("papers-100m")
HALF = get_preset("papers-100m-half")
CSR = (N + 1) * 8 + PAPERS.list_entries * 4
LABELS = N * 8 + PAPERS.num_labeled * 8
SMALL_MACHINE = pytest.mark.skipif(
    available_bytes() >= totals(build_needs(PAPERS, on_gpu=False))[HOST],
    reason="the refusal for host RAM needs a machine with less available than papers-100m's build needs without a "
           "GPU (23 GiB), as the CPU machine has")
GPU_MACHINE = Machine(host_bytes=120 * GB, gpu_bytes=78 * GB, disk_bytes=500 * GB, memlock_bytes=None)


def test_the_build_draws_on_the_gpu_keeps_the_csr_in_host_ram_and_writes_no_feature_table():
    total = totals(build_needs(PAPERS))
    generator = memory_plan.GENERATOR_BYTES_PER_NODE * N
    drawing = (memory_plan.DRAW_BYTES_PER_NODE * N + memory_plan.BYTES_PER_PART_ENTRY * memory_plan.PART_ENTRIES
               + memory_plan.EDGE_CHUNK_BYTES)
    assert total[HOST] == 2 * CSR + LABELS + generator  # the CSR, then its transpose or its reordered copy
    assert total[GPU] == drawing < 21 * GB
    assert total[DISK] == 2 * (CSR + LABELS) < 17 * GB  # the feature table (57 GB) is never written
    assert total[PINNED] == 0  # the table is made when the entry is opened, by the run
    assert totals(build_needs(HALF)) == total  # the graph is the same; only the table's type differs
    on_cpu = totals(build_needs(PAPERS, on_gpu=False))
    cpu_drawing = drawing + memory_plan.BYTES_PER_PART_ENTRY * (CPU_PART_ENTRIES - memory_plan.PART_ENTRIES)
    assert on_cpu[GPU] == 0 and on_cpu[HOST] == total[HOST] + cpu_drawing


def test_run_needs_the_hot_tier_the_model_and_the_csr_on_the_gpu_when_sampling_there():
    setting = RunSetting(loader="tiered", hot_fraction=0.1, sampling="gpu")
    rows = 1024 * (1 + 12 + 144 + 1728)
    assert memory_plan.largest_minibatch_rows(setting) == rows
    total = totals(run_needs(PAPERS, setting))
    hot = round(N * 0.1)
    assert total[GPU] == hot * 512 + CSR + model_bytes(128, 172, 3, 256, rows, 512)
    assert total[HOST] == N * 512 + CSR + LABELS + rows * memory_plan.SAMPLED_BYTES_PER_ROW
    assert total[PINNED] == N * 512
    on_cpu = totals(run_needs(HALF, RunSetting(loader="tiered", hot_fraction=0.1)))
    assert on_cpu[GPU] == hot * 256 + model_bytes(128, 172, 3, 256, rows, 256)


def test_uva_sampling_pins_a_copy_of_the_csr_as_torchs_allocator_rounds_it():
    assert [memory_plan.pinned_allocation(n) for n in (1, 4096, 4097, 3 << 30)] == [1, 4096, 8192, 4 << 30]
    plain = totals(run_needs(PAPERS, RunSetting(hot_fraction=0.1)))
    uva = totals(run_needs(PAPERS, RunSetting(hot_fraction=0.1, sampling="uva")))
    indptr, indices = (N + 1) * 8, PAPERS.list_entries * 4
    assert PAPERS.csr_bytes == indptr + indices == CSR
    assert uva[HOST] - plain[HOST] == memory_plan.pinned_allocation(indptr) + memory_plan.pinned_allocation(indices)
    assert uva[GPU] == plain[GPU]  # the GPU reads it over PCIe


def test_in_memory_keeps_every_row_on_the_gpu_and_a_disk_loader_is_refused():
    assert totals(run_needs(HALF, RunSetting(loader="in-memory")))[GPU] > N * 256
    with pytest.raises(BadValue, match="mmap reads the feature table from disk"):
        run_needs(PAPERS, RunSetting(loader="mmap"))


@pytest.mark.parametrize("machine, fragments", [
    (Machine(23 * GB, None, 500 * GB, None), ["of host RAM", "23.1 GiB", "21.4 GiB available"]),
    (Machine(19 * GB, 78 * GB, 500 * GB, None), ["18.7 GiB of host RAM", "17.7 GiB available"]),
    (Machine(120 * GB, 4 * GB, 500 * GB, None), ["19.4 GiB of GPU memory", "3.7 GiB is free: the build sorts one part"]),
    (Machine(120 * GB, 78 * GB, 5 * GB, None), ["15.4 GiB of disk", "4.7 GiB is free"]),
])
def test_the_first_shortfall_of_the_build_is_refused_naming_both_sizes(machine, fragments):
    with pytest.raises(PlanDoesNotFit) as refused:
        check_build(PAPERS, machine)
    assert isinstance(refused.value, UserError) and "\n" not in str(refused.value)
    for fragment in fragments:
        assert fragment in str(refused.value)


@pytest.mark.parametrize("machine, fragments", [
    (Machine(120 * GB, None, 500 * GB, None), ["of GPU memory", "no GPU"]),
    (Machine(120 * GB, 78 * GB, 500 * GB, 8 << 20), ["53.0 GiB feature table", "`ulimit -l` is 8.0 MiB"]),
])
def test_a_gpu_run_is_refused_without_a_gpu_or_the_memlock_to_pin_its_table(machine, fragments):
    with pytest.raises(PlanDoesNotFit) as refused:
        check("papers-100m", run_needs(PAPERS, RunSetting(hot_fraction=0.1)), machine, needs_gpu=True)
    for fragment in fragments:
        assert fragment in str(refused.value)


def test_a_run_without_a_gpu_is_not_refused_for_it():
    check("papers-100m-half", run_needs(HALF, RunSetting(hot_fraction=0.1)), Machine(120 * GB, None, 500 * GB, None),
          needs_gpu=False)


def test_where_the_plan_fits_the_build_goes_ahead():
    check_build(PAPERS, GPU_MACHINE)


def test_the_table_shows_each_place_beside_what_the_machine_has():
    table = memory_plan.render("papers-100m", build_needs(PAPERS, on_gpu=False), Machine(23 * GB, None, 500 * GB, None))
    assert "21.4 GiB available" in table and "23.1 GiB" in table and "465.7 GiB free" in table
    table = memory_plan.render("papers-100m", run_needs(PAPERS, RunSetting()), Machine(23 * GB, None, 500 * GB, None))
    assert "no GPU" in table and "unlimited" in table and "53.0 GiB" in table


def test_prepare_dataset_refuses_papers_100m_before_building(monkeypatch, tmp_path):
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "cache"))
    monkeypatch.setattr(suite.datasets.build, "this_machine", lambda cache: Machine(16 * GB, 78 * GB, 500 * GB, None))
    monkeypatch.setattr(suite.datasets.build, "_build", lambda *a: pytest.fail("the builder ran"))
    with pytest.raises(PlanDoesNotFit, match="18.7 GiB of host RAM"):
        suite.datasets.build.load_dataset("papers-100m-half")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@SMALL_MACHINE
def test_generate_papers_100m_here_exits_2_in_one_line_in_seconds(tmp_path):
    env_cache = tmp_path / "cache"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "suite.cli", "datasets", "generate", "papers-100m"],
                          check=False, capture_output=True, text=True, env={**os.environ,
                                                                "TIERBENCH_DATA": str(env_cache)})
    seconds = time.perf_counter() - start
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierbench: error: papers-100m needs "), done.stderr
    assert "23.1 GiB of host RAM" in lines[0] and "available" in lines[0]
    assert "reordered CSR" in done.stdout and "23.1 GiB" in done.stdout  # the plan, shown first
    assert seconds < 30
    assert not env_cache.exists() or not any(env_cache.iterdir())


@SMALL_MACHINE
def test_train_on_papers_100m_here_shows_the_run_plan_and_refuses_before_opening(tmp_path, monkeypatch, capsys):
    from suite.cli import main

    env_cache = tmp_path / "cache"
    monkeypatch.setenv("TIERBENCH_DATA", str(env_cache))
    start = time.perf_counter()
    assert main(["train", "--dataset", "papers-100m-half", "--loader", "tiered", "--hot-fraction", "0.1"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierbench: error: papers-100m-half needs 34.2 GiB of host RAM")
    assert "hot tier (11,105,996 rows)" in out and "26.5 GiB" in out
    assert time.perf_counter() - start < 30
    assert not env_cache.exists() or not any(env_cache.iterdir())


def test_a_sweep_refuses_the_first_paper_scale_cell_that_does_not_fit_before_opening_anything(monkeypatch, tmp_path,
                                                                                          capsys):
    from suite.cli import main
    from suite.sweep import cells, run

    monkeypatch.setattr(cells, "this_machine", lambda cache: Machine(120 * GB, 30 * GB, 500 * GB, None))
    monkeypatch.setattr(run, "open_dataset", lambda *a, **k: pytest.fail("a dataset was opened"))
    assert main(["run", "--experiment", "e", "--datasets", "papers-100m", "--loaders", "uva,tiered", "--hot-fractions",
                 "0.5", "--runs", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: cell papers-100m tiered hot 50%") and err.count("\n") == 1
    assert "of GPU memory and 27.9 GiB is free" in err
