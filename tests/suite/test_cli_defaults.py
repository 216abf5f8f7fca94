"""Where the tierbench commands write when told nowhere: under out/ (gitignored), never into the committed results/."""

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from suite.cli import build_parser, main
from suite.cli.output import DESTINATIONS

REPO = Path(__file__).resolve().parents[2]


def _subcommands(parser: argparse.ArgumentParser, prefix=()):
    """(words, parser) of every subcommand, nested ones (``datasets cost``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                child.complete()  # a subcommand's options are added when first needed
                yield (*prefix, name), child
                yield from _subcommands(child, (*prefix, name))


def test_every_default_output_folder_is_under_out():
    defaults = {}
    for words, parser in _subcommands(build_parser()):
        for action in parser._actions:
            if action.dest in DESTINATIONS and action.default is not None:
                defaults[" ".join(words), action.dest] = action.default
    assert defaults, "no subcommand has a default output folder"
    assert {key: value for key, value in defaults.items() if not str(value).startswith("out/")} == {}


def test_no_command_computes_a_default_folder_in_results():
    """The commands whose default folder depends on their arguments (``args.out or f"out/..."``) name out/ too."""
    found = {path.name: re.findall(r'or f?"results/[^"]*"', path.read_text())
             for path in sorted((REPO / "suite" / "cli").glob("*.py"))}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_report_without_folders_reads_and_writes_out_and_redraws_committed_records_when_told(tmp_path, monkeypatch,
                                                                                            capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "runs").mkdir(parents=True)
    shutil.copy(REPO / "results" / "runs" / "demo.csv", tmp_path / "out" / "runs" / "demo.csv")
    assert main(["report", "--experiment", "demo"]) == 0
    assert (tmp_path / "out" / "demo" / "demo.md").is_file()
    assert not (tmp_path / "results").exists()
    assert main(["report", "--experiment", "demo", "--runs", str(REPO / "results" / "runs"),
                 "--out", str(tmp_path / "committed")]) == 0
    assert (tmp_path / "committed" / "demo.md").is_file()


def test_bucket_orders_as_the_readme_writes_it_writes_under_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bucket-orders"]) == 0
    assert (tmp_path / "out" / "marius" / "bucket-orders.md").is_file()
    assert not (tmp_path / "results").exists()



def test_building_the_parser_imports_neither_torch_nor_the_figures():
    """``tierbench --help`` takes a fraction of a second: torch, numba, pandas, scipy and the figures load when a
    command runs, not when the parser is built."""
    heavy = ("torch", "numba", "pandas", "scipy", "matplotlib", "suite.figures")
    probe = (f"import sys; from suite.cli import build_parser; build_parser(); "
             f"print([name for name in {heavy!r} if name in sys.modules])")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == "[]"
