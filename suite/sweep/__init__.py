"""Sweeps: their cells, running them into typed records, the first GPU visit."""
