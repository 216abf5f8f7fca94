"""Datasets: synthetic presets and real OGB node-property datasets, prepared into a checked cache.

>>> from suite.datasets import load_dataset
>>> ds = load_dataset("tiny")          # generated on first use, then read from the cache
>>> ds.graph, ds.features.shape, ds.splits["train"]
"""

from suite.datasets.build import entry_path, load_dataset, prepare_dataset
from suite.datasets.dataset import Dataset
from suite.datasets.errors import DatasetFileError
from suite.datasets.presets import PRESETS, Preset, get_preset

__all__ = ["Dataset", "DatasetFileError", "PRESETS", "Preset", "entry_path", "get_preset", "load_dataset", "prepare_dataset"]
