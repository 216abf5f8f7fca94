"""A fused GPU neighbour sampler: one hop, sampling and relabelling, in three kernels and two scans.

``FusedNeighborSampler(graph, fanouts).sample(seeds, generator)`` returns
exactly the minibatch ``NeighborSampler`` (``tiering.sampling.neighbors``,
the CPU reference) returns for the same seeds and generator: the same seeds,
input nodes and blocks.  Each hop draws each frontier node's neighbours with
Floyd's algorithm from the same counter-based draws (``tiering.rng``:
SplitMix64 of (hop seed, node id, draw), ported below as a device function
with the same integer arithmetic), and appends the new nodes after the
frontier in order of first appearance, as ``append_new_nodes`` does.

Relabelling uses an open-addressing hash table in GPU memory (linear
probing), the way DGL's and GraphBolt's GPU samplers build blocks, not
sorting (``torch.unique``).  One hop of a frontier of F nodes and fanout k
lays its candidates out as the sequence ``frontier + sampled``, node i's
draws at positions F + i*k + r (padded to k per node; the padding keeps the
order of the concatenated sample, so "first in the sequence" is "smallest
position").

The host never waits for a hop.  It knows only a bound of each frontier's
size (the seeds, then at most ``min(num_nodes, F * (1 + k))`` nodes after a
frontier of at most F), so it sizes every buffer of a hop by the bound and
launches over it; the frontier's true size lies in GPU memory (``sizes``),
written by the hop before, and the kernels read it there.  A minibatch
enqueues all its hops and then reads every hop's totals (its frontier's size
and edges) in one copy, its one synchronisation, and its blocks are views of
the starts of the hops' buffers.  Threads past a frontier return at once, so
a bound above the true size costs idle threads, not work.  The launches of a
hop, whatever F:

1. ``sample``, one thread per frontier node: insert the node (compare-and-swap
   of its id into a slot, then atomic minimum of its position into the
   slot's position), draw its neighbours, and insert each the same way.
   After it, each id's slot holds the first position the id has.
2. ``marks``, grid-stride: 1 at each position that is its id's first and is
   not in the frontier, else 0.  Then torch's ``cumsum`` (a device-wide scan)
   twice: over the per-node counts (where each node's edges end) and over the
   marks (each new node's rank, so new nodes are numbered in first-seen
   order); their last elements are the hop's edges and new nodes.  A scan
   within one kernel of one block would leave a hop's F x k candidates to
   that block's 1,024 threads, each walking F x k / 1,024 of them one
   dependent read of the table after another: about 1,900 at the third hop of
   a (12,12,12) minibatch of 1,024 seeds.
3. ``write``, grid-stride: each sample's local id (its id's first position
   if that is in the frontier, else F plus its rank) and destination, the
   next frontier (frontier, then new nodes), the hop's totals into ``sizes``,
   and the clearing of the other table (below).

A table must be empty when a hop starts, and clearing it would be one more
launch (a memset).  So the sampler keeps two tables and alternates them: the
``write`` kernel of a hop clears, slot by slot, the entries the previous hop
left in the other table (that hop's frontier and candidates, their count kept
in GPU memory, so the clearing costs what inserting did).  Tables are sized
for the largest hop a minibatch can reach (at most
``min(num_nodes, F * (1 + k))`` distinct ids, at most ``max_load`` of the
slots) and grow, filled by ``torch.full``, when a larger minibatch comes.  A
probe that found every slot taken, which the sizing rules out, gives up and
sets a flag beside the totals in ``sizes``; the host refuses that minibatch
at its one read rather than spin on a full table.
Outside the hops, a minibatch launches only the fill of its seeds' count into
``sizes`` and, when the tables grow, their fills; its seeds are checked (in
range, distinct) where they are, in host memory.  An empty minibatch launches
nothing.  Each hop's work buffers (counts, prefix sums, candidates, slots),
sized by the bounds, are kept for the next minibatch of the same size (the one
read at a minibatch's end means its kernels are done with them), so a
minibatch allocates only its outputs.  The sampler keeps this state between
minibatches: use one sampler per sampling thread.  A minibatch sampled on
another stream than the previous one (the pipeline's sampler thread, then the
validation pass on the training stream) first makes its stream wait for the
previous one, whose last ``write`` may still be clearing a table, and marks
the tensors it keeps as used on it for the caching allocator.

The graph lives in GPU memory (``graph_memory="gpu"``, copied once) or stays
in pinned host memory read over PCIe (``"host"``, UVA sampling:
``tiering.features.zero_copy.mapped_graph``).  Kernels are launched on
torch's current stream, so the minibatch's tensors are torch CUDA tensors.
numba and CuPy wrap streams and launch kernels in the current CUDA context, so
the sampler makes its own device current around a minibatch (a sampler on
``cuda:1`` in a thread where ``cuda:0`` is current).

The same kernels exist twice (``kernels``), because on a minibatch of 1,024
seeds the host's cost of launching them may weigh more than the GPU's work,
and ``tierbench samplerbench`` measures both side by side:

* ``"numba"`` (the default): numba-cuda kernels (``fused_kernels``) taking
  torch tensors wrapped as numba arrays (``cuda.as_cuda_array``).  Wrapping
  is a host cost of every launch, so every tensor a launch takes is wrapped
  once, where it is made (``_Buffer``), and the sampler keeps its work buffers
  between minibatches of the same size: a (12,12,12) minibatch wraps its seeds
  and each hop's two outputs (the next frontier and the edges), 7 tensors, of
  its nine launches' 84 array arguments.
* ``"cupy"``: the same kernels in CUDA C++ (``fused.cu``, launched by
  ``fused_cupy`` through CuPy's ``RawKernel``), each tensor passed as its
  address and size.

Why numba-cuda (``numba.cuda``): the kernels are Python, like the CPU
sampler's numba kernels, and numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``, set before ``numba.cuda`` is first imported)
runs them, atomics, shared memory and barriers included, on a machine
without a GPU: the tests check them against the CPU sampler in CI.  Under the
simulator the graph and every tensor stay on the CPU (``graph_memory`` has
no effect) and each CUDA thread is a Python thread, so only small graphs are
practical; the simulator evaluates the device code on numpy uint64 scalars,
which warn ("overflow encountered") where the hash wraps, as it means to.
``numba.cuda`` is imported (``tiering.sampling.fused_kernels``) when the
first sampler is built, and each kernel compiles at its first launch, so
importing this module costs nothing and fixes no simulator choice.  The
CUDA C++ kernels run without a GPU too: the tests compile ``fused.cu`` for
the host and launch it one thread at a time, through this module's code.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from typing import NamedTuple

import numpy as np
import torch

from tiering.graph.csr import CSRGraph
from tiering.sampling.neighbors import (
    Block,
    MiniBatch,
    check_distinct,
    check_fanouts,
    check_nodes,
    seed_from,
)

GRAPH_MEMORY = ("gpu", "host")
KERNELS = ("numba", "cupy")
"""The sets of kernels a sampler may launch (module docstring), the default first."""
DEFAULT_KERNELS = KERNELS[0]
GPU_THREADS = 256
"""Threads per block of every launch of either set on a GPU."""
EMPTY = -1  # a free slot's key; node ids are non-negative
NO_POSITION = np.int64(2**63 - 1)  # a free slot's position: above every position, for atomic minimum


def device_code():
    """``tiering.sampling.fused_kernels``, imported (``numba.cuda`` with it) at first use."""
    from tiering.sampling import fused_kernels

    return fused_kernels


def kernel_parameters(name: str) -> tuple[str, ...]:
    """The parameters of kernel ``name`` in the order it takes them: that of its definition in ``fused_kernels``,
    which the kernels of ``fused.cu`` follow."""
    return tuple(inspect.signature(getattr(device_code(), name).py_func).parameters)


def kernel_array(tensor: torch.Tensor):
    """What a kernel takes for ``tensor``: a numba view of its CUDA memory, or under the simulator the
    numpy view of the CPU tensor (the simulator copies it in and back around each launch)."""
    if tensor.device.type == "cuda":
        from tiering.numba_cuda import cuda

        return cuda.as_cuda_array(tensor.detach(), sync=False)
    return tensor.numpy()


def kernel_arguments(args) -> tuple:
    """``args`` as a kernel takes them: each tensor wrapped (``kernel_array``), the rest (numbers, numba arrays
    wrapped earlier) as they are."""
    return tuple(kernel_array(a) if isinstance(a, torch.Tensor) else a for a in args)


def made_current(device: torch.device):
    """``device`` made the current CUDA device for what is done inside (nothing on a CPU): numba wraps streams and
    arrays, and numba and CuPy launch kernels, in the current CUDA context, not in that of the tensors' device."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def numba_stream(device: torch.device):
    """torch's current stream on ``device`` as numba's launch stream (0, the default, under the simulator)."""
    if device.type != "cuda":
        return 0
    from tiering.numba_cuda import cuda

    with made_current(device):
        return cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)


