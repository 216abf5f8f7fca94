"""Replay speed of the placement-policy lab (``suite.policies``): reads per second of each dynamic cache and of
Belady's MIN, on a trace of 256 minibatches of 16 seeds (fanouts 12, 12, 12) on the papers-like graph, at a cache of
5% of the rows.  The lab's reports state the same rate for a whole papers-s epoch.  asv reads every number as
lower-is-better; for the reads/s track a drop is the regression.
"""

import numpy as np
import torch

from benchmarks.workloads import NODES, load_graph, make_graphs
from suite.measure.timing import best_wall_seconds
from suite.policies.belady import replay_belady
from suite.policies.dynamic import KERNELS, replay_dynamic
from suite.policies.trace import load_trace, record_trace, save_trace

BATCHES = 256
SEEDS = 16
CAPACITY = 0.05


class Replay:
    params = [*KERNELS, "belady"]
    param_names = ["policy"]
    timeout = 300

    def setup_cache(self):
        root = make_graphs()
        graph = load_graph(root, NODES)
        seeds = torch.randperm(NODES, generator=torch.Generator().manual_seed(0))[: BATCHES * SEEDS]
        save_trace(f"{root}/trace.npz", record_trace(graph, seeds, (12, 12, 12), SEEDS, progress=False))
        return root

    def setup(self, root, policy):
        self.policy = policy
        self.trace = load_trace(f"{root}/trace.npz")
        self.cost = np.full(self.trace.num_nodes, 512, dtype=np.int64)
        self.capacity = int(CAPACITY * self.trace.num_nodes)
        self.replay()  # compile

    def replay(self):
        if self.policy == "belady":
            return replay_belady(self.trace, self.capacity, self.cost)
        return replay_dynamic(self.policy, self.trace, self.capacity, self.cost)

    def time_replay(self, root, policy):
        self.replay()

    def track_reads_per_second(self, root, policy):
        _, seconds = best_wall_seconds(self.replay)
        return self.trace.num_accesses / seconds

    track_reads_per_second.unit = "reads/s"
