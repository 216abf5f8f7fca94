"""The predefined sweeps of ``tierbench run --experiment NAME``: which datasets, loaders and hot fractions each measures.

Each sweep is the settings of ``suite.sweep.cells.sweep_cells``; any setting
given on the command line replaces its own.  A sweep's ``fanouts=None`` takes
each dataset's training fanouts (``suite.datasets.regime.default_fanouts``),
and a sweep's batch is its regime's (``regime``, default ``paper``).
``tierbench report --experiment NAME`` draws a sweep's records as the figure
named like it (``suite.figures``), any other sweep as Figure 8.
"""

from __future__ import annotations

EXPERIMENTS = {
    "demo": dict(datasets=["papers-xs"], loaders=["cpu-gather", "uva", "degree-cache", "tiered"],
                 hot_fractions=[0.1, 0.25], fanouts=[None], epochs=2, warmup=1, regime="paper"),
    "fig8": dict(datasets=["papers-s", "products-s"], loaders=["cpu-gather", "uva", "degree-cache", "gns", "tiered"],
                 hot_fractions=[0.1], fanouts=[None], epochs=1, warmup=1, rounds=2),
    "pipeline": dict(datasets=["papers-s"], loaders=["cpu-gather", "uva", "degree-cache", "tiered"],
                     hot_fractions=[0.1], fanouts=[None], epochs=2, warmup=1),
    "disk": dict(datasets=["papers-s"], loaders=["cpu-gather", "mmap", "disk-tiered"], hot_fractions=[0.1],
                 host_fractions=[0.15], fanouts=[None], epochs=1, warmup=0),
    "lookahead": dict(datasets=["papers-s"], loaders=["tiered", "lookahead"], hot_fractions=[0.1], fanouts=[None],
                      epochs=1, warmup=1, rounds=2),
    "fig10": dict(datasets=["papers-s", "papers-m"], loaders=["tiered"],
                  hot_fractions=[0.0, 0.05, 0.10, 0.15, 0.20, 0.25], fanouts=[None], epochs=1, warmup=1,
                  rounds=2),
    "fig11": dict(datasets=["papers-s"], loaders=["tiered"], hot_fractions=[0.0, 0.05, 0.10, 0.20, 0.40],
                  fanouts=[None], samplings=["cpu", "uva", "distributed"], epochs=2, warmup=1),
}
"""Every predefined sweep by name:

* ``demo``: the paper's baselines and data tiering at 10% and 25% hot on a papers-like graph, in the paper's regime
  (Data Tiering §5.3-5.4), two recorded epochs after an untimed one, so that its table can mark a difference within
  the epoch-to-epoch spread as noise;
* ``fig8``: Figure 8 of Data Tiering (§5.3), epoch time by feature loader, each cell in two rounds (its loader built,
  an untimed epoch and a recorded one each time), the second in the reverse order of cells, so that a drift of the
  machine over the sweep does not read as a difference between loaders (``suite.sweep.run``); ``lookahead`` and
  ``fig10`` likewise;
* ``pipeline``: the same loaders with and without ``--pipeline``;
* ``disk``: the loaders that read from disk (Marius's tier below host memory) beside the whole table in host
  memory, one cold epoch each: the table's file is dropped from the page cache when a disk loader is built;
* ``lookahead``: the lookahead cache against data tiering's static hot tier in the same GPU memory (10% of the rows),
  in the paper's regime: PCIe bytes and epoch time;
* ``fig10``: Figure 10 of Data Tiering (§5.4), the tiered loader against the hot fraction;
* ``fig11``: Figure 11 of Data Tiering (§5.5), the multi-GPU hot tier under CPU, UVA and distributed sampling.  On a CPU
  device ``tierbench run`` leaves its ``uva`` sampling out (the GPU sampler over pinned host memory,
  ``suite.training.sampling``); asking for it, or for ``gpu``, by name there is an error.
"""
