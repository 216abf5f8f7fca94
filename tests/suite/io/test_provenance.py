import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
import torch

from suite.io import provenance as provenance_module
from suite.io.provenance import caption, git_revision, provenance, source_digest


def test_provenance_names_device_revision_and_time():
    record = provenance()
    if torch.cuda.is_available():  # the default device is the GPU where there is one
        assert record["device"] == f"cuda: {torch.cuda.get_device_name()}"
    else:
        assert record["device"].startswith("cpu: ")
    assert provenance("cpu")["device"].startswith("cpu: ")  # a CPU number is never labelled as a GPU one
    assert record["time"].endswith("+00:00")
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert git_revision().startswith(head.stdout.strip())
    assert caption(record).startswith(f"device {record['device']} | git ")


def test_the_revision_the_caller_gives_wins_over_git(monkeypatch):
    monkeypatch.setenv("TIERBENCH_REVISION", "b560f74cf751")  # the machine's .git may stand at another commit
    assert git_revision() == "b560f74cf751"
    assert provenance()["git_revision"] == "b560f74cf751"
    monkeypatch.setenv("TIERBENCH_REVISION", "  ")
    assert git_revision() != ""


def test_the_source_digest_changes_with_the_code_and_only_with_it(tmp_path):
    (tmp_path / "tiering").mkdir()
    (tmp_path / "tiering" / "kernel.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "a.py").write_text("x = 1\n")
    before = source_digest(tmp_path)
    source_digest.cache_clear()  # the digest is kept per process: read the files again after each edit
    assert len(before) == 16 and before == source_digest(tmp_path)
    (tmp_path / "suite" / "__pycache__").mkdir()
    (tmp_path / "suite" / "__pycache__" / "a.py").write_text("compiled")
    (tmp_path / "suite" / "notes.txt").write_text("not code")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "b.py").write_text("outputs are not code")
    source_digest.cache_clear()
    assert source_digest(tmp_path) == before
    (tmp_path / "suite" / "a.py").write_text("x = 2\n")
    source_digest.cache_clear()
    assert source_digest(tmp_path) != before
    (tmp_path / "suite" / "a.py").write_text("x = 1\n")
    (tmp_path / "suite" / "a.py").rename(tmp_path / "suite" / "b.py")  # same bytes under another name
    source_digest.cache_clear()
    assert source_digest(tmp_path) != before


def test_the_source_digest_is_read_once_per_process(tmp_path, monkeypatch):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "a.py").write_text("x = 1\n")
    source_digest.cache_clear()
    first, recorded = source_digest(tmp_path), provenance()["source_sha256"]
    monkeypatch.setattr(provenance_module, "source_files", lambda root: pytest.fail("read the source files again"))
    assert source_digest(tmp_path) == first and provenance()["source_sha256"] == recorded


def test_the_record_carries_the_digest_of_this_checkout_and_the_module_prints_it():
    assert provenance()["source_sha256"] == source_digest(provenance_module._REPO)
    printed = subprocess.run([sys.executable, "-m", "suite.io.provenance"], capture_output=True, text=True, check=True)
    assert f"source_sha256 {source_digest()}" in printed.stdout


def test_the_junit_report_of_a_test_run_carries_the_provenance(tmp_path):
    report = tmp_path / "tests.xml"
    test = Path(__file__).resolve().parents[2] / "test_gpu_marker.py"  # a small file of the suite: its quick tests
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", str(test),
                    "-k", "not skips and not fails"],
                   capture_output=True, check=True, env={**os.environ, "TIERBENCH_REVISION": "feedc0ffee12"})
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(report).iter("property")}
    assert properties["git_revision"] == "feedc0ffee12"
    assert {"device", "source_sha256", "time"} <= set(properties)
