"""Where and when a result was made: device, git revision, time (rule 2 of the house).

Every table and figure tierbench writes carries this record, so a number can
always be traced to the machine and the code that produced it.  The device is
the CUDA device when one is in use, otherwise the CPU model, marked as such:
a CPU number is never presented as a GPU one.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
from pathlib import Path

import torch

_REPO = Path(__file__).resolve().parent.parent


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


def provenance(device=None) -> dict:
    return {
        "device": device_name(device),
        "git_revision": git_revision(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "torch": torch.__version__,
    }


def caption(record: dict) -> str:
    """One line to print under a figure or table."""
    return f"device {record['device']} | git {record['git_revision']} | {record['time']}"
