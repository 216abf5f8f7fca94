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

The range check of ``gather`` never synchronises.  Ids in host memory are
checked where they are, and an id outside [0, N) raises ``IndexError`` at
that gather, before anything is read.  Ids already on a CUDA device (a GPU
sampler's) are checked on the device: the number of ids out of range is added
to a counter there (``tiering.features.device_counters``), and the ids are
clamped into [0, N) before the loader reads, so a bad id reads a wrong row,
never outside the table.  The ``IndexError`` is raised by the next ``check()``
or ``stats()`` (which calls it): the trainer's once per epoch, after the
epoch's last gather, and after each evaluation pass.
"""

from __future__ import annotations

import abc
import dataclasses

import torch

from tiering.features.device_counters import DeviceCounters


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
        self._out_of_range: DeviceCounters | None = None  # ids on a CUDA device gathered out of range, unread

    def gather(self, ids) -> torch.Tensor:
        """``features[ids]`` on ``self.device``; ids outside [0, N) raise ``IndexError``: at once for ids in host
        memory, at the next ``check()`` for ids on a CUDA device (read clamped into the table until then)."""
        ids = torch.as_tensor(ids)
        if ids.dim() != 1:
            raise ValueError(f"ids must be one-dimensional, got shape {tuple(ids.shape)}")
        if ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"ids must be int32 or int64, got {ids.dtype}")
        if not ids.numel():
            return self._gather(ids)
        if ids.is_cuda and self.num_rows:
            return self._gather(self._clamped(ids))
        if not self._in_range(ids):
            bad = int(torch.nonzero((ids < 0) | (ids >= self.num_rows))[0, 0])
            raise IndexError(f"ids[{bad}] = {int(ids[bad])} is not a row of the {self.num_rows}-row feature table")
        return self._gather(ids)

    def _in_range(self, ids: torch.Tensor) -> bool:
        low, high = torch.aminmax(ids)  # ids in host memory: nothing to wait for
        return bool((low >= 0) & (high < self.num_rows))

    def _clamped(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` (on a CUDA device) clamped into [0, N), the count of those that were not added on the device."""
        if self._out_of_range is None:
            self._out_of_range = DeviceCounters(1, ids.device)
        outside = (ids < 0) | (ids >= self.num_rows)
        self._out_of_range.add(outside.sum().reshape(1))
        return ids.clamp(0, self.num_rows - 1)

    def check(self) -> None:
        """Raise ``IndexError`` if ids on a CUDA device were gathered out of range since the last check (one read
        of a device counter: it waits for those gathers)."""
        if self._out_of_range is None:
            return
        (outside,) = self._out_of_range.read()
        if outside:
            self._out_of_range.zero()
            raise IndexError(f"{outside} ids gathered on {self._out_of_range.values.device} were not rows of the "
                             f"{self.num_rows}-row feature table (they read rows clamped into it)")

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
        """The counters since the last ``reset_stats``, after ``check()``."""
        self.check()
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
