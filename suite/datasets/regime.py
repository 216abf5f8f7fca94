"""The paper's regime: how much of the graph one minibatch touches (Data Tiering §5.1, §5.2).

How well a hot tier of x% of the nodes serves a minibatch depends on the
minibatch's *footprint*: the unique nodes whose features it needs, as a
share of all nodes.  Data Tiering trains ogbn-papers100M (111M nodes) with
1024 seeds and fanouts (12, 12, 12); such a minibatch touches about 1% of
the graph.  The same batch touches about 28% of papers-s (1M nodes), where
every node is fetched by most minibatches and any placement looks alike.  A
synthetic preset reproduces the paper's regime only with a batch whose
footprint share matches the paper's on the graph it imitates.

The imitated graph is too big to build here, so its footprint comes from a
model of the generator (``footprint_model``): the degree-corrected block
model of ``suite.datasets.dcsbm`` drawn lazily, one neighbour list at a time.
A node's list has Poisson(E θ_row / Σθ_row) entries; each entry is in the
node's class with probability ``homophily``, otherwise in a class chosen in
proportion to its propensity mass, and inside the class it is a node drawn
in proportion to θ_col.  Lists are fixed per node (entry j of node v is the
same draw whenever v is sampled), and the sampler of
``tiering.sampling.neighbors.NeighborSampler`` runs on them unchanged: every node of
the minibatch so far is sampled again at each hop, ``min(length, fanout)``
distinct list positions.  It leaves out that the real lists hold no
duplicates; on the presets themselves the model's footprint is within a few
percent of the measured one (``tests/suite/datasets/test_regime.py``).

``batch_size(name, regime)`` is the one place every experiment, sweep and
profile takes its batch from:

* ``paper`` (the default): the batch whose modelled footprint share on the
  preset equals the modelled footprint share of the paper's batch on the
  imitated graph, at the paper's fanouts; one model on both sides, so its
  error largely cancels.  A real OGB dataset is its own imitated graph and
  keeps the paper's batch.
* ``unscaled``: the paper's batch as it is (1024), whatever the graph's
  size: a batch that keeps a GPU busy, at the cost of a footprint far larger
  than the paper's on a small graph.

What a minibatch actually touched is measured where it runs
(``measured_footprint``) and printed in every table beside the regime.

The imitated graph's share takes seconds to model (ogbn-papers100M: its 111M
nodes' masses and 8 minibatches of lists searched in them, ~9 s on 2 cores),
and every process that trains, plans or reports a papers preset needs it, so
each modelled share is kept in the dataset cache (``footprints/``, one JSON
file a setting, written through a temporary file and a rename), under the
digest of the model's source: a changed model computes its shares anew.  A
file that is not what was asked for is computed again and replaced; where the
cache cannot be written (a read-only cache), the share is computed and not
kept.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

import tiering.rng
from suite.datasets import dcsbm
from suite.datasets.cache import cache_root, writable
from suite.datasets.presets import PAPERS_100M_NODES, PRESETS, Preset
from suite.errors import BadValue
from suite.io import atomic
from tiering.rng import normal, uniform

REGIMES = ("paper", "unscaled")
"""``paper``: footprint-matched batch; ``unscaled``: the paper's batch as it is."""


@dataclasses.dataclass(frozen=True)
class ImitatedGraph:
    """An OGB graph a preset imitates, with the training setting the paper used on it."""

    name: str
    num_nodes: int
    batch_size: int
    fanouts: tuple[int, ...]


IMITATED = {
    g.name: g
    for g in (
        # Data Tiering §5.1: batch 1024, fanouts (12, 12, 12) on ogbn-papers100M (node count from OGB's dataset page)
        ImitatedGraph("ogbn-papers100M", PAPERS_100M_NODES, 1024, (12, 12, 12)),
        # PyG's ogbn-products example: batch 1024, fanouts (15, 10, 5)
        ImitatedGraph("ogbn-products", 2_449_029, 1024, (15, 10, 5)),
    )
}
"""The graphs presets imitate, by OGB name."""

PAPER_BATCH = 1024
"""The batch of Data Tiering's runs; also the unscaled batch of a graph that imitates none of ``IMITATED``."""

MODEL_BATCHES = 8
"""Minibatches the footprint model averages over."""
GUIDE_SPACING = 8
"""Nodes per bucket of the guide table the model searches θ_col's running sum through, on average (a table of N / 8
entries beside the sum's N)."""


def imitated_graph(name: str) -> ImitatedGraph | None:
    """The graph dataset ``name`` imitates (a real OGB dataset imitates itself), or None."""
    if name in PRESETS:
        return IMITATED.get(PRESETS[name].imitates)
    return IMITATED.get(name)


