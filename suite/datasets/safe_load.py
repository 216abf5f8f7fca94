"""Loading ogb's ``torch.save`` files without running code from them.

ogb caches a dataset it has read in ``processed/data_processed``: a
``torch.save`` archive whose pickle holds only numpy arrays, ints and None,
written with pickle protocol 4.  ogb reads it back with a bare
``torch.load``, which on torch >= 2.6 means ``weights_only=True``; that
unpickler rejects numpy arrays and does not even parse protocol 4 (its
``FRAME`` opcode), so every second read of a dataset fails.  The usual advice,
``weights_only=False``, would run any code a crafted file contains, and
processed files are passed around with datasets.

``safe_torch_load`` reads the archive's pickle with a standard-library
unpickler whose ``find_class`` allows only numpy's array and dtype
reconstruction (the "restricting globals" recipe of the ``pickle`` docs).
Archives that hold torch tensors (ogb's optional ``split_dict.pt``) go to
``torch.load(weights_only=True)``, which handles those safely; what it
refuses is refused in one line that names the object, without torch's
advice to load the file with ``weights_only=False``.
"""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import torch
from numpy._core import multiarray

_DTYPE_CLASSES = {type(np.dtype(t)).__name__: type(np.dtype(t)) for t in np.typecodes["All"] if t not in "Mm"}
_ALLOWED = {
    ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy.core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy._core.multiarray", "scalar"): multiarray.scalar,
    ("numpy.core.multiarray", "scalar"): multiarray.scalar,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    **{("numpy.dtypes", name): cls for name, cls in _DTYPE_CLASSES.items()},
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a dataset file") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("unexpected tensor storage in a numpy-only archive")


def safe_torch_load(path, *args, **kwargs):
    """``torch.load`` for ogb's files, never executing code from them (extra arguments are ignored)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickles = [n for n in names if n.endswith("/data.pkl")]
            has_storages = any("/data/" in n for n in names)
            if len(pickles) == 1 and not has_storages:
                return _NumpyOnlyUnpickler(io.BytesIO(archive.read(pickles[0]))).load()
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        raise pickle.UnpicklingError(f"{path} holds {_refused_object(str(err))}, which no dataset file holds; it was "
                                     "not loaded, as loading it could run code") from None


def _refused_object(message: str) -> str:
    """What torch's weights-only unpickler refused, from the one line of its message that says it ("Unsupported
    global: GLOBAL print was not an allowed global ..."), in a few words."""
    for line in message.splitlines():
        _, found, detail = line.partition("WeightsUnpickler error: ")
        if found:
            detail = detail.split(" was not ")[0].split(". ")[0].rstrip(".")
            prefix = "Unsupported global: GLOBAL "
            return f"a reference to {detail[len(prefix):]}" if detail.startswith(prefix) else f"what torch refuses ({detail})"
    return "what torch's weights-only unpickler refuses"
