"""PyG's remote-backend interface over tierbench: train a PyG model with features from any registered loader.

PyG (2.3 and later) lets ``torch_geometric.loader.NodeLoader`` draw minibatches
from a ``(FeatureStore, GraphStore)`` pair and a ``BaseSampler``.  This module
fills those three roles with tierbench's parts, so a PyG user keeps PyG's loader
and models while the features come through the loader being measured:

* ``LoaderFeatureStore``: node attribute ``x`` is ``loader.gather(index)``, so
  every row PyG fetches passes through the loader and lands in its counters
  (hit ratio, modelled PCIe bytes and requests, host and disk bytes: Data
  Tiering §5, PyTorch-Direct §3.2); ``y`` (optional) is the labels.
* ``CSRGraphStore``: tierbench's CSR (``tiering.graph.csr``) as PyG's CSC
  layout (``indices[indptr[v]:indptr[v+1]]`` are the sources of the edges into
  ``v``: PyG's ``(row, colptr)``), without a copy.
* ``TierbenchNodeSampler``: tierbench's neighbour sampler
  (``tiering.sampling.neighbors``), or the loader's own where it brings one (GNS).

Minibatches are those of tierbench's trainer (``suite.training.trainer``) for
the same seed: with ``EpochOrder`` as the NodeLoader's ``sampler`` the seeds of
epoch e come in ``epoch_order(ids, seed, e)`` and are cut into batches of
``batch_size`` in turn; ``set_epoch(e)`` restarts the hop seeds at
``epoch_generator(seed, e, 1)``, and each minibatch draws one per hop from it in
batch order, exactly as ``minibatches`` does (a node's neighbours are then the
counter-based draws of ``tiering.rng`` for that hop seed and the node's id).
A batch's ``n_id`` is tierbench's ``input_nodes`` (seeds first, then each hop's
new nodes in order of first appearance), and ``edge_index`` holds every hop's
block from the seeds outwards, local to ``n_id``; ``num_sampled_nodes`` and
``num_sampled_edges`` count them per hop, as PyG's ``NeighborLoader`` does.

Link-level minibatches (PyG's ``LinkLoader``, with or without its negative
sampling) are sampled from the distinct endpoints of their edges.

Limits: homogeneous graphs, no temporal sampling, no edge ids (tierbench keeps
no edge features).  Sampling draws hop seeds in batch order
and the loader counts in the process it lives in, so the NodeLoader must run
with ``num_workers=0`` (a worker is refused); tierbench's sampler is itself
parallel.  GNS's importance weights are in the ``SamplerOutput``'s
``metadata[2]``; PyG's NodeLoader does not copy them onto the batch, so a model
fed by it aggregates GNS's neighbours unweighted.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.utils.data
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.data.graph_store import EdgeLayout
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.sampler.neighbor_sampler import edge_sample

from tiering.features.loader import FeatureLoader
from tiering.graph.csr import CSRGraph
from tiering.sampling.neighbors import NeighborSampler, epoch_generator

FEATURES = "x"
LABELS = "y"


def _refuse_workers(what: str) -> None:
    if torch.utils.data.get_worker_info() is not None:
        raise RuntimeError(f"{what} runs in the main process: create the NodeLoader with num_workers=0 (tierbench's "
                           "hop seeds are drawn in batch order, and the feature loader counts in its own process)")


class LoaderFeatureStore(FeatureStore):
    """A read-only feature store over a tierbench feature loader: ``x`` is gathered by it, ``y`` is ``labels``."""

    def __init__(self, loader: FeatureLoader, labels: torch.Tensor | None = None):
        super().__init__()
        if labels is not None and len(labels) != loader.num_rows:
            raise ValueError(f"labels has {len(labels)} entries, the feature table {loader.num_rows} rows")
        self.loader = loader
        self.labels = labels

    def _rows(self, index) -> torch.Tensor:
        """``index`` (ids, a mask, a slice, an int or None for every row) as int64 node ids."""
        if index is None:
            return torch.arange(self.loader.num_rows)
        if isinstance(index, np.ndarray):
            index = torch.from_numpy(index)
        if isinstance(index, torch.Tensor):
            return index.nonzero().view(-1) if index.dtype == torch.bool else index.view(-1)
        return torch.arange(self.loader.num_rows)[index].view(-1)

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        _refuse_workers("gathering features")
        self._check(attr)
        rows = self._rows(attr.index)
        if attr.attr_name == FEATURES:
            return self.loader.gather(rows)
        return self.labels[rows.to(self.labels.device)].to(self.loader.device)

    def _check(self, attr: TensorAttr) -> None:
        if attr.group_name is not None or attr.attr_name not in self._names():
            raise KeyError(f"no tensor {attr.group_name!r}/{attr.attr_name!r}: this store holds the homogeneous "
                           f"node attributes {', '.join(self._names())}")

    def _names(self) -> list[str]:
        return [FEATURES] if self.labels is None else [FEATURES, LABELS]

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        self._check(attr)
        rows = self.loader.num_rows if attr.index is None else len(self._rows(attr.index))
        return (rows, self.loader.feature_dim) if attr.attr_name == FEATURES else (rows,)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(group_name=None, attr_name=name) for name in self._names()]

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        return False  # the table belongs to the loader

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return False


class CSRGraphStore(GraphStore):
    """A read-only graph store over a tierbench CSR: one homogeneous edge set, in PyG's CSC layout."""

    def __init__(self, graph: CSRGraph):
        super().__init__()
        self.graph = graph

    def _edge_attr(self) -> EdgeAttr:
        return EdgeAttr(None, EdgeLayout.CSC, size=(self.graph.num_nodes, self.graph.num_nodes))

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [self._edge_attr()]

    def _get_edge_index(self, edge_attr: EdgeAttr):
        """``(row, colptr)``: the sources of the edges into each node, and where each node's start (the CSR's own
        ``indices`` and ``indptr``; other layouts come from PyG's ``coo()`` / ``csr()``)."""
        if edge_attr.edge_type is not None or edge_attr.layout != EdgeLayout.CSC:
            return None
        return self.graph.indices, self.graph.indptr

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        return False  # the graph is the dataset's

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return False


