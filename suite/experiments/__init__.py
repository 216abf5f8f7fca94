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
  (``tierbench policies``).
"""
