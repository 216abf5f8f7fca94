"""int64 counters that stay on a device: a gather adds to them without synchronising, ``stats()`` reads them once."""

from __future__ import annotations

import contextlib
import threading

import torch


class DeviceCounters:
    """int64 counters on a device, updated without synchronising, in call order across streams.

    Each ``add``, ``zero`` and ``read`` runs on the caller's current stream
    after waiting for the event the previous operation recorded (whatever
    stream it ran on), then records its own; a lock makes wait-and-record one
    step between threads.  On a CPU device they are plain tensor operations.
    """

    def __init__(self, size: int, device: torch.device):
        self.values = torch.zeros(size, dtype=torch.int64, device=device)
        self.on_cuda = self.values.is_cuda
        self._last: torch.cuda.Event | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def in_order(self):
        """Around work on the caller's current stream that updates ``values`` (a kernel adding to them as it runs):
        it starts after the previous operation on the counters and the next one waits for it."""
        with self._lock:
            if not self.on_cuda:
                yield
                return
            stream = torch.cuda.current_stream(self.values.device)
            if self._last is not None:
                stream.wait_event(self._last)
            yield
            self._last = torch.cuda.Event()
            self._last.record(stream)

    def add(self, values: torch.Tensor) -> None:
        with self.in_order():
            self.values += values

    def zero(self) -> None:
        with self.in_order():
            self.values.zero_()

    def read(self) -> list[int]:
        with self.in_order():
            return self.values.tolist()
