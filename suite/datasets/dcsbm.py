"""Degree-corrected stochastic block model with power-law degrees (Karrer and Newman, PRE 2011).

Every node gets a class (its block) and a propensity theta drawn from a
Pareto distribution with tail index ``alpha = exponent - 1``, so expected
degrees follow a power law with the given exponent.  An edge picks its source
with probability proportional to ``theta_src``; with probability
``homophily`` its target is in the same class, otherwise in a class chosen in
proportion to the classes' total ``theta_dst``; inside the class the target is
picked in proportion to ``theta_dst``.  This gives both the heavy tail that
makes tiering pay (Data Tiering §3.1: the top 1% of ogbn-papers100M nodes hold
32% of its edges; a Pareto tail index of 1.33 reproduces that) and label
homophily, which makes the classes learnable by a GNN.

Directed graphs draw ``theta_src`` and ``theta_dst`` independently; for a
symmetric graph they are the same draw and the caller adds each edge both ways.

Parallel over edges with numba, deterministic for a seed on any thread count
(counter-based draws from ``tiering.rng``): edge e is a function of the seed
and e alone, so ``BlockModel.draw`` gives any range of edges, and the dataset
builder draws them in chunks, twice (``tiering.graph.csr.CSRGraph.from_edge_chunks``).
Picking a node in proportion to its propensity is a search of the cumulative
masses, narrowed by a guide table of one bucket per node (Chen and Asau's
indexed search, 1974) to a few entries instead of log2(N) cache misses; the
result is exactly the full binary search's.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from tiering.graph.csr import indptr_from_counts
from tiering.rng import uniform

SRC_DRAW, SAME_CLASS_DRAW, CLASS_DRAW, DST_DRAW = 0, 1, 2, 3  # edge e's four draws use counters 4 * e + these
EDGE_STREAM = 3  # the stream of the edge draws (0 to 2 are the classes and the propensities)


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


@numba.njit(cache=True)
def guide_table(cum, size):
    """Chen and Asau's guide table: ``out[j]`` = how many entries of ``cum`` are at most ``j * cum[-1] / size``."""
    out = np.empty(size + 1, dtype=np.int64)
    step = cum[-1] / size
    p = 0
    for j in range(size + 1):
        bound = j * step
        while p < len(cum) and cum[p] <= bound:
            p += 1
        out[j] = p
    return out


@numba.njit(inline="always")
def guide_bucket(cum, guide, scale, x):
    """The range ``[lo, hi]`` of the guide table's bucket of x: ``searchsorted(cum, x, "right")`` lies in it unless
    rounding put x just outside the bucket (``guided_search`` checks)."""
    j = min(int(x * scale), len(guide) - 2)
    return guide[j], guide[j + 1]


@numba.njit(inline="always")
def guided_search(cum, lo, hi, x):
    """``np.searchsorted(cum, x, side="right")``, given a range ``[lo, hi]`` that should hold the answer.

    The range is checked first and widened to the whole array where it does
    not hold it, so the result is always exactly searchsorted's.
    """
    n = len(cum)
    if (lo > 0 and cum[lo - 1] > x) or (hi < n and cum[hi] <= x):
        lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(inline="always")
def _touch(cum, lo, hi):
    """Read the entries ``guided_search`` reads first, so that a batch's cache misses overlap instead of queueing."""
    n = len(cum)
    return cum[max(lo - 1, 0)] + cum[min(hi, n - 1)]


_BATCH = 256  # edges whose memory reads are issued together