def launch(kernel, blocks: int, threads: int, stream, device: torch.device, *args) -> None:
    """``kernel`` on ``blocks`` x ``threads`` in ``stream`` of ``device``, its arguments as it takes them
    (``kernel_arguments``)."""
    with made_current(device):
        _launch_in_current_context(kernel, blocks, threads, stream, args)


def _launch_in_current_context(kernel, blocks: int, threads: int, stream, args) -> None:
    kernel[blocks, threads, stream](*kernel_arguments(args))


class NumbaLaunches:
    """The sampler's numba-cuda kernels (``fused_kernels``), launched in the current CUDA context, which the sampler
    makes its device's.

    ``on_host``: whether the kernels run on the CPU over CPU tensors (numba's CUDA simulator); ``threads``: threads
    per block; ``stream(device)``: the launch stream of torch's current one; ``arrays(args)``: the arguments with
    each tensor as the kernels take it, to keep for later launches; ``launch(name, blocks, stream, *args)``: kernel
    ``name``, its arguments tensors, kept arrays and numbers, in the order of ``fused_kernels``.
    """

    name = "numba"

    def __init__(self):
        self.code = device_code()
        self.on_host = self.code.SIMULATED
        self.threads = self.code.THREADS

    def stream(self, device: torch.device):
        return numba_stream(device)

    def arrays(self, args) -> tuple:
        return kernel_arguments(args)

    def launch(self, name: str, blocks: int, stream, *args) -> None:
        _launch_in_current_context(getattr(self.code, name), blocks, self.threads, stream, args)


