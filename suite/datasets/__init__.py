"""Datasets: synthetic presets and real OGB node-property datasets, prepared into a checked cache.

>>> from suite.datasets import load_dataset
>>> ds = load_dataset("tiny")          # generated on first use, then read from the cache
>>> ds.graph, ds.features.shape, ds.splits["train"]
"""

import importlib

_EXPORTS = {
    "entry_path": "suite.datasets.build", "load_dataset": "suite.datasets.build",
    "prepare_dataset": "suite.datasets.build", "Dataset": "suite.datasets.dataset",
    "DatasetFileError": "suite.datasets.errors", "PRESETS": "suite.datasets.presets",
    "Preset": "suite.datasets.presets", "get_preset": "suite.datasets.presets",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    """The public API, imported when first asked for: the presets' names (``suite.datasets.presets``, which the
    command line's help lists) do not import torch and the builders with them."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'suite.datasets' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