@numba.njit(parallel=True, cache=True)
def _edge_kernel(block_ptr, cum_src, guide_src, cum_dst, guide_dst, cum_block_dst, homophily, seed, stream, first,
                 src, dst):
    """Edges ``first + i`` as positions in class order (``order`` maps them to node ids afterwards).

    Each picks a source position by its mass in ``cum_src``, takes the class
    of the block holding it (from the short ``block_ptr``, not a random read),
    keeps it with probability ``homophily`` or else picks a class by mass,
    and picks a target position by mass inside that class.  The edges are
    handled in batches, stage by stage (guide entries, then the masses they
    point to), so that the random reads of a batch overlap.
    """
    n = len(cum_src)
    num_blocks = len(block_ptr) - 1
    total_src = cum_src[-1]
    total_dst_blocks = cum_block_dst[-1]
    scale_src = (len(guide_src) - 1) / total_src
    scale_dst = (len(guide_dst) - 1) / cum_dst[-1]
    count = len(src)
    for batch in numba.prange((count + _BATCH - 1) // _BATCH):
        start = batch * _BATCH
        size = min(_BATCH, count - start)
        xs = np.empty(size, dtype=np.float64)
        los = np.empty(size, dtype=np.int64)
        his = np.empty(size, dtype=np.int64)
        block_lo = np.empty(size, dtype=np.int64)
        block_hi = np.empty(size, dtype=np.int64)
        touched = 0.0
        for b in range(size):
            e = first + start + b
            xs[b] = uniform(seed, stream, 4 * e + SRC_DRAW) * total_src
            los[b], his[b] = guide_bucket(cum_src, guide_src, scale_src, xs[b])
        for b in range(size):
            touched += _touch(cum_src, los[b], his[b])
        for b in range(size):
            e = first + start + b
            s = min(guided_search(cum_src, los[b], his[b], xs[b]), n - 1)
            src[start + b] = s
            r = np.searchsorted(block_ptr, s, side="right") - 1
            if uniform(seed, stream, 4 * e + SAME_CLASS_DRAW) >= homophily:
                x = uniform(seed, stream, 4 * e + CLASS_DRAW) * total_dst_blocks
                r = min(max(np.searchsorted(cum_block_dst, x, side="right"), 0), num_blocks - 1)
            lo = block_ptr[r]
            hi = block_ptr[r + 1]
            base = cum_dst[lo - 1] if lo > 0 else 0.0
            xs[b] = base + uniform(seed, stream, 4 * e + DST_DRAW) * (cum_dst[hi - 1] - base)
            block_lo[b], block_hi[b] = lo, hi
            los[b], his[b] = guide_bucket(cum_dst, guide_dst, scale_dst, xs[b])
        for b in range(size):
            touched += _touch(cum_dst, los[b], his[b])
        for b in range(size):
            k = guided_search(cum_dst, los[b], his[b], xs[b])
            dst[start + b] = min(max(k, block_lo[b]), block_hi[b] - 1)
        if touched < 0:  # never: masses are positive; keeps the reads from being optimised away
            src[start] = -1


@numba.njit(parallel=True, cache=True)
def _to_node_ids(order, positions):
    for i in numba.prange(len(positions)):
        positions[i] = order[positions[i]]


def class_weights(num_classes: int, skew: float) -> np.ndarray:
    """Relative class sizes, proportional to ``(k + 1) ** -skew``."""
    return (np.arange(1, num_classes + 1, dtype=np.float64)) ** -skew


@numba.njit(cache=True)
def _class_order(classes, block_ptr):
    """The node ids sorted by class, stably (``np.argsort(classes, kind="stable")``), by one counting pass: at
    ogbn-papers100M's 111M nodes a comparison sort takes seconds."""
    cursor = block_ptr[:-1].copy()
    order = np.empty(len(classes), dtype=np.int64)
    for v in range(len(classes)):
        order[cursor[classes[v]]] = v
        cursor[classes[v]] += 1
    return order


def draw_classes(num_nodes: int, num_classes: int, class_skew: float, seed) -> np.ndarray:
    """The class of every node (int64), the first draw of ``block_model``: alone, it costs one pass over the nodes."""
    classes = np.empty(num_nodes, dtype=np.int64)
    _draw_classes(np.cumsum(class_weights(num_classes, class_skew)), np.uint64(seed), 0, classes)
    return classes


@dataclasses.dataclass
class BlockModel:
    """The drawn part of a DC-SBM (classes and propensities, as cumulative masses in class order), from which
    any range of edges can be drawn: edge e is the same whichever call draws it."""

    classes: np.ndarray  # int64 class of every node
    order: np.ndarray  # node ids sorted by class (stable)
    block_ptr: np.ndarray  # class k's nodes are order[block_ptr[k]:block_ptr[k + 1]]
    cum_src: np.ndarray  # cumulative theta_src in class order
    cum_dst: np.ndarray
    cum_block_dst: np.ndarray  # cumulative theta_dst mass of the classes
    guide_src: np.ndarray  # guide tables of cum_src and cum_dst, one bucket per node
    guide_dst: np.ndarray
    homophily: float
    seed: np.uint64

    def draw(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Edges ``first`` to ``first + count - 1`` as int64 ``(src, dst)``."""
        src = np.empty(count, dtype=np.int64)
        dst = np.empty(count, dtype=np.int64)
        _edge_kernel(self.block_ptr, self.cum_src, self.guide_src, self.cum_dst, self.guide_dst, self.cum_block_dst,
                     self.homophily, self.seed, EDGE_STREAM, first, src, dst)
        _to_node_ids(self.order, src)
        _to_node_ids(self.order, dst)
        return src, dst


def block_model(
    num_nodes: int,
    num_classes: int,
    exponent: float,
    homophily: float,
    class_skew: float,
    symmetric: bool,
    seed: int,
) -> BlockModel:
    """Draw the classes and propensities of ``num_nodes`` nodes (no edges yet)."""
    if exponent <= 2.0:
        raise ValueError(f"the degree exponent must exceed 2 (finite mean degree), got {exponent}")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily must be in [0, 1], got {homophily}")
    if num_classes < 1 or num_nodes < 1:
        raise ValueError("need at least one node and one class")
    seed = np.uint64(seed)
    classes = draw_classes(num_nodes, num_classes, class_skew, seed)

    alpha = exponent - 1.0
    theta_src = np.empty(num_nodes, dtype=np.float64)
    _pareto(alpha, seed, 1, theta_src)
    if symmetric:
        theta_dst = theta_src
    else:
        theta_dst = np.empty(num_nodes, dtype=np.float64)
        _pareto(alpha, seed, 2, theta_dst)

    block_ptr = indptr_from_counts(np.bincount(classes, minlength=num_classes))
    order = _class_order(classes, block_ptr)
    cum_src = np.cumsum(theta_src[order])
    cum_dst = cum_src if symmetric else np.cumsum(theta_dst[order])
    block_mass = np.bincount(classes, weights=theta_dst, minlength=num_classes)
    del theta_src, theta_dst
    guide_src = guide_table(cum_src, num_nodes)
    guide_dst = guide_src if symmetric else guide_table(cum_dst, num_nodes)
    return BlockModel(classes, order, block_ptr, cum_src, cum_dst, np.cumsum(block_mass), guide_src, guide_dst,
                      homophily, seed)


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
    model = block_model(num_nodes, num_classes, exponent, homophily, class_skew, symmetric, seed)
    return (*model.draw(0, num_edges), model.classes)
