"""Refusing a ``--hidden`` whose GraphSAGE could not be built where it trains, before any work: ``tierbench train``
and ``tierbench sar`` (SAR) share the check."""

from __future__ import annotations

from suite.errors import BadValue


def check_model_fits(dataset, layers: int, hidden: int, device) -> None:
    """Refuse a ``--hidden`` whose model could not be built, before it is: on the CPU, its weights, gradients and
    Adam's two moments in host memory; for a GPU, its weights in host memory (built there, then moved) and all four
    in the GPU's free memory, before the loader's rows take their share of it (a GPU that cannot hold the minibatches
    beside them is torch's out-of-memory error, one line too).  ``dataset``: anything with the ``feature_dim`` and
    ``num_classes`` of the data (a dataset, or a preset before it is built)."""
    import torch

    from suite.measure.host_memory import available_bytes, gib
    from suite.training.model_memory import parameter_count, training_state_bytes

    widths = (dataset.feature_dim, dataset.num_classes, layers, hidden)
    state = "GraphSAGE's weights, gradients and Adam's two moments take"
    if device.type == "cpu":
        needed, what = training_state_bytes(*widths), state
    else:
        needed = 4 * parameter_count(*widths)  # float32 weights
        what = "GraphSAGE's weights, built in host memory before they move to the GPU, take"
    available = available_bytes()
    if needed > available:
        raise BadValue(f"--hidden {hidden}: {what} {gib(needed)}, and the host has {gib(available)} available: give "
                       "a smaller --hidden")
    if device.type == "cuda":
        needed, (free, _) = training_state_bytes(*widths), torch.cuda.mem_get_info(device)
        if needed > free:
            raise BadValue(f"--hidden {hidden}: {state} {gib(needed)}, and {device} has {gib(free)} free: give a "
                           "smaller --hidden")