def default_fanouts(name: str) -> tuple[int, ...]:
    """The training fanouts of a dataset: the paper's on the graph it imitates, else (10, 10)."""
    imitated = imitated_graph(name)
    return imitated.fanouts if imitated else (10, 10)


# ------------------------------------------------------------------ the model
@numba.njit(parallel=True, cache=True)
def _pareto_cumsum(alpha, seed, stream, out):
    """Pareto(alpha) propensities (as ``dcsbm._pareto`` draws them), then their running sum in place."""
    for v in numba.prange(len(out)):
        out[v] = (1.0 - uniform(seed, stream, v)) ** (-1.0 / alpha)
    total = 0.0
    for v in range(len(out)):
        total += out[v]
        out[v] = total


@numba.njit(parallel=True, cache=True)
def _pareto_sum(alpha, seed, stream, n):
    total = 0.0
    for v in numba.prange(n):
        total += (1.0 - uniform(seed, stream, v)) ** (-1.0 / alpha)
    return total


@numba.njit(inline="always")
def _list_length(mean, seed, v):
    """Poisson(mean) from counter-based draws: inversion for small means, the normal approximation for large."""
    if mean > 64.0:
        return max(0, int(round(mean + np.sqrt(mean) * normal(seed, 4, v))))
    u = uniform(seed, 5, v)
    p = np.exp(-mean)
    k, cdf = 0, p
    while u > cdf and k < 1000:
        k += 1
        p *= mean / k
        cdf += p
    return k


@numba.njit(inline="always")
def _entry(cum_col, guide, scale, block_ptr, cum_block, home, homophily, seed, v, j):
    """Entry j of node v's list: a node of v's class (``home``) or of a class drawn by mass, drawn by θ_col (searched
    in the guide table's bucket of ``cum_col``: searchsorted's answer, found in a few reads)."""
    entry_seed = seed + np.uint64(1)
    r = home
    if uniform(entry_seed, v, 3 * j) >= homophily:
        x = uniform(entry_seed, v, 3 * j + 1) * cum_block[-1]
        r = min(np.searchsorted(cum_block, x, side="right"), len(cum_block) - 1)
    lo, hi = block_ptr[r], block_ptr[r + 1]
    base = cum_col[lo - 1] if lo > 0 else 0.0
    x = base + uniform(entry_seed, v, 3 * j + 2) * (cum_col[hi - 1] - base)
    first, last = dcsbm.guide_bucket(cum_col, guide, scale, x)
    return min(max(dcsbm.guided_search(cum_col, first, last, x), lo), hi - 1)


@numba.njit(parallel=True, cache=True)
def _sample_hop(nodes, fanout, hop_seed, cum_col, guide, scale, row_total, symmetric, alpha, entries, block_ptr,
                cum_block, homophily, seed, out, counts):
    for i in numba.prange(len(nodes)):
        v = nodes[i]
        if symmetric:
            theta = cum_col[v] - (cum_col[v - 1] if v > 0 else 0.0)
        else:
            theta = (1.0 - uniform(seed, 2, v)) ** (-1.0 / alpha)
        length = _list_length(entries * theta / row_total, seed, v)
        home = min(np.searchsorted(block_ptr, v, side="right") - 1, len(block_ptr) - 2)
        k = min(length, fanout)
        counts[i] = k
        for r in range(k):
            if length <= fanout:
                t = r
            else:
                j = length - fanout + r
                t = min(int(uniform(hop_seed, v, r) * (j + 1)), j)
                for q in range(r):
                    if out[i * fanout + q] == t:
                        t = j
                        break
            out[i * fanout + r] = t
        extra = length  # a repeated entry is redrawn past the list's end: real lists hold no duplicates
        for r in range(k):
            u = _entry(cum_col, guide, scale, block_ptr, cum_block, home, homophily, seed, v, out[i * fanout + r])
            for attempt in range(8):
                repeated = False
                for q in range(r):
                    if out[i * fanout + q] == u:
                        repeated = True
                        break
                if not repeated:
                    break
                u = _entry(cum_col, guide, scale, block_ptr, cum_block, home, homophily, seed, v, extra)
                extra += 1
            out[i * fanout + r] = u


@numba.njit(cache=True)
def _new_nodes(seen, candidates, counts, fanout):
    """The candidates (row i's first ``counts[i]`` of its ``fanout``) not marked in ``seen``, each once, marked now:
    a frontier grows by them, in no particular order (a node's draws depend on its id alone)."""
    new = np.empty(len(candidates), dtype=np.int64)
    found = 0
    for i in range(len(counts)):
        for r in range(counts[i]):
            u = candidates[i * fanout + r]
            if not seen[u]:
                seen[u] = True
                new[found] = u
                found += 1
    return new[:found]


