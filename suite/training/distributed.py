"""Data-parallel training on G processes, one per GPU (Data Tiering §4.2 and §5.5).

``tierbench run --gpus G`` relaunches itself under ``torchrun`` (PyTorch's
elastic launcher, ``python -m torch.distributed.run --standalone``): one
process per GPU, joined by NCCL on GPUs and by gloo on the CPU (where G
processes stand in for G GPUs, so CI can run the whole path).  Every process:

* trains a replica of the model wrapped in ``DistributedDataParallel``, which
  averages gradients so all replicas take the same step;
* takes its share of each epoch's shuffled training seeds (the same order in
  every process, split in G equal parts, the last padded by wrapping around,
  so every process runs as many minibatches; padding does not count in the
  accuracy);
* samples with one of the samplers of ``suite.training.sampling.SAMPLING``: ``cpu``, the numba
  sampler over the whole graph in host memory; ``gpu`` and ``uva``, the fused GPU sampler over the CSR
  in GPU memory or in pinned host memory;
  ``distributed``, the collective sampler over a CSR split across the
  processes (``tiering.sampling.distributed``), the GPU sampling of Figure 11.
  Its collectives run on a process group of their own (the same ranks,
  ``dist.new_group``): with ``pipeline=True`` the sampler thread's
  all-to-alls run while the training thread's DDP all-reduces gradients,
  and collectives on one group must be issued in the same order on every
  rank, which two threads cannot promise.  On GPUs the two groups are two
  NCCL communicators, which DSP §5 warns can still deadlock if their
  kernels, launched in different orders on different GPUs, cannot all be
  resident at once (DSP orders the launches through a leader); this has not
  run on GPUs yet;
* gathers features through its own loader; with ``tiered`` that is the
  multi-GPU combined tensor (``tiering.features.multi_gpu``): interleaved hot tier over
  all GPUs, host tier in shared memory.

An epoch's result is combined over processes: times are the slowest
process's (the step waits for it), losses and accuracy are over all
processes' minibatches, hit ratio, rows gathered and traffic are summed,
and the nodes touched are those any process gathered.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from suite.errors import BadValue
from suite.training.trainer import EpochResult, Trainer
from tiering.sampling.distributed import (
    PARTITIONS,
    DistributedNeighborSampler,
    GraphPartition,
)
from suite.training.sampling import SAMPLING
from tiering.sampling.neighbors import epoch_order, minibatches


def launched_by_torchrun() -> bool:
    """Whether this process is one of torchrun's workers."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_RANK" in os.environ


def torchrun_command(gpus: int, argv: list[str]) -> list[str]:
    """The command that runs ``tierbench <argv>`` in ``gpus`` processes on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
            "-m", "suite.cli", *argv]


def init_process_group(device: str, timeout_s: int | None = None) -> torch.device:
    """Join torchrun's group (NCCL for CUDA, gloo for CPU); returns this process's device.  ``timeout_s``: how long a
    collective waits for the other processes before it fails (torch's default where not given)."""
    timeout = None if timeout_s is None else datetime.timedelta(seconds=timeout_s)
    if torch.device(device).type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=timeout)
        return torch.device("cuda", local)
    dist.init_process_group("gloo", timeout=timeout)
    return torch.device("cpu")


def rank() -> int:
    """This process's rank (0 outside a process group)."""
    return dist.get_rank() if dist.is_initialized() else 0


def destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def share(ids: torch.Tensor, rank: int, world: int) -> tuple[torch.Tensor, int]:
    """``(ids of this process, how many of them count)``: equal parts, the last padded by wrapping around."""
    if len(ids) == 0:
        return ids, 0
    per = -(-len(ids) // world)
    padded = ids[torch.arange(per * world) % len(ids)]  # a part never holds an id twice: per <= len(ids)
    counted = max(0, min(per, len(ids) - rank * per))
    return padded[rank * per : (rank + 1) * per], counted


class DistributedTrainer(Trainer):
    """``Trainer`` for one process of a data-parallel run; every process of the default group must build one
    (distributed sampling creates a process group, which every process joins) and ``close()`` it."""

    def __init__(self, dataset, loader, fanouts, *, sampling: str = "cpu", partition: str = "interleaved", group=None,
                 **options):
        if sampling not in SAMPLING:
            raise BadValue(f"sampling must be one of {SAMPLING}, got {sampling!r}")
        if partition not in PARTITIONS:
            raise BadValue(f"partition must be one of {PARTITIONS}, got {partition!r}")
        if loader.make_sampler(dataset.graph, fanouts) is not None:
            raise BadValue("a loader with its own sampler (gns) is not supported in distributed training")
        super().__init__(dataset, loader, fanouts, sampling=sampling, **options)
        self.group = group
        self.sampler_group = None  # the distributed sampler's own group, released by close()
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        cuda = self.device.type == "cuda"
        # NCCL reduces GPU tensors only; gloo CPU ones
        self.comm_device = self.device if dist.get_backend(group) == "nccl" else torch.device("cpu")
        self.graph_bytes_resident = 0
        if sampling == "distributed":
            part = GraphPartition.of(dataset.graph, self.rank, self.world, partition).to(self.device)
            self.graph_bytes_resident = (part.indptr.numel() * 8 + part.indices.numel() * part.indices.element_size()) if cuda else 0
            ranks = dist.get_process_group_ranks(group if group is not None else dist.group.WORLD)
            self.sampler_group = dist.new_group(ranks)
            self.sampler = DistributedNeighborSampler(part, self.sampler.fanouts, backend="torch" if cuda else "cpu",
                                                      group=self.sampler_group)
        self.model = DistributedDataParallel(self.model, device_ids=[self.device] if cuda else None, process_group=group)

    def close(self) -> None:
        """Release the distributed sampler's process group (collective: every process calls it); safe to call twice."""
        if self.sampler_group is not None:
            dist.destroy_process_group(self.sampler_group)
            self.sampler_group = None

    def _batches(self, split: str, epoch: int, shuffle: bool):
        ids = self.dataset.splits[split]
        if shuffle:
            ids = epoch_order(ids, self.seed, epoch)
        mine, counted = share(ids, self.rank, self.world)
        batches = minibatches(self.sampler, mine, self.batch_size, self.seed, epoch, shuffle=False, stream=1 + self.rank)
        return batches, -(-len(mine) // self.batch_size), counted

    def _reduce(self, values, op=dist.ReduceOp.SUM) -> torch.Tensor:
        total = torch.tensor(values, dtype=torch.float64, device=self.comm_device)
        dist.all_reduce(total, op=op, group=self.group)
        return total.cpu()

    def evaluate(self, split: str, epoch: int = 0) -> float:
        correct, counted = self._reduce(list(self.count_correct(split, epoch))).tolist()
        return correct / counted if counted else float("nan")

    def train_epoch(self, epoch: int, progress: bool = True, pipeline: bool = False) -> EpochResult:
        result = super().train_epoch(epoch, progress=progress and self.rank == 0, pipeline=pipeline)
        slowest = self._reduce([result.sample_s, result.gather_s, result.train_s, result.epoch_s], dist.ReduceOp.MAX)
        stats = self.epoch_stats  # the training minibatches' counters, without the validation pass's gathers
        measured = result.pcie_rx_bytes_measured
        sums = self._reduce([stats.hits, stats.accesses, result.pcie_payload_bytes, result.pcie_requests,
                          result.host_bytes_touched, result.gpu_bytes_resident + self.graph_bytes_resident,
                          result.sampled_edges, measured or 0, measured is None, result.disk_bytes_read])
        hits, accesses, payload, requests, host, resident, edges, rx, unmeasured, disk = (int(v) for v in sums.tolist())
        losses = self._reduce(result.losses) / self.world  # minibatch i's loss averaged over the processes
        touched = self.epoch_touched.to(device=self.comm_device, dtype=torch.uint8)
        dist.all_reduce(touched, op=dist.ReduceOp.MAX, group=self.group)  # a node any process gathered
        return dataclasses.replace(
            result, loss=float(losses.mean()), sample_s=float(slowest[0]), gather_s=float(slowest[1]),
            train_s=float(slowest[2]), epoch_s=float(slowest[3]), sampled_edges=edges, rows_gathered=accesses,
            nodes_touched=int(touched.sum()),
            hit_ratio=hits / accesses if accesses else float("nan"), pcie_payload_bytes=payload, pcie_requests=requests,
            host_bytes_touched=host, gpu_bytes_resident=resident, disk_bytes_read=disk,
            pcie_rx_bytes_measured=None if unmeasured else rx, losses=losses.tolist(),
        )
