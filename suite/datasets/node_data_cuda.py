"""Synthetic feature rows made on a GPU: the numba-cuda twin of ``node_data``'s kernel, imported at first use.

One thread makes one entry (v, k) of the table, as ``node_data._features_kernel``
makes it: the same float64 sum of the list's class centroids, in the list's
order, and the same counter-based normal draw (``tiering.rng``, through the
fused sampler's device hash ``tiering.sampling.fused_kernels.uniform``).  The
GPU may fuse a multiply and an add, and its ``log`` and ``cos`` are not the
CPU's to the last float64 bit, so an entry equals the CPU kernel's within one
float32 rounding step (nearly always bit for bit).  Under numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``, the tests') the arrays stay on the CPU,
as the fused sampler's do, and each thread is a Python thread: small tables only.

Long lists are summed first.  A thread walks its row's list alone, one
dependent read of a class after another, so a launch lasts as long as the
longest list among its rows; a degree-corrected graph's longest lists are tens
of millions of entries at papers-100m's size, and a launch holding one would
run for tens of seconds.  So the sums of the lists longer than ``LONG_LIST``
are made once, before any row (``long_list_sums``): each list's entries
counted per class (``torch.bincount``, a bounded number of entries at a time),
times the centroids.  That adds the same terms grouped by class, equal to the
sum in the list's order within float64 rounding, so those rows too are the
CPU's within one float32 rounding step.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from suite.datasets.node_data import check_rows, checked_noise_ids, table_centroids
from tiering.numba_cuda import cuda
from tiering.sampling.fused import launch, numba_stream
from tiering.sampling.fused_kernels import SIMULATED, THREADS, uniform

LONG_LIST = 4096
"""Lists longer than this are summed before the rows are made (``long_list_sums``); a shorter one costs a thread at
most this many reads."""
LONG_LIST_PIECE = 1 << 26
"""List entries counted at once for the long lists' sums (their positions, owners, classes and keys, int64: about
3 GB); a list longer than this is counted on its own."""


@cuda.jit(device=True)
def entry(indptr, indices, classes, centroids, long_slot, long_sums, signal, neighbor_signal, seed, v, noise_id, k):
    """Entry (v, k) of the table, its noise drawn as node ``noise_id``'s, in float64; a long list's centroid sum is
    row ``long_slot[v]`` of ``long_sums``."""
    start = indptr[v]
    end = indptr[v + 1]
    slot = long_slot[v]
    if slot >= 0:
        x = long_sums[slot, k]
    else:
        x = 0.0
        for p in range(start, end):
            x += centroids[classes[indices[p]], k]
    if end > start:
        x *= neighbor_signal / (end - start)
    x += signal * centroids[classes[v], k]
    stream = np.uint64(noise_id)
    counter = np.uint64(2) * np.uint64(k)
    u1 = uniform(seed, stream, counter)
    u2 = uniform(seed, stream, counter + np.uint64(1))
    return x + math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


@cuda.jit(device=True)
def position(out, first):
    """This thread's entry of ``out``: ``(i, k, v)``, row i and column k of ``out``, for node v = first + i; i is -1
    for a thread past the end."""
    t = cuda.grid(1)
    dim = out.shape[1]
    if t >= out.shape[0] * dim:
        return -1, 0, 0
    i = t // dim
    return i, t - i * dim, first + i


@cuda.jit
def rows(indptr, indices, classes, centroids, long_slot, long_sums, signal, neighbor_signal, seed, first, out):
    """Rows ``first`` on of the table into ``out``, row v's noise drawn as v's."""
    i, k, v = position(out, first)
    if i >= 0:
        out[i, k] = entry(indptr, indices, classes, centroids, long_slot, long_sums, signal, neighbor_signal, seed, v,
                          v, k)


@cuda.jit
def renamed_rows(indptr, indices, classes, centroids, long_slot, long_sums, signal, neighbor_signal, seed, first,
                 noise_ids, out):
    """Rows ``first`` on of the table into ``out``, row v's noise drawn as node ``noise_ids[v]``'s."""
    i, k, v = position(out, first)
    if i >= 0:
        out[i, k] = entry(indptr, indices, classes, centroids, long_slot, long_sums, signal, neighbor_signal, seed, v,
                          noise_ids[v], k)


def long_list_sums(indptr: torch.Tensor, indices: torch.Tensor, classes: torch.Tensor, centroids: torch.Tensor,
                   longest: int, piece: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(slot, sums)`` for the lists longer than ``longest`` entries, on the arrays' device.

    ``slot`` (int32, one per node) is the row of ``sums`` holding node v's float64 sum of its list's class centroids
    where v's list is long, -1 elsewhere; ``sums`` has a row per long list, and one row of zeros where there is none
    (a kernel is never handed an empty array).  Each sum is the list's class counts times ``centroids``, counted about
    ``piece`` entries at a time."""
    device, num_classes = indptr.device, centroids.shape[0]
    lengths = indptr[1:] - indptr[:-1]
    long_nodes = torch.nonzero(lengths > longest).flatten()
    slot = torch.full((len(lengths),), -1, dtype=torch.int32, device=device)
    slot[long_nodes] = torch.arange(len(long_nodes), dtype=torch.int32, device=device)
    counts = torch.zeros((max(len(long_nodes), 1), num_classes), dtype=torch.int64, device=device)
    long_lengths = lengths[long_nodes].tolist()
    first = 0
    while first < len(long_nodes):
        last, total = first + 1, long_lengths[first]
        while last < len(long_nodes) and total + long_lengths[last] <= piece:
            total += long_lengths[last]
            last += 1
        nodes = long_nodes[first:last]
        piece_lengths, list_starts = lengths[nodes], indptr[nodes]
        owner = torch.repeat_interleave(torch.arange(last - first, device=device), piece_lengths, output_size=total)
        starts_in_piece = torch.cumsum(piece_lengths, 0) - piece_lengths
        positions = torch.arange(total, device=device) - starts_in_piece[owner] + list_starts[owner]
        keys = owner * num_classes + classes[indices[positions].long()].long()
        counts[first:last] += torch.bincount(keys, minlength=(last - first) * num_classes).view(-1, num_classes)
        first = last
    return slot, counts.to(torch.float64) @ centroids


