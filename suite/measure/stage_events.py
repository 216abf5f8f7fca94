"""Stage times on the GPU's clock: CUDA events on the stream each stage of a minibatch runs on (PyTorch-Direct §3.3).

The host clock around a stage, read after synchronising the stream, counts
the time the host spent enqueueing and waiting as well as the GPU's.  A pair
of timing events recorded on the stage's own stream before and after its
work measures the span the stream took for it instead: the stream reaches the
first event once the work queued before it is done and the second when the
stage's last kernel ends (or when the host finished enqueueing, if later).
Events are read at the end of an epoch, after every stage is done, so timing
them never adds a synchronisation inside the epoch.

``StageEvents`` is device-agnostic: on a CPU it records nothing and
``seconds()`` is None for every stage.  ``event`` makes the events (a CUDA
timing event by default); the tests hand it a fake with the same three
methods (``record``, ``synchronize``, ``elapsed_time`` in milliseconds).
"""

from __future__ import annotations

import threading

import torch

STAGES = ("sample", "gather", "train")


def _cuda_event():
    return torch.cuda.Event(enable_timing=True)


class StageEvents:
    """Pairs of events per stage, summed into seconds on request."""

    def __init__(self, device, event=_cuda_event):
        self.enabled = torch.device(device).type == "cuda"
        self.event = event
        self.spans = {stage: [] for stage in STAGES}
        self.lock = threading.Lock()  # the pipeline's sampler and gather threads record concurrently

    def begin(self, stream):
        """The span's first event, recorded on ``stream`` (None on a CPU)."""
        if not self.enabled:
            return None
        start = self.event()
        start.record(stream)
        return start

    def end(self, stage: str, start, stream) -> None:
        """Close the span ``begin`` opened with an event on ``stream`` and keep it under ``stage``."""
        if start is None:
            return
        stop = self.event()
        stop.record(stream)
        with self.lock:
            self.spans[stage].append((start, stop))

    def add(self, stage: str, start, stop) -> None:
        """Keep a span whose two events the caller recorded itself (the pipeline's gather span)."""
        if self.enabled:
            with self.lock:
                self.spans[stage].append((start, stop))

    def seconds(self) -> dict[str, float | None]:
        """Each stage's spans summed, in seconds (waiting for the last events first); None on a CPU."""
        if not self.enabled:
            return {stage: None for stage in STAGES}
        totals = {}
        with self.lock:
            for stage, spans in self.spans.items():
                for _, stop in spans:
                    stop.synchronize()
                totals[stage] = sum(start.elapsed_time(stop) for start, stop in spans) / 1e3
        return totals
