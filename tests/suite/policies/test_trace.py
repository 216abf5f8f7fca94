"""Access traces: what the training sampler reads, bit for bit, and a file format that refuses what is not a trace."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from suite.policies.trace import AccessTrace, load_trace, record_trace, save_trace
from tiering.sampling.neighbors import NeighborSampler, minibatches

FANOUTS = (5, 3)
BATCH = 50


@pytest.fixture(scope="module")
def traced(tiny):
    return record_trace(tiny.graph, tiny.splits["train"], FANOUTS, BATCH, seed=3, epochs=2, first_epoch=1,
                        progress=False)


def test_a_trace_holds_each_minibatchs_input_nodes_in_the_trainers_order(tiny, traced):
    sampler = NeighborSampler(tiny.graph, FANOUTS)
    expected = [np.sort(batch.input_nodes.numpy()) for epoch in (1, 2)
                for batch in minibatches(sampler, tiny.splits["train"], BATCH, 3, epoch, shuffle=True)]
    assert traced.num_batches == len(expected)
    for b, rows in enumerate(expected):
        assert np.array_equal(traced.ids[traced.batch_offsets[b]:traced.batch_offsets[b + 1]], rows)
    per_epoch = -(-len(tiny.splits["train"]) // BATCH)
    assert traced.epoch_batches.tolist() == [0, per_epoch, 2 * per_epoch]
    assert traced.counts().sum() == traced.num_accesses


def test_recording_again_gives_the_same_trace(tiny, traced):
    again = record_trace(tiny.graph, tiny.splits["train"], FANOUTS, BATCH, seed=3, epochs=2, first_epoch=1,
                         progress=False)
    assert np.array_equal(again.ids, traced.ids) and np.array_equal(again.batch_offsets, traced.batch_offsets)


def test_a_saved_trace_reads_back_exactly(traced, tmp_path):
    path = save_trace(tmp_path / "t.npz", traced)
    back = load_trace(path)
    assert np.array_equal(back.ids, traced.ids)
    assert np.array_equal(back.batch_offsets, traced.batch_offsets)
    assert np.array_equal(back.epoch_batches, traced.epoch_batches)
    assert back.num_nodes == traced.num_nodes and back.meta["fanouts"] == list(FANOUTS)
    assert not list(tmp_path.glob(".*tmp"))


def _write(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _arrays(trace: AccessTrace) -> dict:
    meta = {"format": 1, "num_nodes": trace.num_nodes}
    deltas = np.diff(trace.ids, prepend=0)
    deltas[trace.batch_offsets[:-1]] = trace.ids[trace.batch_offsets[:-1]]
    return {"deltas": deltas.astype(np.uint32), "batch_offsets": trace.batch_offsets,
            "epoch_batches": trace.epoch_batches, "meta": np.array(json.dumps(meta))}


def _tiny_trace():
    ids = np.array([1, 4, 2, 3, 0, 4], dtype=np.int64)
    return AccessTrace(5, ids, np.array([0, 2, 4, 6]), np.array([0, 3]), {})


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update(deltas=np.array([1, 3, 2, 0, 0, 4], np.uint32)), "distinct and ascending"),
    (lambda a: a.update(deltas=np.array([1, 9, 2, 1, 0, 4], np.uint32)), "past the graph"),
    (lambda a: a.update(batch_offsets=np.array([0, 2, 9])), "batch_offsets"),
    (lambda a: a.update(epoch_batches=np.array([0, 2])), "epoch_batches"),
    (lambda a: a.update(deltas=a["deltas"].astype(np.int64)), "not 1-D uint32"),
    (lambda a: a.update(meta=np.array(json.dumps({"format": 7, "num_nodes": 5}))), "format 7"),
    (lambda a: a.pop("meta"), "it holds"),
    (lambda a: a.update(meta=np.array([{"format": 1}], dtype=object)), "cannot be read"),
])
def test_a_file_that_is_not_a_trace_is_refused_by_name(tmp_path, change, message):
    arrays = _arrays(_tiny_trace())
    assert np.array_equal(load_trace(save_trace(tmp_path / "ok.npz", _tiny_trace())).ids, _tiny_trace().ids)
    change(arrays)
    path = tmp_path / "bad.npz"
    _write(path, **arrays)
    with pytest.raises(ValueError, match=message):
        load_trace(path)


def test_a_missing_or_garbled_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_trace(tmp_path / "none.npz")
    (tmp_path / "garbled.npz").write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="cannot be read"):
        load_trace(tmp_path / "garbled.npz")


def test_a_trace_is_much_smaller_than_its_ids(tiny, tmp_path):
    trace = record_trace(tiny.graph, tiny.splits["train"], FANOUTS, BATCH, epochs=1, progress=False)
    path = save_trace(tmp_path / "t.npz", trace)
    assert path.stat().st_size < 0.5 * trace.num_accesses * 4
    assert torch.equal(torch.from_numpy(load_trace(path).ids).long(), torch.from_numpy(trace.ids).long())
