"""Overlapping sampling, gathering and training of different minibatches (seeds/001 §5, seeds/004 §3.3).

A producer/consumer chain of three stages joined by bounded queues
(capacity 2 by default, as in seeds/001)::

    sampler thread --queue--> gather thread --queue--> training (the caller's thread)

While the model trains on minibatch i, the gather thread fetches the
features of i+1 and the sampler draws i+2.  On a GPU the gather thread
issues its work on a CUDA stream of its own and records an event; the
training stream waits for that event before using the tensors (and marks
them as used on its stream, so the caching allocator does not recycle them
early).  The sampler's numba kernel releases the GIL, and torch's operators
do, so the threads really run side by side.

The pipeline never changes results: minibatches are drawn in the same order
from the same generator and trained in that order, so losses are identical
with and without it.  An exception in any stage travels down the chain and
is raised in the caller's thread; when the caller stops early (an exception
in training, or a break), the stages are told to stop and are joined.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Callable, Iterable

import torch


class _Failed:
    """An exception on its way down the chain."""

    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()
_POLL = 0.05  # seconds between checks of the stop flag while a queue is full or empty


class Pipeline:
    """Iterate over ``prepare(item)`` for every item of ``produce``, each stage in its own thread.

    ``busy`` holds the seconds each worker stage spent working (they overlap
    each other and the caller's training, so they do not add up to the wall time).
    """

    def __init__(self, produce: Iterable, prepare: Callable, *, capacity: int = 2, device=None):
        if capacity < 1:
            raise ValueError(f"queue capacity must be at least 1, got {capacity}")
        self.produce = produce
        self.prepare = prepare
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.sampled: queue.Queue = queue.Queue(capacity)
        self.ready: queue.Queue = queue.Queue(capacity)
        self.stop = threading.Event()
        self.busy = {"sample": 0.0, "gather": 0.0}
        self.threads = [
            threading.Thread(target=self._sample_stage, name="tierbench-sampler", daemon=True),
            threading.Thread(target=self._gather_stage, name="tierbench-gather", daemon=True),
        ]

    def _put(self, target: queue.Queue, item) -> bool:
        while not self.stop.is_set():
            try:
                target.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _get(self, source: queue.Queue):
        while not self.stop.is_set():
            try:
                return source.get(timeout=_POLL)
            except queue.Empty:
                continue
        return _DONE

    def _sample_stage(self) -> None:
        try:
            items = iter(self.produce)
            while not self.stop.is_set():
                start = time.perf_counter()
                item = next(items, _DONE)
                self.busy["sample"] += time.perf_counter() - start
                if not self._put(self.sampled, item) or item is _DONE:
                    return
        except BaseException as error:  # noqa: B036 (handed to the consumer, who raises it)
            self._put(self.sampled, _Failed(error))

    def _gather_stage(self) -> None:
        stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        try:
            while True:
                item = self._get(self.sampled)
                if item is _DONE or isinstance(item, _Failed):
                    self._put(self.ready, item)
                    return
                start = time.perf_counter()
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    prepared = self.prepare(item)
                    event = torch.cuda.Event() if stream is not None else None
                    if event is not None:
                        event.record(stream)
                self.busy["gather"] += time.perf_counter() - start
                if not self._put(self.ready, (prepared, event)):
                    return
        except BaseException as error:  # noqa: B036 (handed to the consumer, who raises it)
            self._put(self.ready, _Failed(error))

    def __iter__(self):
        for thread in self.threads:
            thread.start()
        try:
            while True:
                item = self._get(self.ready)
                if item is _DONE:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                prepared, event = item
                if event is not None:
                    current = torch.cuda.current_stream(self.device)
                    current.wait_event(event)
                    for tensor in _tensors(prepared):
                        tensor.record_stream(current)
                yield prepared
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join()


def _tensors(value):
    """Every CUDA tensor inside nested tuples, lists and objects with an ``edge_index``."""
    if isinstance(value, torch.Tensor):
        if value.is_cuda:
            yield value
    elif isinstance(value, (tuple, list)):
        for part in value:
            yield from _tensors(part)
    elif hasattr(value, "edge_index"):
        yield from _tensors(value.edge_index)
