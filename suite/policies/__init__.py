"""The placement-policy lab: record what minibatches read, replay every placement policy against it, and plan.

* ``trace``: feature-access traces of E epochs, recorded by the training sampler, stored as delta-encoded npz;
* ``replay``: what a replay reports, and the minibatch-at-a-time semantics every policy is replayed under;
* ``static``: fixed placements (scorers, PreSC, the static optimum);
* ``dynamic``: LRU, CLOCK and S3-FIFO caches as DGL GraphBolt keeps them;
* ``belady``: Belady's MIN, the bound on any cache of C rows;
* ``lab``: every policy by name (``POLICIES``) and one run of all of them at every capacity;
* ``planner``: data-loading time projected from a replay and a machine's ceilings.

``tierbench policies`` and ``tierbench plan`` (``suite.experiments.policies`` and ``suite.figures.policies``, ``suite.figures.plan``) report them.
"""
