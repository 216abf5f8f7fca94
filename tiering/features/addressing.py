"""Which bytes of a row the gather kernel's warp reads, step by step: the one definition of the kernel variants.

A warp copies one row (``tiering.features.zero_copy``).  It moves the row in
*units* of 16, 4 or 2 bytes, the widest that the row's source and destination
addresses, the row size and the variant allow (``copy_unit``; fp16 rows of
odd D move in 2-byte units), and in *steps* of ``WARP`` units, one per lane
(``step_bytes``: 64, 128 or 512 bytes).  Lane k of step s copies unit
``WARP s - shift + k`` where it falls in the row; ``shift`` is what tells the
variants (PyTorch-Direct §3.2.1, Fig. 8) apart:

* ``naive``: shift 0, so each step starts where the previous one ended, from
  the row's first byte, and straddles two 128-byte lines whenever the row is
  misaligned (units of at most 4 bytes: PyTorch-Direct's naive zero-copy);
* ``aligned``: the circular shift, the units from the 128-byte line at or
  before the row's first byte to that byte (from the 64-byte half line for
  2-byte units, whose steps span 64 bytes), so the warp starts on that line,
  lanes before the row idle, and each step reads within one line (units of at
  most 4 bytes);
* ``wide``: the circular shift with 16-byte vector loads where the row's
  start and size are multiples of 16 bytes, ``UNROLL`` steps (loads) in
  flight per lane before the stores; its steps of 512 bytes start on a
  128-byte line, so it touches what ``aligned`` touches; other rows are
  copied exactly as ``aligned`` copies them.

``warp_steps`` spells a row's copy out lane by lane; it is the reference the
kernel source (``zero_copy.cu``, which re-states this in C++, checked lane by
lane against it by the tests) and the traffic model (``tiering.features.traffic``,
which counts the 32-byte sectors and 128-byte lines the steps touch, in closed
form, from ``copy_unit``, ``step_bytes`` and ``shift_window``) are held to.
"""

from __future__ import annotations

from typing import NamedTuple

VARIANTS = ("naive", "aligned", "wide")
WARP = 32  # lanes of a warp: a step copies WARP units
SECTOR = 32  # bytes the GPU fetches host memory in (PyTorch-Direct §3.2.1, Fig. 4)
LINE = 128  # bytes of a cache line: one PCIe request covers at most one
UNROLL = 4  # the wide variant's loads in flight per lane


class Access(NamedTuple):
    """One lane's load and store in a warp step: ``width`` bytes from address ``src`` to address ``dst``."""

    lane: int
    src: int
    dst: int
    width: int


def check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown gather kernel variant {variant!r}; choose one of {', '.join(VARIANTS)}")


def copy_unit(variant: str, src: int, row_bytes: int, dst: int = 0) -> int:
    """The unit in bytes a row of ``row_bytes`` bytes at address ``src`` is copied with, to address ``dst``.

    16 for ``wide`` where both addresses and the row size are multiples of
    16, else 4 where they are multiples of 4, else 2.  ``dst`` defaults to a
    16-byte aligned output row, as a fresh allocation's rows are.
    """
    bits = src | dst | row_bytes
    if variant == "wide" and bits % 16 == 0:
        return 16
    return 4 if bits % 4 == 0 else 2


def step_bytes(unit: int) -> int:
    """The bytes a warp step spans: one unit per lane."""
    return WARP * unit


def shift_window(unit: int) -> int:
    """The bytes the circular shift aligns a warp's steps to: the 128-byte line, or the step where it is shorter."""
    return min(LINE, step_bytes(unit))


def circular_shift(variant: str, src: int, unit: int) -> int:
    """The units lane 0 of the first step lies before the row at ``src``: 0 for ``naive``, else back to the
    ``shift_window`` at or before ``src``, where the first step starts."""
    if variant == "naive":
        return 0
    return src % shift_window(unit) // unit


def warp_steps(variant: str, src: int, dst: int, row_bytes: int) -> list[list[Access]]:
    """The copy of one row, step by step: each step's accesses, one per lane with a unit inside the row.

    16-byte units are copied in iterations of ``UNROLL`` steps, whose loads
    are all issued before the stores; an iteration's steps past the row's end
    are listed empty (their lanes idle).
    """
    check_variant(variant)
    unit = copy_unit(variant, src, row_bytes, dst)
    units = row_bytes // unit
    per_iteration = UNROLL if unit == 16 else 1
    steps = []
    for base in range(-circular_shift(variant, src, unit), units, WARP * per_iteration):
        for u in range(per_iteration):
            lanes = ((lane, base + WARP * u + lane) for lane in range(WARP))
            steps.append([Access(lane, src + j * unit, dst + j * unit, unit) for lane, j in lanes if 0 <= j < units])
    return steps
