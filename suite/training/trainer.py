"""GraphSAGE minibatch training through the feature-loader interface (Data Tiering §2, §5).

The model is GraphSAGE (Hamilton et al., NeurIPS 2017) built from PyG's
``SAGEConv`` with mean aggregation: hidden width 256, ReLU and dropout
between layers, as in Data Tiering and DSP; Adam and cross-entropy on the
training nodes; minibatches of 1024 seeds by default.  Adam updates every
parameter in one fused kernel (``fused=True``): in the paper's regime a
minibatch of 8 seeds trains in a few milliseconds that are mostly the host
issuing operators, and the multi-tensor Adam issues several per step (on
this project's CPU machine the fused step took 0.8 ms against 1.7).  With
``compile_model`` the model's forward (and through AOTAutograd its backward)
runs as ``torch.compile`` made it, with dynamic shapes so that minibatches of
any size share a few compiled graphs (PyG's scatter guards on the width of a
layer's destinations, 4,096 rows, which splits them), its operators fused
into fewer kernels: whether that cuts the few milliseconds above is what
``tierbench costs --compile`` measures.

An epoch runs three stages per minibatch and times each one, synchronising
the training's CUDA stream (not the whole GPU) before reading the clock when
training on CUDA (with ``pipeline=True`` the stages of different minibatches
overlap in threads, ``suite.training.pipeline``, and each stage's time is its busy
time, the gather's taken by CUDA events on its own stream, the very events of
``gather_event_s``, so that the two are equal in a pipelined run on CUDA).  On CUDA each stage
is also timed by CUDA events on the stream it runs on (``suite.measure.stage_events``),
into ``sample_event_s``, ``gather_event_s`` and ``train_event_s`` (None on a CPU):

* **sample**: the sampler of ``sampling`` (``suite.training.sampling``: ``NeighborSampler`` on the CPU, or the
  fused GPU sampler over the CSR in GPU or pinned host memory, launching ``sampler_kernels``) draws the blocks for
  the batch's seeds, the same blocks whichever samples;
* **gather**: ``loader.gather(input_nodes)`` brings their features to the
  training device, through whichever loader is being measured;
* **train**: forward, loss, backward and the optimizer step.

Host synchronisation.  Nothing in a training minibatch reads a value back from
the GPU: each minibatch's loss stays on the device, and the epoch's losses are
read in one copy after its last minibatch (``EpochResult.loss`` and ``losses``);
the nodes it touched are marked on the device and counted once; the loader's
counters and range check (``tiering.features.loader``) are read once, by
``stats()``.  What still waits for the GPU in each minibatch, and why:

* the stage timing: the trainer waits for its stream after the step, and without
  ``pipeline`` after the gather too (``_sync``), so that ``train_s`` and
  ``gather_s`` are the stages' wall times (the CUDA events need no wait); in a
  pipelined epoch the training stream therefore idles while the host enqueues
  the next step;
* the fused GPU sampler reads its hops' sizes once, after its last hop, to cut
  its blocks from buffers sized by their bounds (``tiering.sampling.fused``);
* the progress bar's loss (only when the bar is shown), read every
  ``LOSS_SHOWN_EVERY`` minibatches;
* loaders that decide on the host which rows to read (``baselines.degree_cache``,
  ``baselines.gns``, ``tiering.features.lookahead``, the disk tiers), which say so
  in their docstrings.

Randomness is fixed by one seed: model initialisation and dropout by
``torch.manual_seed``, the order of seeds and the sampling of each epoch by
generators seeded from (seed, epoch), so two runs with the same seed see the
same minibatches.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from suite.errors import BadValue
from suite.measure.pcie import PCIeCounter
from suite.measure.stage_events import StageEvents
from suite.training.model import GraphSAGE
from suite.training.pipeline import Pipeline
from suite.training.sampling import build_sampler
from tiering.features.loader import FeatureLoader
from tiering.sampling.fused import DEFAULT_KERNELS
from tiering.sampling.neighbors import MiniBatch, minibatches

LOSS_SHOWN_EVERY = 50
COMPILE_BACKEND = "inductor"
"""``torch.compile``'s backend for ``compile_model`` (the tests set "eager": dynamo's graphs, no code generated)."""
"""Minibatches between two reads of the loss for the progress bar (each read waits for the GPU)."""


@dataclasses.dataclass
class EpochResult:
    epoch: int
    loss: float
    valid_accuracy: float | None  # None: the trainer ran no validation pass (``validate=False``)
    sample_s: float
    gather_s: float
    train_s: float
    epoch_s: float
    batches: int
    epoch_batches: int  # the minibatches of a whole epoch: more than ``batches`` where the trainer had a batch limit
    sampled_edges: int
    hit_ratio: float
    rows_gathered: int  # the loader's accesses: the unique input nodes of every training minibatch, summed
    nodes_touched: int  # distinct nodes whose rows the epoch's training minibatches gathered
    row_bytes: int  # bytes of one row of the feature table (D x element size)
    pcie_payload_bytes: int  # modelled (tiering.features.traffic)
    pcie_requests: int  # modelled
    host_bytes_touched: int
    gpu_bytes_resident: int
    disk_bytes_read: int  # measured at the file by loaders with a disk tier (0 for the others)
    pcie_rx_bytes_measured: int | None  # NVML, None where unavailable (never 0 for "unknown")
    pcie_measured_scope: str  # what the NVML bytes cover (suite.measure.pcie.SCOPE), or why there are none
    pipeline: bool  # sampling, gathering and training overlapped (suite.training.pipeline)
    sample_event_s: float | None = None  # CUDA events on the stage's stream (suite.measure.stage_events); None on a CPU
    gather_event_s: float | None = None
    train_event_s: float | None = None
    losses: list[float] = dataclasses.field(default_factory=list, repr=False)  # per minibatch, in order

    def as_record(self) -> dict:
        """The per-epoch fields of a results row (the per-minibatch losses stay out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "losses"}


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
        sampling: str = "cpu",
        sampler_kernels: str = DEFAULT_KERNELS,
        pipeline_capacity: int = 2,
        batch_limit: int | None = None,
        validate: bool = True,
        compile_model: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if batch_limit is not None and batch_limit < 1:
            raise ValueError(f"batch_limit must be positive, got {batch_limit}")
        torch.manual_seed(seed)
        self.dataset = dataset
        self.loader = loader
        self.device = loader.device
        # a loader that changes sampling (GNS) brings its own sampler, which weights the sampled edges
        own_sampler = loader.make_sampler(dataset.graph, fanouts)
        if own_sampler is not None and sampling != "cpu":
            raise BadValue(f"a loader with its own sampler (gns) samples on the CPU: {sampling} sampling is not "
                           "supported with it (--sampling cpu)")
        self.sampling = "cpu" if sampling == "distributed" else sampling  # the distributed trainer builds its own
        self.sampler = own_sampler or build_sampler(self.sampling, dataset.graph, fanouts, loader.device,
                                                    kernels=sampler_kernels)
        self.batch_size = batch_size
        self.seed = seed
        self.pipeline_capacity = pipeline_capacity
        self.batch_limit = batch_limit  # epochs and validation passes stop after this many minibatches (None: whole)
        self.validate = validate  # False: no validation pass after an epoch (its valid_accuracy is None)
        self.model = GraphSAGE(dataset.feature_dim, dataset.num_classes, len(self.sampler.fanouts), hidden, dropout,
                               weighted=own_sampler is not None)
        self.model.to(self.device)
        # the graphs a step calls where compiled (None: it calls self.model, which DistributedTrainer wraps later)
        self.compiled_model = torch.compile(self.model, dynamic=True, backend=COMPILE_BACKEND) if compile_model \
            else None
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr, fused=True)
        self.labels = dataset.labels.to(self.device)
        self.pcie = PCIeCounter(self.device)
        self.epoch_stats = None  # the loader's counters over the last training epoch's minibatches
        self.epoch_touched = None  # which nodes the last training epoch's minibatches gathered (bool, N)

    def _sync(self):
        """Wait for the work queued on the training's CUDA stream (other streams, such as the
        pipeline's gather stream, run on)."""
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    def _stream(self):
        """The training's CUDA stream (None on a CPU): where the sequential stages and training run."""
        return torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None

    def _prepare(self, batch: MiniBatch):
        """The gather stage: the batch's features and blocks on the training device."""
        return batch, self.loader.gather(batch.input_nodes), [b.to(self.device) for b in batch.blocks]

    def _sequential(self, batches, times: dict, events: StageEvents):
        """Sample, then gather, one minibatch at a time, timing each stage."""
        while True:
            start, span = time.perf_counter(), events.begin(self._stream())
            batch = next(batches, None)
            times["sample"] += time.perf_counter() - start
            if batch is None:
                return
            events.end("sample", span, self._stream())
            start, span = time.perf_counter(), events.begin(self._stream())
            prepared = self._prepare(batch)
            events.end("gather", span, self._stream())
            self._sync()
            times["gather"] += time.perf_counter() - start
            yield prepared

    def _step(self, batch: MiniBatch, x: torch.Tensor, blocks, times: dict, train: bool,
              events: StageEvents) -> torch.Tensor:
        start, span = time.perf_counter(), events.begin(self._stream())
        logits = (self.model if self.compiled_model is None else self.compiled_model)(x, blocks)
        if train:
            loss = F.cross_entropy(logits, self.labels[batch.seeds.to(self.device)])
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            logits = loss.detach()
        events.end("train", span, self._stream())
        self._sync()
        times["train"] += time.perf_counter() - start
        return logits

    def train_epoch(self, epoch: int, progress: bool = True, pipeline: bool = False) -> EpochResult:
        """One epoch over the training seeds; ``pipeline`` overlaps sampling, gathering and training."""
        self.model.train()
        self.loader.start_epoch(epoch)
        self.loader.reset_stats()
        times = {"sample": 0.0, "gather": 0.0, "train": 0.0}
        events = StageEvents(self.device)
        losses, edges = [], 0
        touched = torch.zeros(self.dataset.num_nodes, dtype=torch.bool, device=self.sampler.graph.indptr.device)
        batches, epoch_batches, _ = self._batches("train", epoch, shuffle=True)
        total = epoch_batches
        if self.batch_limit is not None and self.batch_limit < epoch_batches:
            batches, total = itertools.islice(batches, self.batch_limit), self.batch_limit
        batches = self.loader.announce(batches)
        bar = tqdm(total=total, desc=f"epoch {epoch}", unit="batch", disable=not progress, leave=False)
        self.pcie.start()
        epoch_start = time.perf_counter()
        if pipeline:
            stages = Pipeline(batches, self._prepare, capacity=self.pipeline_capacity, device=self.device,
                              events=events)
            times = stages.busy  # worker stages time themselves; training adds its own entry
            times["train"] = 0.0
        else:
            stages = self._sequential(batches, times, events)
        try:
            for batch, x, blocks in stages:
                edges += batch.num_sampled_edges
                touched.index_fill_(0, batch.input_nodes, True)  # no host sync, unlike touched[ids] = True on CUDA
                losses.append(self._step(batch, x, blocks, times, train=True, events=events))
                if progress and len(losses) % LOSS_SHOWN_EVERY == 1:
                    bar.set_postfix(loss=f"{float(losses[-1]):.3f}")
                bar.update(1)
            epoch_s = time.perf_counter() - epoch_start
            measured = self.pcie.delta()
        finally:
            self.pcie.close()  # an interrupted epoch leaves no NVML reader running
        bar.close()
        on_gpu = events.seconds()
        losses = torch.stack(losses).tolist() if losses else []  # the epoch's one read of its losses
        stats = self.epoch_stats = self.loader.stats()  # before the validation pass gathers rows of its own
        self.epoch_touched = touched
        return EpochResult(
            epoch=epoch,
            loss=sum(losses) / len(losses),
            valid_accuracy=self.evaluate("valid", epoch) if self.validate else None,
            sample_s=times["sample"],
            gather_s=times["gather"],
            train_s=times["train"],
            epoch_s=epoch_s,
            batches=len(losses),
            epoch_batches=epoch_batches,
            sampled_edges=edges,
            hit_ratio=stats.hit_ratio,
            rows_gathered=stats.accesses,
            nodes_touched=int(touched.sum()),
            row_bytes=self.dataset.feature_dim * self.dataset.features.element_size(),
            pcie_payload_bytes=stats.pcie_payload_bytes,
            pcie_requests=stats.pcie_requests,
            host_bytes_touched=stats.host_bytes_touched,
            gpu_bytes_resident=stats.gpu_bytes_resident,
            disk_bytes_read=stats.disk_bytes_read,
            pcie_rx_bytes_measured=None if measured is None else measured["rx_bytes"],
            pcie_measured_scope=self.pcie.scope,
            pipeline=pipeline,
            sample_event_s=on_gpu["sample"],
            gather_event_s=on_gpu["gather"],
            train_event_s=on_gpu["train"],
            losses=losses,
        )

    def _batches(self, split: str, epoch: int, shuffle: bool):
        """``(minibatches, how many, how many seeds count)`` of one pass over a split.

        A single process takes the whole split; ``suite.training.distributed`` overrides
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
        untimed = StageEvents("cpu")
        batches, _, counted = self._batches(split, epoch + 10_000, shuffle=False)
        if self.batch_limit is not None:  # the first minibatches' seeds only
            batches = itertools.islice(batches, self.batch_limit)
            counted = min(counted, self.batch_limit * self.batch_size)
        for batch, x, blocks in self._sequential(batches, times, untimed):
            predicted = self._step(batch, x, blocks, times, train=False, events=untimed).argmax(dim=1)
            right = predicted == self.labels[batch.seeds.to(self.device)]
            correct += int(right[: max(0, counted - seen)].sum())
            seen += len(right)
        self.loader.check()  # ids gathered on the device out of range raise here, once per pass
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
