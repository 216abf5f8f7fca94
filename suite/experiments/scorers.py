"""``tierbench scorers``: how concentrated each scorer's scores are, and how fast scoring and reordering run.

* concentration: for every registered scorer (``suite.registry.SCORERS``, in
  its order), the share of total score held by the top 10% and 25% of nodes,
  (the shares of Data Tiering's Figure 7, whose numbers ``suite.figures.scorers``
  puts beside them), the time one scoring took (after an untimed warm-up on a tiny graph,
  so no time includes numba compilation), and each scorer's curve of score
  mass against the share of top-scored nodes.  The paper's are shares of
  *measured accesses*, a different quantity that ``tierbench profile``
  measures; the column is there for orientation, not as a match.
* speed: wall time and edges/s of ``reorder_graph`` against a SciPy
  row+column permutation of the same matrix, and of ``reverse_pagerank``
  against a SciPy sparse power iteration, each pair timed in the same run;
  the paper's reorder figure goes beside ours when it is drawn.

Records: ``concentration.csv`` (one row per scorer) with the sidecar (the command, the graph's size),
``concentration-curves.csv`` and ``speed.csv``, each row with its provenance; ``suite.figures.scorers`` draws them.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.datasets import load_dataset
from suite.datasets.reordered import score_nodes
from suite.datasets.stats import cumulative_share, top_share
from suite.io import atomic, records
from suite.io.provenance import provenance
from suite.measure.peers import adjacency, scipy_permute, scipy_reverse_pagerank
from suite.measure.timing import best_wall_seconds
from suite.registry import SCORERS, scorer_params
from tiering.graph.csr import CSRGraph
from tiering.graph.reorder import order_by_score, reorder_graph

SHARES = (10, 25)
"""The shares of the nodes (%) whose score mass the table reports: those of Data Tiering's Figure 7."""
CURVE = np.linspace(0, 1, 201)
"""The fractions of the nodes the concentration curves are drawn at."""
CONCENTRATION, CURVES, SPEED = "concentration", "concentration-curves", "speed"
FACTS = ("command", "name", "num_nodes", "num_edges")


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
                **{f"score mass, top {p}%": top_share(scores, p / 100) for p in SHARES},
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
    rows = [("reorder_graph", "scipy A[p][:, p]", ours, peer, edges / ours)]
    (_, iterations), peer = best_wall_seconds(lambda: scipy_reverse_pagerank(graph, **scorer_params("rpr")), repeat=1)
    ours = scored["rpr"][1]
    rows.append((f"reverse_pagerank ({iterations} it.)", "scipy power iteration", ours, peer, edges * iterations / ours))
    table = pd.DataFrame(rows, columns=["ours", "peer (same run)", "ours (s)", "peer (s)", "ours edges/s"]).set_index("ours")
    table["speedup over peer"] = table["peer (s)"] / table["ours (s)"]
    return table


def measure(name: str, records_dir, ogb_root=None, progress: bool = True) -> Path:
    """Score ``name`` with every scorer, time scoring and reordering; write the records into ``records_dir`` and
    return their folder."""
    records_dir = Path(records_dir)
    dataset = load_dataset(name, ogb_root=ogb_root, progress=progress)
    record = provenance(device="cpu")
    scored = _score_all(dataset)
    concentration, curves = _concentration(scored)
    speed = _speed(dataset, scored)
    facts = {"command": f"tierbench scorers --dataset {name} --out {records_dir}", "name": name,
             "num_nodes": dataset.num_nodes, "num_edges": dataset.graph.num_edges}
    records.write_records(records_dir / f"{CONCENTRATION}.csv", concentration.assign(dataset=name, **record), record,
                          facts)
    atomic.write_csv(records_dir / f"{CURVES}.csv", curves.assign(dataset=name, **record), index=False)
    atomic.write_csv(records_dir / f"{SPEED}.csv", speed.assign(dataset=name, **record))
    return records_dir


def read_records(path) -> tuple[records.Records, pd.DataFrame | None, records.Records]:
    """The concentration and speed records in ``path`` (their folder), each table without its provenance columns,
    and the curves behind the concentration (None where a run did not keep them)."""
    path = Path(path)
    kept = ["dataset", *records.PROVENANCE_COLUMNS]
    concentration = records.read_records(path / f"{CONCENTRATION}.csv", FACTS, index_col="scorer")
    concentration = dataclasses.replace(concentration, table=concentration.table.drop(columns=kept, errors="ignore"))
    curves_path = path / f"{CURVES}.csv"
    curves = records.read_table(curves_path).drop(columns=kept, errors="ignore") if curves_path.exists() else None
    speed = records.read_table(path / f"{SPEED}.csv", index_col="ours")
    speed = records.Records(speed.drop(columns=kept, errors="ignore"), concentration.provenance, {}, path / f"{SPEED}.csv")
    return concentration, curves, speed
