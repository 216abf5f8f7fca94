"""A synthetic feature table generated straight into page-aligned host memory (Data Tiering §4.1, PyTorch-Direct §3.1).

A paper-scale preset's table (ogbn-papers100M's size: 111M x 128 float32,
57 GB) is never written to disk: each process that trains makes it in
memory, where CUDA then pins it in place, so it is made into fresh memory
whose first row starts on a page boundary (``host_copy.page_aligned_empty``).
Rows are independent (``node_data.synthesize_features``), so the table is
filled ``host_copy.CHUNK_BYTES`` of float32 rows at a time, the rows of a
chunk in parallel, with a progress bar.  A float16 table is made a float32
chunk at a time and cast into place, so no full-size float32 copy exists.

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
from suite.datasets.node_data import synthesize_features


def generate_feature_table(graph, classes, dim: int, signal: float, neighbor_signal: float, seed: int, *,
                           dtype: torch.dtype = torch.float32, noise_ids=None,
                           progress: bool = False) -> torch.Tensor:
    """The (N, dim) ``synthesize_features`` table as a ``dtype`` tensor in fresh page-aligned memory.

    Row v is made from ``graph``'s list of v, ``classes`` (one per node, in
    ``graph``'s numbering) and noise drawn as node ``noise_ids[v]``'s (v's
    where ``noise_ids`` is None).  A float32 table is bit for bit the one
    ``synthesize_features`` makes in one call; any other float dtype is that
    table rounded to it.
    """
    if not dtype.is_floating_point:
        raise ValueError(f"a feature table holds floats, not {dtype}")
    classes = np.asarray(classes)
    n = graph.num_nodes
    table = page_aligned_empty((n, dim), dtype)
    rows = max(1, host_copy.CHUNK_BYTES // (4 * dim))
    staging = None if dtype == torch.float32 else np.empty((min(rows, n), dim), dtype=np.float32)
    row_bytes = dim * table.element_size()
    with tqdm(total=n * row_bytes, unit="B", unit_scale=True, unit_divisor=1024,
              desc="generating the feature table into memory", disable=not progress) as bar:
        for first in range(0, n, rows):
            stop = min(n, first + rows)
            out = table[first:stop].numpy() if staging is None else staging[: stop - first]
            synthesize_features(graph, classes, dim, signal, neighbor_signal, seed, out=out, first=first,
                                noise_ids=noise_ids)
            if staging is not None:
                table[first:stop].copy_(torch.from_numpy(out))
            bar.update((stop - first) * row_bytes)
    return table
