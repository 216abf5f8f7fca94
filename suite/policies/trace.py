"""Feature-access traces: which rows each minibatch of E epochs gathers, in order (Data Tiering §5.2).

A trace is what a placement policy is replayed against.  It is recorded by
the sampler training uses (``tiering.sampling.neighbors.minibatches``, the trainer's
seeds and epoch numbering), so a trace is reproducible bit for bit from
(graph, training ids, fanouts, batch, seed, epochs), and the trace of a
sweep's cell holds exactly the rows that cell's loader gathered.  A
minibatch's entry is its ``input_nodes`` as a set: every row it needs once,
sorted by id.

On disk (``save_trace`` / ``load_trace``) a trace is one ``.npz``, never a
pickle:

* ``deltas``: the ids, each minibatch's first id as it is and every other one
  as its difference from the previous (sorted ids make these small: on
  papers-s most fit in one byte), as uint32, deflated by
  ``np.savez_compressed``.  Deltas of sorted sets are the standard
  compressible form of posting lists; deflate on top needs nothing beyond
  numpy;
* ``batch_offsets`` (B + 1) and ``epoch_batches`` (E + 1): where each
  minibatch's ids and each epoch's minibatches start;
* ``meta``: JSON (dataset, fanouts, batch, seed, epochs, node count, the
  provenance of the recording) in a 0-d string array.

``load_trace`` checks every array before use: a trace from someone else
that does not describe sets of node ids is refused with a clear error.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from suite.errors import BadValue
from suite.io.atomic import atomic_path
from tiering.sampling.neighbors import NeighborSampler, minibatches

FORMAT = 1
"""The version of the on-disk layout; ``load_trace`` refuses any other."""
_ARRAYS = ("deltas", "batch_offsets", "epoch_batches", "meta")


@dataclasses.dataclass(frozen=True)
class AccessTrace:
    """The rows gathered by every minibatch of ``num_epochs`` epochs, in order.

    Minibatch b gathers ``ids[batch_offsets[b]:batch_offsets[b + 1]]``
    (distinct, ascending); epoch e is minibatches ``epoch_batches[e]`` to
    ``epoch_batches[e + 1]``.
    """

    num_nodes: int
    ids: np.ndarray
    batch_offsets: np.ndarray
    epoch_batches: np.ndarray
    meta: dict

    @property
    def num_epochs(self) -> int:
        return len(self.epoch_batches) - 1

    @property
    def num_batches(self) -> int:
        return len(self.batch_offsets) - 1

    @property
    def num_accesses(self) -> int:
        return len(self.ids)

    def epoch_slice(self, epoch: int) -> slice:
        """The positions in ``ids`` of epoch ``epoch``'s accesses."""
        first, last = self.epoch_batches[epoch], self.epoch_batches[epoch + 1]
        return slice(int(self.batch_offsets[first]), int(self.batch_offsets[last]))

    def epoch_accesses(self) -> np.ndarray:
        """Row reads per epoch (each minibatch reads each of its rows once)."""
        return np.diff(self.batch_offsets[self.epoch_batches])

    def counts(self) -> np.ndarray:
        """``(E, N)``: how many minibatches of each epoch read each row."""
        return np.stack([np.bincount(self.ids[self.epoch_slice(e)], minlength=self.num_nodes)
                         for e in range(self.num_epochs)])


def record_trace(graph, train_ids: torch.Tensor, fanouts, batch_size: int, *, seed: int = 0, epochs: int = 1,
                 first_epoch: int = 0, meta: dict | None = None, progress: bool = True) -> AccessTrace:
    """Sample epochs ``first_epoch`` .. ``first_epoch + epochs - 1`` as the trainer does and keep each minibatch's
    sorted ``input_nodes``."""
    sampler = NeighborSampler(graph, fanouts)
    per_epoch = -(-len(train_ids) // batch_size)
    parts, sizes = [], []
    with tqdm(total=epochs * per_epoch, desc=f"tracing {tuple(fanouts)}", unit="batch", disable=not progress,
              leave=False) as bar:
        for epoch in range(first_epoch, first_epoch + epochs):
            for batch in minibatches(sampler, train_ids, batch_size, seed, epoch, shuffle=True):
                parts.append(np.sort(batch.input_nodes.numpy()))
                sizes.append(len(parts[-1]))
                bar.update(1)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    settings = {"fanouts": list(fanouts), "batch_size": batch_size, "seed": seed, "epochs": epochs,
                "first_epoch": first_epoch}
    return AccessTrace(graph.num_nodes, np.concatenate(parts) if parts else np.zeros(0, np.int64), offsets,
                       np.arange(0, epochs * per_epoch + 1, per_epoch, dtype=np.int64), {**settings, **(meta or {})})


def save_trace(path, trace: AccessTrace) -> Path:
    """Write ``trace`` to ``path`` (a ``.npz``) through a temporary file; returns the path."""
    if trace.num_nodes > 2**32:
        raise BadValue(f"a trace holds node ids below 2**32, this graph has {trace.num_nodes:,} nodes")
    deltas = np.diff(trace.ids, prepend=0)
    starts = trace.batch_offsets[:-1][np.diff(trace.batch_offsets) > 0]
    deltas[starts] = trace.ids[starts]
    meta = {**trace.meta, "format": FORMAT, "num_nodes": trace.num_nodes}
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, deltas=deltas.astype(np.uint32), batch_offsets=trace.batch_offsets,
                                epoch_batches=trace.epoch_batches, meta=np.array(json.dumps(meta, sort_keys=True)))
    return path


