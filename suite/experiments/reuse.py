"""Measured data reuse: how well each scorer predicts which features sampling fetches (Data Tiering §5.2, §5.4).

What Figures 7 and 9 measure (``suite.figures.fig7``, ``fig9`` draw it).  The
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

Figure 7 counts at the dataset's training fanouts (``--fanout`` for others)
and orders the nodes by every registered scorer (``suite.registry.SCORERS``,
in its order); Figure 9 counts at depths 2 to 5, fanouts (10,) x depth, and
orders them by degree and by weighted reverse PageRank.

``measure`` writes the records of Figure K: ``figK-curves.csv`` (every
curve, with the provenance of the measurement) and ``figK-curves.json``
beside it (the command, the dataset, how it was sampled and the footprint
at each of the fanouts counted); ``read_records`` reads them back.
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
from suite.io import records
from suite.io.provenance import provenance
from suite.registry import SCORERS, scorer_params
from tiering.sampling.neighbors import NeighborSampler, minibatches

GRID = np.linspace(0.0, 1.0, 201)
"""The fractions of the nodes every curve is given at: 0 to 100% in steps of 0.5%."""
IDEAL = "ideal (measured counts)"
FACTS = ("command", "dataset", "figure", "num_nodes", "train_seeds", "batch_size", "regime", "epochs", "batches",
         "footprint")
"""What the sidecar of a reuse measurement holds besides the provenance."""
DEPTHS = [(10,) * depth for depth in range(2, 6)]
"""Figure 9's sampling depths: fanouts (10, 10) to (10, 10, 10, 10, 10)."""
DEPTH_SCORERS = ("degree", "wrpr")
"""The scorers Figure 9 compares across depths."""


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

    def facts(self, counts_by_fanouts: dict) -> dict:
        """What a table says of the measurement: the command, the dataset, how it was sampled, and the footprint
        at each of the fanouts counted (per minibatch and over the epochs, as shares of the nodes)."""
        chosen = {"fixed": f" --batch-size {self.batch_size}", "unscaled": " --regime unscaled"}.get(self.regime, "")
        command = (f"`tierbench profile --dataset {self.name} --figure {self.figure} --epochs {self.epochs}{chosen} "
                   f"--out {self.out_dir}`")
        footprint = [[str(fanouts), float(regimes.footprint_share(counts.sum(), self.batches, self.dataset.num_nodes)),
                      float((counts > 0).mean())] for fanouts, counts in counts_by_fanouts.items()]
        return dict(command=command, dataset=self.name, figure=self.figure, num_nodes=self.dataset.num_nodes,
                    train_seeds=len(self.train), batch_size=self.batch_size, regime=self.regime, epochs=self.epochs,
                    batches=self.batches, footprint=footprint)

    def write(self, counted: dict, curves: pd.DataFrame) -> Path:
        """Write ``figK-curves.csv`` (``curves`` with the provenance) and ``figK-curves.json`` (``facts(counted)``);
        the path of the curves."""
        provenance_columns = {k: self.record[k] for k in records.PROVENANCE_KEYS}
        return records.write_records(self.out_dir / f"fig{self.figure}-curves.csv", curves.assign(**provenance_columns),
                                     self.record, self.facts(counted), index=False)


def measure_scorers(run: ReuseRun) -> Path:
    """Figure 7: count the fetches of ``run`` at its fanouts (the dataset's training fanouts by default) and score
    every node by every registered scorer."""
    fanouts = run.fanouts or regimes.default_fanouts(run.name)
    counts = run.counts(fanouts)
    curves = coverage_table(counts, scores_by_label(run.dataset, SCORERS))
    curves["fanouts"] = str(fanouts)
    return run.write({fanouts: counts}, curves)


def measure_depths(run: ReuseRun) -> Path:
    """Figure 9: count the fetches of ``run`` at every depth of ``DEPTHS`` (its own fanouts are not used)."""
    frames, counted = [], {}
    scores = scores_by_label(run.dataset, DEPTH_SCORERS)
    for fanouts in DEPTHS:
        counts = run.counts(fanouts)
        counted[fanouts] = counts
        curve = coverage_table(counts, scores)
        curve["fanouts"] = str(fanouts)
        curve["depth"] = len(fanouts)
        frames.append(curve)
    return run.write(counted, pd.concat(frames, ignore_index=True))


MEASURES = {7: measure_scorers, 9: measure_depths}
"""What each figure of measured reuse counts, by its number."""


def measure(name: str, figure: int, out_dir, *, fanouts=None, epochs: int = 1, batch_size: int | None = None,
            regime: str = "paper", seed: int = 0, ogb_root=None, progress: bool = True) -> Path:
    """Measure the reuse Figure ``figure`` (7 or 9) shows on dataset ``name`` and write its records into
    ``out_dir``; the path of its curves."""
    if figure not in MEASURES:
        raise ValueError(f"figure must be {' or '.join(map(str, MEASURES))}, got {figure}")
    return MEASURES[figure](open_run(name, figure, out_dir, fanouts=fanouts, epochs=epochs, batch_size=batch_size,
                                     regime=regime, seed=seed, ogb_root=ogb_root, progress=progress))


@dataclasses.dataclass(frozen=True)
class ReuseRecords:
    """The records of one figure of measured reuse: its ``curves`` (without provenance) and the ``facts`` of its
    measurement (``ReuseRun.facts``, with the provenance)."""

    curves: pd.DataFrame
    facts: dict


def read_records(path) -> ReuseRecords:
    """The curves at ``path`` (``figK-curves.csv``) and the facts beside them (``figK-curves.json``, through
    ``suite.io.records``); ``BadValue`` naming what is missing."""
    stored = records.read_records(path, FACTS, measured_by="tierbench profile")
    return ReuseRecords(stored.table.drop(columns=list(records.PROVENANCE_KEYS)), {**stored.facts, **stored.provenance})


def open_run(name: str, figure: int, out_dir, *, fanouts=None, epochs: int = 1, batch_size: int | None = None,
             regime: str = "paper", seed: int = 0, ogb_root=None, progress: bool = True) -> ReuseRun:
    """Load dataset ``name`` and settle how Figure ``figure`` samples it (nothing is sampled yet)."""
    batch, regime = regimes.resolve(name, regime, batch_size)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    return ReuseRun(name, figure, dataset, Path(out_dir), tuple(fanouts) if fanouts else None, batch, regime, epochs,
                    seed, progress, provenance(device="cpu"))

