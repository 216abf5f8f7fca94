"""Full-batch GraphSAGE, trained domain-parallel: each worker one part of the graph, the other parts' rows aggregated
the vanilla way or SAR's (SAR, Mostafa 2022).

The model is PyG's ``SAGEConv`` layers with mean aggregation (``lin_l`` on
the neighbours' mean, with the bias; ``lin_r`` on the node itself), ReLU
between layers and no dropout, so that a step is deterministic.  A worker
computes a layer for its own nodes as

    x_v lin_r + mean_u (x_u lin_l) + bias

(each neighbour transformed before the mean, which is ``lin_l`` of the mean:
the form SAR aggregates in, and DGL's ``SAGEConv`` when a layer narrows),
its own part's neighbours by ``A[rank]`` with plain autograd and the other
parts' by ``suite.training.domain_parallel`` (``vanilla`` or ``sar``).  The
loss is the cross-entropy summed over the worker's training nodes, divided
by the training nodes of the whole graph, so the workers' losses add up to
the single-process loss; the gradients are summed over the workers
(``all_reduce``) before each Adam step, so every worker keeps the same
parameters.  With one worker this is single-process full-batch training;
``reference_loss`` runs the same model the ordinary way, ``SAGEConv`` over
the whole graph, which the distributed steps are tested against.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv

from suite.measure.process_memory import PeakMemory
from suite.training.domain_parallel import AGGREGATIONS, LocalGraph
from suite.training.errors import PeerLost


def sage_layers(in_dim: int, hidden: int, num_classes: int, num_layers: int, seed: int = 0) -> torch.nn.ModuleList:
    """GraphSAGE's layers, initialised from ``seed`` (the same on every worker)."""
    torch.manual_seed(seed)
    widths = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
    return torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(widths[:-1], widths[1:]))


@dataclasses.dataclass
class WorkerData:
    """A worker's rows: its nodes' features and labels, and which of them are in each split."""

    features: torch.Tensor
    labels: torch.Tensor
    masks: dict[str, torch.Tensor]
    split_sizes: dict[str, int]  # over the whole graph

    @classmethod
    def of(cls, dataset, nodes: np.ndarray) -> WorkerData:
        index = torch.from_numpy(nodes)
        masks, sizes = {}, {}
        for split, ids in dataset.splits.items():
            member = torch.zeros(dataset.num_nodes, dtype=torch.bool)
            member[ids] = True
            masks[split], sizes[split] = member[index], len(ids)
        return cls(dataset.features[index].clone(), dataset.labels[index].clone(), masks, sizes)


def forward(layers: torch.nn.ModuleList, graph: LocalGraph, x: torch.Tensor, aggregation: str) -> torch.Tensor:
    """The layers on this worker's nodes, the other parts' rows aggregated by ``aggregation``."""
    aggregate = AGGREGATIONS[aggregation]
    for i, conv in enumerate(layers):
        weight = conv.lin_l.weight.t()
        x = conv.lin_r(x) + graph.blocks[graph.rank] @ (x @ weight) + aggregate(x, weight, graph) + conv.lin_l.bias
        if i < len(layers) - 1:
            x = F.relu(x)
    return x


def _summed_over_workers(value: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(value)
    return value


def step_loss(layers, graph: LocalGraph, data: WorkerData, aggregation: str) -> torch.Tensor:
    """This worker's share of the full-batch loss (the shares add up to the mean over all training nodes)."""
    logits = forward(layers, graph, data.features, aggregation)
    train = data.masks["train"]
    return F.cross_entropy(logits[train], data.labels[train], reduction="sum") / data.split_sizes["train"]


def _lost_a_peer(err: RuntimeError) -> bool:
    """Whether a step failed in the process group's communication (a peer's connection closed, or the group's
    timeout): NCCL raises ``DistError``s, gloo plain ``RuntimeError``s from its transport."""
    return dist.is_initialized() and (isinstance(err, dist.DistError) or "gloo" in str(err))


@dataclasses.dataclass
class StepResult:
    loss: float  # the whole graph's
    seconds: float
    peak_bytes: int  # the process's resident set at its highest during the step
    added_bytes: int  # that over the resident set at the step's start


def train_step(layers, optimizer, graph: LocalGraph, data: WorkerData, aggregation: str) -> StepResult:
    """One full-batch step on every worker together: forward, backward, gradients summed, Adam."""
    with PeakMemory() as peak:
        start = time.perf_counter()
        try:
            optimizer.zero_grad()
            loss = step_loss(layers, graph, data, aggregation)
            loss.backward()
            for parameter in layers.parameters():
                _summed_over_workers(parameter.grad)
            optimizer.step()
            total = _summed_over_workers(loss.detach().clone())
        except RuntimeError as err:
            if not _lost_a_peer(err):
                raise
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise PeerLost(f"worker {graph.rank} of {graph.world}: another worker stopped during the step ({first})"
                           ) from None
        seconds = time.perf_counter() - start
    return StepResult(float(total), seconds, peak.peak_bytes, peak.added_bytes)


@torch.no_grad()
def accuracy(layers, graph: LocalGraph, data: WorkerData, aggregation: str) -> dict[str, float]:
    """Accuracy on each split over the whole graph."""
    predicted = forward(layers, graph, data.features, aggregation).argmax(1)
    correct = torch.tensor([float((predicted[mask] == data.labels[mask]).sum()) for mask in data.masks.values()])
    correct = _summed_over_workers(correct)
    return {split: float(c) / max(data.split_sizes[split], 1) for split, c in zip(data.masks, correct)}


def reference_loss(layers, dataset) -> torch.Tensor:
    """The full-batch loss of ``layers`` computed in one process by ``SAGEConv`` itself over the whole graph."""
    graph = dataset.graph
    destinations = torch.repeat_interleave(torch.arange(graph.num_nodes), torch.diff(graph.indptr))
    edge_index = torch.stack([graph.indices.long(), destinations])
    x = dataset.features
    for i, conv in enumerate(layers):
        x = conv(x, edge_index)
        if i < len(layers) - 1:
            x = F.relu(x)
    train = dataset.splits["train"]
    return F.cross_entropy(x[train], dataset.labels[train])
