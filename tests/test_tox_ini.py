"""tox.ini as a new user meets it: every environment named in its header, every tierbench command in it one the
CLI takes, and no file where the README's own environment goes."""

import configparser
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tox() -> configparser.ConfigParser:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    return tox


def test_tox_writes_no_venv_file_where_the_readme_makes_its_own_environment():
    """tox 4 writes a PEP 832 ``.venv`` redirect file beside tox.ini after running an editable environment, unless
    told not to; the README's own-environment recipe then fails at ``python3 -m venv .venv``."""
    assert _tox()["tox"]["venv_redirect"].strip() == "false"
    assert "python3 -m venv .venv" in (REPO / "README.md").read_text()


def test_every_environment_is_named_in_the_header_and_only_test_runs_by_default():
    text = (REPO / "tox.ini").read_text()
    header = text[:text.index("[tox]")]
    environments = [section.removeprefix("testenv:") for section in _tox().sections() if section.startswith("testenv:")]
    assert environments
    assert [env for env in environments if not re.search(rf"(?<![\w-]){re.escape(env)}(?![\w-])", header)] == []
    assert "tox list" in header and "python3 -m tox list" in (REPO / "README.md").read_text()
    assert _tox()["tox"]["env_list"].split() == ["test"]  # a bare `tox`, and CI, run the tests alone


def _commands(section) -> list[str]:
    """The command lines of a tox environment, its other environments' commands (``{[testenv:x]commands}``)
    expanded and tox's substitutions made as tox makes them with no positional arguments: ``{/}`` a slash,
    ``{env:NAME:default}`` the default, ``{env:NAME}`` its name, ``{posargs}`` nothing, ``{posargs:default}`` the default."""
    tox = _tox()
    lines = []
    for line in tox[section].get("commands", "").splitlines():
        included = re.fullmatch(r"\s*\{\[(testenv:[\w-]+)\]commands\}\s*", line)
        lines += _commands(included.group(1)) if included else [line.strip()] if line.strip() else []
    substitutions = [(r"\{/\}", "/"), (r"\{env:\w+:([^}]*)\}", r"\1"), (r"\{env:(\w+)\}", r"\1"),
                     (r"\{posargs:([^}]*)\}", r"\1"), (r"\{posargs\}", "")]
    for pattern, replacement in substitutions:
        lines = [re.sub(pattern, replacement, line) for line in lines]
    return lines


def test_every_tierbench_command_of_every_environment_parses():
    # an option renamed in the CLI but not in tox.ini would fail only when someone reproduces that figure
    import shlex

    from suite.cli import build_parser

    parsed = {}
    for section in _tox().sections():
        for line in _commands(section):
            words = shlex.split(line)
            if words[0] == "tierbench":
                parsed[(section, line)] = build_parser().parse_args(words[1:])
    sections = {section for section, _ in parsed}
    assert {"testenv:demo", "testenv:results-demo", "testenv:redraw", "testenv:fig8", "testenv:plan",
            "testenv:build-cost"} <= sections
    assert parsed[("testenv:fig8", "tierbench run --experiment fig8 --runs results/runs --device cpu")].device == "cpu"
