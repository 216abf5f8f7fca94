"""gpubench's pure parts on the CPU with fake timings, and one quick measurement per variant on a GPU."""

import math

import pandas as pd
import pytest
import torch

from suite.datasets.host_copy import page_aligned_empty
from suite.experiments import gpu as gpu_bench
from suite.experiments.gpu import Config
from suite.figures.gpu import render
from tiering.features.addressing import VARIANTS
from tiering.features.zero_copy import DEFAULT_VARIANT

CEILINGS = {"h2d_memcpy_bytes_per_s": 50e9, "zero_copy_read_bytes_per_s": 40e9, "d2d_copy_bytes_per_s": 1500e9,
            "buffer_bytes": 512 << 20}


def test_the_buffer_starts_on_a_page_and_tables_are_views_of_it():
    buffer = page_aligned_empty((1 << 20,), torch.uint8)
    assert buffer.data_ptr() % 4096 == 0 and len(buffer) == 1 << 20 and buffer.dtype == torch.uint8
    table = gpu_bench.table_view(buffer, 1024, torch.float32)
    assert table.shape == (1024, 256) and table.data_ptr() == buffer.data_ptr()
    table[3, 0] = 1.5  # a view, not a copy
    assert buffer[3 * 1024:3 * 1024 + 4].view(torch.float32).item() == 1.5
    half = gpu_bench.table_view(buffer, 128, torch.float16, max_bytes=1000)
    assert half.shape == (7, 64) and half.dtype == torch.float16
    shifted = gpu_bench.table_view(buffer, 512, torch.float32, offset=64)
    assert shifted.data_ptr() % 128 == 64 and shifted.shape == ((1 << 20) // 512 - 1, 128)
    for row_bytes in gpu_bench.ALIGNMENT_ROW_BYTES:  # every Fig. 8 row starts where it should
        rows = gpu_bench.table_view(buffer, row_bytes, torch.float32)
        assert rows[1].data_ptr() - rows[0].data_ptr() == row_bytes


def test_a_table_view_refuses_rows_that_do_not_fit():
    buffer = page_aligned_empty((4096,), torch.uint8)
    with pytest.raises(ValueError, match="whole torch.float32"):
        gpu_bench.table_view(buffer, 1026, torch.float32)
    with pytest.raises(ValueError, match="holds no 8192 B row"):
        gpu_bench.table_view(buffer, 8192, torch.float32)


def test_configurations_cover_every_case_once():
    configs = gpu_bench.configurations()
    assert len(configs) == len(set(configs))
    for dtype in gpu_bench.DTYPES:
        for row_bytes in gpu_bench.ROW_BYTES:
            for study in ("cold", "hot"):
                here = [c for c in configs if (c.study, c.dtype, c.row_bytes) == (study, dtype, row_bytes)]
                assert sorted(c.variant for c in here if c.path == "kernel") == sorted(VARIANTS)
                assert [c.variant for c in here if c.path == "full gather"] == [DEFAULT_VARIANT]
    alignment = [(c.row_bytes, c.variant) for c in configs if c.study == "alignment"]
    assert sorted(alignment) == sorted((r, v) for r in range(1024, 1045, 4) for v in VARIANTS)


def _fake_results():
    """Bandwidths in B/s: wide is fastest on hot rows, aligned on cold ones, naive is slowest."""
    speed = {"naive": 0.8, "aligned": 1.0, "wide": 0.95}
    results = []
    for config in gpu_bench.configurations():
        if config.study == "hot":
            ours = {"naive": 1.0, "aligned": 1.1, "wide": 1.6}[config.variant] * 1000e9
            results.append((config, ours, 1200e9))
        else:
            ours = speed[config.variant] * 45e9 * (0.5 if config.path == "full gather" else 1.0)
            results.append((config, ours, 50e9))
    return results


def test_the_speed_table_has_ratios_goals_and_ceilings():
    table = gpu_bench.speed_table(_fake_results(), CEILINGS)
    cold = table.set_index(["study", "path", "dtype", "row bytes", "variant"])
    row = cold.loc[("cold", "kernel", "float32", 512, "aligned")]
    assert row["ours (GB/s)"] == pytest.approx(45) and row["peer (GB/s)"] == pytest.approx(50)
    assert row["ours / peer"] == pytest.approx(0.9) and row["goal"] == ">= 0.90" and row["meets goal"] == "yes"
    assert row["ours / ceiling"] == pytest.approx(45 / 40) and row["meets ceiling goal"] == "yes"
    assert cold.loc[("cold", "kernel", "float16", 1024, "naive"), "meets goal"] == "no"
    small = cold.loc[("cold", "kernel", "float32", 256, "aligned")]
    assert small["goal"] == small["meets goal"] == ""  # the goal is for rows of 512 B and more
    hot = cold.loc[("hot", "kernel", "float16", 128, "wide")]
    assert hot["goal"] == ">= 1.00" and hot["meets goal"] == "yes" and hot["ceiling"] == "device-to-device copy"
    assert hot["ours / ceiling"] == pytest.approx(1600 / 1500)
    full = cold.loc[("cold", "full gather", "float32", 4096, DEFAULT_VARIANT)]
    assert full["goal"] == "" and full["ours / peer"] == pytest.approx(0.45)
    paper = table[table["study"] == "alignment"].set_index("variant")["paper"]
    assert set(paper["aligned"]) == {"88-93%"} and set(paper["naive"]) == {"78-82%"}


def test_the_fastest_variant_is_chosen_per_case_and_overall():
    table = gpu_bench.speed_table(_fake_results(), CEILINGS)
    fastest = gpu_bench.fastest_variants(table)
    assert len(fastest) == 2 * len(gpu_bench.DTYPES) * len(gpu_bench.ROW_BYTES)
    assert set(fastest.loc[fastest["study"] == "cold", "fastest"]) == {"aligned"}
    assert set(fastest.loc[fastest["study"] == "hot", "fastest"]) == {"wide"}
    hot = fastest[fastest["study"] == "hot"].iloc[0]
    assert hot["aligned / fastest"] == pytest.approx(1.1 / 1.6)
    default, why = gpu_bench.recommend_default(fastest)
    # geometric means of the shares of the fastest: wide sqrt(0.95 * 1), aligned sqrt(1 * 1.1 / 1.6)
    assert default == "wide" and "fastest in 10 of 20" in why
    assert f"aligned {math.sqrt(1.1 / 1.6):.3f}" in why


def test_the_model_check_table_gives_ratios_or_says_why_not():
    checks = [
        {"row bytes": 512, "offset": 0, "variant": "aligned", "modelled payload": 1000, "modelled requests": 10,
         "measured rx": 1050, "measured tx": 300, "reason": None},
        {"row bytes": 516, "offset": 0, "variant": "naive", "modelled payload": 1000, "modelled requests": 10,
         "measured rx": 1200, "measured tx": 250, "reason": None},
        {"row bytes": 512, "offset": 64, "variant": "aligned", "modelled payload": 1000, "modelled requests": 10,
         "measured rx": None, "measured tx": None, "reason": "NVML PCIe counters unavailable: no NVML"},
    ]
    table = gpu_bench.model_check_table(checks, {"bytes": 2000, "measured rx": 2100, "reason": None})
    assert list(table["within goal"]) == ["yes", "no", "", ""]
    assert table["measured / model"].iloc[0] == pytest.approx(1.05)
    assert table["measured TX per modelled request"].iloc[0] == pytest.approx(30)
    assert table["measured RX"].iloc[2] == "unavailable" and "no NVML" in table["note"].iloc[2]
    assert "row 0 at byte 64" in table["case"].iloc[2]
    assert table["case"].iloc[3].startswith("pinned cudaMemcpy") and table["measured / model"].iloc[3] == 1.05


def test_the_report_writes_tables_and_figures(tmp_path):
    table = gpu_bench.speed_table(_fake_results(), CEILINGS)
    checks = gpu_bench.model_check_table([], None)
    record = {"device": "cuda: Fake GPU", "git_revision": "abc", "time": "2026-01-01T00:00:00+00:00"}
    facts = {"command": "tierbench gpubench", "ceilings": CEILINGS, "table_bytes": 64 << 20, "repeat": 1,
             "default_variant": DEFAULT_VARIANT}
    reached = gpu_bench.reach_table(_fake_rates(64 << 20), 64 << 20, CEILINGS)
    paths = render(gpu_bench.write_records(tmp_path / "records", table, checks, reached, record, facts), tmp_path)
    assert [p.name for p in paths] == ["microbench.md", "microbench.csv", "ratios.png", "alignment.png",
                                       "pcie-check.csv", "reach.csv", "reach.png"]
    markdown = paths[0].read_text()
    assert "**The default variant should be: wide**" in markdown and "device cuda: Fake GPU" in markdown
    assert "## Full `loader.gather`" in markdown and "h2d memcpy 50 GB/s" in markdown
    assert "## Reach: cold gather of random rows from the first 128 MiB, 1 GiB or the whole table" in markdown
    for png in (paths[2], paths[3], paths[6]):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(pd.read_csv(paths[1])) == len(table)
    reach_records = pd.read_csv(paths[5])
    assert len(reach_records) == len(reached) and set(reach_records["device"]) == {"cuda: Fake GPU"}
    assert {"git_revision", "time"} <= set(reach_records.columns)


def _fake_rates(table_bytes):
    """Cold gathers that slow down as their rows spread: 40 GB/s over 128 MiB, halved by each wider window."""
    windows = gpu_bench.reach_windows(table_bytes)
    return [(row_bytes, window, 40e9 * row_bytes / 4096 / 2 ** k)
            for row_bytes in gpu_bench.REACH_ROW_BYTES for k, window in enumerate(windows)]


def test_the_reach_study_windows_are_the_first_128_mib_1_gib_and_the_whole_table():
    assert gpu_bench.reach_windows(4 << 30) == [128 << 20, 1 << 30, 4 << 30]
    assert gpu_bench.reach_windows(1 << 30) == [128 << 20, 1 << 30]
    assert gpu_bench.reach_windows(64 << 20) == [64 << 20]


def test_the_reach_table_gives_each_window_its_speed_share_of_the_ceiling_and_gain_over_the_whole_table():
    table = gpu_bench.reach_table(_fake_rates(4 << 30), 4 << 30, CEILINGS)
    assert len(table) == len(gpu_bench.REACH_ROW_BYTES) * 3
    row = table.set_index(["row bytes", "window"]).loc[(4096, "first 128 MiB")]
    assert row["window bytes"] == 128 << 20 and row["ours (GB/s)"] == pytest.approx(40)
    assert row["ours / ceiling"] == pytest.approx(1.0) and row["over the whole table"] == pytest.approx(4)
    assert list(table["window"][:3]) == ["first 128 MiB", "first 1 GiB", "whole table"]
    assert set(table.loc[table["window"] == "whole table", "over the whole table"]) == {1.0}


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_study_measures_correct_rows_on_the_gpu(variant):
    from tiering.features.zero_copy import register_host_memory, unregister_host_memory

    buffer = page_aligned_empty((64 << 20,), torch.uint8)
    gpu_bench._fill(buffer)
    register_host_memory(buffer)
    try:
        device = torch.device("cuda", torch.cuda.current_device())
        for config in (Config("cold", 1028, torch.float32, variant), Config("hot", 256, torch.float16, variant),
                       Config("cold", 512, torch.float16, variant, "full gather")):
            ours, peer = gpu_bench.measure_config(config, buffer, device, repeat=1)  # raises if a row came back wrong
            assert ours > 0 and peer > 0
    finally:
        unregister_host_memory(buffer)


@pytest.mark.gpu
def test_the_reach_study_measures_correct_rows_in_every_window_on_the_gpu():
    from tiering.features.zero_copy import register_host_memory, unregister_host_memory

    buffer = page_aligned_empty((256 << 20,), torch.uint8)
    gpu_bench._fill(buffer)
    register_host_memory(buffer)
    try:
        device = torch.device("cuda", torch.cuda.current_device())
        rates = gpu_bench.reach(buffer, len(buffer), device, repeat=1)  # raises if a row came back wrong
    finally:
        unregister_host_memory(buffer)
    assert [(r, w) for r, w, _ in rates] == [(r, w) for r in gpu_bench.REACH_ROW_BYTES for w in (128 << 20, 256 << 20)]
    assert all(rate > 0 for _, _, rate in rates)
