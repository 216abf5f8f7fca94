"""A feature table read from its cache file into memory that CUDA can pin in place (Data Tiering §4.1, PyTorch-Direct §3.1).

Datasets open ``features.npy`` memory-mapped copy-on-write
(``suite.datasets.dataset``): a table larger than RAM opens at once and pages
in on demand.  ``cudaHostRegister`` cannot pin such a private file mapping in
place: to page-lock it writable, the kernel gives every page a private copy,
so the whole table is silently copied into anonymous memory, with no
progress shown and no word of it.  The zero-copy loaders on a GPU therefore take the table
through ``read_into_memory``: it is read once from the cache file, in chunks
and with a progress bar, into fresh memory whose first row starts on a page
boundary (so rows of a multiple of 128 bytes start on 128-byte lines), and
that memory is pinned in place: one copy, made here and visibly.
"""

from __future__ import annotations

import math

import torch
from tqdm.auto import tqdm

PAGE_BYTES = 4096
CHUNK_BYTES = 64 * 2**20  # per copy step: large enough to stream the file, small enough to update the bar often


def page_aligned_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised contiguous CPU tensor whose first element starts on a page boundary."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    buffer = torch.empty(nbytes + PAGE_BYTES, dtype=torch.uint8)
    start = -buffer.data_ptr() % PAGE_BYTES
    return buffer[start : start + nbytes].view(dtype).view(shape)  # the view keeps the buffer alive


def read_into_memory(table: torch.Tensor, progress: bool = True) -> torch.Tensor:
    """A contiguous copy of the CPU table ``table`` (N, D) in fresh page-aligned memory, ``CHUNK_BYTES`` at a time."""
    if table.device.type != "cpu" or table.dim() != 2:
        raise ValueError(f"expected a 2-D CPU feature table, got shape {tuple(table.shape)} on {table.device}")
    out = page_aligned_empty(tuple(table.shape), table.dtype)
    row_bytes = table.shape[1] * table.element_size()
    rows_per_chunk = max(1, CHUNK_BYTES // max(1, row_bytes))
    with tqdm(total=table.shape[0] * row_bytes, unit="B", unit_scale=True, unit_divisor=1024,
              desc="loading the host tier into memory", disable=not progress) as bar:
        for start in range(0, table.shape[0], rows_per_chunk):
            stop = min(table.shape[0], start + rows_per_chunk)
            out[start:stop].copy_(table[start:stop])
            bar.update((stop - start) * row_bytes)
    return out
