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
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import cuda

from suite.datasets.node_data import check_rows, checked_noise_ids, table_centroids
from tiering.sampling.fused import launch, numba_stream
from tiering.sampling.fused_kernels import SIMULATED, THREADS, uniform


@cuda.jit(device=True)
def entry(indptr, indices, classes, centroids, signal, neighbor_signal, seed, v, noise_id, k):
    """Entry (v, k) of the table, its noise drawn as node ``noise_id``'s, in float64."""
    start = indptr[v]
    end = indptr[v + 1]
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
def rows(indptr, indices, classes, centroids, signal, neighbor_signal, seed, first, out):
    """Rows ``first`` on of the table into ``out``, row v's noise drawn as v's."""
    i, k, v = position(out, first)
    if i >= 0:
        out[i, k] = entry(indptr, indices, classes, centroids, signal, neighbor_signal, seed, v, v, k)


@cuda.jit
def renamed_rows(indptr, indices, classes, centroids, signal, neighbor_signal, seed, first, noise_ids, out):
    """Rows ``first`` on of the table into ``out``, row v's noise drawn as node ``noise_ids[v]``'s."""
    i, k, v = position(out, first)
    if i >= 0:
        out[i, k] = entry(indptr, indices, classes, centroids, signal, neighbor_signal, seed, v, noise_ids[v], k)


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
        self._arrays = [torch.as_tensor(a).to(self.device) for a in (graph.indptr, graph.indices, classes, centroids)]
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
