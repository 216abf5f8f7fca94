"""The swaps of BETA, Hilbert and row-major edge-bucket orderings against the lower bound (Marius §4).

Marius orders the p x p edge buckets so that a buffer of c
partitions reads as few partitions from disk as it can, and shows that its
BETA ordering needs far fewer swaps than a Hilbert-curve ordering, which
knows nothing of the buffer, and stays close to the lower bound.  This
counts them (``baselines.marius.bucket_order``) for p = 8, 16 and 32 at every buffer
size c from 2 to p - 1, with the bound beside them.  The curve orderings are
given their best buffer (Belady's eviction), so their counts are the fewest
any buffer could make for them.  Records: ``bucket-orders.csv`` and its sidecar
(``suite.io.records``); ``suite.figures.bucket_orders`` draws them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from baselines.marius.bucket_order import ORDERS, bucket_order, swap_lower_bound
from suite.io import records
from suite.io.provenance import provenance

PARTITIONS = (8, 16, 32)
STEM = "bucket-orders"


def swap_table(partitions=PARTITIONS) -> pd.DataFrame:
    """One row per (p, c): the swaps of every ordering, the bound, and BETA's swaps over the bound and Hilbert's over
    BETA's."""
    rows = []
    for p in partitions:
        for c in range(2, p):
            row = {"p": p, "c": c, **{name: bucket_order(name, p, c).swaps for name in ORDERS},
                   "bound": swap_lower_bound(p, c)}
            rows.append(row)
    table = pd.DataFrame(rows)
    table["BETA / bound"] = table["beta"] / table["bound"]
    table["Hilbert / BETA"] = table["hilbert"] / table["beta"]
    return table


def measure(records_dir) -> Path:
    """Count the swaps and write them into ``records_dir``; the records' path."""
    command = f"tierbench bucket-orders --out {records_dir}"
    return records.write_records(Path(records_dir) / f"{STEM}.csv", swap_table(), provenance(device="cpu"),
                                 {"command": command}, index=False)


def read_records(path) -> records.Records:
    """The swap counts in ``path`` (the records' folder or CSV)."""
    path = Path(path)
    return records.read_records(path / f"{STEM}.csv" if path.is_dir() else path, ("command",))
