"""``tierbench datasets info NAME... --out DIR``, measured: statistics of cached datasets, and their degree curves.

The statistics come from each entry's manifest (computed when it was built);
the curves from its graph: the complementary CDF of how many neighbour lists
a node appears in, and the share of all list entries held by the top x% of
nodes, which is the best hit ratio a static hot tier of x% of the nodes could
reach if sampling took whole lists (the "ideal" curve of Data Tiering Fig. 7
in the limit of full-neighbourhood sampling).  ``measure`` writes
``summary.csv`` (one row per dataset, with the provenance) and its sidecar
``summary.json`` (the command), and ``degree-curves.csv`` (both curves of
every dataset); ``read_records`` reads them back for ``suite.figures.datasets``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets.build import regenerate_hint
from suite.datasets.dataset import load_entry
from suite.datasets.stats import cumulative_share
from suite.io import atomic, records
from suite.io.provenance import provenance

SUMMARY, CURVES = "summary.csv", "degree-curves.csv"
_COLUMNS = {
    "num_nodes": "nodes",
    "num_edges": "list entries",
    "feature_dim": "D",
    "num_classes": "C",
}
_STATS = {
    "avg_degree": "avg degree",
    "max_appearances": "max appearances",
    "top1_share": "top-1% share",
    "top10_share": "top-10% share",
    "isolated_fraction": "isolated",
    "labeled_fraction": "labelled",
    "train_majority_share": "majority class (train)",
}


def summarize(manifests: dict[str, dict]) -> pd.DataFrame:
    """One row per dataset of its manifest's sizes and statistics, and what it is made from."""
    rows = {}
    for name, m in manifests.items():
        row = {label: m[key] for key, label in _COLUMNS.items()}
        row.update({label: m["stats"][key] for key, label in _STATS.items()})
        source = m["source"]
        row["source"] = source["preset"]["imitates"] if source["kind"] == "synthetic" else source["dir"]
        rows[name] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "dataset"
    return table


def degree_curves(name: str, appearances: np.ndarray) -> pd.DataFrame:
    """Both curves of one dataset in one long table: ``curve`` "ccdf" (x: appearances k, y: P(appearances >= k))
    and "share" (x: top nodes %, y: share of list entries %)."""
    positive = appearances[appearances > 0]
    ks = np.unique(np.round(np.geomspace(1, max(positive.max(initial=1), 1), 200)).astype(np.int64))
    x = np.linspace(0, 1, 101)
    return pd.concat([
        pd.DataFrame({"dataset": name, "curve": "ccdf", "x": ks, "y": [(positive >= k).mean() for k in ks]}),
        pd.DataFrame({"dataset": name, "curve": "share", "x": 100 * x, "y": 100 * cumulative_share(appearances, x)}),
    ])


def measure(manifests: dict[str, dict], out_dir, ogb_root=None) -> Path:
    """Write the records of ``manifests`` (name -> manifest with its entry's ``path``) into ``out_dir``; the
    folder."""
    out_dir = Path(out_dir)
    record = provenance(device="cpu")
    curves = []
    for name, m in manifests.items():
        dataset = load_entry(Path(m["path"]), regenerate_hint(name, ogb_root), verify=False, progress=False,
                             make_features=False)
        curves.append(degree_curves(name, dataset.graph.appearances().numpy()))
    command = f"tierbench datasets info {' '.join(manifests)} --out {out_dir}"
    records.write_records(out_dir / SUMMARY, summarize(manifests).assign(**record), record, {"command": command})
    atomic.write_csv(out_dir / CURVES, pd.concat(curves), index=False)
    return out_dir


@dataclasses.dataclass(frozen=True)
class DatasetRecords:
    """The summary's records (one row per dataset, with the provenance and the command) and the curves (``None``
    where they were not recorded)."""

    summary: records.Records
    curves: pd.DataFrame | None

    @property
    def statistics(self) -> pd.DataFrame:
        """The summary without its provenance columns."""
        table = self.summary.table
        return table.drop(columns=[c for c in records.PROVENANCE_COLUMNS if c in table])


def read_records(folder) -> DatasetRecords:
    summary = records.read_records(Path(folder) / SUMMARY, ("command",), measured_by="tierbench datasets info",
                                   index_col="dataset")
    curves = Path(folder) / CURVES
    return DatasetRecords(summary, pd.read_csv(curves) if curves.exists() else None)
