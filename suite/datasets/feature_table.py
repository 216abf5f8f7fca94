"""A synthetic feature table generated straight into page-aligned host memory (Data Tiering §4.1, PyTorch-Direct §3.1).

A paper-scale preset's table (ogbn-papers100M's size: 111M x 128 float32,
57 GB) is never written to disk: each process that trains makes it in
memory, where CUDA then pins it in place, so it is made into fresh memory
whose first row starts on a page boundary (``host_copy.page_aligned_empty``).
Rows are independent (``node_data.synthesize_features``), so the table is
filled ``host_copy.CHUNK_BYTES`` of float32 rows at a time, the rows of a
chunk in parallel, with a progress bar.  A float16 table is made a float32
chunk at a time and cast into place, so no full-size float32 copy exists.
On a GPU machine the rows can be made on the GPU instead
(``node_data_cuda``), a chunk at a time into one device buffer copied into
the table.

Made from the hotness-reordered graph (Data Tiering §3.2) with the classes in
the new order and ``noise_ids = new_to_old``, the table comes out already in
the new order: row i is old node ``new_to_old[i]``'s row.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from suite.datasets import host_copy
from suite.datasets.host_copy import page_aligned_empty
from suite.datasets.node_data import synthesize_features, table_centroids


def generate_feature_table(graph, classes, dim: int, signal: float, neighbor_signal: float, seed: int, *,
                           dtype: torch.dtype = torch.float32, noise_ids=None, device=None,
                           progress: bool = False) -> torch.Tensor:
    """The (N, dim) ``synthesize_features`` table as a ``dtype`` tensor in fresh page-aligned host memory.

    Row v is made from ``graph``'s list of v, ``classes`` (one per node, in
    ``graph``'s numbering) and noise drawn as node ``noise_ids[v]``'s (v's
    where ``noise_ids`` is None).  With ``device`` None the rows are made on
    the CPU (numba), and a float32 table is bit for bit the one
    ``synthesize_features`` makes in one call; any other float dtype is that
    table rounded to it.  With a CUDA ``device`` they are made there
    (``node_data_cuda``: the graph is copied to it) a chunk at a time, rounded
    to ``dtype`` there and copied into the table, equal to the CPU's within
    one float32 rounding step; the device memory this took (the graph's copy
    and one chunk) is handed back to the driver before the table is returned,
    since the loaders size their GPU tier by the device's free memory
    (``tiering.features.combined.check_fits``).
    """
    if not dtype.is_floating_point:
        raise ValueError(f"a feature table holds floats, not {dtype}")
    table = page_aligned_empty((graph.num_nodes, dim), dtype)
    _fill(table, graph, np.asarray(classes), dim, signal, neighbor_signal, seed, noise_ids, device, progress)
    if device is not None:
        torch.cuda.empty_cache()  # the caching allocator would keep what _fill freed, out of mem_get_info's free
    return table


def _fill(table: torch.Tensor, graph, classes: np.ndarray, dim: int, signal: float, neighbor_signal: float, seed: int,
          noise_ids, device, progress: bool) -> None:
    """Every row of ``table``, a chunk at a time, made on the CPU (``device`` None) or on the CUDA ``device``."""
    dtype, n = table.dtype, graph.num_nodes
    rows = max(1, host_copy.CHUNK_BYTES // (4 * dim))
    if device is None:
        staging = None if dtype == torch.float32 else torch.empty((min(rows, n), dim), dtype=torch.float32)
        centroids = table_centroids(classes, dim, seed)

        def fill(out, first):
            synthesize_features(graph, classes, dim, signal, neighbor_signal, seed, out=out.numpy(), first=first,
                                noise_ids=noise_ids, centroids=centroids)
    else:
        from suite.datasets.node_data_cuda import FeatureRows

        gpu_rows = FeatureRows(graph, classes, dim, signal, neighbor_signal, seed, device, noise_ids=noise_ids)
        staging = torch.empty((min(rows, n), dim), dtype=torch.float32, device=gpu_rows.device)
        fill = gpu_rows.fill
    row_bytes = dim * table.element_size()
    with tqdm(total=n * row_bytes, unit="B", unit_scale=True, unit_divisor=1024,
              desc="generating the feature table into memory", disable=not progress) as bar:
        for first in range(0, n, rows):
            stop = min(n, first + rows)
            if staging is None:
                fill(table[first:stop], first)
            else:
                chunk = staging[: stop - first]
                fill(chunk, first)
                table[first:stop].copy_(chunk.to(dtype))
            bar.update((stop - first) * row_bytes)
