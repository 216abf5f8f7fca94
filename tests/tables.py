"""Feature tables for the loader tests: values 0, 1, 2, ... in any table dtype, starting at a chosen byte offset."""

import torch

LINE = 128


def table_at(rows: int, dim: int, dtype=torch.float32, offset: int = 0) -> torch.Tensor:
    """A contiguous (rows, dim) table whose row 0 starts ``offset`` bytes after a 128-byte line boundary.

    A view into a larger buffer, as ``torch.empty`` tables often are (their
    address modulo 128 is not always 0); random values, the same for a given
    shape and dtype.
    """
    element = torch.empty((), dtype=dtype).element_size()
    if offset % element:
        raise ValueError(f"offset {offset} is not a multiple of the {element}-byte elements")
    buffer = torch.empty(rows * dim * element + 2 * LINE, dtype=torch.uint8)
    start = -buffer.data_ptr() % LINE + offset
    out = buffer[start : start + rows * dim * element].view(dtype).view(rows, dim)
    out.copy_(torch.randn(rows, dim, generator=torch.Generator().manual_seed(rows * dim)))
    return out


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The bit pattern, so that equality is bit-exact whatever the float format."""
    return tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int32)
