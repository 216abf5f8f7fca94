"""Which gather kernel variant a ``tiered`` loader launches on a GPU, chosen per tier from gpubench's records.

``tierbench gpubench`` times every variant (``tiering.features.addressing.VARIANTS``; PyTorch-Direct §3.2.1) on hot
rows (in GPU memory) and cold rows (zero-copy from host memory) of each size.  On the first H100 visit ``wide`` came
to 0.95-1.00 of the device-to-device copy for hot rows of 1 KiB and more where ``aligned`` reached 0.78-0.81, while
cold rows are read at PCIe speed whichever variant reads them.  The fastest variant of each tier is read from the
device's records at the measured row size nearest the table's (the largest not above it, else the smallest) among
the sizes measured in both tiers.

One kernel launch gathers both tiers (``CombinedTensor.launch_kernel``) and takes one variant, so the loader
launches the variant of the tier that dominates the gather's time: the tier with the larger expected time per
gathered row, its share of the table's rows over its measured speed (accesses taken as uniform over rows; a
reordered table's hot rows are accessed more than their share, which the choice leaves out).  Without records for
the device (a CPU, or a GPU gpubench has not run on), or with records that cannot be read, it is
``tiering.features.zero_copy.DEFAULT_VARIANT``, and the choice says why.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from suite.errors import BadValue
from suite.io.provenance import device_name, slug
from tiering.features.zero_copy import DEFAULT_VARIANT

GPUBENCH_ROOTS = ("out/gpu", "results/gpu")
"""Where ``gpu-suite`` puts a device's records (``<root>/<device slug>/``: gpubench's in ``microbench/``,
samplerbench's in ``sampler-bench/``), relative to the working directory as every output path of the commands is; the
first found is used."""


@dataclasses.dataclass(frozen=True)
class VariantChoice:
    """The variant launched, each tier's fastest, and why (the records' path, or that there are none)."""

    variant: str
    hot: str | None
    cold: str | None
    basis: str


def device_records(device: str, table: str, roots=GPUBENCH_ROOTS) -> Path | None:
    """The records ``table`` (``"microbench/microbench.csv"``) of ``device`` (``"cuda: NVIDIA H100 ..."``) under the
    first of ``roots`` that holds them, or ``None``."""
    for root in roots:
        path = Path(root) / slug(device) / table
        if path.is_file():
            return path
    return None


def gpubench_records(device: str, roots=GPUBENCH_ROOTS) -> Path | None:
    """The speed table gpubench wrote for ``device``, or ``None``."""
    return device_records(device, "microbench/microbench.csv", roots)


def measured_row_bytes(measured: list[int], row_bytes: int) -> int:
    """The measured row size the table's ``row_bytes`` is judged by: the largest not above it, else the smallest."""
    below = [size for size in measured if size <= row_bytes]
    return max(below) if below else min(measured)


def choose(table, row_bytes: int, dtype: str, hot_rows: int, num_rows: int, basis: str) -> VariantChoice:
    """The choice from gpubench's speed table (``suite.experiments.gpu.speed_table``) for a table of ``num_rows``
    rows of ``row_bytes`` bytes in ``dtype`` (``"float32"``), ``hot_rows`` of them in GPU memory."""
    from suite.experiments.gpu import fastest_variants

    fastest = fastest_variants(table)
    fastest = fastest[fastest["dtype"] == dtype]
    both = fastest.groupby("row bytes")["study"].nunique().loc[lambda studies: studies == 2].index
    if both.empty:
        return VariantChoice(DEFAULT_VARIANT, None, None, f"default: {basis} has no {dtype} rows measured in both "
                                                          "tiers")
    size = measured_row_bytes(sorted(both), row_bytes)
    cases = fastest[fastest["row bytes"] == size].set_index("study")
    hot, cold = cases.loc["hot", "fastest"], cases.loc["cold", "fastest"]
    hot_time = hot_rows / cases.loc["hot", "GB/s"]
    cold_time = (num_rows - hot_rows) / cases.loc["cold", "GB/s"]
    tier, variant = ("hot", hot) if hot_time > cold_time else ("cold", cold)
    return VariantChoice(variant, hot, cold, f"fastest at {size} B {dtype} rows in {basis}: hot tier {hot}, cold tier "
                                             f"{cold}; one launch takes the {tier} tier's, which dominates the time")


def kernel_variant(loader: str, features: torch.Tensor, hot_rows: int, device) -> VariantChoice | None:
    """The choice for ``loader`` over ``features`` on ``device``: ``None`` for loaders other than ``tiered``."""
    if loader != "tiered":
        return None
    name = device_name(device)
    path = gpubench_records(name) if torch.device(device).type == "cuda" else None
    if path is None:
        return VariantChoice(DEFAULT_VARIANT, None, None, f"default: no gpubench records for {name}")
    from suite.experiments.gpu import read_records

    try:
        table = read_records(path)[0].table
    except BadValue as err:  # records of another version, or a file cut short
        return VariantChoice(DEFAULT_VARIANT, None, None, f"default: {path} cannot be read ({err})")
    dtype = str(features.dtype).removeprefix("torch.")
    return choose(table, features.shape[1] * features.element_size(), dtype, hot_rows, features.shape[0], str(path))
