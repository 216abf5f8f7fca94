"""Stage times by CUDA events on each stage's stream: the arithmetic with fake events, the epoch's columns on a GPU."""

import pytest
import torch

from baselines.in_memory import InMemoryLoader
from suite.measure.stage_events import STAGES, StageEvents
from suite.training.trainer import Trainer


class FakeEvent:
    """A timing event whose clock is a counter the test advances; it remembers the stream it was recorded on."""

    clock = [0.0]  # milliseconds

    def record(self, stream):
        self.at, self.stream = self.clock[0], stream

    def synchronize(self):
        self.synced = True

    def elapsed_time(self, other):
        return other.at - self.at


def test_spans_are_summed_per_stage_in_seconds_on_their_own_streams():
    events = StageEvents("cuda:0", event=FakeEvent)
    recorded = []
    for stage, stream, ms in (("sample", "s1", 2.0), ("gather", "s2", 5.0), ("sample", "s1", 3.0), ("train", "s0", 7.5)):
        start = events.begin(stream)
        FakeEvent.clock[0] += ms
        events.end(stage, start, stream)
        recorded.append(events.spans[stage][-1])
    assert events.seconds() == pytest.approx({"sample": 0.005, "gather": 0.005, "train": 0.0075})
    assert all(stop.synced and start.stream == stop.stream for start, stop in recorded)


def test_on_a_cpu_nothing_is_recorded_and_every_stage_is_none():
    events = StageEvents("cpu", event=FakeEvent)
    events.end("gather", events.begin(None), None)
    assert events.seconds() == {stage: None for stage in STAGES}
    assert not any(events.spans.values())


def test_a_cpu_epoch_leaves_the_event_columns_empty(tiny):
    result = Trainer(tiny, InMemoryLoader(tiny.features), (10, 5), batch_size=256).train_epoch(0, progress=False)
    record = result.as_record()
    assert record["sample_event_s"] is None and record["gather_event_s"] is None and record["train_event_s"] is None


@pytest.mark.gpu
@pytest.mark.parametrize("pipeline", [False, True])
def test_a_gpu_epoch_times_every_stage_by_events(tiny, pipeline):
    from baselines.uva import UVALoader

    loader = UVALoader(tiny.features.clone(), torch.device("cuda"))  # pinned in place: not the session's mapped file
    try:
        result = Trainer(tiny, loader, (10, 5), batch_size=256).train_epoch(0, progress=False, pipeline=pipeline)
    finally:
        loader.close()
    assert result.sample_event_s > 0 and result.gather_event_s > 0 and result.train_event_s > 0
    assert result.train_event_s <= result.epoch_s and result.gather_event_s <= result.epoch_s
    if pipeline:  # the gather thread's busy time is taken by the same events (suite.training.pipeline)
        assert result.gather_s == pytest.approx(result.gather_event_s)
