"""The device code of the fused GPU neighbour sampler (``tiering.sampling.fused``, whose docstring
explains the launches of a hop): numba-cuda kernels, imported when the first sampler of these kernels is built.
``fused.cu`` states the same kernels in CUDA C++, argument for argument.

Block sizes are fixed at import: 256 threads per block on a GPU, 32 under numba's CUDA simulator, where each
thread is a Python thread.
"""

import numpy as np

from tiering.numba_cuda import cuda

try:
    from numba.cuda.core import config  # the CUDA target's settings, in numba-cuda from 0.20 on
except ImportError:  # an older numba-cuda (a GPU machine's own install) reads numba's
    from numba.core import config

from tiering.rng import _GOLDEN, _MIX1, _MIX2, _S11, _S27, _S30, _S31, _TWO_POW_MINUS_53
from tiering.sampling.fused import EMPTY, GPU_THREADS, NO_POSITION

SIMULATED = bool(config.ENABLE_CUDASIM)
"""Whether these kernels run in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) rather than on a GPU."""
THREADS = 32 if SIMULATED else GPU_THREADS

# A hop of a few hundred frontier nodes needs a few blocks: numba warns of low
# occupancy below 128 blocks, once per distinct grid size, which would fill a training run's log.  Its config
# (NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS), read at every launch, turns that off for the process; a warnings filter would
# not hold, since any catch_warnings block around this import (pytest's collection, for one) drops it afterwards.
config.CUDA_LOW_OCCUPANCY_WARNINGS = 0


@cuda.jit(device=True)
def splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)

@cuda.jit(device=True)
def uniform(seed, stream, counter):
    """``tiering.rng.uniform(seed, stream, counter)``, bit for bit (all three uint64)."""
    h = splitmix64(seed)
    h = splitmix64(h ^ stream)
    h = splitmix64(h ^ counter)
    return np.float64(h >> _S11) * _TWO_POW_MINUS_53

@cuda.jit(device=True)
def insert(keys, positions, key, position, sizes):
    """Put ``key`` in the table (linear probing) and lower its slot's position to ``position``; its slot, or -1 with
    the flag ``sizes[sizes.size - 1]`` set where every slot holds another key (the table is full: a sizing bug, which
    the host then reports instead of a probe that never ends)."""
    mask = np.uint64(keys.size - 1)
    slot = np.int64(splitmix64(np.uint64(key)) & mask)
    for _ in range(keys.size):
        found = cuda.atomic.cas(keys, slot, EMPTY, key)
        if found == EMPTY or found == key:
            cuda.atomic.min(positions, slot, position)
            return slot
        slot = np.int64((np.uint64(slot) + np.uint64(1)) & mask)
    sizes[sizes.size - 1] = 1
    return np.int64(-1)

@cuda.jit
def sample(indptr, indices, frontier, fanout, seed, sizes, hop, keys, positions, counts, sampled, slots):
    """Kernel 1 of a hop, over the frontier's bound (``frontier.size``; its size is ``sizes[2 * hop]``): frontier node
    i's draws (Floyd, as ``neighbors._sample_batch``) into ``sampled[i*fanout : i*fanout + counts[i]]``, and every
    candidate into the table; a count of 0 for each row past the frontier."""
    i = cuda.grid(1)
    if i >= frontier.size:
        return
    num_frontier = sizes[2 * hop]
    if i >= num_frontier:
        counts[i] = 0
        return
    v = frontier[i]
    slots[i] = insert(keys, positions, v, np.int64(i), sizes)
    start = indptr[v]
    degree = indptr[v + 1] - start
    base = i * fanout
    if degree <= fanout:
        count = degree
        for r in range(degree):
            sampled[base + r] = r
    else:
        count = fanout
        for r in range(fanout):
            j = degree - fanout + r
            t = min(np.int64(uniform(seed, np.uint64(v), np.uint64(r)) * (j + 1)), j)
            for q in range(r):
                if sampled[base + q] == t:
                    t = j
                    break
            sampled[base + r] = t
    counts[i] = count
    for r in range(count):
        u = np.int64(indices[start + sampled[base + r]])
        sampled[base + r] = u
        slots[num_frontier + base + r] = insert(keys, positions, u, np.int64(num_frontier + base + r), sizes)
    for r in range(count, fanout):
        slots[num_frontier + base + r] = -1  # padding: no entry to clear later

