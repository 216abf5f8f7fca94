"""What GraphSAGE (``suite.training.model``) holds in memory, counted from its widths without building it, and so
without importing PyG: the planner (``suite.policies.planner``) and the ``--hidden`` checks of the commands that
train (``suite.cli.model_size``) read it."""

from __future__ import annotations


def parameter_count(in_dim: int, num_classes: int, num_layers: int, hidden: int) -> int:
    """The parameters of ``GraphSAGE(in_dim, num_classes, num_layers, hidden)``, counted without building it: per
    layer of widths a -> b, two a x b weights (the node's own and its neighbours') and one bias of b."""
    widths = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
    return sum(2 * a * b + b for a, b in zip(widths[:-1], widths[1:]))


def training_state_bytes(in_dim: int, num_classes: int, num_layers: int, hidden: int) -> int:
    """What training the model holds for its parameters: float32 weights, their gradients and Adam's two moments."""
    return 4 * 4 * parameter_count(in_dim, num_classes, num_layers, hidden)