class FeatureRows:
    """A table's graph, classes, centroids and noise ids on a GPU, and ``fill`` to make any of its rows there."""

    def __init__(self, graph, classes, dim: int, signal: float, neighbor_signal: float, seed: int, device,
                 noise_ids=None):
        device = torch.device("cpu") if SIMULATED else torch.device(device)
        if device.type == "cuda" and device.index is None:  # tensors made on "cuda" are on "cuda:N", unequal to it
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.num_nodes, self.dim = graph.num_nodes, dim
        classes = np.asarray(classes)
        noise_ids = checked_noise_ids(noise_ids, graph.num_nodes)
        centroids = table_centroids(classes, dim, seed)
        arrays = [torch.as_tensor(a).to(self.device) for a in (graph.indptr, graph.indices, classes, centroids)]
        self._arrays = [*arrays, *long_list_sums(*arrays, longest=LONG_LIST, piece=LONG_LIST_PIECE)]
        self._scalars = (float(signal), float(neighbor_signal), np.uint64(seed))
        self._noise_ids = None if noise_ids is None else torch.from_numpy(noise_ids).to(self.device)

    def fill(self, out: torch.Tensor, first: int) -> torch.Tensor:
        """Rows ``first`` to ``first + len(out) - 1`` into the float32 tensor ``out`` on ``self.device``, on torch's
        current stream; returns ``out``."""
        check_rows(first, len(out), self.num_nodes)
        if out.dtype != torch.float32 or out.device != self.device or tuple(out.shape[1:]) != (self.dim,):
            raise ValueError(f"out must be float32 rows of {self.dim} on {self.device}, "
                             f"got {tuple(out.shape)} {out.dtype} on {out.device}")
        if not len(out):
            return out
        renamed = self._noise_ids is not None
        kernel = renamed_rows if renamed else rows
        args = [*self._arrays, *self._scalars, np.int64(first), *([self._noise_ids] if renamed else []), out]
        blocks = -(-len(out) * self.dim // THREADS)
        launch(kernel, blocks, THREADS, numba_stream(self.device), self.device, *args)
        return out
