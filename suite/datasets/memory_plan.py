"""What a paper-scale preset needs of this machine, planned before anything is allocated.

ogbn-papers100M on one GPU machine (Data Tiering §5: 111M nodes, 1.6B edges, a 57 GB float32 feature table) is
trained from a feature table pinned whole in host memory and read zero-copy from the GPU, its hottest rows copied
into GPU memory (Data Tiering §4.1; PyTorch-Direct §3.2).  For the ``gpu_built`` presets (``papers-100m``,
``papers-100m-half``) the table is generated straight into that memory whenever the entry is opened and never written
to disk; only the CSR is cached.  A plan adds up, for the build or for a run setting (loader, hot fraction, where
neighbours are sampled), what lands where:

* host RAM: the feature table (pinned for the zero-copy loaders), the CSR, labels and splits, and the sampler's
  buffers for the largest minibatch; with UVA sampling a pinned copy of the CSR, each array rounded up to a power of
  two as torch's pinned allocator takes it; for the build, the generator's per-node arrays, and scoring's transposed
  CSR and the reordered CSR of ``tierbench prepare``;
* GPU memory: the hot tier (all rows for ``in-memory``; a node -> slot map beside it for the loaders that keep one),
  the CSR when sampling on the GPU from GPU memory, and the model's training state, minibatch and CUDA context
  (``suite.policies.planner.model_bytes``); for the build, the generator's masses, one part of the lists being
  sorted and one chunk of edges (in host RAM where the machine has no GPU and the build runs on the CPU);
* disk, in the dataset cache: the CSR, labels and splits (the only files such an entry holds), and their reordered
  copy;
* the memlock limit (``ulimit -l``), which must admit the pinned table (``CAP_IPC_LOCK`` lifts it).

``check`` refuses in one line, naming what is needed and what the machine has, the first of these that does not
fit; a machine without CUDA shows "no GPU" on the GPU lines, and a run on a CUDA device there is refused.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from suite.datasets.presets import Preset
from suite.errors import BadValue, UserError
from suite.io.atomic import nearest_existing
from suite.measure.host_memory import available_bytes, gib, memlock_bytes
from tiering.graph.csr_sort import BYTES_PER_PART_ENTRY, CPU_PART_ENTRIES

HOST = "host RAM"
GPU = "GPU memory"
DISK = "disk"
PINNED = "pinned (memlock)"
PLACES = (HOST, GPU, DISK, PINNED)

GENERATOR_BYTES_PER_NODE = 40
"""The DC-SBM generator's per-node arrays (propensities, their sums, classes): tens of bytes per node (the builder's
docstring; measured by ``tierbench datasets cost``)."""
DRAW_BYTES_PER_NODE = 32
"""Where the edges are drawn: the generator's node order and cumulative masses (``suite.datasets.dcsbm_torch``) and
every list's drawn length, 8 bytes each per node."""
EDGE_CHUNK_BYTES = 16 << 23
"""One chunk of drawn edges, two int64 arrays of ``suite.datasets.build.EDGE_CHUNK`` entries."""
PART_ENTRIES = 1 << 29
"""List entries sorted at once when the CSR is built by sorting on a GPU (``tiering.graph.csr_sort``; on the CPU,
its ``CPU_PART_ENTRIES``)."""
SAMPLED_BYTES_PER_ROW = 24
"""The sampler's buffers per sampled node: its int64 id and an int64 pair for the edge that reached it."""


class PlanDoesNotFit(UserError):
    """A preset, or a run on it, needs more of this machine (RAM, GPU memory, disk, memlock) than it has; the message
    names both sizes."""


@dataclasses.dataclass(frozen=True)
class RunSetting:
    """How a preset is trained: the feature loader, its hot fraction, where neighbours are sampled (the trainer's
    ``sampling``), the minibatch."""

    loader: str = "tiered"
    hot_fraction: float = 0.0
    sampling: str = "cpu"
    batch_size: int = 1024  # Data Tiering §5.1
    fanouts: tuple[int, ...] = (12, 12, 12)
    hidden: int = 256


@dataclasses.dataclass(frozen=True)
class Need:
    place: str  # one of PLACES
    what: str
    bytes: int


