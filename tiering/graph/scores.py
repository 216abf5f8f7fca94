"""Node scorers that predict how often neighbour sampling will fetch a node (Data Tiering §3.1).

Every scorer takes a ``CSRGraph`` whose list ``indices[indptr[v]:indptr[v+1]]``
holds the nodes sampling may pick for ``v``, and returns a float64 tensor of
N scores; higher means hotter.

* ``degree``: how many lists a node appears in.  Each appearance is one more
  chance to be picked, so over an epoch the expected fetch count grows with it.
* ``reverse_pagerank``: PageRank on the transposed graph (Bar-Yossef and
  Mashiach, CIKM 2008).  The random walk moves the way sampling does, from
  ``v`` to a uniformly chosen entry of ``list(v)``, so score flows from every
  node to the nodes it may sample, divided by the length of its list: being
  in a short list of a hot node is worth more than in a long one.  It sees
  several hops where ``degree`` sees one.  Update, iterated from the uniform
  vector until the L1 change is below ``tol``::

      x'[u] = (1 - d)/N + d * ( sum_{v : u in list(v)} x[v] / |list(v)|
                                + (1/N) * sum_{v : list(v) empty} x[v] )

  Damping ``d = 0.85`` (Brin and Page's value, used by Data Tiering).  Dangling
  nodes (empty list: nothing to sample from them) hand their score to all
  nodes uniformly, so the total stays 1.  Duplicate entries count as often as
  they appear (sampling draws entries, not distinct neighbours); self-loops
  are ordinary entries.
* ``weighted_reverse_pagerank``: Data Tiering Algorithm 1.  The same update, but
  the start vector is 1/N multiplied by ``weight = N / |labeled|`` for
  labelled (training) nodes, where every minibatch starts, and exactly
  ``iterations`` (5) updates are run, so the scores keep the imprint of the
  start vector instead of converging to plain reverse PageRank.  No
  renormalisation: the scores do not sum to 1.

The update is a pull over the transposed lists (``graph.transpose()``, built
once), parallel over nodes with numba; no Python loop touches nodes or edges.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping

import numba
import numpy as np
import torch

from tiering.graph.csr import CSRGraph


def degree(graph: CSRGraph) -> torch.Tensor:
    """How many neighbour lists each node appears in, as float64."""
    return graph.appearances().to(torch.float64)


@numba.njit(parallel=True, cache=True)
def _pull(t_indptr, t_indices, share, base, out):
    """out[u] = base + sum of share[v] over the v whose list holds u; returns the L1 change vs ``out``'s input."""
    change = 0.0
    for u in numba.prange(len(t_indptr) - 1):
        acc = 0.0
        for p in range(t_indptr[u], t_indptr[u + 1]):
            acc += share[t_indices[p]]
        new = base + acc
        change += abs(new - out[u])
        out[u] = new
    return change


class _ReverseWalk:
    """The pieces of the reverse-PageRank update that do not change between iterations."""

    def __init__(self, graph: CSRGraph, damping: float):
        if not 0.0 <= damping < 1.0:
            raise ValueError(f"damping must be in [0, 1), got {damping}")
        if graph.num_nodes == 0:
            raise ValueError("cannot score an empty graph")
        self.n = graph.num_nodes
        self.damping = damping
        transposed = graph.transpose()
        self.t_indptr = transposed.indptr.numpy()
        self.t_indices = transposed.indices.numpy()
        lengths = graph.degrees().numpy()
        self.dangling = lengths == 0
        self.scale = np.where(self.dangling, 0.0, damping / np.maximum(lengths, 1))

    def step(self, x: np.ndarray, out: np.ndarray) -> float:
        """One update from ``x`` into ``out`` (which must hold the previous ``x``); the L1 change."""
        base = (1.0 - self.damping) / self.n + self.damping * x[self.dangling].sum() / self.n
        return _pull(self.t_indptr, self.t_indices, x * self.scale, base, out)


def _iterate(walk: _ReverseWalk, x: np.ndarray, iterations: int, tol: float | None):
    """Up to ``iterations`` updates from ``x``; stops early once the L1 change is below ``tol``.

    Returns the scores, the number of updates run and the last L1 change.
    """
    done, change = 0, float("nan")
    while done < iterations and not (tol is not None and change < tol):
        out = x.copy()
        change = walk.step(x, out)
        x = out
        done += 1
    return x, done, change


