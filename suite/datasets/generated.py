"""Feature tables made in memory when a dataset is opened, for the presets too large to keep one on disk.

A ``gpu_built`` preset (``papers-100m``: a 57 GB float32 table, on a machine with 64 GiB of disk) caches only its
CSR, labels and splits; its manifest says ``generated_features``.  Every process that opens the entry makes the table
again from the generator's counter-based draws (``suite.datasets.feature_table``: on the GPU where there is one,
else on every CPU core), with a progress bar, straight into page-aligned host memory, which the zero-copy loaders
then pin in place with no second copy (Data Tiering §4.1; PyTorch-Direct §3.1).  The classes the features are drawn
around are drawn again too (one pass over the nodes, ``suite.datasets.dcsbm.draw_classes``).

The table comes in the entry's own order.  In a reordered entry (``suite.datasets.reordered``) row i is node
``new_to_old[i]`` of its base: it is made from the reordered list of i, with the classes renumbered and the noise
drawn for the base's id, so it holds the base's row up to the order in which its neighbours' centroids are summed,
that is within float32 rounding.
"""

from __future__ import annotations

import numpy as np
import torch

from suite.datasets.dcsbm import draw_classes
from suite.datasets.errors import DatasetFileError
from suite.datasets.feature_table import generate_feature_table
from suite.datasets.presets import FEATURE_DTYPES, Preset
from tiering.graph.csr import CSRGraph

FIELD = "generated_features"
"""The manifest field of an entry whose feature table is generated when it is opened (its value: the table's dtype)."""
TORCH_DTYPES = {name: getattr(torch, name) for name in FEATURE_DTYPES}


def manifest_field(preset: Preset) -> dict:
    """What a ``gpu_built`` preset's manifest records of its table, which no file holds."""
    return {FIELD: {"dtype": preset.feature_dtype}}


def is_generated(manifest: dict) -> bool:
    return FIELD in manifest


def source_preset(manifest: dict, hint: str) -> Preset:
    """The preset an entry (or the base of a reordered entry) was built from, as its manifest records it."""
    source = manifest["source"]
    if source.get("kind") == "reordered":
        source = source.get("base_source", {})
    try:
        preset = Preset(**source["preset"])
    except (KeyError, TypeError, ValueError) as err:
        raise DatasetFileError(f"the manifest's preset cannot make a feature table ({err}). {hint}") from None
    recorded = manifest[FIELD].get("dtype") if isinstance(manifest[FIELD], dict) else None
    if preset.generator != "dcsbm" or preset.feature_dtype != recorded:
        raise DatasetFileError(f"the manifest names a feature table of {manifest[FIELD]} that its preset "
                               f"({preset.generator}, {preset.feature_dtype}) does not make. {hint}")
    return preset


def feature_table(manifest: dict, graph: CSRGraph, new_to_old: torch.Tensor | None, hint: str,
                  progress: bool = True) -> torch.Tensor:
    """The entry's feature table (N, D), made in page-aligned host memory; ``new_to_old`` for a reordered entry."""
    preset = source_preset(manifest, hint)
    classes = draw_classes(preset.num_nodes, preset.num_classes, preset.class_skew, preset.sub_seed("graph"))
    noise_ids = None
    if new_to_old is not None:
        noise_ids = np.ascontiguousarray(new_to_old.numpy())
        classes = classes[noise_ids]
    return generate_feature_table(graph, classes, preset.feature_dim, preset.signal, preset.neighbor_signal,
                                  preset.sub_seed("features"), dtype=TORCH_DTYPES[preset.feature_dtype],
                                  noise_ids=noise_ids, device=table_device(), progress=progress)


def table_device() -> torch.device | None:
    """Where the rows are made: on the GPU where there is one, else (``None``) on every CPU core."""
    return torch.device("cuda") if torch.cuda.is_available() else None
