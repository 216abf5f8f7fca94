"""Overlapping sampling, gathering and training of different minibatches (DSP §5, PyTorch-Direct §3.3).

A producer/consumer chain of three stages joined by bounded queues
(capacity 2 by default, as in DSP)::

    sampler thread --queue--> gather thread --queue--> training (the caller's thread)

While the model trains on minibatch i, the gather thread fetches the
features of i+1 and the sampler draws i+2.  On a GPU each worker thread
issues its work on a CUDA stream of its own and records an event after it;
the next stage's stream waits for that event before using the tensors, and
marks them as used on its stream, so the caching allocator does not recycle
them early (a sampler that samples on the GPU hands over CUDA tensors too).  With GPU
sampling (``--sampling gpu`` or ``uva``, ``suite.training.sampling``) the fused
sampler's kernels run on the sampler thread's stream, so minibatch i+2 is
sampled and i+1 gathered on the GPU while i trains, bounded by the queues: the
sampler's hash tables are state, and only the sampler thread samples while the
pipeline runs (the validation pass samples after it, on the training stream,
and the sampler orders that after its last launch).
The sampler's numba kernel releases the GIL, and torch's operators do, so
the threads really run side by side.

Each worker stage's busy time is what it occupies its resource for.  The
sampler's is wall-clock time around each draw.  On a CPU the gather's is
wall-clock time around ``prepare``; on a GPU it is the time between two CUDA
events recorded on the gather stream before and after ``prepare``: the stream
reaches the first when the previous gather's work is done (or at once, when it
is idle) and the second when this gather's last kernel ends or the host has
finished enqueueing, whichever is later, so the span is the GPU time of the
gather together with the host-side part the stream waited for, never the CPU
enqueue alone.  Spans are read once their events have completed: after the
training step that used the minibatch, and at the end of the iteration.  On a
GPU each worker also records its spans (the sampler's on its own stream too)
into the ``events`` it is given (``suite.measure.stage_events``).

The pipeline never changes results: minibatches are drawn in the same order
from the same generator and trained in that order, so losses are identical
with and without it.  An exception in any stage travels down the chain and
is raised in the caller's thread; when the caller stops early (an exception
in training, or a break), the stages are told to stop and are joined.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Iterable

import torch

from suite.measure.stage_events import StageEvents


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

    def __init__(self, produce: Iterable, prepare: Callable, *, capacity: int = 2, device=None,
                 events: StageEvents | None = None):
        if capacity < 1:
            raise ValueError(f"queue capacity must be at least 1, got {capacity}")
        self.produce = produce
        self.prepare = prepare
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.events = events if events is not None else StageEvents("cpu")  # where the workers' spans go, if anywhere
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

    def _side_stream(self):
        """A CUDA stream of the calling stage's own on a GPU; ``None`` on a CPU."""
        return torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def _sample_stage(self) -> None:
        stream = self._side_stream()
        try:
            items = iter(self.produce)
            while not self.stop.is_set():
                start = time.perf_counter()
                if stream is None:
                    item, sampled = next(items, _DONE), None
                else:
                    with torch.cuda.stream(stream):
                        span = self.events.begin(stream)
                        item, sampled = next(items, _DONE), torch.cuda.Event()
                        sampled.record(stream)
                        if item is not _DONE:
                            self.events.end("sample", span, stream)
                self.busy["sample"] += time.perf_counter() - start
                if item is _DONE:
                    self._put(self.sampled, _DONE)
                    return
                if not self._put(self.sampled, (item, sampled)):
                    return
        except BaseException as error:  # noqa: B036 (handed to the consumer, who raises it)
            self._put(self.sampled, _Failed(error))

    def _gather_stage(self) -> None:
        stream = self._side_stream()
        try:
            while True:
                item = self._get(self.sampled)
                if item is _DONE or isinstance(item, _Failed):
                    self._put(self.ready, item)
                    return
                item, sampled = item
                if stream is None:
                    start = time.perf_counter()
                    prepared, span = self.prepare(item), None
                    self.busy["gather"] += time.perf_counter() - start
                else:
                    with torch.cuda.stream(stream):
                        stream.wait_event(sampled)
                        _mark_used_on(stream, item)
                        span = _StreamSpan(stream)
                        prepared = self.prepare(item)
                        span.close(stream)
                        self.events.add("gather", span.begin, span.end)
                if not self._put(self.ready, (prepared, span)):
                    return
        except BaseException as error:  # noqa: B036 (handed to the consumer, who raises it)
            self._put(self.ready, _Failed(error))

    def _add_gather_spans(self, spans: list, wait: bool) -> None:
        """Add the completed spans (all of them, waiting for each, when ``wait``) to the gather's busy time."""
        while spans and (wait or spans[0].done()):
            self.busy["gather"] += spans.pop(0).seconds()

    def __iter__(self):
        for thread in self.threads:
            thread.start()
        spans = []  # gather spans handed to training whose time is not yet counted, oldest first
        try:
            while True:
                item = self._get(self.ready)
                if item is _DONE:
                    self._add_gather_spans(spans, wait=True)
                    return
                if isinstance(item, _Failed):
                    raise item.error
                prepared, span = item
                if span is not None:
                    current = torch.cuda.current_stream(self.device)
                    current.wait_event(span.end)
                    _mark_used_on(current, prepared)
                    spans.append(span)
                yield prepared
                self._add_gather_spans(spans, wait=False)
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join()


class _StreamSpan:
    """Two timing events on a CUDA stream around the work enqueued between them."""

    def __init__(self, stream):
        self.begin = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.begin.record(stream)

    def close(self, stream) -> None:
        self.end.record(stream)

    def done(self) -> bool:
        return self.end.query()

    def seconds(self) -> float:
        """The span on the GPU's clock, waiting for its end first."""
        self.end.synchronize()
        return self.begin.elapsed_time(self.end) / 1e3


def held_tensors(value):
    """Every tensor inside nested tuples and lists and objects that list theirs in ``tensors()``
    (``tiering.sampling.neighbors.Block`` and ``MiniBatch``)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for part in value:
            yield from held_tensors(part)
    elif hasattr(value, "tensors"):
        yield from held_tensors(value.tensors())


def _mark_used_on(stream, value) -> None:
    """Tell the caching allocator that ``stream`` uses the CUDA tensors in ``value``, which another stream made."""
    for tensor in held_tensors(value):
        if tensor.is_cuda:
            tensor.record_stream(stream)
