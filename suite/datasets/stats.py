"""Summary statistics of a dataset, recorded in its manifest and shown by ``tierbench datasets info``.

``top1_share`` is the measure Data Tiering §5.2 quotes for the skew of a graph:
the share of all neighbour-list entries that name one of the 1% of nodes
appearing in the most lists (32% for ogbn-papers100M, 46% for MAG240M).
``cumulative_share`` is that share as a curve over every fraction of the
nodes, in any order: the measured reuse of Data Tiering Fig. 7 and 9 (accesses
covered by the top-scored nodes) and the skew plots of ``tierbench datasets
info`` and ``tierbench scorers``.
"""

from __future__ import annotations

import numpy as np

from tiering.graph.csr import CSRGraph


def top_share(counts: np.ndarray, fraction: float) -> float:
    """Share of ``counts.sum()`` held by the ``fraction`` of entries with the largest counts."""
    total = counts.sum()
    k = max(1, int(len(counts) * fraction))
    return float(np.partition(counts, len(counts) - k)[-k:].sum() / total) if total else 0.0


def cumulative_share(weights: np.ndarray, grid, order: np.ndarray | None = None) -> np.ndarray:
    """Share of ``weights.sum()`` held by the first x of the entries, for each fraction x in ``grid``.

    The entries are taken in ``order`` (indices into ``weights``), by default
    largest weight first; the first x are the first ``round(x * len(weights))``
    of them.  All zeros where the weights sum to zero.
    """
    ordered = np.sort(weights)[::-1] if order is None else weights[order]
    total = ordered.sum()
    cumulative = np.concatenate([[0], np.cumsum(ordered)]) / (total if total else 1)
    return cumulative[np.round(np.asarray(grid) * len(weights)).astype(np.int64)]


def graph_stats(graph: CSRGraph, labels: np.ndarray, splits: dict) -> dict:
    appearances = graph.appearances().numpy()
    degrees = graph.degrees().numpy()
    train_labels = labels[np.asarray(splits["train"])]
    majority = np.bincount(train_labels).max() / len(train_labels) if len(train_labels) else float("nan")
    return {
        "avg_degree": graph.num_edges / max(graph.num_nodes, 1),
        "max_list_length": int(degrees.max(initial=0)),
        "max_appearances": int(appearances.max(initial=0)),
        "top1_share": top_share(appearances, 0.01),
        "top10_share": top_share(appearances, 0.10),
        "isolated_fraction": float(((degrees == 0) & (appearances == 0)).mean()),
        "labeled_fraction": float((labels >= 0).mean()),
        "train_majority_share": float(majority),
    }
