"""GraphSAGE minibatch training through the feature-loader interface (seeds/000 §2, §5).

The model is GraphSAGE (Hamilton et al., NeurIPS 2017) built from PyG's
``SAGEConv`` with mean aggregation: hidden width 256, ReLU and dropout
between layers, as in seeds/000 and seeds/001; Adam and cross-entropy on the
training nodes; minibatches of 1024 seeds by default.

An epoch runs three stages per minibatch and times each one, synchronising
the training's CUDA stream (not the whole GPU) before reading the clock when
training on CUDA (with ``pipeline=True`` the stages of different minibatches
overlap in threads, ``suite.pipeline``, and each stage's time is its busy
time, the gather's taken by CUDA events on its own stream):

* **sample**: ``NeighborSampler`` draws the blocks for the batch's seeds;
* **gather**: ``loader.gather(input_nodes)`` brings their features to the
  training device, through whichever loader is being measured;
* **train**: forward, loss, backward and the optimizer step.

Randomness is fixed by one seed: model initialisation and dropout by
``torch.manual_seed``, the order of seeds and the sampling of each epoch by
generators seeded from (seed, epoch), so two runs with the same seed see the
same minibatches.
"""

from __future__ import annotations

import dataclasses
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphConv, SAGEConv
from tqdm.auto import tqdm

from tiering.feature_loader import FeatureLoader
from tiering.sampling import MiniBatch, NeighborSampler

from .datasets.presets import PRESETS
from .pcie import PCIeCounter
from .pipeline import Pipeline

DEFAULT_FANOUTS = {"ogbn-papers100M": (12, 12, 12), "ogbn-products": (15, 10, 5)}
"""Fanouts of the papers' runs: (12,12,12) for papers100M (seeds/000 §5.1); (15,10,5) is PyG's products example."""


