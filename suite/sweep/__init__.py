"""Sweeps: their cells, running them into typed records, reporting the records as figures, the first GPU visit."""
