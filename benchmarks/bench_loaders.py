"""Feature loaders (Data Tiering §4.1): gather time per loader, miss ratio and modelled PCIe bytes.

The table is papers-like (``papers-s`` shape at 2**18 nodes, 128 float32
features), reordered by weighted reverse PageRank for the tiered loader; the
ids are the input nodes of real sampled minibatches (fanouts 12,12,12).
``time_gather`` runs on the CPU code path everywhere and on the GPU where
CUDA is visible (the ``cuda`` parameter is skipped otherwise; asv's way of
skipping is ``NotImplementedError`` from ``setup``).  ``track_miss_ratio``
and ``track_pcie_mb_per_batch`` are exact model outputs: they change only
when the placement or the traffic model changes.  ``LookaheadEpoch`` times
the lookahead loader's host decisions over an epoch at the paper's batch, as
a ratio to the tiered loader gathering the same ids in the same run.  All
lower is better.
"""

import types

import torch

from benchmarks.workloads import NODES, PAPER_BATCH, load_graph, loader_workload, make_graphs
from suite.measure.timing import best_wall_seconds
from suite.registry import create_loader

LOADERS = ["cpu-gather", "uva", "uva-naive", "degree-cache", "tiered"]


def build(root):
    """The loader workload on the papers-like graph of NODES nodes: eight minibatches' input nodes."""
    return loader_workload(load_graph(root, NODES), batches=8, seed=1)


class Gather:
    params = [LOADERS, ["cpu", "cuda"]]
    param_names = ["loader", "device"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, loader, device):
        if device == "cuda" and not torch.cuda.is_available():
            raise NotImplementedError("no CUDA device here")
        self.dataset, self.batches = build(root)
        self.loader = create_loader(loader, self.dataset, 0.1, device)
        self.batches = [b.to(device) for b in self.batches]

    def teardown(self, root, loader, device):
        if hasattr(self, "loader"):  # teardown also runs after a skipped setup
            self.loader.close()

    def gather_all(self):
        for ids in self.batches:
            self.loader.gather(ids)
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def time_gather(self, root, loader, device):
        self.gather_all()

    def track_ratio_vs_index_select(self, root, loader, device):
        table = self.dataset.features.to(device)
        ids = [b.to(device) for b in self.batches]

        def peer():
            for i in ids:
                torch.index_select(table, 0, i)
            if torch.cuda.is_available():
                torch.cuda.synchronize()

        _, ours = best_wall_seconds(self.gather_all)
        _, peer_seconds = best_wall_seconds(peer)
        return ours / peer_seconds

    track_ratio_vs_index_select.unit = "ratio"


class Traffic:
    params = [LOADERS]
    param_names = ["loader"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, loader):
        dataset, batches = build(root)
        self.loader = create_loader(loader, dataset, 0.1, "cpu")
        for ids in batches:
            self.loader.gather(ids)
        self.stats = self.loader.stats()
        self.batches = len(batches)

    def track_miss_ratio(self, root, loader):
        return 1.0 - self.stats.hit_ratio

    track_miss_ratio.unit = "misses/access"

    def track_pcie_mb_per_batch(self, root, loader):
        return self.stats.pcie_payload_bytes / 1e6 / self.batches

    track_pcie_mb_per_batch.unit = "MB"


LOOKAHEAD_WINDOWS = [16, 256]


class LookaheadEpoch:
    """The lookahead loader's host decisions (``tiering.features.lookahead``): an epoch of the papers-like graph's
    training seeds at the paper's batch of 8, each minibatch announced ``window`` ahead and then gathered on the CPU,
    against the tiered loader gathering the same ids in the same GPU memory (10% of the rows) in the same run.  Both
    loaders persist across epochs, as in training; the first epoch (numba's compiles, the lookahead cache's
    placement) is in ``setup``."""

    params = [LOOKAHEAD_WINDOWS]
    param_names = ["window"]
    timeout = 300

    def setup_cache(self):
        return make_graphs()

    def setup(self, root, window):
        dataset, batches = loader_workload(load_graph(root, NODES), batches=None, seed=1, batch_size=PAPER_BATCH)
        self.batches = [types.SimpleNamespace(input_nodes=ids) for ids in batches]
        self.lookahead = create_loader("lookahead", dataset, 0.1, "cpu", window=window)
        self.tiered = create_loader("tiered", dataset, 0.1, "cpu")
        self.lookahead_epoch()
        self.tiered_epoch()

    def teardown(self, root, window):
        for name in ("lookahead", "tiered"):
            if hasattr(self, name):
                getattr(self, name).close()

    def lookahead_epoch(self):
        for batch in self.lookahead.announce(self.batches):
            self.lookahead.gather(batch.input_nodes)

    def tiered_epoch(self):
        for batch in self.batches:
            self.tiered.gather(batch.input_nodes)

    def time_epoch(self, root, window):
        self.lookahead_epoch()

    def track_ratio_vs_tiered(self, root, window):
        _, ours = best_wall_seconds(self.lookahead_epoch)
        _, peer = best_wall_seconds(self.tiered_epoch)
        return ours / peer

    track_ratio_vs_tiered.unit = "ratio"
