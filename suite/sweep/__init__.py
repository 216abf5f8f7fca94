"""Sweeps: their cells, running them into typed records, the first GPU visit."""

RUNS_DIR = "out/runs"
"""Where sweeps write their records unless told (``--runs``); the committed ones are in ``results/runs``."""
