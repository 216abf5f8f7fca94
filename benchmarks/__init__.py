"""Benchmarks, outside the tierbench package: the asv suite and the pytest-benchmark microbenchmarks.

The ``bench_*`` modules are the asv suite (``asv run``; see asv.conf.json).  Classes follow
numpy's and pandas' suites: ``params``/``param_names``, ``setup``, ``time_*`` for timings and
``track_*`` for derived numbers, all lower-is-better so that asv's regression detection reads
them the right way.  ``microbench/`` holds the pytest-benchmark microbenchmarks
(``tox -e microbench``); it has no ``__init__.py``, so asv, which imports only packages, never
imports it.  Both suites build their data with ``workloads`` and time with
``suite.measure.timing``.  ``peers`` races tierbench against DGL and SciPy on the same graphs
(``tox -e peers``); ``peers_dgl`` is its worker, run by DGL's own interpreter.  Neither defines a
``time_*`` or ``track_*`` name, so asv finds nothing to run in them.
"""
