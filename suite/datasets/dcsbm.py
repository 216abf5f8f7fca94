"""Degree-corrected stochastic block model with power-law degrees (Karrer and Newman, PRE 2011).

Every node gets a class (its block) and a propensity theta drawn from a
Pareto distribution with tail index ``alpha = exponent - 1``, so expected
degrees follow a power law with the given exponent.  An edge picks its source
with probability proportional to ``theta_src``; with probability
``homophily`` its target is in the same class, otherwise in a class chosen in
proportion to the classes' total ``theta_dst``; inside the class the target is
picked in proportion to ``theta_dst``.  This gives both the heavy tail that
makes tiering pay (seeds/000 §3.1: the top 1% of ogbn-papers100M nodes hold
32% of its edges; a Pareto tail index of 1.33 reproduces that) and label
homophily, which makes the classes learnable by a GNN.

Directed graphs draw ``theta_src`` and ``theta_dst`` independently; for a
symmetric graph they are the same draw and the caller adds each edge both ways.

Parallel over edges with numba, deterministic for a seed on any thread count
(counter-based draws from ``tiering.rng``).
"""

from __future__ import annotations

import numba
import numpy as np

from tiering.graph import indptr_from_counts
from tiering.rng import uniform

_SRC, _SAME_CLASS, _CLASS, _DST = 0, 1, 2, 3  # counters of the four draws per edge


@numba.njit(parallel=True, cache=True)
def _pareto(alpha, seed, stream, out):
    for v in numba.prange(len(out)):
        out[v] = (1.0 - uniform(seed, stream, v)) ** (-1.0 / alpha)


@numba.njit(parallel=True, cache=True)
def _draw_classes(cum_weights, seed, stream, out):
    total = cum_weights[-1]
    for v in numba.prange(len(out)):
        k = np.searchsorted(cum_weights, uniform(seed, stream, v) * total, side="right")
        out[v] = min(k, len(cum_weights) - 1)


@numba.njit(inline="always")
def _pick(cum, lo, hi, x):
    """Position in [lo, hi) whose cumulative mass interval holds x."""
    k = np.searchsorted(cum, x, side="right")
    return min(max(k, lo), hi - 1)


@numba.njit(parallel=True, cache=True)
def _edge_kernel(order, block_ptr, classes, cum_src, cum_dst, cum_block_dst, homophily, seed, stream, src, dst):
    n = len(order)
    num_blocks = len(block_ptr) - 1
    total_src = cum_src[-1]
    total_dst_blocks = cum_block_dst[-1]
    for e in numba.prange(len(src)):
        i = _pick(cum_src, 0, n, uniform(seed, stream, 4 * e + _SRC) * total_src)
        s = order[i]
        r = classes[s]
        if uniform(seed, stream, 4 * e + _SAME_CLASS) >= homophily:
            x = uniform(seed, stream, 4 * e + _CLASS) * total_dst_blocks
            r = _pick(cum_block_dst, 0, num_blocks, x)
        lo = block_ptr[r]
        hi = block_ptr[r + 1]
        base = cum_dst[lo - 1] if lo > 0 else 0.0
        x = base + uniform(seed, stream, 4 * e + _DST) * (cum_dst[hi - 1] - base)
        src[e] = s
        dst[e] = order[_pick(cum_dst, lo, hi, x)]


def class_weights(num_classes: int, skew: float) -> np.ndarray:
    """Relative class sizes, proportional to ``(k + 1) ** -skew``."""
    return (np.arange(1, num_classes + 1, dtype=np.float64)) ** -skew


def dcsbm_edges(
    num_nodes: int,
    num_edges: int,
    num_classes: int,
    exponent: float,
    homophily: float,
    class_skew: float,
    symmetric: bool,
    seed: int,
):
    """Draw ``num_edges`` edges and the class of every node.

    Returns ``(src, dst, classes)`` as int64 arrays.  Duplicates and
    self-loops are kept (the dataset builder removes them).
    """
    if exponent <= 2.0:
        raise ValueError(f"the degree exponent must exceed 2 (finite mean degree), got {exponent}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    if num_classes < 1 or num_nodes < 1:
        raise ValueError("need at least one node and one class")
    seed = np.uint64(seed)
    classes = np.empty(num_nodes, dtype=np.int64)
    _draw_classes(np.cumsum(class_weights(num_classes, class_skew)), seed, 0, classes)

    alpha = exponent - 1.0
    theta_src = np.empty(num_nodes, dtype=np.float64)
    _pareto(alpha, seed, 1, theta_src)
    if symmetric:
        theta_dst = theta_src
    else:
        theta_dst = np.empty(num_nodes, dtype=np.float64)
        _pareto(alpha, seed, 2, theta_dst)

    order = np.argsort(classes, kind="stable")
    block_ptr = indptr_from_counts(np.bincount(classes, minlength=num_classes))
    cum_src = np.cumsum(theta_src[order])
    cum_dst = np.cumsum(theta_dst[order])
    block_mass = np.bincount(classes, weights=theta_dst, minlength=num_classes)
    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    _edge_kernel(order, block_ptr, classes, cum_src, cum_dst, np.cumsum(block_mass), homophily, seed, 3, src, dst)
    return src, dst, classes
