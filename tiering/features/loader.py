"""The one interface every feature loader implements (docs/design.md), and the counters it reports.

A loader owns a feature table of N rows x D columns.  ``gather(ids)``
returns ``features[ids]`` as a tensor on the training device; ``stats()``
returns what the gathers since the last ``reset_stats()`` cost.  The training
loop, the benchmarks and the tables only talk to this interface, so a new
loader is one new file (in ``tiering/`` for the tiering system itself, in
``baselines/`` for what the paper compares against).

Counters (docs/design.md, "Metrics"):

* ``accesses``: rows gathered (each id of each call; the training loop asks
  for the unique input nodes of a minibatch, so this is the paper's count);
* ``hits``: rows served from GPU memory (hit ratio = hits / accesses);
* ``pcie_payload_bytes`` / ``pcie_requests``: modelled PCIe traffic;
* ``host_bytes_touched``: bytes of host memory read;
* ``gpu_bytes_resident``: bytes of features held in GPU memory;
* ``disk_bytes_read``: bytes read from disk (loaders with a disk tier).
"""

from __future__ import annotations

import abc
import dataclasses

import torch


@dataclasses.dataclass
class LoaderStats:
    accesses: int = 0
    hits: int = 0
    pcie_payload_bytes: int = 0
    pcie_requests: int = 0
    host_bytes_touched: int = 0
    gpu_bytes_resident: int = 0
    disk_bytes_read: int = 0

    @property
    def hit_ratio(self) -> float:
        return self.hits / self.accesses if self.accesses else float("nan")

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "hit_ratio": self.hit_ratio}


class FeatureLoader(abc.ABC):
    """Base class of feature loaders: subclasses implement ``_gather`` and keep ``self._stats``."""

    def __init__(self, num_rows: int, feature_dim: int, device):
        self.num_rows = num_rows
        self.feature_dim = feature_dim
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._stats = LoaderStats()

    def gather(self, ids) -> torch.Tensor:
        """``features[ids]`` on ``self.device``; ids outside [0, N) raise ``IndexError``."""
        ids = torch.as_tensor(ids)
        if ids.dim() != 1:
            raise ValueError(f"ids must be one-dimensional, got shape {tuple(ids.shape)}")
        if ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"ids must be int32 or int64, got {ids.dtype}")
        if ids.numel() and not self._in_range(ids):
            bad = int(torch.nonzero((ids < 0) | (ids >= self.num_rows))[0, 0])
            raise IndexError(f"ids[{bad}] = {int(ids[bad])} is not a row of the {self.num_rows}-row feature table")
        return self._gather(ids)

    def _in_range(self, ids: torch.Tensor) -> bool:
        low, high = torch.aminmax(ids)  # one synchronisation on a GPU, before anything is read
        return bool((low >= 0) & (high < self.num_rows))

    @abc.abstractmethod
    def _gather(self, ids: torch.Tensor) -> torch.Tensor:
        """``features[ids]`` for ids already checked to be in range."""

    def start_epoch(self, epoch: int) -> None:  # noqa: B027 (most loaders keep no per-epoch state)
        """Called before each training epoch; loaders that refresh their cache (GNS) do it here."""

    def announce(self, batches):
        """The minibatch iterator an epoch gathers from, told to the loader ahead of its gathers where the loader
        uses the future (``tiering.features.lookahead``); every other loader takes ``batches`` as they are."""
        return batches

    def make_sampler(self, graph, fanouts):
        """The neighbour sampler this loader needs training to use, or ``None`` for the ordinary one.

        A loader that changes sampling (GNS prefers cached neighbours and
        weights the sampled edges) returns its own sampler, whose blocks carry
        ``edge_weight``; every other loader leaves sampling alone.
        """
        return None

    def stats(self) -> LoaderStats:
        return dataclasses.replace(self._stats)

    def reset_stats(self) -> None:
        resident = self._stats.gpu_bytes_resident
        self._stats = LoaderStats(gpu_bytes_resident=resident)

    def close(self) -> None:  # noqa: B027 (a loader with nothing to release keeps this default)
        """Release pinned or device memory; safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
