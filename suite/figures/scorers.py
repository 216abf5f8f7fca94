"""How concentrated each scorer's scores are, and how fast scoring and reordering run.

``tierbench scorers --dataset papers-s --out results/scorers`` writes:

* ``concentration.md`` / ``.csv`` / ``.png``: for every registered scorer
  (``suite.registry.SCORERS``, in its order), the share of total score held
  by the top 10% and 25% of nodes, with the paper's Figure 7 numbers
  (``suite.figures.fig7.PAPER``) beside them, and the time one scoring took
  (after an untimed warm-up on a tiny graph, so no time includes numba
  compilation).  The paper's are shares of *measured accesses*, a different
  quantity that ``tierbench profile`` measures; the column is there for
  orientation, not as a match.
* ``speed.md`` / ``.csv``: wall time and edges/s of ``reorder_graph`` against
  a SciPy row+column permutation of the same matrix, and of
  ``reverse_pagerank`` against a SciPy sparse power iteration, each pair
  timed in the same run; the paper's reorder figure (31 s for 3.2B edges on
  2x 20-core Xeon 6230, ~100M edges/s) beside ours.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.datasets import load_dataset
from suite.datasets.reordered import score_nodes
from suite.datasets.stats import cumulative_share, top_share
from suite.figures import fig7
from suite.io import atomic
from suite.io.plotting import pyplot, write_table_and_figure
from suite.io.provenance import caption, provenance
from suite.measure.peers import adjacency, scipy_permute, scipy_reverse_pagerank
from suite.measure.timing import best_wall_seconds
from suite.registry import SCORERS, scorer_params
from tiering.graph.csr import CSRGraph
from tiering.graph.reorder import order_by_score, reorder_graph

PAPER_REORDER = {"edges": 3.2e9, "seconds": 31.0, "machine": "2x Xeon 6230 (40 cores)"}
CURVE = np.linspace(0, 1, 201)
"""The fractions of the nodes the concentration curves are drawn at."""


def _warm_up(graph: CSRGraph) -> None:
    """Run every scorer once, untimed, on a two-node graph with ``graph``'s id type, so that no scoring time
    includes the one-off compilation of the numba kernels (the two reverse PageRanks share theirs)."""
    small = CSRGraph(torch.tensor([0, 1, 2]), torch.tensor([1, 0], dtype=graph.indices.dtype))
    for spec in SCORERS.values():
        spec.score(small, torch.tensor([0]), **spec.params())


def _score_all(dataset) -> dict:
    """``{scorer: (scores, seconds)}`` for every registered scorer, in registry order, each timed once."""
    _warm_up(dataset.graph)
    timed = {}
    for name in SCORERS:
        scores, seconds = best_wall_seconds(functools.partial(score_nodes, dataset, name, scorer_params(name)), repeat=1)
        timed[name] = (scores.numpy(), seconds)
    return timed


def _concentration(scored: dict):
    """The table (score mass at Figure 7's shares of nodes, scoring time) and the curves, one per scorer."""
    rows, curves = [], []
    for name, spec in SCORERS.items():
        scores, seconds = scored[name]
        rows.append(
            {
                "scorer": spec.label,
                **{f"score mass, top {p}%": top_share(scores, p / 100) for p in fig7.PAPER},
                **{f"paper Fig. 7, top {p}%": f"{paper} of accesses" for p, paper in fig7.PAPER.items()},
                "scoring time (s)": seconds,
            }
        )
        share = 100 * cumulative_share(scores, CURVE)
        curves.append(pd.DataFrame({"scorer": spec.label, "top nodes (%)": 100 * CURVE, "share of score mass (%)": share}))
    return pd.DataFrame(rows).set_index("scorer"), pd.concat(curves)


def _speed(dataset, scored: dict):
    graph = dataset.graph
    edges = graph.num_edges
    scores = scored["wrpr"][0]
    reorder_graph(graph, scores)  # numba compilation outside the timing
    _, ours = best_wall_seconds(lambda: reorder_graph(graph, scores), repeat=3)
    new_to_old, _ = order_by_score(scores)
    matrix = adjacency(graph)
    _, peer = best_wall_seconds(lambda: scipy_permute(matrix, new_to_old), repeat=3)
    paper_rate = PAPER_REORDER["edges"] / PAPER_REORDER["seconds"]
    rows = [("reorder_graph", "scipy A[p][:, p]", ours, peer, edges / ours, f"{paper_rate:.3g}")]
    (_, iterations), peer = best_wall_seconds(lambda: scipy_reverse_pagerank(graph, **scorer_params("rpr")), repeat=1)
    ours = scored["rpr"][1]
    rows.append((f"reverse_pagerank ({iterations} it.)", "scipy power iteration", ours, peer, edges * iterations / ours, ""))
    table = pd.DataFrame(
        rows, columns=["ours", "peer (same run)", "ours (s)", "peer (s)", "ours edges/s", "paper edges/s"]
    ).set_index("ours")
    table["speedup over peer"] = table["peer (s)"] / table["ours (s)"]
    return table


def write_scorer_report(name: str, out_dir, ogb_root=None, progress: bool = True) -> list[Path]:
    plt, sns = pyplot()
    out_dir = Path(out_dir)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    record = provenance(device="cpu")
    scored = _score_all(dataset)
    concentration, curves = _concentration(scored)
    speed = _speed(dataset, scored)
    command = f"`tierbench scorers --dataset {name} --out {out_dir}`"
    shape = f"{name}: {dataset.num_nodes:,} nodes, {dataset.graph.num_edges:,} list entries"

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    sns.lineplot(data=curves, x="top nodes (%)", y="share of score mass (%)", hue="scorer", ax=ax)
    ax.set(title=f"Score concentration, {name}")
    fig.tight_layout(rect=(0, 0.04, 1, 1))

    markdown = (
        f"# Score concentration by scorer\n\nMade by {command}; {caption(record)}.\n{shape}.\n\n"
        "Share of the total score held by the top-scored nodes. The paper's Figure 7 column gives shares of "
        "*measured accesses* (a different quantity, measured by `tierbench profile`), for orientation only.\n\n"
        + concentration.to_markdown(floatfmt=".3f") + "\n"
    )
    paths = write_table_and_figure(out_dir, "concentration", markdown, concentration.assign(dataset=name, **record), fig, record)
    paths += [out_dir / "speed.md", out_dir / "speed.csv"]
    atomic.write_text(
        paths[3],
        f"# Scoring and reordering speed\n\nMade by {command}; {caption(record)}.\n{shape}.\n\n"
        "Each row times ours and its SciPy peer on the same data in the same run (best of 3 for reorder). "
        f"Paper: reordering ogbn-papers100M ({PAPER_REORDER['edges']:.1e} edges) took {PAPER_REORDER['seconds']:.0f} s "
        f"on {PAPER_REORDER['machine']}.\n\n" + speed.to_markdown(floatfmt=".3g") + "\n",
    )
    atomic.write_csv(paths[4], speed.assign(dataset=name, **record))
    return paths