@dataclasses.dataclass(frozen=True)
class Machine:
    """What this machine offers: memory available now, free GPU memory (None without CUDA), free disk in the dataset
    cache, and the memlock limit (None when unlimited)."""

    host_bytes: int
    gpu_bytes: int | None
    disk_bytes: int
    memlock_bytes: int | None


def size(n: int) -> str:
    """``n`` bytes in GiB, or in MiB below one GiB (a memlock limit of a few MiB)."""
    return gib(n) if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def this_machine(cache: Path) -> Machine:
    """This machine, now; ``cache`` is the dataset cache (its nearest existing folder is measured)."""
    import torch

    gpu = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
    return Machine(available_bytes(), gpu, shutil.disk_usage(nearest_existing(cache)).free, memlock_bytes())


def _table(preset: Preset) -> str:
    return f"feature table ({preset.num_nodes:,} x {preset.feature_dim} {preset.feature_dtype})"


def largest_minibatch_rows(setting: RunSetting) -> int:
    """The most nodes a minibatch can sample: the seeds, then each hop's fanout per node of the hop before."""
    rows, frontier = setting.batch_size, setting.batch_size
    for fanout in setting.fanouts:
        frontier *= fanout
        rows += frontier
    return rows


def build_needs(preset: Preset, on_gpu: bool = True) -> list[Need]:
    """What building ``preset`` and reordering it (``tierbench prepare``) need: the edges drawn and sorted into
    lists on the GPU (on the CPU when ``not on_gpu``), the CSR copied back, scored through its transpose and
    renumbered in host memory, and cached twice, with no feature table (it is made when the entry is opened)."""
    drawn_at = GPU if on_gpu else HOST
    part = min(preset.list_entries, PART_ENTRIES if on_gpu else CPU_PART_ENTRIES)
    return [
        Need(HOST, "CSR (int64 indptr, indices)", preset.csr_bytes),
        Need(HOST, "labels and splits", preset.label_bytes),
        Need(HOST, "generator's per-node arrays", GENERATOR_BYTES_PER_NODE * preset.num_nodes),
        Need(HOST, "scoring's transposed CSR, then the reordered CSR", preset.csr_bytes),
        Need(drawn_at, "generator's masses, list lengths", DRAW_BYTES_PER_NODE * preset.num_nodes),
        Need(drawn_at, f"one part's sort ({part:,} entries)", BYTES_PER_PART_ENTRY * part),
        Need(drawn_at, "one chunk of edges", EDGE_CHUNK_BYTES),
        Need(DISK, "CSR, labels and splits, twice (no feature table)", 2 * preset.disk_bytes),
    ]


def run_needs(preset: Preset, setting: RunSetting) -> list[Need]:
    """What training ``preset`` with ``setting`` needs."""
    from suite.policies.planner import model_bytes
    from suite.registry import loader
    from tiering.features.placement import hot_rows

    spec = loader(setting.loader)
    if spec.disk and preset.gpu_built:
        raise BadValue(f"loader {setting.loader} reads the feature table from disk, and {preset.name} keeps it only "
                       f"in host memory: choose a loader that does not (tiered, uva, in-memory, ...)")
    n = preset.num_nodes
    rows = largest_minibatch_rows(setting)
    pinned = spec.zero_copy or preset.gpu_built
    needs = [
        Need(HOST, _table(preset) + (", pinned" if pinned else ""), preset.feature_bytes),
        Need(HOST, "CSR (int64 indptr, indices)", preset.csr_bytes),
        Need(HOST, "labels and splits", preset.label_bytes),
        Need(HOST, f"sampler's buffers ({rows:,} nodes)", rows * SAMPLED_BYTES_PER_ROW),
    ]
    hot = n if spec.gpu_share == 1.0 else hot_rows(n, setting.hot_fraction) if spec.hot_tier else 0
    if hot:
        needs.append(Need(GPU, f"hot tier ({hot:,} rows)", hot * preset.row_bytes))
    if hot and spec.slot_map:
        needs.append(Need(GPU, "node -> slot map", n * 8))
    if setting.sampling == "gpu":
        needs.append(Need(GPU, "CSR, for sampling", preset.csr_bytes))
    if setting.sampling == "uva":
        needs.append(Need(HOST, "CSR pinned for UVA sampling", sum(map(pinned_allocation, preset.csr_arrays_bytes))))
    needs.append(Need(GPU, "model, minibatch, CUDA context", model_bytes(
        preset.feature_dim, preset.num_classes, len(setting.fanouts), setting.hidden, rows, preset.row_bytes)))
    needs.append(Need(DISK, "CSR, labels and splits" if preset.gpu_built else "the cache entry", preset.disk_bytes))
    if pinned:
        needs.append(Need(PINNED, "feature table", preset.feature_bytes))
    return needs


