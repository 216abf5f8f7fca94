"""Refusing a ``--hidden`` whose GraphSAGE could not be built where it trains, before any work: ``tierbench train``
and ``tierbench sar`` (SAR) share the check."""

from __future__ import annotations

from suite.errors import BadValue


def check_model_fits(dataset, layers: int, hidden: int, device) -> None:
    """Refuse a ``--hidden`` whose model could not be built in host memory, before it is: its weights, gradients
    and Adam's two moments on the CPU; its weights alone for a GPU (built on the host, then moved; a GPU that cannot
    hold the rest is torch's out-of-memory error, one line too).  ``dataset``: anything with the ``feature_dim`` and
    ``num_classes`` of the data (a dataset, or a preset before it is built)."""
    from suite.measure.host_memory import available_bytes, gib
    from suite.training.model import parameter_count, training_state_bytes

    widths = (dataset.feature_dim, dataset.num_classes, layers, hidden)
    if device.type == "cpu":
        needed, what = training_state_bytes(*widths), "GraphSAGE's weights, gradients and Adam's two moments take"
    else:
        needed = 4 * parameter_count(*widths)  # float32 weights
        what = "GraphSAGE's weights, built in host memory before they move to the GPU, take"
    available = available_bytes()
    if needed > available:
        raise BadValue(f"--hidden {hidden}: {what} {gib(needed)}, and the host has {gib(available)} available: give "
                       "a smaller --hidden")