def reverse_pagerank(graph: CSRGraph, damping: float = 0.85, tol: float = 1e-10, max_iter: int = 1000) -> torch.Tensor:
    """PageRank on the transposed graph, to convergence (L1 change < ``tol``); see the module docstring.

    Warns (``RuntimeWarning``) when ``max_iter`` updates do not reach ``tol``.
    """
    walk = _ReverseWalk(graph, damping)
    x = np.full(walk.n, 1.0 / walk.n)
    x, done, change = _iterate(walk, x, max_iter, tol)
    if not change < tol:
        warnings.warn(
            f"reverse_pagerank stopped after {done} iterations with L1 change {change:.3g} >= tol {tol:.3g}",
            RuntimeWarning,
            stacklevel=2,
        )
    return torch.from_numpy(x)


def labeled_mask(labeled, num_nodes: int) -> np.ndarray:
    """A boolean mask from a mask or an id list, with clear errors for bad input."""
    labeled = labeled.numpy() if isinstance(labeled, torch.Tensor) else np.asarray(labeled)
    if labeled.dtype == np.bool_:
        if labeled.shape != (num_nodes,):
            raise ValueError(f"a labeled mask must have shape ({num_nodes},), got {labeled.shape}")
        mask = labeled.copy()
    else:
        if labeled.size and labeled.dtype.kind not in "iu":
            raise TypeError(f"labeled must be a boolean mask or integer node ids, got dtype {labeled.dtype}")
        ids = labeled.reshape(-1)
        bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
        if len(bad):
            raise ValueError(f"labeled[{bad[0]}] = {ids[bad[0]]} is not a node id in [0, {num_nodes})")
        mask = np.zeros(num_nodes, dtype=bool)
        mask[ids] = True
    if not mask.any():
        raise ValueError("labeled is empty: weighted reverse PageRank needs at least one labelled node")
    return mask


def weighted_reverse_pagerank(graph: CSRGraph, labeled, damping: float = 0.85, iterations: int = 5) -> torch.Tensor:
    """Data Tiering Algorithm 1: labelled nodes start with weight N/|labeled|, then ``iterations`` updates.

    ``labeled`` is a boolean mask of length N or a tensor of node ids (the
    training set); repeated ids count once.
    """
    if iterations < 0:
        raise ValueError(f"iterations must be non-negative, got {iterations}")
    mask = labeled_mask(labeled, graph.num_nodes)
    walk = _ReverseWalk(graph, damping)
    x = np.full(walk.n, 1.0 / walk.n)
    x[mask] *= walk.n / mask.sum()
    x, _, _ = _iterate(walk, x, iterations, tol=None)
    return torch.from_numpy(x)


@dataclasses.dataclass(frozen=True)
class ScorerSpec:
    """A scorer and what the rest of the suite needs to know about it.

    ``name`` is how the command line spells it, ``label`` how tables and
    figures name it; ``fn(graph, **params)`` (``fn(graph, labeled, **params)``
    when ``needs_labels``: the labelled, training node ids come second) returns
    the scores; ``defaults`` are its parameters, each with its default.
    """

    name: str
    label: str
    fn: Callable[..., torch.Tensor]
    defaults: Mapping[str, object] = dataclasses.field(default_factory=dict)
    needs_labels: bool = False

    def params(self, **overrides) -> dict:
        """The parameters: the defaults with ``overrides`` (``None`` values ignored) applied, each cast to its
        default's type; a parameter the scorer does not take raises ``ValueError``."""
        params = dict(self.defaults)
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in params:
                raise ValueError(f"scorer {self.name} has no parameter {key!r}; it takes {sorted(params) or 'none'}")
            params[key] = type(params[key])(value)
        return params

    def score(self, graph: CSRGraph, labeled=None, **params) -> torch.Tensor:
        """The scores of ``graph``'s nodes; ``labeled`` (the training ids) is passed on to a scorer that needs it."""
        if self.needs_labels:
            return self.fn(graph, labeled, **params)
        return self.fn(graph, **params)


SCORERS = {
    spec.name: spec
    for spec in (
        ScorerSpec("degree", "degree", degree),
        ScorerSpec("rpr", "reverse PageRank", reverse_pagerank, {"damping": 0.85, "tol": 1e-10, "max_iter": 1000}),
        ScorerSpec("wrpr", "weighted reverse PageRank", weighted_reverse_pagerank, {"damping": 0.85, "iterations": 5},
                   needs_labels=True),
    )
}
"""The scorers by the name the command line spells, in the order tables and figures list them."""


def get_scorer(name: str) -> ScorerSpec:
    """The scorer called ``name``; ``KeyError`` naming the choices for any other."""
    if name not in SCORERS:
        raise KeyError(f"unknown scorer {name!r}; choose one of {', '.join(SCORERS)}")
    return SCORERS[name]