def kernel_launches(kernels):
    """What launches the kernels named by ``kernels`` (``KERNELS``), or ``kernels`` itself where it is such an
    object already (the tests' kernels compiled for the host)."""
    if not isinstance(kernels, str):
        return kernels
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    if kernels == NumbaLaunches.name:
        return NumbaLaunches()
    from tiering.sampling.fused_cupy import CupyLaunches

    return CupyLaunches()


def _capacity(distinct: int, max_load: float) -> int:
    """The power of two of slots that holds ``distinct`` ids at a load of at most ``max_load``."""
    if not 0 < max_load <= 1:
        raise ValueError(f"max_load must be in (0, 1], got {max_load}")
    return 1 << max(0, int(np.ceil(distinct / max_load)) - 1).bit_length()


def _table(capacity: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """An empty table: keys, and each slot's first position."""
    return (torch.full((capacity,), EMPTY, dtype=torch.int64, device=device),
            torch.full((capacity,), int(NO_POSITION), dtype=torch.int64, device=device))


def _blocks(items: int, threads: int) -> int:
    return max(1, (items + threads - 1) // threads)


class _Buffer(NamedTuple):
    """A tensor and what the kernels take for it (``NumbaLaunches.arrays``), made once for every launch that passes
    it: numba-cuda would otherwise wrap the tensor again at each launch, a host cost of every launch."""

    tensor: torch.Tensor
    array: object


def _buffers(launches, *tensors: torch.Tensor) -> list[_Buffer]:
    """``tensors`` with what the kernels take for them, in the current CUDA context."""
    return [_Buffer(tensor, array) for tensor, array in zip(tensors, launches.arrays(tensors))]


class _HopWork:
    """The work buffers of a hop of ``rows`` rows of ``width`` candidates: ``counts`` and ``row_ends`` per row,
    ``ranks`` per candidate, and ``sampled``, the candidates (drawn into it, unless given), each a ``_Buffer``.  The
    sampler keeps one per hop between minibatches of the same frontier bounds."""

    def __init__(self, launches, rows: int, width: int, device: torch.device, sampled: torch.Tensor | None = None):
        def buffer(size):
            return torch.empty(size, dtype=torch.int64, device=device)

        self.rows, self.width = rows, width
        self.counts, self.row_ends, self.ranks, self.sampled = _buffers(
            launches, buffer(rows), buffer(rows), buffer(rows * width),
            buffer(rows * width) if sampled is None else sampled)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.counts.tensor, self.row_ends.tensor, self.ranks.tensor, self.sampled.tensor


def _relabel(launches, stream, work: _HopWork, frontier: _Buffer, slots, positions, sizes, hop, stale,
             stale_bound: int, node_bound: int, device):
    """Kernels 2 and 3 of a hop and the scans between them, after kernel 1 filled ``work``'s counts and candidates,
    ``slots`` and the table: the next frontier (of at most ``node_bound`` nodes, a ``_Buffer``) and the hop's edges
    (as a flat (2, E) array), at the starts of buffers of their bounds, their sizes written into ``sizes`` (``write``
    in ``fused_kernels``).  ``frontier``'s tensor is a buffer of its bound; ``slots``, ``positions``, ``sizes`` and
    ``stale`` are as the kernels take them.  ``stale``: (keys, positions, slots) of the other table's entries to
    clear, at most ``stale_bound`` of them, then ``left`` and the index of this hop's table (``write``'s last
    arguments)."""
    rows, width = work.rows, work.width
    torch.cumsum(work.counts.tensor, 0, out=work.row_ends.tensor)  # on torch's current stream, where kernels launch
    if rows:
        launches.launch("marks", _blocks(rows * width, launches.threads), stream, work.counts.array, width, sizes,
                        hop, slots, positions, work.ranks.array)
        work.ranks.tensor.cumsum_(0)
    nodes, edges = _buffers(launches, torch.empty(node_bound, dtype=torch.int64, device=device),
                            torch.empty(2 * rows * width, dtype=torch.int64, device=device))
    grid = _blocks(max(rows * width, len(frontier.tensor), stale_bound), launches.threads)
    launches.launch("write", grid, stream, frontier.array, work.counts.array, width, work.sampled.array, slots,
                    positions, work.row_ends.array, work.ranks.array, nodes.array, edges.array, sizes, hop, *stale)
    return nodes, edges.tensor


def _check_not_full(full: int) -> None:
    """Refuse a minibatch whose kernels found a hash table full (``insert``'s flag): the tables are sized to hold
    every id a hop can reach, so this is a bug in the sizing, reported rather than spun on."""
    if full:
        raise RuntimeError("the fused sampler found a hash table full, which its sizing should rule out; "
                           "the minibatch is refused")


def _edge_index(edges: torch.Tensor, num_edges: int) -> torch.Tensor:
    """The (2, ``num_edges``) edge index ``write`` left at the start of ``edges``."""
    return edges[: 2 * num_edges].view(2, num_edges)


def append_new_nodes_hashed(frontier: torch.Tensor, neighbors: torch.Tensor, max_load: float = 0.5,
                            kernels=DEFAULT_KERNELS) -> tuple[torch.Tensor, torch.Tensor]:
    """``append_new_nodes`` by the hash table of the fused sampler's hops: ``(nodes, local)``, int64.

    The relabelling of ``FusedNeighborSampler`` on given neighbours: insert, mark, scan and write into a fresh
    table of at most ``max_load`` of its slots used (filling it is two more), by the kernels ``kernels``
    (``kernel_launches``), and one read of the number of nodes.  Tensors on a CUDA device, or CPU tensors where the
    kernels run on the host.
    """
    device = frontier.device
    frontier = frontier.to(torch.int64).contiguous()
    neighbors = neighbors.to(device=device, dtype=torch.int64).contiguous()
    size = len(frontier) + len(neighbors)
    if size == 0:
        return frontier.clone(), torch.empty(0, dtype=torch.int64, device=device)
    launches = kernel_launches(kernels)
    with made_current(device):
        stream = launches.stream(device)
        keys, positions, slots, sizes, left = _buffers(
            launches, *_table(_capacity(size, max_load), device), torch.empty(size, dtype=torch.int64, device=device),
            torch.tensor([len(frontier), 0, 0, 0], dtype=torch.int64, device=device),  # sizes, then "table full"
            torch.zeros(2, dtype=torch.int64, device=device))
        work = _HopWork(launches, len(neighbors), 1, device, sampled=neighbors)
        frontier = _buffers(launches, frontier)[0]
        launches.launch("insert_all", _blocks(size, launches.threads), stream, frontier.array, work.sampled.array,
                        keys.array, positions.array, work.counts.array, slots.array, sizes.array)
        nothing_stale = (keys.array, positions.array, slots.array, left.array, 0)  # left: nothing to clear
        nodes, edges = _relabel(launches, stream, work, frontier, slots.array, positions.array, sizes.array, 0,
                                nothing_stale, 0, size, device)
        num_edges, num_nodes, full = sizes.tensor[1:].tolist()  # the one read
    _check_not_full(full)
    return nodes.tensor[:num_nodes], _edge_index(edges, num_edges)[0]


class FusedNeighborSampler:
    """``NeighborSampler``'s minibatches, each hop three kernels and two scans on the GPU (module docstring).

    ``graph_memory``: ``"gpu"`` copies the CSR into GPU memory once; ``"host"`` keeps it in pinned
    host memory, read by the kernels over PCIe (UVA).  ``device``: the CUDA device (default: the
    current one); where the kernels run on the host (numba's simulator), everything stays on the CPU.
    ``max_load``: the largest fraction of a hash table's slots a hop may fill (tables are powers of two).
    ``kernels``: which set of kernels samples (``KERNELS``, module docstring).
    """

    def __init__(self, graph: CSRGraph, fanouts, graph_memory: str = "gpu", device=None, max_load: float = 0.5,
                 kernels=DEFAULT_KERNELS):
        fanouts = check_fanouts(fanouts)
        if graph_memory not in GRAPH_MEMORY:
            raise ValueError(f"graph_memory must be one of {GRAPH_MEMORY}, got {graph_memory!r}")
        _capacity(1, max_load)
        self.launches = kernel_launches(kernels)  # what launches the kernels (NumbaLaunches' interface)
        self.kernels = self.launches.name
        self.fanouts = fanouts
        self.graph_memory = graph_memory
        self.max_load = max_load
        self.num_nodes = graph.num_nodes
        if self.launches.on_host:
            self.device = torch.device("cpu")
            self.graph = graph
        else:
            self.device = torch.device("cuda" if device is None else device)
            if self.device.index is None:  # "cuda": the current device, named, so that made_current makes it current
                self.device = torch.device("cuda", torch.cuda.current_device())
            if graph_memory == "gpu":
                self.graph = CSRGraph(graph.indptr.to(self.device), graph.indices.to(self.device), validate=False)
            else:
                from tiering.features.zero_copy import mapped_graph

                self.graph = mapped_graph(graph, self.device)
        self._graph_arrays = self._kernel_arrays(self.graph.indptr, self.graph.indices)
        self._fresh_tables()

    def _kernel_arrays(self, *tensors: torch.Tensor) -> tuple:
        """``tensors`` as the kernels take them, made once for every launch that passes them (``_Buffer``)."""
        with made_current(self.device):
            return self.launches.arrays(tensors)

    def _fresh_tables(self) -> None:
        self._tables: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._table_arrays: list[tuple] = []  # the tables as the kernels take them (_kernel_arrays)
        self._current = 0  # the table the next hop inserts into
        self._left = torch.zeros(2, dtype=torch.int64, device=self.device)  # how many of each table's slots to clear
        # each hop's frontier size and edges, then the input nodes' count and the flag of a full table: the
        # minibatch's one read
        self._sizes = torch.zeros(2 * len(self.fanouts) + 2, dtype=torch.int64, device=self.device)
        self._size_arrays = self._kernel_arrays(self._sizes, self._left)
        self._work_bounds: list[int] = []  # the frontier bounds the work buffers below were made for
        self._work: list[_HopWork] = []  # each hop's
        self._slots: list[_Buffer] = []  # each table's slots of a hop's frontier and candidates, written by its hops
        nothing = torch.empty(0, dtype=torch.int64, device=self.device)
        self._stale = _Buffer(nothing, *self._kernel_arrays(nothing))  # the other table's last hop's slots, to clear by
        self._stale_bound = 0  # at most how many of them it filled
        # the CUDA stream the last minibatch launched on, or where the buffers above were made and zeroed
        self._stream = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None

    def with_fanouts(self, fanouts) -> FusedNeighborSampler:
        """A sampler of other ``fanouts`` over this one's graph where it already is (no second copy into GPU or
        pinned memory), with hash tables of its own."""
        other = copy.copy(self)
        other.fanouts = check_fanouts(fanouts)
        other._fresh_tables()
        return other

    def _held(self):
        """The tensors this sampler keeps between minibatches."""
        yield from (t for table in self._tables for t in table)
        yield from (self._left, self._sizes, self._stale.tensor, *(slots.tensor for slots in self._slots))
        for work in self._work:
            yield from work.tensors()

    def _follow_stream(self) -> None:
        """Order this minibatch's launches after the previous minibatch's when torch's current stream changed."""
        if self.device.type != "cuda":
            return
        current = torch.cuda.current_stream(self.device)
        if self._stream is not None and current != self._stream:
            current.wait_stream(self._stream)
            for tensor in self._held():
                tensor.record_stream(current)
        self._stream = current

    def _bounds(self, num_seeds: int) -> list[int]:
        """The most nodes each hop's frontier of a minibatch of ``num_seeds`` seeds may have, then its input nodes:
        ``min(num_nodes, F * (1 + fanout))`` after a frontier of F."""
        bounds = [num_seeds]
        for fanout in self.fanouts:
            bounds.append(min(self.num_nodes, bounds[-1] * (1 + fanout)))
        return bounds

    def _reserve(self, bounds: list[int]) -> None:
        """Tables large enough for every hop of a minibatch of frontiers within ``bounds`` (new, empty ones if not),
        and work buffers for them (made again where the bounds differ from the last minibatch's)."""
        capacity = _capacity(max(*bounds[1:], 1), self.max_load)
        if not self._tables or len(self._tables[0][0]) < capacity:
            self._tables = [_table(capacity, self.device), _table(capacity, self.device)]
            self._table_arrays = [self._kernel_arrays(*table) for table in self._tables]
            self._current = 0
            self._left.zero_()  # new tables: nothing to clear by the stale slots
            self._stale_bound = 0
        if bounds != self._work_bounds:
            self._work = [_HopWork(self.launches, bound, fanout, self.device)
                          for bound, fanout in zip(bounds, self.fanouts)]
            size = max(bound * (1 + fanout) for bound, fanout in zip(bounds, self.fanouts))
            self._slots = _buffers(self.launches, *(torch.empty(size, dtype=torch.int64, device=self.device)
                                                    for _ in range(2)))
            self._work_bounds = bounds

    def sample(self, seeds, generator: torch.Generator | None = None) -> MiniBatch:
        seeds = torch.as_tensor(seeds)
        check_nodes(self.graph, seeds, 1)
        check_distinct(seeds)  # where the seeds are: in host memory (the trainer's), no wait
        seeds = seeds.to(device=self.device, dtype=torch.int64, non_blocking=True)
        hop_seeds = [np.uint64(seed_from(generator)) for _ in self.fanouts]  # one per hop, as NeighborSampler draws
        if len(seeds) == 0:
            nothing = torch.empty((2, 0), dtype=torch.int64, device=self.device)
            return MiniBatch(seeds=seeds, input_nodes=seeds, blocks=[Block(nothing, 0, 0) for _ in self.fanouts])
        bounds = self._bounds(len(seeds))
        hops = []
        with made_current(self.device):
            self._follow_stream()
            self._reserve(bounds)
            stream = self.launches.stream(self.device)
            self._sizes[:1].fill_(len(seeds))
            nodes = _buffers(self.launches, seeds)[0]
            try:
                for hop, (fanout, seed) in enumerate(zip(self.fanouts, hop_seeds)):
                    nodes, edges = self._hop(stream, hop, nodes, fanout, seed, bounds[hop + 1])
                    hops.append(edges)
                sizes = self._sizes.tolist()  # the minibatch's one read
                _check_not_full(sizes.pop())
            except BaseException:
                # a hop cut short (out of memory, an interrupt, a full table) may have left its keys in a table that
                # no write cleared: the next minibatch starts from fresh tables, and with the flag cleared
                self._tables = []
                self._sizes[-1:].zero_()
                raise
        blocks = [Block(_edge_index(edges, sizes[2 * hop + 1]), sizes[2 * hop + 2], sizes[2 * hop])
                  for hop, edges in enumerate(hops)]
        return MiniBatch(seeds=seeds, input_nodes=nodes.tensor[: sizes[-1]], blocks=blocks[::-1])

    def _hop(self, stream, hop: int, frontier: _Buffer, fanout: int, seed: np.uint64, node_bound: int):
        """Hop ``hop`` from ``frontier`` (a buffer of its bound; its size in ``sizes``): the next frontier's and the
        edges' buffers (``_relabel``)."""
        work, slots, launches = self._work[hop], self._slots[self._current], self.launches
        keys, positions = self._table_arrays[self._current]
        sizes, left = self._size_arrays
        launches.launch("sample", _blocks(work.rows, launches.threads), stream, *self._graph_arrays, frontier.array,
                        fanout, seed, sizes, hop, keys, positions, work.counts.array, work.sampled.array, slots.array)
        other_keys, other_positions = self._table_arrays[1 - self._current]
        stale = (other_keys, other_positions, self._stale.array, left, self._current)
        nodes, edges = _relabel(launches, stream, work, frontier, slots.array, positions, sizes, hop, stale,
                                self._stale_bound, node_bound, self.device)
        self._current, self._stale, self._stale_bound = 1 - self._current, slots, work.rows * (1 + fanout)
        return nodes, edges
