"""What the suite measures: each experiment runs, writes typed records with provenance, and reads them back.

Every experiment module offers a function that measures and writes its
records (``measure(..., out_dir) -> Path``) and ``read_records(path)``, which
loads and checks what it wrote; the figures of ``suite.figures`` draw those
records and never measure.  Experiments never import figures.

* ``sweeps``: the predefined sweeps of ``tierbench run`` (``EXPERIMENTS``);
  the sweep itself runs in ``suite.sweep`` and records through
  ``suite.sweep.records``;
* ``reuse``: measured feature reuse by scorer and by sampling depth
  (Figures 7 and 9, ``tierbench profile``);
* ``policies``: every placement policy replayed against recorded epochs
  (``tierbench policies``);
* ``plan``: the projected data-loading time per policy and capacity in a GPU
  memory budget (``tierbench plan``);
* ``disk``, ``bucket_orders``, ``bucket_training``: the disk-backed loaders
  against the disk's ceilings, and Marius's edge-bucket orderings and link
  prediction through its partition buffer (``tierbench disk``,
  ``bucket-orders``, ``bucket-train``);
* ``sar``: full-batch training, vanilla domain parallelism against SAR
  (``tierbench sar``);
* ``scorers``, ``datasets``, ``build_cost``: score concentration and speed,
  dataset statistics and degree curves, what building a dataset costs
  (``tierbench scorers``, ``datasets info``, ``datasets cost``);
* ``gpu``: the gather kernel's microbenchmarks on a GPU (``tierbench
  gpubench``).

Most write a CSV and a sidecar JSON of their facts and provenance through
``suite.io.records``.  ``tierbench report --figure NAME --records PATH``
draws any of them again (``suite.figures.FIGURES``).
"""