class _Generator(NamedTuple):
    """What the footprint model reads of a preset: its generator's parameters, not its name, size or features, so
    that presets of one generator (papers-xs, papers-s and papers-100m) share each modelled share."""

    degree_exponent: float
    avg_degree: float
    symmetric: bool
    num_classes: int
    class_skew: float
    homophily: float
    seed: int


def _class_blocks(generator: _Generator, num_nodes: int) -> np.ndarray:
    """Class boundaries in a class-sorted numbering: each class as large as its expected share."""
    weights = np.arange(1, generator.num_classes + 1, dtype=np.float64) ** -generator.class_skew
    sizes = np.floor(num_nodes * weights / weights.sum()).astype(np.int64)
    sizes[0] += num_nodes - sizes.sum()
    return np.concatenate([[0], np.cumsum(sizes)])


def footprint_model(preset: Preset, num_nodes: int, batch_size: int, fanouts: tuple[int, ...],
                    batches: int = MODEL_BATCHES, seed: int = 0) -> float:
    """Mean footprint share (unique input nodes ÷ N) of ``batches`` minibatches of ``batch_size`` seeds at
    ``fanouts``, on ``preset``'s generator at ``num_nodes`` nodes, drawn lazily (the module docstring)."""
    if preset.generator != "dcsbm":
        raise ValueError(f"the footprint model follows the dcsbm generator; {preset.name} is {preset.generator}")
    generator = _Generator(preset.degree_exponent, preset.avg_degree, preset.symmetric, preset.num_classes,
                           preset.class_skew, preset.homophily, preset.seed)
    return _footprint(generator, num_nodes, batch_size, tuple(fanouts), batches, seed)


FOOTPRINTS = "footprints"
"""The dataset cache's folder of modelled footprint shares (the module docstring)."""


@functools.lru_cache(maxsize=256)  # a float each
def _footprint(generator: _Generator, num_nodes: int, batch_size: int, fanouts: tuple[int, ...], batches: int,
               seed: int) -> float:
    """The modelled share, read from the dataset cache where it was kept, else modelled and kept there."""
    setting = {"generator": generator._asdict(), "num_nodes": num_nodes, "batch_size": batch_size,
               "fanouts": list(fanouts), "batches": batches, "seed": seed, "model": _model_digest()}
    path = _kept_share_path(setting)
    share = _read_kept_share(path, setting)
    if share is None:
        share = _modelled_footprint(generator, num_nodes, batch_size, fanouts, batches, seed)
        if path is not None and writable(path.parent):
            atomic.write_json(path, {"setting": setting, "share": share})
    return share


@functools.lru_cache(maxsize=1)
def _model_digest() -> str:
    """The digest of the model's source: this module, the counter-based draws it makes (``tiering.rng``) and the
    guided search it finds nodes with (``suite.datasets.dcsbm``)."""
    digest = hashlib.sha256()
    for source in (__file__, tiering.rng.__file__, dcsbm.__file__):
        digest.update(Path(source).read_bytes())
    return digest.hexdigest()[:16]


def _kept_share_path(setting: dict) -> Path | None:
    """Where the share of ``setting`` is kept in the dataset cache; None where there is no cache root (no
    ``$TIERBENCH_DATA`` and no platformdirs to find the user's cache directory)."""
    try:
        root = cache_root()
    except BadValue:
        return None
    name = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:24]
    return root / FOOTPRINTS / f"{name}.json"


def _read_kept_share(path: Path | None, setting: dict) -> float | None:
    """The share kept in ``path`` if the file holds one of ``setting`` (a float in (0, 1]), else None."""
    if path is None or not path.is_file():
        return None
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("setting") != setting:
        return None
    share = kept.get("share")
    if isinstance(share, float) and math.isfinite(share) and 0.0 < share <= 1.0:
        return share
    return None


