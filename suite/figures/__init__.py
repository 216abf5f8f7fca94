"""The paper's figures and the suite's other tables, one module each.

* ``fig7`` / ``fig9``: measured data reuse by scorer and by sampling depth
  (``tierbench profile``; shared measurement in ``reuse``, dispatch by number
  in ``profile``);
* ``fig8`` / ``fig10`` / ``fig11``: the sweeps' epoch times, PCIe traffic and
  multi-GPU tier (``tierbench run``, then ``tierbench report``, which
  dispatches through ``SWEEP_FIGURES``; shared tables in ``sweep_tables``);
* ``demo``: the main job's panels, loader by loader, in the paper's regime;
* ``scorers``, ``datasets``, ``training``, ``gpu``: score concentration and
  speed, dataset statistics, training epochs, GPU microbenchmarks;
* ``policies`` / ``plan``: every placement policy against the optimum, and
  the projected plan for a GPU memory budget (``suite.policies``).

Each sweep figure module defines the predefined sweeps it reports
(``EXPERIMENTS``); ``EXPERIMENTS`` here is all of them, the sweeps
``tierbench run --experiment NAME`` knows.  A sweep's ``fanouts=None`` takes
each dataset's training fanouts (``suite.datasets.regime.default_fanouts``), and
a sweep's batch is its regime's (``regime``, default ``paper``).
"""

from __future__ import annotations

from suite.figures import demo, fig8, fig10, fig11

EXPERIMENTS = {**demo.EXPERIMENTS, **fig8.EXPERIMENTS, **fig10.EXPERIMENTS, **fig11.EXPERIMENTS}
"""Every predefined sweep by name: demo, fig8, pipeline, fig10, fig11."""

SWEEP_FIGURES = {"demo": demo.render, "fig8": fig8.render, "fig10": fig10.render, "fig11": fig11.render}
"""The figures ``tierbench report`` draws from a sweep's records, by the name ``--figure`` spells with its number."""
