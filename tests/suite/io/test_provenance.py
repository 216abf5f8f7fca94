import subprocess

import torch

from suite.io.provenance import caption, git_revision, provenance


def test_provenance_names_device_revision_and_time():
    record = provenance()
    if not torch.cuda.is_available():
        assert record["device"].startswith("cpu: ")  # a CPU number is never labelled as a GPU one
    assert record["time"].endswith("+00:00")
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert git_revision().startswith(head.stdout.strip())
    assert caption(record).startswith(f"device {record['device']} | git ")
