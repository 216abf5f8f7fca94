"""GraphSAGE's size counted from its widths is the size of the model built with them."""

import pytest

from suite.training.model import GraphSAGE
from suite.training.model_memory import parameter_count, training_state_bytes


@pytest.mark.parametrize("widths", [(128, 172, 3, 256), (32, 8, 2, 16), (100, 47, 1, 64)])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_counted_parameters_are_the_built_models(widths, weighted):
    in_dim, num_classes, num_layers, hidden = widths
    model = GraphSAGE(in_dim, num_classes, num_layers, hidden, weighted=weighted)
    assert parameter_count(*widths) == sum(p.numel() for p in model.parameters())
    assert training_state_bytes(*widths) == 4 * 4 * parameter_count(*widths)