def _refuse(path, why: str):
    raise BadValue(f"{path} is not a tierbench access trace: {why}")


def load_trace(path, expect: dict | None = None) -> AccessTrace:
    """Read and check a trace written by ``save_trace``; ``expect``: what its meta must say (its node count, the
    dataset and the settings it was recorded with), checked before anything of the trace's size is allocated."""
    path = Path(path)
    if not path.is_file():
        raise BadValue(f"{path} does not exist (record one with `tierbench policies`)")
    unreadable = (OSError, EOFError, ValueError, zipfile.BadZipFile)  # ValueError: a pickled array, refused
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as err:
        _refuse(path, f"it cannot be read as .npz without pickle ({err})")
    if not hasattr(archive, "files"):
        _refuse(path, "it is one array, not an .npz archive")
    try:
        with archive:
            files = sorted(archive.files)
            arrays = {name: archive[name] for name in _ARRAYS if name in files}
    except unreadable as err:
        _refuse(path, f"it cannot be read as .npz without pickle ({err})")
    if files != sorted(_ARRAYS):
        _refuse(path, f"it holds {files}, not {sorted(_ARRAYS)}")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError:
        _refuse(path, "its meta is not JSON")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        _refuse(path, f"format {meta.get('format') if isinstance(meta, dict) else None}, this version reads {FORMAT}")
    num_nodes = meta.get("num_nodes")
    if not isinstance(num_nodes, int) or num_nodes < 1:
        _refuse(path, f"num_nodes is {num_nodes!r}")
    for key, value in (expect or {}).items():
        if meta.get(key) != value:
            raise BadValue(f"{path} was recorded with {key} {meta.get(key)!r}, not {value!r}: it is the trace of "
                           "something else (remove it, and the trace is recorded again)")
    deltas, offsets, epochs = arrays["deltas"], arrays["batch_offsets"], arrays["epoch_batches"]
    for name, array, dtype in (("deltas", deltas, np.uint32), ("batch_offsets", offsets, np.int64),
                               ("epoch_batches", epochs, np.int64)):
        if array.dtype != dtype or array.ndim != 1:
            _refuse(path, f"{name} is {array.dtype} with {array.ndim} dimensions, not 1-D {np.dtype(dtype)}")
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(deltas) or np.any(np.diff(offsets) < 0):
        _refuse(path, "batch_offsets do not cut the ids into minibatches")
    if len(epochs) < 2 or epochs[0] != 0 or epochs[-1] != len(offsets) - 1 or np.any(np.diff(epochs) < 0):
        _refuse(path, "epoch_batches do not cut the minibatches into epochs")
    # rebuild: a running sum that restarts at every minibatch's first id
    ids = np.cumsum(deltas, dtype=np.int64)
    sizes = np.diff(offsets)
    starts = offsets[:-1][sizes > 0]
    before = np.where(starts > 0, ids[np.maximum(starts - 1, 0)], 0)
    ids -= np.repeat(before, sizes[sizes > 0])
    first = np.zeros(len(deltas), dtype=bool)
    first[starts] = True
    if np.any(deltas[~first] == 0):
        _refuse(path, "a minibatch's ids are not distinct and ascending")
    if len(ids) and ids.max() >= num_nodes:
        _refuse(path, f"an id reaches {int(ids.max())}, past the graph's {num_nodes:,} nodes")
    return AccessTrace(num_nodes, ids.astype(np.int32) if num_nodes < 2**31 else ids, offsets, epochs, meta)
