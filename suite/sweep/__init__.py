"""Sweeps: their cells, running them into typed records, the first GPU visit (their figures are ``suite.figures``)."""
