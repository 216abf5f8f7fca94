"""DGL's side of ``benchmarks.peers``, and the checks both sides' outputs must pass.

This file runs in DGL's own environment (``tox -e peers-dgl``: DGL 2.1.0, torch 2.2.1, numpy < 2), so it imports
nothing of tierbench's.  ``python peers_dgl.py serve`` reads one JSON request per line on stdin and answers one
JSON line on stdout; ``python peers_dgl.py --versions`` prints the versions and exits.

The graph arrives as the npy files ``benchmarks.peers`` writes: ``indptr``/``indices`` is the CSR whose list v
holds the nodes sampling may pick for v (int64; DGL's fused minibatch sampler gives wrong blocks on int32
graphs), so in DGL an entry u of list(v) is the edge u -> v, and sampling draws in-edges.  Each request times
one call of DGL's way of doing a task; the first call of each task (untimed, a warm-up) also checks the output
against the reference files with the functions below, which ``benchmarks.peers`` applies to tierbench's and
SciPy's outputs as well.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# ----------------------------------------------------------------------------- checks (numpy only)


def edge_keys(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """``owner * n + entry`` of every list entry, sorted: a CSR as a set of edges, whatever order its lists are in."""
    n = len(indptr) - 1
    owners = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return np.sort(owners * n + indices.astype(np.int64))


def same_graph(indptr, indices, reference_indptr, reference_keys) -> str | None:
    """``None`` if the CSR has the reference's lists (in any order within a list), else what differs."""
    if not np.array_equal(np.asarray(indptr, dtype=np.int64), reference_indptr):
        return "list lengths differ from the reference"
    if not np.array_equal(edge_keys(np.asarray(indptr), np.asarray(indices)), reference_keys):
        return "list entries differ from the reference"
    return None


def valid_sample(owners, entries, nodes, fanout: int, reference_indptr, reference_keys) -> str | None:
    """``None`` if the edges ``entries[i] in list(owners[i])`` are a valid sample of ``fanout`` of each list of
    ``nodes``: every edge exists, none repeats, and each node has ``min(fanout, length)`` of them."""
    n = len(reference_indptr) - 1
    owners, entries, nodes = (np.asarray(a, dtype=np.int64) for a in (owners, entries, nodes))
    keys = owners * n + entries
    found = np.searchsorted(reference_keys, keys)
    if len(keys) and (found.max() >= len(reference_keys) or not np.array_equal(reference_keys[found], keys)):
        return "a sampled edge is not in the graph"
    if len(np.unique(keys)) != len(keys):
        return "an edge was sampled twice"
    order = np.argsort(nodes)
    place = np.searchsorted(nodes[order], owners)
    if len(owners) and (place.max() >= len(nodes) or not np.array_equal(nodes[order][place], owners)):
        return "an edge belongs to a node that was not sampled"
    counts = np.bincount(place, minlength=len(nodes))
    if not np.array_equal(counts, np.minimum(np.diff(reference_indptr)[nodes], fanout)[order]):
        return f"a node did not get min(fanout={fanout}, list length) samples"
    return None


def close_scores(scores, reference) -> str | None:
    difference = float(np.abs(np.asarray(scores, dtype=np.float64) - reference).sum())
    return None if difference < 1e-8 else f"scores differ from the reference by {difference:.3g} (L1)"


class Reference:
    """The reference files of one graph, loaded once."""

    def __init__(self, directory):
        directory = Path(directory)
        self.directory = directory
        self.indptr = np.load(directory / "indptr.npy")
        self.keys = edge_keys(self.indptr, np.load(directory / "indices.npy"))
        self.reordered_indptr = np.load(directory / "reordered_indptr.npy")
        self.reordered_keys = edge_keys(self.reordered_indptr, np.load(directory / "reordered_indices.npy"))
        self.rpr = np.load(directory / "rpr.npy")


# ----------------------------------------------------------------------------- DGL's side


