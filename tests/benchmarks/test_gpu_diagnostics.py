import json
import shutil
from pathlib import Path

import pytest

from benchmarks import gpu_diagnostics


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_report_puts_each_window_in_a_column_and_divides_by_the_cpu_time_of_the_same_study(tmp_path):
    provenance = {"device": "cuda: Fake GPU", "git_revision": "abc", "time": "2026-01-01T00:00:00+00:00"}
    reach = [provenance, {"pages": "4k", "anon_huge_kib": 0}]
    reach += [{"study": "reach", "pages": "4k", "row_bytes": row, "window_mib": window >> 20,
               "gbps": row / 100 + window / 2**30} for row in (128, 512) for window in gpu_diagnostics.WINDOWS]
    reach += [{"study": "grid", "pages": "4k", "row_bytes": 512, "max_blocks": cap, "gbps": 19.0}
              for cap in gpu_diagnostics.GRID_CAPS]
    sampler = [provenance, {"graph": "papers-s"}]
    sampler += [{"study": study, "case": case, "edges": 100, "seconds": seconds, "edges_per_s": 100 / seconds}
                for study, cpu_seconds in (("one hop", 0.004), ("minibatch", 0.03))
                for case, seconds in (("cpu (numba)", cpu_seconds), ("gpu (CSR in GPU memory)", cpu_seconds / 2))]
    _write_jsonl(tmp_path / "reach.jsonl", reach)
    _write_jsonl(tmp_path / "sampler.jsonl", sampler)

    markdown_path, figure_path = gpu_diagnostics.report(tmp_path)
    markdown = markdown_path.read_text()
    assert "device cuda: Fake GPU | git abc" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| pages"))
    assert [c.strip() for c in header.strip("|").split("|")][2:] == [
        "128 MiB window (GB/s)", "1024 MiB window (GB/s)", "4096 MiB window (GB/s)"]
    row_128 = next(line for line in markdown.splitlines() if line.startswith("| 4k      |         128"))
    assert [float(c) for c in row_128.strip("|").split("|")[2:]] == [1.41, 2.28, 5.28]
    assert "none (one warp per row)" in markdown and "| 8448 " in markdown
    gpu_rows = [line for line in markdown.splitlines() if "gpu (CSR in GPU memory)" in line]
    assert len(gpu_rows) == 2 and all(line.rstrip(" |").endswith("2") for line in gpu_rows)  # twice as fast
    assert figure_path.stat().st_size > 0


REDRAWN_DIAGNOSTICS = ["results/gpu/cuda-nvidia-h100-80gb-hbm3/diagnostics/reach.png"]
"""The committed diagnostics figures, drawn again below from the records beside them."""


@pytest.mark.parametrize("figure", REDRAWN_DIAGNOSTICS)
def test_the_committed_diagnostics_are_drawn_again_from_their_records(figure, tmp_path):
    committed = Path(__file__).resolve().parents[2] / figure
    for name in ("reach.jsonl", "sampler.jsonl", "provenance.json"):
        shutil.copy(committed.parent / name, tmp_path / name)
    paths = gpu_diagnostics.report(tmp_path)
    assert [path.name for path in paths] == ["diagnostics.md", committed.name]
    assert paths[0].read_text() == (committed.parent / "diagnostics.md").read_text()
