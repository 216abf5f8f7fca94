"""Measured data reuse: how well each scorer predicts which features sampling fetches (seeds/000 §5.2, §5.4).

The sampler runs over the training seeds for one or more epochs, exactly as
training would (same minibatches for the same seed), without training.  For
every node we count the minibatches whose ``input_nodes`` contain it (each
node once per minibatch: that is one feature-row fetch).  Then, for each
scorer, nodes are ordered by score and we take the cumulative share of all
fetches covered by the top x% of them: the hit ratio a hot tier of x% of the
nodes would have.  The *ideal* curve orders nodes by the measured counts
themselves, the best any static placement could do.

Batch size.  A synthetic preset is smaller than the graph it imitates
(papers-s has 1/106 of ogbn-papers100M's nodes), so a minibatch of 1024
seeds would fetch a far larger share of it (28% of papers-s per minibatch
at fanouts 12,12,12, against ~0.1% of papers100M), every node would be
fetched by most minibatches, and the counts would flatten.  By default the
batch is therefore scaled, 1024 x N / N(imitated dataset), so that a
minibatch covers the same share of the graph as in the paper and an epoch
has as many minibatches; the share actually fetched per minibatch is printed
with every table.  ``--batch-size`` overrides it.

* **Figure 7** (``--figure 7``): degree, reverse PageRank and weighted reverse
  PageRank at the dataset's training fanouts; the paper reports that the top
  10% of nodes take at least 35% of accesses and the top 25% at least 56%, on
  every dataset it tried.
* **Figure 9** (``--figure 9``): depths (10,10) to (10,10,10,10,10) for degree
  and weighted reverse PageRank; the paper (ogbn-papers100M) reports the top
  10% by weighted reverse PageRank still taking 52% at depth 5, against 28%
  by degree.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from tiering.sampling import NeighborSampler

from . import atomic
from .datasets import load_dataset
from .datasets.presets import REAL_NUM_NODES
from .datasets.reordered import score_nodes, scorer_params
from .plotting import pyplot, save_figure, write_table_and_figure
from .provenance import caption, provenance
from .train import default_fanouts, minibatches

SCORER_LABELS = {"degree": "degree", "rpr": "reverse PageRank", "wrpr": "weighted reverse PageRank"}
FIG9_FANOUTS = [(10,) * depth for depth in range(2, 6)]
PAPER_FIG7 = {10: "≥ 35%", 25: "≥ 56%"}
PAPER_FIG9 = {"weighted reverse PageRank": "52%", "degree": "28%"}  # top 10% at depth 5, ogbn-papers100M
GRID = np.linspace(0.0, 1.0, 201)


def paper_equivalent_batch_size(dataset, batch_size: int = 1024) -> int:
    """``batch_size`` scaled by N / N(imitated OGB dataset); unchanged for real or unmatched datasets."""
    imitates = dataset.manifest["source"].get("preset", {}).get("imitates")
    real = REAL_NUM_NODES.get(imitates)
    return max(1, round(batch_size * dataset.num_nodes / real)) if real else batch_size


def access_counts(graph, train_ids, fanouts, *, batch_size=1024, epochs=1, seed=0, progress=True) -> np.ndarray:
    """How many minibatches need each node's features, over ``epochs`` epochs of training seeds."""
    sampler = NeighborSampler(graph, fanouts)
    counts = torch.zeros(graph.num_nodes, dtype=torch.int64)
    total = epochs * -(-len(train_ids) // batch_size)
    with tqdm(total=total, desc=f"sampling {fanouts}", unit="batch", disable=not progress, leave=False) as bar:
        for epoch in range(epochs):
            for batch in minibatches(sampler, train_ids, batch_size, seed, epoch, shuffle=True):
                counts[batch.input_nodes] += 1
                bar.update(1)
    return counts.numpy()


def coverage(counts: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Share of all accesses covered by the top x of nodes by ``scores`` (ties: smaller id first), x on GRID."""
    order = np.argsort(-scores, kind="stable")
    cumulative = np.concatenate([[0], np.cumsum(counts[order])]) / max(counts.sum(), 1)
    return cumulative[np.round(GRID * len(counts)).astype(np.int64)]


IDEAL = "ideal (measured counts)"


def scores_by_label(dataset, scorers) -> dict[str, np.ndarray]:
    return {SCORER_LABELS[s]: score_nodes(dataset, s, scorer_params(s)).numpy() for s in scorers}


def coverage_table(counts: np.ndarray, scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """Long table: one row per (curve, x) with the covered share, for each scored order and the ideal."""
    curves = {**scores, IDEAL: counts.astype(np.float64)}
    return pd.concat(
        [
            pd.DataFrame({"scorer": label, "top nodes (%)": 100 * GRID, "share of accesses (%)": 100 * coverage(counts, scores)})
            for label, scores in curves.items()
        ],
        ignore_index=True,
    )


def share_at(curves: pd.DataFrame, percent: float) -> pd.Series:
    rows = curves[np.isclose(curves["top nodes (%)"], percent)]
    return rows.set_index("scorer")["share of accesses (%)"]


def plot_figure7(curves: pd.DataFrame, name: str):
    plt, sns = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    sns.lineplot(data=curves, x="top nodes (%)", y="share of accesses (%)", hue="scorer", style="scorer", ax=ax)
    ax.set(title=f"Figure 7: access coverage by scorer, {name} {curves['fanouts'].iloc[0]}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def plot_figure9(curves: pd.DataFrame, name: str):
    _, sns = pyplot()
    grid = sns.relplot(
        data=curves[curves["scorer"] != IDEAL], x="top nodes (%)", y="share of accesses (%)",
        hue="fanouts", col="scorer", kind="line", height=4, aspect=1.1,
    )
    grid.figure.suptitle(f"Figure 9: access coverage vs sampling depth, {name}")
    grid.figure.subplots_adjust(top=0.85, bottom=0.18)
    return grid.figure


PLOTS = {7: plot_figure7, 9: plot_figure9}
PROVENANCE_COLUMNS = ("device", "git_revision", "time")


def _write(out_dir: Path, figure: int, name: str, table: pd.DataFrame, curves: pd.DataFrame, header: str, record) -> list[Path]:
    curves_path = out_dir / f"fig{figure}-curves.csv"
    atomic.write_csv(curves_path, curves.assign(**{k: record[k] for k in PROVENANCE_COLUMNS}), index=False)
    markdown = header + table.to_markdown(floatfmt=".1f") + "\n"
    md, csv, png = write_table_and_figure(out_dir, f"fig{figure}", markdown, table, PLOTS[figure](curves, name), record)
    return [md, csv, curves_path, png]


def replot(out_dir, figure: int, name: str) -> Path:
    """Draw Figure 7 or 9 again from its curves CSV, with the provenance of the measurement."""
    path = Path(out_dir) / f"fig{figure}-curves.csv"
    if not path.exists():
        raise ValueError(f"{path} does not exist: run `tierbench profile --dataset {name} --figure {figure}` first")
    curves = pd.read_csv(path)
    record = {k: str(curves[k].iloc[0]) for k in PROVENANCE_COLUMNS}
    target = Path(out_dir) / f"fig{figure}.png"
    save_figure(PLOTS[figure](curves.drop(columns=list(PROVENANCE_COLUMNS)), name), target, record)
    return target


def profile_figure(name: str, figure: int, out_dir, *, fanouts=None, epochs: int = 1, batch_size: int | None = None,
                   seed: int = 0, ogb_root=None, progress: bool = True) -> list[Path]:
    """Measure reuse on ``name`` and write Figure 7 or 9's table, curves and plot into ``out_dir``."""
    if figure not in (7, 9):
        raise ValueError(f"figure must be 7 or 9, got {figure}")
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    train = dataset.splits["train"]
    record = provenance(device="cpu")
    out_dir = Path(out_dir)
    chosen = f" --batch-size {batch_size}" if batch_size else ""
    batch_size = batch_size or paper_equivalent_batch_size(dataset)
    batches = epochs * -(-len(train) // batch_size)
    command = f"`tierbench profile --dataset {name} --figure {figure} --epochs {epochs}{chosen} --out {out_dir}`"

    def intro(counts_by_fanouts: dict) -> str:
        fetched = ", ".join(
            f"{100 * counts.sum() / batches / dataset.num_nodes:.2g}% at {fo}" for fo, counts in counts_by_fanouts.items()
        )
        return (
            f"Made by {command}; {caption(record)}.\n{name}: {dataset.num_nodes:,} nodes, {len(train):,} training "
            f"seeds, batch {batch_size} ({'set by hand' if chosen else 'scaled to the imitated dataset, see suite/profile.py'}), "
            f"{batches} minibatches over {epochs} epoch(s). Shares are of measured feature fetches (each node once per "
            f"minibatch); a minibatch fetched on average {fetched} of the nodes.\n\n"
        )
    if figure == 7:
        fanouts = tuple(fanouts or default_fanouts(name))
        counts = access_counts(dataset.graph, train, fanouts, batch_size=batch_size, epochs=epochs, seed=seed, progress=progress)
        curves = coverage_table(counts, scores_by_label(dataset, SCORER_LABELS))
        counted = {fanouts: counts}
        curves["fanouts"] = str(fanouts)
        table = pd.DataFrame({f"top {p}%": share_at(curves, p) for p in PAPER_FIG7})
        for p, paper in PAPER_FIG7.items():
            table[f"paper, top {p}%"] = paper
        header = f"# Figure 7: share of feature fetches covered by the top-scored nodes, {name}\n\n{intro(counted)}Fanouts {fanouts}. Paper (seeds/000 Fig. 7): at least 35% at top 10% and 56% at top 25% on every dataset.\n\n"
        return _write(out_dir, 7, name, table, curves, header, record)

    frames, counted = [], {}
    scores = scores_by_label(dataset, ("degree", "wrpr"))
    for depth_fanouts in FIG9_FANOUTS:
        counts = access_counts(dataset.graph, train, depth_fanouts, batch_size=batch_size, epochs=epochs, seed=seed, progress=progress)
        counted[depth_fanouts] = counts
        curve = coverage_table(counts, scores)
        curve["fanouts"] = str(depth_fanouts)
        curve["depth"] = len(depth_fanouts)
        frames.append(curve)
    curves = pd.concat(frames, ignore_index=True)
    at10 = curves[np.isclose(curves["top nodes (%)"], 10)]
    table = at10.pivot(index="depth", columns="scorer", values="share of accesses (%)")
    table.columns = [f"top 10%, {c}" for c in table.columns]
    table["paper, top 10% (wrpr / degree)"] = ""
    table.loc[5, "paper, top 10% (wrpr / degree)"] = f"{PAPER_FIG9['weighted reverse PageRank']} / {PAPER_FIG9['degree']}"
    header = f"# Figure 9: share of feature fetches covered by the top 10% of nodes vs sampling depth, {name}\n\n{intro(counted)}Fanouts (10,) x depth. Paper (seeds/000 Fig. 9, ogbn-papers100M): at depth 5 the top 10% by weighted reverse PageRank take 52% of accesses, by degree 28%.\n\n"
    return _write(out_dir, 9, name, table, curves, header, record)
