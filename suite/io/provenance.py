"""Where and when a result was made: device, git revision, time, and the machine's profile.

Every table and figure tierbench writes carries this record, so a number can
always be traced to the machine and the code that produced it.  The device is
the CUDA device when one is in use, otherwise the CPU model, marked as such:
a CPU number is never presented as a GPU one.  ``machine_profile`` is the
path of the profile ``tierbench doctor`` wrote for this machine (versions,
PCIe links, measured ceilings), or ``None`` where it has not run.
"""

from __future__ import annotations

import datetime
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


def git_revision() -> str:
    """The commit the code was run from, with ``-dirty`` when its code had uncommitted changes."""
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