class DGLSide:
    """DGL's way of doing each task of ``benchmarks.peers.TASKS`` on one graph."""

    def __init__(self, directory):
        import dgl
        import torch

        self.dgl, self.torch = dgl, torch
        self.reference = Reference(directory)
        load = lambda name: torch.from_numpy(np.load(Path(directory) / f"{name}.npy"))  # noqa: E731
        self.graph = dgl.graph(("csc", (load("indptr"), load("indices"), torch.tensor([], dtype=torch.int64))))
        self.graph.create_formats_()
        self.src, self.dst = load("src"), load("dst")
        self.new_to_old = load("new_to_old")
        self.one_hop_seeds = load("one_hop_seeds")
        self.batches = load("batches")

    def run(self, task: str, params: dict, check: bool):
        return getattr(self, task.replace("-", "_"))(check=check, **params)

    def coo_to_csr(self, check):
        graph = self.dgl.graph((self.src, self.dst), num_nodes=self.graph.num_nodes())
        indptr, indices, _ = graph.adj_tensors("csc")
        if check:
            return same_graph(indptr.numpy(), indices.numpy(), self.reference.indptr, self.reference.keys)

    def one_hop(self, check, fanout):
        sample = self.dgl.sampling.sample_neighbors(self.graph, self.one_hop_seeds, fanout)
        if check:
            entries, owners = sample.edges()
            return valid_sample(owners.numpy(), entries.numpy(), self.one_hop_seeds.numpy(), fanout,
                                self.reference.indptr, self.reference.keys)

    def minibatches(self, check, fanouts):
        # DGL lists fanouts from the input layer towards the seeds: tierbench's (15, 10, 5) is DGL's [5, 10, 15]
        sampler = self.dgl.dataloading.NeighborSampler(list(reversed(fanouts)))
        problems, input_nodes = [], 0
        for seeds in self.batches:
            inputs, _, blocks = sampler.sample_blocks(self.graph, seeds)
            input_nodes += len(inputs)
            if check:
                for block, fanout in zip(reversed(blocks), fanouts):
                    entries, owners = block.edges()
                    src_ids, dst_ids = block.srcdata[self.dgl.NID].numpy(), block.dstdata[self.dgl.NID].numpy()
                    problems.append(valid_sample(dst_ids[owners.numpy()], src_ids[entries.numpy()], dst_ids, fanout,
                                                 self.reference.indptr, self.reference.keys))
        if check:
            return next((p for p in problems if p), None), input_nodes / len(self.batches)

    def reorder(self, check):
        graph = self.dgl.reorder_graph(self.graph, node_permute_algo="custom", edge_permute_algo="dst",
                                       permute_config={"nodes_perm": self.new_to_old})
        if check:
            indptr, indices, _ = graph.adj_tensors("csc")
            return same_graph(indptr.numpy(), indices.numpy(), self.reference.reordered_indptr,
                              self.reference.reordered_keys)

    def reverse_pagerank(self, check, damping, tol):
        # the update of tiering.graph.scores.reverse_pagerank: score flows from v to every entry u of list(v), that is
        # along the reversed edges v -> u, divided by |list(v)| = v's in-degree
        torch = self.torch
        walk = self.dgl.reverse(self.graph)
        lengths = self.graph.in_degrees().to(torch.float64)
        dangling = lengths == 0
        scale = torch.where(dangling, 0.0, damping / lengths.clamp(min=1))
        n = self.graph.num_nodes()
        x = torch.full((n,), 1.0 / n, dtype=torch.float64)
        change = float("inf")
        while not change < tol:
            base = (1.0 - damping) / n + damping * float(x[dangling].sum()) / n
            new = self.dgl.ops.copy_u_sum(walk, x * scale) + base
            change = float((new - x).abs().sum())
            x = new
        if check:
            return close_scores(x.numpy(), self.reference.rpr)


def versions() -> dict:
    import dgl
    import torch

    return {"dgl": dgl.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0], "threads": torch.get_num_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def serve(requests, replies) -> None:
    """Answer each request line: ``{"load": DIR}``, or ``{"task": T, "params": {...}, "check": bool}`` -> seconds,
    and with ``check`` the first problem found (``null`` if none) and anything else the check reports."""
    side = None
    for line in requests:
        request = json.loads(line)
        try:
            if "load" in request:
                side = DGLSide(request["load"])
                reply = {"ok": True}
            else:
                start = time.perf_counter()
                result = side.run(request["task"], request["params"], request["check"])
                reply = {"seconds": time.perf_counter() - start}
                if request["check"]:
                    problem, *extra = result if isinstance(result, tuple) else (result,)
                    reply.update(problem=problem, extra=extra)
        except Exception as error:  # reported to the driver, which stops with it
            reply = {"error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--versions"]:
        print(json.dumps(versions()))
    elif sys.argv[1:] == ["serve"]:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
        print(json.dumps(versions()), flush=True)
        serve(sys.stdin, sys.stdout)
    else:
        sys.exit("usage: peers_dgl.py --versions | serve")
