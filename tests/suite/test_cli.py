"""The tierbench command line, run as a user would."""

import subprocess
import sys

from suite.cli import main


def test_datasets_list_shows_every_preset(capsys):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("tiny", "products-s", "papers-s", "papers-m", "papers-l", "graph500-s"):
        assert name in out
    assert "ogbn-papers100M" in out and "--ogb-root" in out


def test_generate_then_info_writes_a_table_and_a_figure(tiny, tmp_path, capsys):
    assert main(["datasets", "generate", "tiny", "-q"]) == 0
    assert str(tiny.path) in capsys.readouterr().out
    out_dir = tmp_path / "results"
    assert main(["datasets", "info", "tiny", "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert "top-1% share" in printed and "4096" in printed
    table = (out_dir / "summary.md").read_text()
    assert "device cpu:" in table and "git " in table and "| tiny" in table
    png = (out_dir / "degree-ccdf.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "device" in (out_dir / "summary.csv").read_text().splitlines()[0]


def test_errors_are_one_clear_line_and_exit_status_2(capsys, tmp_path):
    assert main(["datasets", "info", "nope"]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["datasets", "info", "papers-m"]) == 2  # never generated in this cache
    err = capsys.readouterr().err
    assert "papers-m" in err and "tierbench datasets generate papers-m" in err
    assert main(["datasets", "generate", "ogbn-arxiv", "--ogb-root", str(tmp_path)]) == 2
    assert f"no dataset directory {tmp_path / 'ogbn_arxiv'}" in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "suite.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "datasets" in result.stdout
