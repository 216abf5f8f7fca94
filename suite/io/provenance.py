"""Where and when a result was made: device, git revision, source digest, time, and the machine's profile.

Every table and figure tierbench writes carries this record, so a number can
always be traced to the machine and the code that produced it.  The revision is
``$TIERBENCH_REVISION`` where the caller set it (a GPU node's checkout is copied
over, often with a ``.git`` that does not match its files), else git's view of
the checkout.  ``source_sha256`` is a digest of the source files themselves, so
a reader can tell whether the code that ran is the code of that revision:
``python -m suite.io.provenance`` prints it for a checkout of the revision.  The device is
the CUDA device when one is in use, otherwise the CPU model, marked as such:
a CPU number is never presented as a GPU one.  ``machine_profile`` is the
path of the profile ``tierbench doctor`` wrote for this machine (versions,
PCIe links, measured ceilings), or ``None`` where it has not run.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import platform
import re
import subprocess
from pathlib import Path

import torch

_REPO = Path(__file__).resolve().parents[2]
MACHINES_DIR = "out/machines"
"""Where ``tierbench doctor`` writes this machine's profile unless told otherwise."""
PROFILE_DIRS = (MACHINES_DIR, "results/machines")
"""Where a machine's profile is looked for: the one ``tierbench doctor`` wrote here, then the committed ones."""
REVISION_ENV = "TIERBENCH_REVISION"
"""Set by whoever ships the checkout to the machine that runs it: the revision recorded in place of git's."""
SOURCE_DIRS = ("tiering", "baselines", "suite", "benchmarks")
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h")
SOURCE_FILES = ("pyproject.toml",)
"""What ``source_digest`` reads: the code of the packages and the build file, never data, results or caches."""


def git_revision() -> str:
    """``$TIERBENCH_REVISION`` where set; else the commit the code was run from, with ``-dirty`` when its code had
    uncommitted changes."""
    given = os.environ.get(REVISION_ENV, "").strip()
    if given:
        return given
    try:
        rev = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(  # outputs in results/ do not make the code that wrote them dirty
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev}-dirty" if dirty else rev


def source_files(root=_REPO) -> list[Path]:
    """The source files under ``root`` that ``source_digest`` reads, sorted by their path relative to ``root``."""
    root = Path(root)
    found = [root / name for name in SOURCE_FILES if (root / name).is_file()]
    for folder in SOURCE_DIRS:
        found += [path for path in (root / folder).rglob("*") if path.suffix in SOURCE_SUFFIXES and path.is_file()
                  and "__pycache__" not in path.relative_to(root).parts]
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


@functools.cache
def source_digest(root=_REPO) -> str:
    """SHA-256 (first 16 hex digits) over each source file's relative path and bytes: equal for two checkouts exactly
    when their code is.  Read once per process and ``root`` (a process runs the code it imported; every record it
    writes carries the same digest); ``source_digest.cache_clear()`` reads the files again."""
    digest = hashlib.sha256()
    for path in source_files(root):
        name = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()[:16]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: torch.device | str | None = None) -> str:
    """``"cuda: NVIDIA H100 ..."`` or ``"cpu: <model>"`` for the device results come from."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu: {cpu_name()}"


def slug(text: str) -> str:
    """``"cuda: NVIDIA H100 80GB HBM3"`` -> ``"cuda-nvidia-h100-80gb-hbm3"``: a file or folder name for a device or host."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def machine_profile_name(device: torch.device | str | None = None) -> str:
    """The file name of this machine's profile: ``<GPU name>-<host>.json``, or ``cpu-<host>.json`` without CUDA.

    A CPU ``device`` on a machine with CUDA names the profile of its current
    GPU: the profile describes the machine, not the device a run used.
    """
    if torch.cuda.is_available():
        device = torch.device(device) if device is not None else None
        gpu = device if device is not None and device.type == "cuda" else torch.cuda.current_device()
        machine = torch.cuda.get_device_name(gpu)
    else:
        machine = "cpu"
    return f"{slug(machine)}-{slug(platform.node())}.json"


def machine_profile_path(device: torch.device | str | None = None, directories=PROFILE_DIRS) -> str | None:
    """The path of this machine's profile in the first of ``directories`` where ``tierbench doctor`` wrote one, else
    ``None``.

    ``directories`` are relative to the working directory, as every output path of the commands is.
    """
    for directory in directories:
        path = Path(directory) / machine_profile_name(device)
        if path.is_file():
            return str(path)
    return None


def provenance(device=None) -> dict:
    return {
        "device": device_name(device),
        "git_revision": git_revision(),
        "source_sha256": source_digest(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "torch": torch.__version__,
        "machine_profile": machine_profile_path(device),
    }


def caption(record: dict) -> str:
    """One line to print under a figure or table (with the machine profile where the record has one)."""
    line = f"device {record['device']} | git {record['git_revision']} | {record['time']}"
    profile = record.get("machine_profile")
    return f"{line} | machine {profile}" if isinstance(profile, str) else line  # NaN in a CSV's older rows


if __name__ == "__main__":
    print(f"revision {git_revision()}, source_sha256 {source_digest()}")
