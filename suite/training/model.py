"""GraphSAGE (Hamilton et al., NeurIPS 2017), the model Data Tiering §5.1 trains: PyG's ``SAGEConv`` with mean aggregation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphConv, SAGEConv


class GraphSAGE(torch.nn.Module):
    """GraphSAGE with mean aggregation: ``SAGEConv`` layers.

    ``weighted=True`` builds the same layer for samplers that attach importance
    weights to their edges (GNS): PyG's ``GraphConv``, ``W1 x_v + W2 sum_u w_uv x_u``,
    which is SAGEConv's ``W1 x_v + W2 mean_u x_u`` with the mean's 1/k replaced
    by the weights.
    """

    def __init__(self, in_dim: int, num_classes: int, num_layers: int, hidden: int = 256, dropout: float = 0.5,
                 weighted: bool = False):
        super().__init__()
        widths = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        layer = GraphConv if weighted else SAGEConv
        self.convs = torch.nn.ModuleList(layer(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.weighted = weighted
        self.dropout = dropout

    def forward(self, x: torch.Tensor, blocks) -> torch.Tensor:
        """Logits of the seeds of ``blocks`` from the input nodes' rows ``x``, widened to the layers' dtype where the
        table holds fewer bits (float16, bfloat16): the rows travel at their size, the model computes in float32."""
        x = x.to(next(self.parameters()).dtype)
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            if self.weighted:
                x = conv((x, x[: block.num_dst]), block.edge_index, edge_weight=block.edge_weight)
            else:
                x = conv((x, x[: block.num_dst]), block.edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x