@cuda.jit
def insert_all(frontier, neighbors, keys, positions, counts, slots, sizes):
    """Kernel 1 of ``append_new_nodes_hashed``: the frontier and given neighbours (one per row) into the table."""
    g = cuda.grid(1)
    stride = cuda.gridsize(1)
    num_frontier = frontier.size
    for i in range(g, num_frontier, stride):
        slots[i] = insert(keys, positions, frontier[i], np.int64(i), sizes)
    for q in range(g, neighbors.size, stride):
        counts[q] = 1
        slots[num_frontier + q] = insert(keys, positions, neighbors[q], np.int64(num_frontier + q), sizes)

@cuda.jit(device=True)
def is_first(counts, width, num_frontier, slots, positions, q):
    """Whether candidate q (row q // width, draw q % width) is its id's first position and not in the frontier."""
    row = q // width
    if q - row * width >= counts[row]:
        return 0
    slot = slots[num_frontier + q]
    return 1 if slot >= 0 and positions[slot] == num_frontier + q else 0  # -1: not in a full table

@cuda.jit
def marks(counts, width, sizes, hop, slots, positions, ranks):
    """Kernel 2 of a hop, grid-stride: ``ranks[q]`` = 1 where candidate q is its id's first position and not in the
    frontier (a new node), else 0; torch's ``cumsum`` then turns the marks into each new node's rank, counted from
    1."""
    g = cuda.grid(1)
    stride = cuda.gridsize(1)
    num_frontier = sizes[2 * hop]
    for q in range(g, counts.size * width, stride):
        ranks[q] = is_first(counts, width, num_frontier, slots, positions, q)

@cuda.jit
def write(frontier, counts, width, sampled, slots, positions, row_ends, ranks, nodes, edges, sizes, hop, stale_keys,
          stale_positions, stale_slots, left, table):
    """Kernel 3 of a hop: the edges (local source, row) in row order, the next frontier, the hop's totals, and the
    other table's entries of the previous hop cleared.  ``row_ends`` and ``ranks`` are inclusive prefix sums: of the
    rows' edge counts (row r's edges end there) and of the new-node marks (a new node's rank counted from 1).
    ``edges`` holds the hop's E edges as a (2, E) array from its start: sources, then destinations.  The totals:
    E in ``sizes[2 * hop + 1]``, the next frontier's size in ``sizes[2 * hop + 2]``, and in ``left[table]`` how many
    of ``slots`` the next hop's clearing of this table reads; ``left[1 - table]`` is that of ``stale_slots``."""
    g = cuda.grid(1)
    stride = cuda.gridsize(1)
    num_frontier = sizes[2 * hop]
    rows = counts.size
    num_edges = row_ends[rows - 1] if rows > 0 else 0
    for q in range(g, rows * width, stride):
        row = q // width
        r = q - row * width
        if r >= counts[row]:
            continue
        slot = slots[num_frontier + q]
        if slot < 0:  # the table was full: the minibatch is refused
            continue
        first = positions[slot]
        local = first if first < num_frontier else num_frontier + ranks[first - num_frontier] - 1
        e = row_ends[row] - counts[row] + r
        edges[e] = local
        edges[num_edges + e] = row
        if first == num_frontier + q:
            nodes[num_frontier + ranks[q] - 1] = sampled[q]
    for i in range(g, num_frontier, stride):
        nodes[i] = frontier[i]
    for p in range(g, left[1 - table], stride):
        slot = stale_slots[p]
        if slot >= 0:
            stale_keys[slot] = EMPTY
            stale_positions[slot] = NO_POSITION
    if g == 0:
        sizes[2 * hop + 1] = num_edges
        sizes[2 * hop + 2] = num_frontier + (ranks[ranks.size - 1] if ranks.size > 0 else 0)
        left[table] = num_frontier * (1 + width)
