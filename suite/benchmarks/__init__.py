"""asv benchmarks (``asv run``); see asv.conf.json.  Classes follow numpy's and pandas' suites:
``params``/``param_names``, ``setup``, ``time_*`` for timings and ``track_*`` for derived
numbers, all lower-is-better so that asv's regression detection reads them the right way."""