class TierbenchNodeSampler(BaseSampler):
    """PyG's sampler over tierbench's ``NeighborSampler`` (or ``loader``'s own, for GNS), minibatches as the trainer's.

    ``fanouts`` from the seeds outwards, as the trainer takes them; ``seed`` as the trainer's.
    Call ``set_epoch(e)`` before each epoch (after ``loader.start_epoch(e)``, as the trainer does).
    It serves PyG's ``LinkLoader`` too: a batch of edges (and PyG's negative samples for them) is sampled from its
    distinct endpoints, through PyG's own ``edge_sample``.
    """

    def __init__(self, graph: CSRGraph, fanouts, *, loader: FeatureLoader | None = None, seed: int = 0,
                 backend: str = "cpu"):
        own = loader.make_sampler(graph, fanouts) if loader is not None else None
        self.sampler = own or NeighborSampler(graph, fanouts, backend=backend)
        self.num_nodes = graph.num_nodes
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: ``EpochOrder`` shuffles for it and the hop seeds start over."""
        self.epoch = epoch
        self.generator = epoch_generator(self.seed, epoch, 1)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs) -> SamplerOutput:
        out, weights = self._sample(index.node, index.input_type, index.time)
        out.metadata = (index.input_id, None, weights)
        return out

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None) -> SamplerOutput:
        """The minibatch of the distinct endpoints of ``index``'s edges and of the negative samples PyG draws for them
        (``neg_sampling``); PyG's ``edge_sample`` maps the edges onto the batch's nodes (``edge_label_index``)."""
        return edge_sample(index, lambda seeds, seed_time: self._sample(seeds, index.input_type, seed_time)[0],
                           self.num_nodes, disjoint=False, neg_sampling=neg_sampling)

    def _sample(self, seeds: torch.Tensor, input_type, time) -> tuple[SamplerOutput, torch.Tensor | None]:
        """The minibatch of ``seeds`` (distinct) as PyG's output without its metadata, and GNS's importance weights
        (``None`` for other samplers)."""
        _refuse_workers("sampling")
        if input_type is not None:
            raise ValueError(f"tierbench samples homogeneous graphs; got type {input_type!r}")
        if time is not None:
            raise ValueError("tierbench's sampler is not temporal; give no input or edge-label time")
        batch = self.sampler.sample(seeds, self.generator)
        hops = batch.blocks[::-1]  # from the seeds outwards
        weights = [hop.edge_weight for hop in hops]
        out = SamplerOutput(
            node=batch.input_nodes,
            row=torch.cat([hop.edge_index[0] for hop in hops]),
            col=torch.cat([hop.edge_index[1] for hop in hops]),
            edge=None,
            num_sampled_nodes=[len(batch.seeds)] + [hop.num_src - hop.num_dst for hop in hops],
            num_sampled_edges=[int(hop.edge_index.shape[1]) for hop in hops],
        )
        return out, None if weights[0] is None else torch.cat(weights)


class EpochOrder(torch.utils.data.Sampler):
    """The NodeLoader's ``sampler``: positions of its ``input_nodes`` in the trainer's order for the sampler's epoch
    (``tiering.sampling.neighbors.epoch_order``)."""

    def __init__(self, node_sampler: TierbenchNodeSampler, num_inputs: int):
        self.node_sampler = node_sampler
        self.num_inputs = num_inputs

    def __len__(self) -> int:
        return self.num_inputs

    def __iter__(self):
        order = epoch_generator(self.node_sampler.seed, self.node_sampler.epoch, 0)
        return iter(torch.randperm(self.num_inputs, generator=order).tolist())
