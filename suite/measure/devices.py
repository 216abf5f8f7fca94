"""The ``--device`` option: a device name checked against what this machine has, before any work starts.

tierbench trains and measures on ``cpu`` or on a CUDA GPU (``cuda``, ``cuda:N``;
Data Tiering §4.1 keeps the hot tier in GPU memory).  A name torch cannot parse,
another device type, CUDA on a machine or a torch build without it, and
``cuda:N`` past the GPUs visible here are each refused with a ``ValueError``
that says what to give instead.
"""

from __future__ import annotations

import os

import torch

from suite.errors import BadValue


def _no_cuda_reason() -> str:
    if torch.version.cuda is None:
        return (f"torch {torch.__version__} was built without CUDA; install a CUDA build of torch "
                "(README: Installing on a GPU node without internet)")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    return f"torch {torch.__version__} sees no GPU here{hint}; nvidia-smi shows whether the driver sees one"


def resolve_device(name: str) -> torch.device:
    """``name`` as a ``torch.device`` this machine can run on, or a ``ValueError`` that says why not."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise BadValue(f"--device {name!r} is not a device: give cpu, cuda or cuda:N") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise BadValue(f"--device {name}: tierbench runs on cpu or cuda (cuda:N), not {device.type}")
    if not torch.cuda.is_available():
        raise BadValue(f"--device {name} needs a CUDA GPU and none is usable: {_no_cuda_reason()}")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise BadValue(f"--device {name}: this machine has {count} visible GPU{'s' if count != 1 else ''} "
                       f"(cuda:0 to cuda:{count - 1})")
    return device
