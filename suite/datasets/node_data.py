"""Learnable node features and train/valid/test splits for synthetic graphs.

A synthetic graph comes with a class per node (its DC-SBM block or R-MAT
community).  Features are built so that a GNN has something to learn, and
something to gain from neighbours::

    x_v = signal * mu[y_v]  +  neighbor_signal * mean_{u in list(v)} mu[y_u]  +  eps_v

with ``mu[c]`` a random class centroid (standard normal entries) and
``eps_v`` standard normal noise.  ``signal`` is kept small, so one node's own
features are a weak predictor; averaging neighbours (what SAGEConv does)
raises the signal-to-noise ratio, and the neighbour term makes features
correlated with neighbours' labels even where homophily is weak (R-MAT).

Splits: a seeded permutation of the nodes; the first ``train_fraction`` of it
is the training set, and so on.  Nodes in no split have no label (-1 here,
NaN in the OGB file), as most of ogbn-papers100M does.
"""

from __future__ import annotations

import numba
import numpy as np

from tiering.rng import normal

NO_LABEL = -1


@numba.njit(parallel=True, cache=True)
def _features_kernel(indptr, indices, classes, centroids, signal, neighbor_signal, seed, first, noise_ids, out):
    """Rows ``first`` to ``first + len(out) - 1`` of the table into ``out``.

    Row v's noise is drawn with id ``noise_ids[v]``, or v where ``noise_ids``
    is None (numba compiles that case on its own, the branch pruned: as fast
    as a kernel without noise ids).
    """
    dim = out.shape[1]
    for i in numba.prange(out.shape[0]):
        v = first + i
        start, end = indptr[v], indptr[v + 1]
        row = np.zeros(dim, dtype=np.float64)
        for p in range(start, end):
            row += centroids[classes[indices[p]]]
        if end > start:
            row *= neighbor_signal / (end - start)
        row += signal * centroids[classes[v]]
        if noise_ids is None:
            noise_id = v
        else:
            noise_id = noise_ids[v]
        for k in range(dim):
            out[i, k] = row[k] + normal(seed, noise_id, k)


def class_centroids(num_classes: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((num_classes, dim))


def check_rows(first: int, count: int, num_nodes: int) -> None:
    if not 0 <= first <= first + count <= num_nodes:
        raise ValueError(f"rows {first} to {first + count - 1} are not rows of a table of {num_nodes}")


def checked_noise_ids(noise_ids, num_nodes: int):
    """``noise_ids`` as an int64 array of one id per node (None stays None)."""
    if noise_ids is None:
        return None
    noise_ids = np.asarray(noise_ids, dtype=np.int64)
    if noise_ids.shape != (num_nodes,):
        raise ValueError(f"noise_ids has shape {noise_ids.shape}; expected one id per node ({num_nodes},)")
    return noise_ids


def table_centroids(classes: np.ndarray, dim: int, seed: int) -> np.ndarray:
    """The class centroids a table drawn around ``classes`` uses: one per class up to the largest present."""
    return class_centroids(int(classes.max()) + 1, dim, seed)


def synthesize_features(graph, classes, dim: int, signal: float, neighbor_signal: float, seed: int, out=None,
                        first: int = 0, noise_ids=None, centroids=None):
    """Float32 features of shape (N, dim), or rows ``first`` to ``first + len(out) - 1`` of them into ``out``.

    Row v depends on v, its list and the seed only, so the table can be made
    a chunk of rows at a time (the dataset builder writes it so).

    ``noise_ids`` (N ids) draws row v's noise as node ``noise_ids[v]``'s.
    Renumbered (``tiering.graph.reorder.reorder_graph``), with ``classes`` in
    the new order and ``noise_ids = new_to_old``, this makes the renumbered
    table (row i = old row ``new_to_old[i]``) without the old one: equal to it
    within float32 rounding, since each neighbour mean adds the same terms in
    the renamed list's order.

    ``centroids`` are ``table_centroids(classes, dim, seed)``, given by a caller that makes a table a chunk at a
    time, so that each chunk does not read every node's class again to find how many there are.
    """
    if out is None:
        out = np.empty((graph.num_nodes - first, dim), dtype=np.float32)
    check_rows(first, len(out), graph.num_nodes)
    noise_ids = checked_noise_ids(noise_ids, graph.num_nodes)
    if centroids is None:
        centroids = table_centroids(classes, dim, seed)
    _features_kernel(
        graph.indptr.numpy(), graph.indices.numpy(), classes, centroids, signal, neighbor_signal, np.uint64(seed),
        first, noise_ids, out,
    )
    return out


def random_splits(num_nodes: int, fractions, seed: int) -> dict[str, np.ndarray]:
    """Disjoint sorted int64 id arrays ``train``, ``valid``, ``test`` of the given fractions."""
    perm = np.random.default_rng(seed).permutation(num_nodes)
    splits, start = {}, 0
    for name, fraction in zip(("train", "valid", "test"), fractions):
        size = int(round(num_nodes * fraction))
        splits[name] = np.sort(perm[start : start + size])
        start += size
    return splits


def visible_labels(classes: np.ndarray, splits: dict[str, np.ndarray]) -> np.ndarray:
    """``classes`` where a node is in a split, ``NO_LABEL`` elsewhere."""
    labels = np.full(len(classes), NO_LABEL, dtype=np.int64)
    for ids in splits.values():
        labels[ids] = classes[ids]
    return labels