def pinned_allocation(nbytes: int) -> int:
    """What torch's pinned allocator takes for an array of ``nbytes`` (``Tensor.pin_memory``): the next power of
    two."""
    return 1 << max(nbytes - 1, 0).bit_length()


def totals(needs: list[Need]) -> dict[str, int]:
    return {place: sum(need.bytes for need in needs if need.place == place) for place in PLACES}


def _offered(machine: Machine) -> dict[str, int | None]:
    return {HOST: machine.host_bytes, GPU: machine.gpu_bytes, DISK: machine.disk_bytes, PINNED: machine.memlock_bytes}


def _has(place: str, offered: int | None) -> str:
    if place == GPU and offered is None:
        return "no GPU"
    if place == PINNED and offered is None:
        return "unlimited"
    return f"{size(offered)} {'limit' if place == PINNED else 'free' if place in (GPU, DISK) else 'available'}"


def render(title: str, needs: list[Need], machine: Machine) -> str:
    """The plan as a small table: each need, then each place's total beside what this machine has."""
    width = max(len(need.what) for need in needs)
    lines = [title, f"{'':<17}{'':<{width}}  {'needs':>10}  this machine"]
    offered = _offered(machine)
    for place, total in totals(needs).items():
        for need in (need for need in needs if need.place == place):
            lines.append(f"{place:<17}{need.what:<{width}}  {size(need.bytes):>10}")
        if total:
            lines.append(f"{place:<17}{'total':<{width}}  {size(total):>10}  {_has(place, offered[place])}")
    return "\n".join(lines)


def check_build(preset: Preset, machine: Machine) -> None:
    """``PlanDoesNotFit`` when building and reordering ``preset`` does not fit ``machine`` (on its GPU when it has
    one)."""
    check(preset.name, build_needs(preset, on_gpu=machine.gpu_bytes is not None), machine, needs_gpu=False,
          gpu_advice="the build sorts one part of the lists at a time there: free the GPU's memory")


def check(name: str, needs: list[Need], machine: Machine, *, needs_gpu: bool,
          gpu_advice: str = "lower the hot fraction, or sample on the CPU") -> None:
    """Raise ``PlanDoesNotFit`` naming the first of host RAM, GPU memory, disk and memlock that falls short."""
    total = totals(needs)
    if total[HOST] > machine.host_bytes:
        raise PlanDoesNotFit(f"{name} needs {gib(total[HOST])} of host RAM and "
                             f"this machine has {gib(machine.host_bytes)} available")
    if machine.gpu_bytes is None and needs_gpu:
        raise PlanDoesNotFit(f"{name} needs {gib(total[GPU])} of GPU memory and this machine has no GPU (0 B)")
    if machine.gpu_bytes is not None and total[GPU] > machine.gpu_bytes:
        raise PlanDoesNotFit(f"{name} needs {gib(total[GPU])} of GPU memory and {gib(machine.gpu_bytes)} is free: "
                             f"{gpu_advice}")
    if total[DISK] > machine.disk_bytes:
        raise PlanDoesNotFit(f"{name} needs {gib(total[DISK])} of disk in the dataset cache and "
                             f"{gib(machine.disk_bytes)} is free there: free some, or point TIERBENCH_DATA elsewhere")
    if machine.memlock_bytes is not None and total[PINNED] > machine.memlock_bytes:
        raise PlanDoesNotFit(f"pinning {name}'s {gib(total[PINNED])} feature table needs a memlock limit at least "
                             f"that large and `ulimit -l` is {size(machine.memlock_bytes)}: raise it (`ulimit -l "
                             f"unlimited`, or memlock in /etc/security/limits.conf)")