def default_fanouts(name: str) -> tuple[int, ...]:
    """The training fanouts of a dataset: those of the OGB dataset a preset imitates, or of the OGB name itself."""
    imitates = PRESETS[name].imitates if name in PRESETS else name
    return DEFAULT_FANOUTS.get(imitates, (10, 10))


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
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            if self.weighted:
                x = conv((x, x[: block.num_dst]), block.edge_index, edge_weight=block.edge_weight)
            else:
                x = conv((x, x[: block.num_dst]), block.edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


@dataclasses.dataclass
class EpochResult:
    epoch: int
    loss: float
    valid_accuracy: float
    sample_s: float
    gather_s: float
    train_s: float
    epoch_s: float
    batches: int
    sampled_edges: int
    hit_ratio: float
    rows_gathered: int  # the loader's accesses: the unique input nodes of every training minibatch, summed
    row_bytes: int  # bytes of one row of the feature table (D x element size)
    pcie_payload_bytes: int  # modelled (tiering.traffic)
    pcie_requests: int  # modelled
    host_bytes_touched: int
    gpu_bytes_resident: int
    pcie_rx_bytes_measured: int | None  # NVML, None where unavailable (never 0 for "unknown")
    pcie_measured_scope: str  # what the NVML bytes cover (suite.pcie.SCOPE), or why there are none
    pipeline: bool  # sampling, gathering and training overlapped (suite.pipeline)
    losses: list[float] = dataclasses.field(default_factory=list, repr=False)  # per minibatch, in order

    def as_record(self) -> dict:
        """The per-epoch fields of a results row (the per-minibatch losses stay out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "losses"}


def _generator(seed: int, epoch: int, stream: int, device="cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed * 1_000_003 + epoch * 7_919 + stream)


def epoch_order(ids: torch.Tensor, seed: int, epoch: int) -> torch.Tensor:
    """``ids`` in the epoch's shuffled order, the same in every process for (seed, epoch)."""
    return ids[torch.randperm(len(ids), generator=_generator(seed, epoch, 0))]


def minibatches(sampler: NeighborSampler, ids: torch.Tensor, batch_size: int, seed: int, epoch: int, shuffle: bool,
                stream: int = 1):
    """The sampled minibatches of one epoch over ``ids``, in a fixed order for (seed, epoch).

    ``stream`` selects the sampling generator (processes of a distributed run
    sample with different ones).
    """
    if shuffle:
        ids = epoch_order(ids, seed, epoch)
    sampling = _generator(seed, epoch, stream, sampler.graph.indptr.device)
    for start in range(0, len(ids), batch_size):
        yield sampler.sample(ids[start : start + batch_size], sampling)


class Trainer:
    """Trains GraphSAGE on one dataset through one feature loader."""

    def __init__(
        self,
        dataset,
        loader: FeatureLoader,
        fanouts,
        *,
        batch_size: int = 1024,
        hidden: int = 256,
        dropout: float = 0.5,
        lr: float = 3e-3,
        seed: int = 0,
        sampler_backend: str = "cpu",
        pipeline_capacity: int = 2,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        torch.manual_seed(seed)
        self.dataset = dataset
        self.loader = loader
        self.device = loader.device
        # a loader that changes sampling (GNS) brings its own sampler
        make_sampler = getattr(loader, "make_sampler", None)
        if make_sampler is not None:
            self.sampler = make_sampler(dataset.graph, fanouts)
        else:
            self.sampler = NeighborSampler(dataset.graph, fanouts, backend=sampler_backend)
        self.batch_size = batch_size
        self.seed = seed
        self.pipeline_capacity = pipeline_capacity
        self.model = GraphSAGE(dataset.feature_dim, dataset.num_classes, len(self.sampler.fanouts), hidden, dropout,
                               weighted=make_sampler is not None)
        self.model.to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.labels = dataset.labels.to(self.device)
        self.pcie = PCIeCounter(self.device)
        self.epoch_stats = None  # the loader's counters over the last training epoch's minibatches

    def _sync(self):
        """Wait for the work queued on the training's CUDA stream (other streams, such as the
        pipeline's gather stream, run on)."""
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    def _prepare(self, batch: MiniBatch):
        """The gather stage: the batch's features and blocks on the training device."""
        return batch, self.loader.gather(batch.input_nodes), [b.to(self.device) for b in batch.blocks]

    def _sequential(self, batches, times: dict):
        """Sample, then gather, one minibatch at a time, timing each stage."""
        while True:
            start = time.perf_counter()
            batch = next(batches, None)
            times["sample"] += time.perf_counter() - start
            if batch is None:
                return
            start = time.perf_counter()
            prepared = self._prepare(batch)
            self._sync()
            times["gather"] += time.perf_counter() - start
            yield prepared

    def _step(self, batch: MiniBatch, x: torch.Tensor, blocks, times: dict, train: bool) -> torch.Tensor:
        start = time.perf_counter()
        logits = self.model(x, blocks)
        if train:
            loss = F.cross_entropy(logits, self.labels[batch.seeds.to(self.device)])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            logits = loss.detach()
        self._sync()
        times["train"] += time.perf_counter() - start
        return logits

    def train_epoch(self, epoch: int, progress: bool = True, pipeline: bool = False) -> EpochResult:
        """One epoch over the training seeds; ``pipeline`` overlaps sampling, gathering and training."""
        self.model.train()
        self.loader.start_epoch(epoch)
        self.loader.reset_stats()
        times = {"sample": 0.0, "gather": 0.0, "train": 0.0}
        losses, edges = [], 0
        batches, total, _ = self._batches("train", epoch, shuffle=True)
        bar = tqdm(total=total, desc=f"epoch {epoch}", unit="batch", disable=not progress, leave=False)
        self.pcie.start()
        epoch_start = time.perf_counter()
        if pipeline:
            stages = Pipeline(batches, self._prepare, capacity=self.pipeline_capacity, device=self.device)
            times = stages.busy  # worker stages time themselves; training adds its own entry
            times["train"] = 0.0
        else:
            stages = self._sequential(batches, times)
        try:
            for batch, x, blocks in stages:
                edges += batch.num_sampled_edges
                losses.append(float(self._step(batch, x, blocks, times, train=True)))
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                bar.update(1)
            epoch_s = time.perf_counter() - epoch_start
            measured = self.pcie.delta()
        finally:
            self.pcie.close()  # an interrupted epoch leaves no NVML reader running
        bar.close()
        stats = self.epoch_stats = self.loader.stats()  # before the validation pass gathers rows of its own
        return EpochResult(
            epoch=epoch,
            loss=sum(losses) / len(losses),
            valid_accuracy=self.evaluate("valid", epoch),
            sample_s=times["sample"],
            gather_s=times["gather"],
            train_s=times["train"],
            epoch_s=epoch_s,
            batches=len(losses),
            sampled_edges=edges,
            hit_ratio=stats.hit_ratio,
            rows_gathered=stats.accesses,
            row_bytes=self.dataset.feature_dim * self.dataset.features.element_size(),
            pcie_payload_bytes=stats.pcie_payload_bytes,
            pcie_requests=stats.pcie_requests,
            host_bytes_touched=stats.host_bytes_touched,
            gpu_bytes_resident=stats.gpu_bytes_resident,
            pcie_rx_bytes_measured=None if measured is None else measured["rx_bytes"],
            pcie_measured_scope=self.pcie.scope,
            pipeline=pipeline,
            losses=losses,
        )

    def _batches(self, split: str, epoch: int, shuffle: bool):
        """``(minibatches, how many, how many seeds count)`` of one pass over a split.

        A single process takes the whole split; ``suite.distributed`` overrides
        this to take the process's share (padded so every process runs as many
        minibatches; the padding does not count).
        """
        ids = self.dataset.splits[split]
        batches = minibatches(self.sampler, ids, self.batch_size, self.seed, epoch, shuffle)
        return batches, -(-len(ids) // self.batch_size), len(ids)

    @torch.no_grad()
    def count_correct(self, split: str, epoch: int = 0) -> tuple[int, int]:
        """``(correct, counted)`` predictions on a split, with the same sampled neighbourhoods as training."""
        self.model.eval()
        correct, seen, times = 0, 0, {"sample": 0.0, "gather": 0.0, "train": 0.0}
        batches, _, counted = self._batches(split, epoch + 10_000, shuffle=False)
        for batch, x, blocks in self._sequential(batches, times):
            predicted = self._step(batch, x, blocks, times, train=False).argmax(dim=1)
            right = predicted == self.labels[batch.seeds.to(self.device)]
            correct += int(right[: max(0, counted - seen)].sum())
            seen += len(right)
        return correct, counted

    def evaluate(self, split: str, epoch: int = 0) -> float:
        """Accuracy on a split (NaN for an empty one)."""
        correct, counted = self.count_correct(split, epoch)
        return correct / counted if counted else float("nan")


def majority_accuracy(dataset, split: str = "valid") -> float:
    """Accuracy of always predicting the most common training label: the bar to beat."""
    labels = dataset.labels
    majority = torch.bincount(labels[dataset.splits["train"]]).argmax()
    ids = dataset.splits[split]
    return float((labels[ids] == majority).float().mean())
