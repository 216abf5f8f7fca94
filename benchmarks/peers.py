"""tierbench against DGL and SciPy on the same graphs, timed alternately in one run: ``tox -e peers``.

DGL (2.1.0, the newest wheel for this Python) runs in its own environment (``tox -e peers-dgl``) as a worker
process, ``benchmarks/peers_dgl.py``, which reads the graphs from the npy files this module writes; SciPy runs
here beside tierbench.  For every graph and task, each side is run once untimed with its output checked, then
the sides take turns, ``--repeat`` times, and the best time of each is kept (the run least disturbed by the
rest of the machine).  Each side uses ``--threads`` threads (numba and torch here; OpenMP and torch in DGL's
worker), and the load average seen during each task is recorded beside it.

Graphs (``--graphs``): a uniform random graph (2M nodes, lists of about 10), a Chung-Lu power-law graph (2M
nodes, about 43M entries, the top 1% of lists holding 31%) and papers-s (1M nodes, 31M entries); see
``benchmarks.workloads``.  Tasks, each the same work on every side:

* ``coo-to-csr``: the lists from the edge list in a random order (DGL: ``dgl.graph`` and its CSC; SciPy:
  ``coo_array(...).tocsr()``).
* ``one-hop``: up to ``fanout`` distinct entries of each list of 100,000 distinct random nodes, uniformly
  (DGL: ``dgl.sampling.sample_neighbors``).
* ``minibatches``: 50 three-layer minibatches of 1024 seeds with fanouts (15, 10, 5) from the seeds outward
  (DGL: ``NeighborSampler([5, 10, 15]).sample_blocks``: DGL lists fanouts from the input layer, and on two or
  more threads takes its fused sample-and-compact path).
* ``reorder``: renumber the nodes by a random order (tierbench: ``reorder_graph`` from the scores, its sort
  included; DGL: ``dgl.reorder_graph`` with that permutation and edges by destination; SciPy: ``A[p][:, p]``).
* ``reverse-pagerank``: ``tiering.graph.scores.reverse_pagerank`` to an L1 change below 1e-10 (DGL: the same update
  with ``dgl.ops.copy_u_sum`` on the reversed graph; SciPy: sparse matrix-vector products).

Checks, on the untimed run: CSRs equal the reference's lists, samples are real, distinct edges with min(fanout,
length) per node, scores within 1e-8 (L1) of SciPy's.  DGL's graphs are int64, since its fused minibatch path
gives wrong blocks on int32 graphs; tierbench's use their own index type (int32 below 2**31 nodes).

``python -m benchmarks.peers --dgl-python .tox/peers-dgl/bin/python --out results/peers`` writes
``peers.md``, ``peers.csv`` and ``peers.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import scipy
import torch

from benchmarks.peers_dgl import Reference, close_scores, same_graph, valid_sample
from benchmarks.workloads import papers_like_graph, power_law_graph, uniform_graph
from suite.datasets import PRESETS
from suite.io import atomic
from suite.io.plotting import pyplot, save_figure
from suite.io.progress import Steps
from suite.io.provenance import caption, provenance
from suite.measure.peers import adjacency, scipy_coo_to_csr, scipy_permute, scipy_reverse_pagerank
from tiering.graph.csr import CSRGraph, index_dtype_for
from tiering.graph.reorder import order_by_score, reorder_graph
from tiering.graph.scores import reverse_pagerank
from tiering.sampling.neighbors import NeighborSampler, sample_neighbors

GRAPHS = {
    "uniform": lambda: uniform_graph(1 << 21),
    "power-law": lambda: power_law_graph(1 << 21),
    "papers-s": lambda: papers_like_graph(PRESETS["papers-s"].num_nodes),
}
ONE_HOP_SEEDS = 100_000
BATCHES, BATCH_SIZE = 50, 1024
TASKS = [  # (task, params, what the table calls it, given the graph's seed counts)
    ("coo-to-csr", {}, "COO -> CSR"),
    ("one-hop", {"fanout": 10}, "one hop, {seeds:,} seeds, fanout 10"),
    ("one-hop", {"fanout": 25}, "one hop, {seeds:,} seeds, fanout 25"),
    ("minibatches", {"fanouts": [15, 10, 5]}, "{batches} minibatches of {batch_size} seeds, fanouts (15,10,5)"),
    ("reorder", {}, "reorder by a random order"),
    ("reverse-pagerank", {"damping": 0.85, "tol": 1e-10}, "reverse PageRank to 1e-10"),
]
SIDES = ("tierbench", "DGL", "SciPy")


def write_graph_files(graph: CSRGraph, directory: Path, seed: int = 0) -> None:
    """The npy files both sides read, and the references the checks compare with (SciPy's, where it has one)."""
    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    save = lambda name, array: atomic.save_npy(directory / f"{name}.npy", np.ascontiguousarray(array))  # noqa: E731
    save("indptr", graph.indptr.numpy())
    save("indices", graph.indices.numpy().astype(np.int64))
    edges = graph.to_edge_index()[:, rng.permutation(graph.num_edges)]
    save("src", edges[0])
    save("dst", edges[1])
    del edges
    scores = rng.random(n)
    save("scores", scores)
    new_to_old, _ = order_by_score(scores)
    save("new_to_old", new_to_old)
    reordered = scipy_permute(adjacency(graph), new_to_old)
    save("reordered_indptr", reordered.indptr.astype(np.int64))
    save("reordered_indices", reordered.indices.astype(np.int64))
    del reordered
    save("rpr", scipy_reverse_pagerank(graph)[0])
    save("one_hop_seeds", rng.choice(n, min(ONE_HOP_SEEDS, n), replace=False))
    batches = min(BATCHES, n // BATCH_SIZE)  # fewer on a graph too small for all of them (the tests')
    save("batches", rng.permutation(n)[: batches * BATCH_SIZE].reshape(batches, BATCH_SIZE))


class TierbenchSide:
    """tierbench's way of doing each task, on the graph files of one directory."""

    def __init__(self, directory: Path, reference: Reference):
        load = lambda name: np.load(directory / f"{name}.npy")  # noqa: E731
        indptr = load("indptr")
        num_nodes = len(indptr) - 1
        native = {torch.int32: np.int32, torch.int64: np.int64}[index_dtype_for(num_nodes)]
        self.graph = CSRGraph(torch.from_numpy(indptr), torch.from_numpy(load("indices").astype(native)))
        self.reference = reference
        self.src, self.dst = load("src"), load("dst")
        self.scores = torch.from_numpy(load("scores"))
        self.one_hop_seeds = torch.from_numpy(load("one_hop_seeds"))
        self.batches = torch.from_numpy(load("batches"))

    def coo_to_csr(self, check):
        graph = CSRGraph.from_edges(self.src, self.dst, self.graph.num_nodes)
        if check:
            return same_graph(graph.indptr.numpy(), graph.indices.numpy(), self.reference.indptr, self.reference.keys)

    def one_hop(self, check, fanout):
        counts, neighbors = sample_neighbors(self.graph, self.one_hop_seeds, fanout, torch.Generator().manual_seed(1))
        if check:
            owners = torch.repeat_interleave(self.one_hop_seeds, counts)
            return valid_sample(owners.numpy(), neighbors.numpy(), self.one_hop_seeds.numpy(), fanout,
                                self.reference.indptr, self.reference.keys)

    def minibatches(self, check, fanouts):
        sampler = NeighborSampler(self.graph, fanouts)
        generator = torch.Generator().manual_seed(1)
        problems, input_nodes = [], 0
        for seeds in self.batches:
            batch = sampler.sample(seeds, generator)
            input_nodes += len(batch.input_nodes)
            if check:  # every layer's nodes are a prefix of the input nodes
                nodes = batch.input_nodes.numpy()
                for block, fanout in zip(reversed(batch.blocks), fanouts):
                    entries, owners = nodes[block.edge_index[0].numpy()], nodes[block.edge_index[1].numpy()]
                    problems.append(valid_sample(owners, entries, nodes[: block.num_dst], fanout,
                                                 self.reference.indptr, self.reference.keys))
        if check:
            return next((p for p in problems if p), None), input_nodes / len(self.batches)

    def reorder(self, check):
        graph, _, _ = reorder_graph(self.graph, self.scores)
        if check:
            return same_graph(graph.indptr.numpy(), graph.indices.numpy(), self.reference.reordered_indptr,
                              self.reference.reordered_keys)

    def reverse_pagerank(self, check, damping, tol):
        scores = reverse_pagerank(self.graph, damping, tol)
        if check:
            return close_scores(scores.numpy(), self.reference.rpr)


class SciPySide:
    """SciPy's way of doing the tasks it has a peer for (``suite.measure.peers``)."""

    def __init__(self, ours: TierbenchSide):
        self.ours = ours
        self.matrix = adjacency(ours.graph)
        self.new_to_old, _ = order_by_score(ours.scores)

    def coo_to_csr(self, check):
        matrix = scipy_coo_to_csr(self.ours.src, self.ours.dst, self.ours.graph.num_nodes)
        if check:
            return same_graph(matrix.indptr, matrix.indices, self.ours.reference.indptr, self.ours.reference.keys)

    def reorder(self, check):
        matrix = scipy_permute(self.matrix, self.new_to_old)
        if check:  # SciPy made the reference: this checks that the files hold what it gives
            return same_graph(matrix.indptr, matrix.indices, self.ours.reference.reordered_indptr,
                              self.ours.reference.reordered_keys)

    def reverse_pagerank(self, check, damping, tol):
        scores, _ = scipy_reverse_pagerank(self.ours.graph, damping, tol)
        if check:
            return close_scores(scores, self.ours.reference.rpr)


class DGLWorker:
    """``benchmarks/peers_dgl.py serve`` in DGL's environment, one JSON line per request and reply."""

    def __init__(self, python: str, threads: int):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", DGLBACKEND="pytorch")
        script = Path(__file__).with_name("peers_dgl.py")
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([python, str(script), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=env)
        self.versions = self._reply("starting DGL's worker")

    def _reply(self, what: str) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            last = (self.log.read().strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{what}: DGL's worker exited ({last})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{what}: {reply['error']}")
        return reply

    def request(self, what: str, **fields) -> dict:
        self.process.stdin.write(json.dumps(fields) + "\n")
        self.process.stdin.flush()
        return self._reply(what)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.log.close()


def check_dgl(python: str) -> dict:
    """DGL's versions from its environment, or a clear error saying why it cannot be used."""
    if not Path(python).is_file():
        raise RuntimeError(f"no Python at {python}: build DGL's environment first (tox -e peers-dgl)")
    env = dict(os.environ, DGLBACKEND="pytorch")
    script = Path(__file__).with_name("peers_dgl.py")
    done = subprocess.run([python, str(script), "--versions"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"DGL does not import in {python}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _timed(side, task: str, params: dict, check: bool):
    start = time.perf_counter()
    result = getattr(side, task.replace("-", "_"))(check=check, **params)
    return time.perf_counter() - start, result


def measure(graph_names, dgl_python: str, repeat: int, threads: int, work: Path, progress: bool = True):
    """One row per graph and task: each side's best time, the checks and the load seen."""
    torch.set_num_threads(threads)
    numba.set_num_threads(threads)
    worker = DGLWorker(dgl_python, threads)
    rows = []
    steps = Steps("tierbench against DGL and SciPy", len(graph_names) * (1 + len(TASKS)), progress)
    try:
        for name in graph_names:
            directory = work / name
            directory.mkdir(parents=True, exist_ok=True)
            with steps.step(f"{name}: the graph and its reference files"):
                graph = GRAPHS[name]()
                shape = {"graph": name, "nodes": graph.num_nodes, "entries": graph.num_edges,
                         "top_1pct_share": _top_share(graph)}
                write_graph_files(graph, directory)
                del graph
                reference = Reference(directory)
                ours = TierbenchSide(directory, reference)
                sides = {"tierbench": ours, "SciPy": SciPySide(ours)}
                worker.request(f"loading {name} into DGL", load=str(directory))
            counts = {"seeds": len(ours.one_hop_seeds), "batches": len(ours.batches), "batch_size": BATCH_SIZE}
            for task, params, label in TASKS:
                label = label.format(**counts)
                with steps.step(f"{name}: {label}"):
                    rows.append({**shape, "task": task, "params": json.dumps(params), "label": label,
                                 **_race(sides, worker, task, params, repeat, f"{name}, {label}")})
    finally:
        steps.close()
        worker.close()
    return pd.DataFrame(rows), worker.versions


def _race(sides: dict, worker: DGLWorker, task: str, params: dict, repeat: int, what: str) -> dict:
    """Each side once with its output checked, then ``repeat`` alternating timed runs; the best of each."""
    load = [os.getloadavg()[0]]
    best, checks, details = {}, {}, {}

    def run(side: str, check: bool):
        if side == "DGL":
            reply = worker.request(what, task=task, params=params, check=check)
            return reply["seconds"], (reply["problem"], *reply["extra"]) if check else None
        return _timed(sides[side], task, params, check)

    present = [s for s in SIDES if s == "DGL" or hasattr(sides[s], task.replace("-", "_"))]
    for side in present:
        _, result = run(side, check=True)
        problem, *extra = result if isinstance(result, tuple) else (result,)
        checks[side] = problem or "ok"
        if extra:
            details[side] = round(float(extra[0]), 1)
    for _ in range(repeat):
        for side in present:
            seconds, _ = run(side, check=False)
            best[side] = min(best.get(side, float("inf")), seconds)
        load.append(os.getloadavg()[0])
    row = {f"{side}_s": best.get(side, float("nan")) for side in SIDES}
    for peer in ("DGL", "SciPy"):
        row[f"{peer}_over_tierbench"] = row[f"{peer}_s"] / row["tierbench_s"]
    row["checks"] = "; ".join(f"{side}: {checks[side]}" for side in present)
    row["input_nodes_per_batch"] = "; ".join(f"{side}: {value:,}" for side, value in details.items())
    row["load_1min_max"] = max(load)
    return row


def _top_share(graph: CSRGraph) -> float:
    lengths = np.sort(graph.degrees().numpy())[::-1]
    return float(lengths[: max(1, len(lengths) // 100)].sum() / max(1, lengths.sum()))


def _versions_here() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "numba": numba.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__}


def _markdown(table: pd.DataFrame, record: dict) -> str:
    here, dgl = record["versions"]["tierbench side"], record["versions"]["DGL side"]
    lines = [
        "# tierbench against DGL and SciPy, measured alternately in one run", "",
        f"Best of {record['repeat']} alternating runs per side after one checked run; {record['threads']} threads a "
        f"side, `OMP_WAIT_POLICY={record['omp_wait_policy']}`. Ratios are the peer's time over tierbench's "
        "(above 1: tierbench is faster). `python -m benchmarks.peers` (`tox -e peers`).", "",
        f"- tierbench side: Python {here['python']}, torch {here['torch']}, numba {here['numba']}, "
        f"numpy {here['numpy']}, SciPy {here['scipy']}",
        f"- DGL side: DGL {dgl['dgl']}, torch {dgl['torch']}, numpy {dgl['numpy']}, Python {dgl['python']}, "
        f"OMP_NUM_THREADS={dgl['OMP_NUM_THREADS']}",
        f"- load average (1 min) before the run: {record['load_before']:.2f}; highest seen during a task: "
        f"{table['load_1min_max'].max():.2f}", "",
    ]
    for graph, part in table.groupby("graph", sort=False):
        first = part.iloc[0]
        lines += [f"## {graph}: {first['nodes']:,} nodes, {first['entries']:,} list entries "
                  f"(top 1% of lists: {first['top_1pct_share']:.1%})", "",
                  "| work | tierbench | DGL | SciPy | DGL ÷ tierbench | SciPy ÷ tierbench | checks |",
                  "|---|---|---|---|---|---|---|"]
        for _, row in part.iterrows():
            cells = [_seconds(row[f"{side}_s"]) for side in SIDES]
            ratios = [_ratio(row[f"{peer}_over_tierbench"]) for peer in ("DGL", "SciPy")]
            note = row["checks"] + (f" (input nodes per batch: {row['input_nodes_per_batch']})"
                                    if row["input_nodes_per_batch"] else "")
            lines.append(f"| {row['label']} | " + " | ".join(cells + ratios) + f" | {note} |")
        lines.append("")
    lines += [
        "DGL lists fanouts from the input layer towards the seeds, so tierbench's (15, 10, 5) is DGL's "
        "`[5, 10, 15]`; both sample 15 neighbours of each seed. DGL's graphs are int64 (its fused minibatch path "
        "gives wrong blocks on int32 graphs); tierbench's are int32. tierbench's reorder starts from scores and "
        "includes their sort; DGL and SciPy are given the permutation.", "",
        caption(record), "",
    ]
    return "\n".join(lines)


def _seconds(value: float) -> str:
    if value != value:
        return "n/a"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.3f} s"


def _ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}x"


def _figure(table: pd.DataFrame, repeat: int):
    plt, sns = pyplot()
    long = table.melt(id_vars=["graph", "label"], value_vars=["DGL_over_tierbench", "SciPy_over_tierbench"],
                      var_name="peer", value_name="speed-up").dropna()
    long["peer"] = long["peer"].str.replace("_over_tierbench", "")
    graphs = list(dict.fromkeys(table["graph"]))
    fig, axes = plt.subplots(1, len(graphs), figsize=(4.6 * len(graphs) + 2.6, 4.6), sharey=True, squeeze=False)
    for ax, graph in zip(axes[0], graphs):
        sns.barplot(data=long[long["graph"] == graph], y="label", x="speed-up", hue="peer", ax=ax,
                    order=list(dict.fromkeys(table["label"])), hue_order=["DGL", "SciPy"], legend=ax is axes[0][0])
        ax.set_xscale("log")
        ax.axvline(1.0, color="0.3", linewidth=1)
        for container in ax.containers:
            ax.bar_label(container, fmt="%.2fx", fontsize=7, padding=2)
        ax.set_xlim(right=ax.get_xlim()[1] * 3)  # room for the labels of the longest bars
        ax.set_title(graph)
        ax.set_xlabel("")
        ax.set_ylabel("")
    handles, labels = axes[0][0].get_legend_handles_labels()
    axes[0][0].get_legend().remove()
    fig.legend(handles, labels, loc="upper right", ncols=2, frameon=False)
    fig.suptitle(f"tierbench against DGL and SciPy on the same graphs, best of {repeat} alternating runs a side",
                 x=0.01, ha="left")
    fig.supxlabel("the peer's time ÷ tierbench's, log scale (above 1: tierbench is faster)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def render(records: Path, out: Path) -> list[Path]:
    """The table (``peers.md``) and the figure (``peers.png``) from a run's records in ``records``: ``peers.csv``,
    one row per task and graph, and ``peers.json``, the run's settings, versions and provenance."""
    table = pd.read_csv(Path(records) / "peers.csv", keep_default_na=False, na_values=[""])
    table["input_nodes_per_batch"] = table["input_nodes_per_batch"].fillna("")
    record = json.loads((Path(records) / "peers.json").read_text())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "peers.md", out / "peers.png"]
    atomic.write_text(paths[0], _markdown(table, record))
    save_figure(_figure(table, record["repeat"]), paths[1], record)
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dgl-python", help="the Python of DGL's environment (tox -e peers-dgl); needed to race")
    parser.add_argument("--redraw", action="store_true", help="draw --out's table and figure again from the records "
                        "there (peers.csv, peers.json), without racing")
    parser.add_argument("--out", default="out/peers", help="output folder (the committed one: results/peers)")
    parser.add_argument("--graphs", default=",".join(GRAPHS), help=f"comma-separated, of {', '.join(GRAPHS)}")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side, alternating")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads per side")
    parser.add_argument("--work", help="where the graph files go (default: a temporary folder, removed after)")
    args = parser.parse_args(argv)
    if args.redraw:
        for path in render(Path(args.out), Path(args.out)):
            print(f"wrote {path}")
        return 0
    if not args.dgl_python:
        parser.error("--dgl-python is needed to race (or --redraw to draw the records in --out again)")
    graphs = [g for g in args.graphs.split(",") if g]
    unknown = [g for g in graphs if g not in GRAPHS]
    if unknown or not graphs or args.repeat < 1 or args.threads < 1:
        problem = f"unknown graph {unknown[0]!r} (known: {', '.join(GRAPHS)})" if unknown else \
            "need at least one graph, --repeat >= 1 and --threads >= 1"
        print(f"tierbench: error: {problem}", file=sys.stderr)
        return 2
    try:
        dgl_versions = check_dgl(args.dgl_python)
        record = {**provenance("cpu"), "repeat": args.repeat, "threads": args.threads,
                  "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"), "load_before": os.getloadavg()[0]}
        with tempfile.TemporaryDirectory(prefix="tierbench-peers-") as scratch:
            table, worker_versions = measure(graphs, args.dgl_python, args.repeat, args.threads,
                                             Path(args.work or scratch))
    except RuntimeError as error:
        print(f"tierbench: error: {error}", file=sys.stderr)
        return 1
    record["versions"] = {"tierbench side": _versions_here(), "DGL side": {**dgl_versions, **worker_versions}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_csv(out / "peers.csv", table, index=False)
    atomic.write_json(out / "peers.json", record)
    paths = render(out, out)
    print(paths[0].read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
