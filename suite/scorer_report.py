"""How concentrated each scorer's scores are, and how fast scoring and reordering run.

``tierbench scorers --dataset papers-s --out results/scorers`` writes:

* ``concentration.md`` / ``.csv`` / ``.png``: for degree, reverse PageRank and
  weighted reverse PageRank, the share of total score held by the top 10%
  and 25% of nodes, with the paper's Figure 7 numbers beside them.  Those are
  shares of *measured accesses*, a different quantity that ``tierbench profile``
  measures; the column is there for orientation, not as a match.
* ``speed.md`` / ``.csv``: wall time and edges/s of ``reorder_graph`` against
  a SciPy row+column permutation of the same matrix, and of
  ``reverse_pagerank`` against a SciPy sparse power iteration, each pair
  timed in the same run; the paper's reorder figure (31 s for 3.2B edges on
  2x 20-core Xeon 6230, ~100M edges/s) beside ours.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from tiering.reorder import order_by_score, reorder_graph

from . import atomic
from .datasets import load_dataset
from .datasets.reordered import score_nodes, scorer_params
from .datasets.stats import top_share
from .peers import adjacency, scipy_permute, scipy_reverse_pagerank
from .plotting import pyplot, write_table_and_figure
from .provenance import caption, provenance

SCORER_NAMES = {"degree": "degree", "rpr": "reverse PageRank", "wrpr": "weighted reverse PageRank"}
PAPER_FIG7 = {"top 10%": "≥ 35% of accesses", "top 25%": "≥ 56% of accesses"}
PAPER_REORDER = {"edges": 3.2e9, "seconds": 31.0, "machine": "2x Xeon 6230 (40 cores)"}


def _timed(fn, repeat: int = 1):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def _score_all(dataset) -> dict:
    """``{scorer: (scores, seconds)}``; wrpr runs before rpr so rpr's time excludes numba compilation."""
    timed = {}
    for scorer in ("degree", "wrpr", "rpr"):
        scores, seconds = _timed(lambda s=scorer: score_nodes(dataset, s, scorer_params(s)))
        timed[scorer] = (scores.numpy(), seconds)
    return timed


def _concentration(scored: dict):
    rows, curves = [], []
    x = np.linspace(0, 1, 201)
    for scorer, label in SCORER_NAMES.items():
        scores = scored[scorer][0]
        rows.append(
            {
                "scorer": label,
                "score mass, top 10%": top_share(scores, 0.10),
                "score mass, top 25%": top_share(scores, 0.25),
                "paper Fig. 7, top 10%": PAPER_FIG7["top 10%"],
                "paper Fig. 7, top 25%": PAPER_FIG7["top 25%"],
                "scoring time (s)": scored[scorer][1],
            }
        )
        ordered = np.sort(scores)[::-1]
        cum = np.concatenate([[0.0], np.cumsum(ordered)]) / ordered.sum()
        share = 100 * cum[(x * len(ordered)).astype(int)]
        curves.append(pd.DataFrame({"scorer": label, "top nodes (%)": 100 * x, "share of score mass (%)": share}))
    return pd.DataFrame(rows).set_index("scorer"), pd.concat(curves)


def _speed(dataset, scored: dict):
    graph = dataset.graph
    edges = graph.num_edges
    scores = scored["wrpr"][0]
    reorder_graph(graph, scores)  # numba compilation outside the timing
    _, ours = _timed(lambda: reorder_graph(graph, scores), repeat=3)
    new_to_old, _ = order_by_score(scores)
    matrix = adjacency(graph)
    _, peer = _timed(lambda: scipy_permute(matrix, new_to_old), repeat=3)
    paper_rate = PAPER_REORDER["edges"] / PAPER_REORDER["seconds"]
    rows = [("reorder_graph", "scipy A[p][:, p]", ours, peer, edges / ours, f"{paper_rate:.3g}")]
    (_, iterations), peer = _timed(lambda: scipy_reverse_pagerank(graph, **scorer_params("rpr")))
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
