"""Side-by-side statistics of prepared datasets: a table and a figure.

Made by ``tierbench datasets info NAME... --out DIR`` (``tox -e demo`` writes
those of tiny, tiny-rmat and products-s).

The figure has two panels per dataset: the complementary CDF of how many
neighbour lists a node appears in (log-log; a straight tail is a power law),
and the share of all list entries held by the top x% of nodes, which is the
best hit ratio a static hot tier of x% of the nodes could reach if sampling
took whole lists (the "ideal" curve of Data Tiering Fig. 7 in the limit of
full-neighbourhood sampling).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from suite.datasets.build import regenerate_hint
from suite.datasets.dataset import load_entry
from suite.datasets.stats import cumulative_share
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption, provenance

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


def _curves(name: str, appearances: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    positive = appearances[appearances > 0]
    ks = np.unique(np.round(np.geomspace(1, max(positive.max(initial=1), 1), 200)).astype(np.int64))
    ccdf = pd.DataFrame(
        {"dataset": name, "appearances k": ks, "P(appearances >= k)": [(positive >= k).mean() for k in ks]}
    )
    x = np.linspace(0, 1, 101)
    share = pd.DataFrame(
        {"dataset": name, "top nodes (%)": 100 * x, "share of list entries (%)": 100 * cumulative_share(appearances, x)}
    )
    return ccdf, share


def write_summary(manifests: dict[str, dict], out_dir, ogb_root=None) -> list[Path]:
    """Write ``summary.md``, ``summary.csv`` and ``degree-ccdf.png`` into ``out_dir``."""
    plt, sns = pyplot()
    out_dir = Path(out_dir)
    record = provenance(device="cpu")
    table = summarize(manifests)
    ccdfs, shares = [], []
    for name, m in manifests.items():
        dataset = load_entry(Path(m["path"]), regenerate_hint(name, ogb_root), verify=False, progress=False)
        ccdf, share = _curves(name, dataset.graph.appearances().numpy())
        ccdfs.append(ccdf)
        shares.append(share)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    sns.lineplot(data=pd.concat(ccdfs), x="appearances k", y="P(appearances >= k)", hue="dataset", ax=axes[0])
    axes[0].set(xscale="log", yscale="log", title="How many lists a node appears in (CCDF)")
    sns.lineplot(data=pd.concat(shares), x="top nodes (%)", y="share of list entries (%)", hue="dataset", ax=axes[1])
    axes[1].set(title="Share of list entries held by the top nodes")
    fig.tight_layout(rect=(0, 0.04, 1, 1))

    header = (
        "# Dataset summary\n\n"
        f"Made by `tierbench datasets info {' '.join(manifests)} --out {out_dir}`; {caption(record)}.\n"
        "Statistics are properties of the data, computed on the CPU.\n\n"
    )
    markdown = header + table.to_markdown(floatfmt=".3g") + "\n"
    return write_table_and_figure(out_dir, "summary", markdown, table.assign(**record), fig, record, figure_stem="degree-ccdf")