def _modelled_footprint(generator: _Generator, num_nodes: int, batch_size: int, fanouts: tuple[int, ...],
                        batches: int, seed: int) -> float:
    alpha = generator.degree_exponent - 1.0
    rng_seed = np.uint64(seed * 1_000_003 + generator.seed)
    cum_col = np.empty(num_nodes, dtype=np.float64)
    _pareto_cumsum(alpha, rng_seed, 1, cum_col)
    row_total = cum_col[-1] if generator.symmetric else _pareto_sum(alpha, rng_seed, 2, num_nodes)
    guide = dcsbm.guide_table(cum_col, max(1, num_nodes // GUIDE_SPACING))
    scale = (len(guide) - 1) / cum_col[-1]
    entries = num_nodes * generator.avg_degree
    block_ptr = _class_blocks(generator, num_nodes)
    cum_block = np.cumsum([cum_col[hi - 1] - (cum_col[lo - 1] if lo else 0.0)
                           for lo, hi in zip(block_ptr[:-1], block_ptr[1:])])
    draw = np.random.default_rng([seed, num_nodes, batch_size])
    seen = np.zeros(num_nodes, dtype=np.bool_)  # the nodes of the minibatch drawn so far
    shares = []
    for b in range(batches):
        nodes = np.sort(draw.choice(num_nodes, size=min(batch_size, num_nodes), replace=False))
        seen[nodes] = True
        for hop, fanout in enumerate(fanouts):
            out = np.empty(len(nodes) * fanout, dtype=np.int64)
            counts = np.empty(len(nodes), dtype=np.int64)
            hop_seed = np.uint64((seed * 7919 + b) * 31 + hop)
            _sample_hop(nodes, fanout, hop_seed, cum_col, guide, scale, row_total, generator.symmetric, alpha, entries,
                        block_ptr, cum_block, generator.homophily, rng_seed, out, counts)
            nodes = np.concatenate([nodes, _new_nodes(seen, out, counts, fanout)])
        seen[nodes] = False
        shares.append(len(nodes) / num_nodes)
    return float(np.mean(shares))


# ------------------------------------------------------------------ the batch
@functools.lru_cache(maxsize=32)
def _matched_batch(name: str) -> int:
    preset, imitated = PRESETS[name], imitated_graph(name)
    target = footprint_model(preset, imitated.num_nodes, imitated.batch_size, imitated.fanouts)
    low, high = 1, imitated.batch_size  # the model grows with the batch: bisect for the first batch reaching target
    while low < high:
        middle = (low + high) // 2
        if footprint_model(preset, preset.num_nodes, middle, imitated.fanouts) < target:
            low = middle + 1
        else:
            high = middle
    if low > 1:  # the nearer of the two batches around the target
        below = footprint_model(preset, preset.num_nodes, low - 1, imitated.fanouts)
        if target - below < footprint_model(preset, preset.num_nodes, low, imitated.fanouts) - target:
            low -= 1
    return low


def resolve(name: str, regime: str = "paper", batch_size: int | None = None) -> tuple[int, str]:
    """``(batch, regime)`` of dataset ``name``: the batch an experiment trains and samples it with, and the regime
    that batch is in.

    ``batch_size`` given: that batch, regime ``fixed``.  ``paper``: the
    footprint-matched batch of a preset imitating an OGB graph, the paper's
    batch on the OGB graph itself.  ``unscaled``, or a graph that imitates
    none of ``IMITATED``: the paper's batch as it is.
    """
    if regime not in REGIMES:
        raise BadValue(f"unknown regime {regime!r}; choose from {', '.join(REGIMES)}")
    if batch_size is not None:
        return batch_size, "fixed"
    imitated = imitated_graph(name)
    if imitated is None:
        return PAPER_BATCH, "unscaled"
    if regime == "unscaled" or name not in PRESETS:
        return imitated.batch_size, "unscaled" if name in PRESETS else "paper"
    if PRESETS[name].num_nodes == imitated.num_nodes:  # a preset at the graph's size: the paper's batch matches
        return imitated.batch_size, "paper"
    return _matched_batch(name), "paper"


def describe(name: str, batch: int, regime: str) -> str:
    """What the regime of a table's batch means, as a sentence."""
    imitated = imitated_graph(name)
    if regime == "fixed":
        return f"batch {batch} set by hand (--batch-size)"
    if imitated is None:
        return f"batch {batch}, unscaled: {name} imitates no graph the paper trained on"
    setting = f"batch {imitated.batch_size} at fanouts {','.join(map(str, imitated.fanouts))} on {imitated.name}"
    if regime == "unscaled":
        return (f"batch {batch}, unscaled: the paper's batch as it is, a much larger share of {name} than {setting} "
                "touches (time at a batch that keeps a GPU busy)")
    if name not in PRESETS:
        return f"the paper's regime: {setting}"
    share = footprint_model(PRESETS[name], imitated.num_nodes, imitated.batch_size, imitated.fanouts)
    return (f"the paper's regime: batch {batch}, whose footprint on {name} matches the modelled {100 * share:.2g}% "
            f"of {setting} (suite/datasets/regime.py)")


def footprint_share(rows_gathered, batches, num_nodes):
    """The measured footprint share: rows gathered per minibatch (unique input nodes) ÷ nodes."""
    return rows_gathered / batches / num_nodes
