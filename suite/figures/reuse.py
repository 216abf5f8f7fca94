"""Measured data reuse: how well each scorer predicts which features sampling fetches (seeds/000 §5.2, §5.4).

What Figures 7 and 9 (``suite.figures.fig7``, ``fig9``) share.  The
sampler runs over the training seeds for one or more epochs, exactly as
training would (same minibatches for the same seed), without training.  For
every node we count the minibatches whose ``input_nodes`` contain it (each
node once per minibatch: that is one feature-row fetch).  Then, for each
scorer, nodes are ordered by score and we take the cumulative share of all
fetches covered by the top x% of them: the hit ratio a hot tier of x% of the
nodes would have.  The *ideal* curve orders nodes by the measured counts
themselves, the best any static placement could do.

Batch size.  A synthetic preset is smaller than the graph it imitates
(papers-s has 1/106 of ogbn-papers100M's nodes), so a minibatch of 1024
seeds would fetch a far larger share of it (27% of papers-s per minibatch
at fanouts 12,12,12, against ~0.7% of papers100M), every node would be
fetched by most minibatches, and the counts would flatten.  The batch is
therefore the one of the paper's regime (``suite.datasets.regime``: its
footprint on the preset matches the paper's batch on the imitated graph),
as in the sweeps; ``--regime unscaled`` takes 1024 seeds as they are and
``--batch-size`` sets it by hand.  The share actually fetched per minibatch,
and per epoch, is printed with every table.

Each figure writes ``figK.md`` / ``.csv`` (its table), ``figK-curves.csv``
(every curve, with the provenance of the measurement) and ``figK.png``;
``replot`` draws the PNG again from the curves.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from suite.datasets import load_dataset
from suite.datasets import regime as regimes
from suite.datasets.dataset import Dataset
from suite.datasets.reordered import score_nodes
from suite.datasets.stats import cumulative_share
from suite.errors import BadValue
from suite.io import atomic
from suite.io.plotting import save_figure, write_table_and_figure
from suite.io.provenance import caption, provenance
from suite.registry import SCORERS, scorer_params
from tiering.sampling.neighbors import NeighborSampler, minibatches

GRID = np.linspace(0.0, 1.0, 201)
"""The fractions of the nodes every curve is given at: 0 to 100% in steps of 0.5%."""
IDEAL = "ideal (measured counts)"
PROVENANCE_COLUMNS = ("device", "git_revision", "time")


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
    return cumulative_share(counts, GRID, order=np.argsort(-scores, kind="stable"))


def scores_by_label(dataset, scorers) -> dict[str, np.ndarray]:
    """The scores of ``dataset``'s nodes by each of ``scorers`` (names), under the scorer's label."""
    return {SCORERS[s].label: score_nodes(dataset, s, scorer_params(s)).numpy() for s in scorers}


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
    """Each curve's share of accesses at the top ``percent``% of nodes, by scorer label."""
    rows = curves[np.isclose(curves["top nodes (%)"], percent)]
    return rows.set_index("scorer")["share of accesses (%)"]


@dataclasses.dataclass(frozen=True)
class ReuseRun:
    """One measurement of Figure ``figure`` on dataset ``name``: how it samples, and where and how it writes.

    ``fanouts`` are the fanouts asked for (``None``: the figure's own);
    ``regime`` is the regime ``batch_size`` is in (``suite.datasets.regime``).
    """

    name: str
    figure: int
    dataset: Dataset
    out_dir: Path
    fanouts: tuple[int, ...] | None
    batch_size: int
    regime: str
    epochs: int
    seed: int
    progress: bool
    record: dict

    @property
    def train(self) -> torch.Tensor:
        return self.dataset.splits["train"]

    @property
    def batches(self) -> int:
        """How many minibatches the measurement samples, over all its epochs."""
        return self.epochs * -(-len(self.train) // self.batch_size)

    def counts(self, fanouts) -> np.ndarray:
        """``access_counts`` of the run's training seeds at ``fanouts``."""
        return access_counts(self.dataset.graph, self.train, fanouts, batch_size=self.batch_size, epochs=self.epochs,
                             seed=self.seed, progress=self.progress)

    def intro(self, counts_by_fanouts: dict) -> str:
        """The table's opening: the command, the provenance, and what was sampled at each of the fanouts counted."""
        chosen = {"fixed": f" --batch-size {self.batch_size}", "unscaled": " --regime unscaled"}.get(self.regime, "")
        command = (f"`tierbench profile --dataset {self.name} --figure {self.figure} --epochs {self.epochs}{chosen} "
                   f"--out {self.out_dir}`")
        fetched = ", ".join(
            f"{100 * regimes.footprint_share(counts.sum(), self.batches, self.dataset.num_nodes):.3g}% per minibatch "
            f"and {100 * (counts > 0).mean():.3g}% over the {'epoch' if self.epochs == 1 else 'epochs'} at {fo}"
            for fo, counts in counts_by_fanouts.items()
        )
        return (
            f"Made by {command}; {caption(self.record)}.\n{self.name}: {self.dataset.num_nodes:,} nodes, "
            f"{len(self.train):,} training seeds; {regimes.describe(self.name, self.batch_size, self.regime)}; "
            f"{self.batches} minibatches over {self.epochs} epoch(s). Shares are of measured feature fetches (each node "
            f"once per minibatch). Footprint: the minibatches fetched on average {fetched} of the nodes.\n\n"
        )

    def write(self, title: str, counted: dict, paper: str, table: pd.DataFrame, curves: pd.DataFrame,
              plot) -> list[Path]:
        """Write ``figK.md`` (``title``, ``intro(counted)``, the ``paper`` sentence and ``table``), ``figK.csv``,
        ``figK-curves.csv`` and ``figK.png`` (drawn by ``plot(curves, name)``)."""
        curves_path = self.out_dir / f"fig{self.figure}-curves.csv"
        atomic.write_csv(curves_path, curves.assign(**{k: self.record[k] for k in PROVENANCE_COLUMNS}), index=False)
        header = f"# {title}, {self.name}\n\n{self.intro(counted)}{paper}\n\n"
        markdown = header + table.to_markdown(floatfmt=".1f") + "\n"
        md, csv, png = write_table_and_figure(self.out_dir, f"fig{self.figure}", markdown, table,
                                              plot(curves, self.name), self.record)
        return [md, csv, curves_path, png]


def open_run(name: str, figure: int, out_dir, *, fanouts=None, epochs: int = 1, batch_size: int | None = None,
             regime: str = "paper", seed: int = 0, ogb_root=None, progress: bool = True) -> ReuseRun:
    """Load dataset ``name`` and settle how Figure ``figure`` samples it (nothing is sampled yet)."""
    batch, regime = regimes.resolve(name, regime, batch_size)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    return ReuseRun(name, figure, dataset, Path(out_dir), tuple(fanouts) if fanouts else None, batch, regime, epochs,
                    seed, progress, provenance(device="cpu"))


def replot(out_dir, figure: int, name: str, plot) -> Path:
    """Draw Figure ``figure`` again with ``plot(curves, name)`` from its curves CSV, with the provenance of the
    measurement."""
    path = Path(out_dir) / f"fig{figure}-curves.csv"
    if not path.exists():
        raise BadValue(f"{path} does not exist: run `tierbench profile --dataset {name} --figure {figure}` first")
    curves = pd.read_csv(path)
    record = {k: str(curves[k].iloc[0]) for k in PROVENANCE_COLUMNS}
    target = Path(out_dir) / f"fig{figure}.png"
    save_figure(plot(curves.drop(columns=list(PROVENANCE_COLUMNS)), name), target, record)
    return target
