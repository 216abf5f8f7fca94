"""R-MAT edge generator (Chakrabarti, Zhan and Faloutsos, SDM 2004) with Graph500 parameters.

Each edge picks one quadrant of the adjacency matrix per bit of the node id,
with probabilities a, b, c and d = 1 - a - b - c; Graph500 uses a = 0.57,
b = c = 0.19, d = 0.05.  The recursion makes low ids hubs, so the ids are
shuffled afterwards by a seeded permutation (as Graph500 does): without it,
"node id" would already be a perfect hotness score and reordering would have
nothing to find.  Graph500 also perturbs a, b, c per level; we do not, so the
degree distribution is exactly that of the stated parameters.

The recursion also gives R-MAT a community structure: nodes whose ids share
high-order bits are linked more often than chance (a + d = 0.62 of edges keep
the top bit equal).  ``rmat_communities`` turns contiguous ranges of the
unshuffled ids into classes, which is what the dataset builder uses as labels.

Parallel over edges with numba; every draw is a counter-based hash of
(seed, edge, level), so the output is identical for any thread count, and
any range of edges can be drawn on its own (``first``): the dataset builder
draws them in chunks.
"""

from __future__ import annotations

import numba
import numpy as np

from tiering.rng import uniform

GRAPH500 = (0.57, 0.19, 0.19)
"""Graph500 R-MAT parameters (a, b, c); d = 1 - a - b - c = 0.05."""


@numba.njit(parallel=True, cache=True)
def _rmat_kernel(scale, a, b, c, seed, first, src, dst):
    ab = a + b
    abc = a + b + c
    for i in numba.prange(len(src)):
        e = first + i
        u = 0
        v = 0
        for level in range(scale):
            r = uniform(seed, e, level)
            u <<= 1
            v <<= 1
            if r < a:
                pass
            elif r < ab:
                v |= 1
            elif r < abc:
                u |= 1
            else:
                u |= 1
                v |= 1
        src[i] = u
        dst[i] = v


def rmat_edges(scale: int, num_edges: int, seed: int, params=GRAPH500, first: int = 0):
    """``num_edges`` directed edges over ``2**scale`` nodes, ids *not* yet shuffled.

    Returns ``(src, dst)`` int64 arrays; edge e goes from quadrant row to
    column, so ``src`` is the row id.  Duplicates and self-loops are kept.
    They are edges ``first`` to ``first + num_edges - 1`` of the seed's
    sequence: any range can be drawn on its own, with the same result.
    """
    a, b, c = params
    if not (0 < a and 0 <= b and 0 <= c and a + b + c < 1):
        raise ValueError(f"R-MAT needs a > 0, b, c >= 0 and a + b + c < 1, got {params}")
    if not 1 <= scale <= 40:
        raise ValueError(f"scale must be in [1, 40], got {scale}")
    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    _rmat_kernel(scale, a, b, c, np.uint64(seed), first, src, dst)
    return src, dst


def rmat_communities(num_nodes: int, num_classes: int) -> np.ndarray:
    """Class of each unshuffled id: ``num_classes`` contiguous, equal id ranges."""
    return (np.arange(num_nodes, dtype=np.int64) * num_classes) // num_nodes


def id_permutation(num_nodes: int, seed: int) -> np.ndarray:
    """The seeded relabelling ``shuffle_ids`` applies: node u becomes ``perm[u]``."""
    return np.random.default_rng(seed).permutation(num_nodes)


def shuffle_ids(src, dst, classes, seed: int):
    """Relabel nodes by a seeded random permutation; returns new (src, dst, classes)."""
    perm = id_permutation(len(classes), seed)
    new_classes = np.empty_like(classes)
    new_classes[perm] = classes
    return perm[src], perm[dst], new_classes
