"""tox.ini as a new user meets it: every environment named in its header, and no file where the README's own
environment goes."""

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
