"""Static placements replayed against a trace: the C rows first in some order stay in GPU memory for good.

Data Tiering §3 places rows by a score computed before training (degree,
reverse PageRank, weighted reverse PageRank: ``tiering.graph.scores``).  GNNLab's
PreSC (Yang et al., EuroSys 2022, §5) instead samples k epochs before
training and places rows by how often those epochs read them.  The *static
optimum* places them by how often the replayed epochs themselves read them:
no static placement of C rows serves more of those epochs, which is the
"ideal" curve of Figure 7 (``suite.experiments.reuse``).  Orders break ties by
the smaller id.

A static placement's hits at every capacity come from one sort: with rows in
the order, the hits of C rows are the first C of the cumulative counts.
"""

from __future__ import annotations

import numpy as np

from suite.policies.replay import Replay, check_capacity
from tiering.features.placement import order_ranks


def order_by(values: np.ndarray) -> np.ndarray:
    """Row ids by descending ``values``, ties to the smaller id."""
    return np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")


def replay_static(name: str, counts: np.ndarray, order: np.ndarray, capacities, row_cost: np.ndarray) -> list[Replay]:
    """The rows ``order[:C]`` cached, for every C in ``capacities``; ``counts`` is the trace's ``(E, N)`` reads per
    epoch (``AccessTrace.counts``)."""
    num_nodes = counts.shape[1]
    order, _ = order_ranks(order, num_nodes, f"the order of policy {name!r}")
    capacities = [check_capacity(c, num_nodes) for c in capacities]
    ordered = counts[:, order].astype(np.int64)
    hits = np.cumsum(ordered, axis=1)
    hit_bytes = np.cumsum(ordered * np.asarray(row_cost, dtype=np.int64)[order], axis=1)
    accesses = ordered.sum(axis=1)
    return [Replay(name, c, accesses, hits[:, c - 1], hit_bytes[:, -1] - hit_bytes[:, c - 1],
                   np.zeros(len(accesses), np.int64)) for c in capacities]
