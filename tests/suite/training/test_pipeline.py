"""The pipeline's stream safety and stage timing, with stand-in CUDA streams and events on a CPU."""

import contextlib

import pytest
import torch

from suite.measure.stage_events import StageEvents
from suite.training.pipeline import Pipeline, held_tensors
from tiering.sampling.neighbors import Block, MiniBatch


def test_a_block_and_a_minibatch_list_every_tensor_they_hold():
    edge_index, edge_weight = torch.tensor([[0, 1], [0, 0]]), torch.tensor([0.5, 0.5])
    weighted = Block(edge_index, num_src=2, num_dst=1, edge_weight=edge_weight)
    assert weighted.tensors() == [edge_index, edge_weight]
    assert Block(edge_index, 2, 1).tensors() == [edge_index]
    seeds, nodes = torch.tensor([7]), torch.tensor([7, 3])
    assert MiniBatch(seeds, nodes, [weighted]).tensors() == [seeds, nodes, edge_index, edge_weight]


def test_the_pipelines_tensor_walk_finds_a_gns_blocks_edge_weight():
    x, edge_index, edge_weight = torch.zeros(2, 4), torch.tensor([[0, 1], [0, 0]]), torch.tensor([0.5, 0.5])
    prepared = (MiniBatch(torch.tensor([7]), torch.tensor([7, 3]), []), x, [Block(edge_index, 2, 1, edge_weight)])
    found = list(held_tensors(prepared))
    assert any(t is edge_weight for t in found) and any(t is edge_index for t in found) and any(t is x for t in found)
    assert len(found) == 5  # seeds, input nodes, x, edge_index, edge_weight


class FakeClock:
    """The GPU's clock: each gather takes ``GATHER_MS`` on it, whatever the host's clock says."""

    GATHER_MS = 3.0

    def __init__(self):
        self.ms = 0.0


class FakeEvent:
    def __init__(self, clock, completes_at_once, enable_timing=False):
        self.clock, self.completes_at_once, self.timing = clock, completes_at_once, enable_timing
        self.ms = None
        self.completed = False

    def record(self, stream):
        self.ms = self.clock.ms
        stream.recorded.append(self)

    def query(self):
        self.completed = self.completed or self.completes_at_once
        return self.completed

    def synchronize(self):
        self.completed = True

    def elapsed_time(self, end):
        assert self.timing and end.timing and end.completed, "elapsed_time before the end event completed"
        return end.ms - self.ms


class FakeStream:
    def __init__(self, name):
        self.name, self.recorded, self.waited = name, [], []

    def wait_event(self, event):
        self.waited.append(event)


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda's streams and events replaced by stand-ins that record what the pipeline asks of them."""

    def install(completes_at_once):
        clock, streams, main = FakeClock(), [], FakeStream("main")

        def new_stream(device):
            streams.append(FakeStream(f"side {len(streams)}"))
            return streams[-1]

        monkeypatch.setattr(torch.cuda, "Stream", new_stream)
        monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
        monkeypatch.setattr(torch.cuda, "Event", lambda **kw: FakeEvent(clock, completes_at_once, **kw))
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: main)
        return clock, streams, main

    return install


def _gather(clock):
    def prepare(i):
        clock.ms += FakeClock.GATHER_MS
        return i * 2

    return prepare


def test_on_a_gpu_the_gather_is_timed_by_events_on_its_stream_once_they_complete(fake_cuda):
    clock, streams, main = fake_cuda(completes_at_once=True)
    stages = Pipeline(range(6), _gather(clock), capacity=2, device="cuda")
    seen = []
    for k, value in enumerate(stages):
        # the spans of the minibatches trained before this one have completed and are counted
        assert stages.busy["gather"] == pytest.approx(k * FakeClock.GATHER_MS / 1e3)
        seen.append(value)
    assert seen == [0, 2, 4, 6, 8, 10]
    assert stages.busy["gather"] == pytest.approx(6 * FakeClock.GATHER_MS / 1e3)  # GPU time, not the host's
    sampler, gatherer = sorted(streams, key=lambda s: len(s.waited))
    assert len(gatherer.waited) == 6 and gatherer.waited == sampler.recorded[:6]  # each gather waits for its sampling
    ends = gatherer.recorded[1::2]  # begin, end per minibatch
    assert main.waited == ends  # training waits for each gather's end


def test_given_stage_events_each_worker_times_its_stage_on_its_own_stream(fake_cuda):
    clock, streams, main = fake_cuda(completes_at_once=True)
    sample_ms = 2.0

    def produce():
        for i in range(5):
            clock.ms += sample_ms
            yield i

    events = StageEvents("cuda")
    assert list(Pipeline(produce(), _gather(clock), capacity=2, device="cuda", events=events)) == [0, 2, 4, 6, 8]
    seconds = events.seconds()
    assert seconds["sample"] == pytest.approx(5 * sample_ms / 1e3)
    assert seconds["gather"] == pytest.approx(5 * FakeClock.GATHER_MS / 1e3) and seconds["train"] == 0
    sampler, gatherer = sorted(streams, key=lambda s: len(s.waited))
    assert all(start in sampler.recorded and stop in sampler.recorded for start, stop in events.spans["sample"])
    assert len(gatherer.recorded) == 10  # the gather's own span, begin and end, reused: no further events
    assert [e for span in events.spans["gather"] for e in span] == gatherer.recorded


def test_spans_not_yet_complete_are_counted_at_the_end_of_the_epoch(fake_cuda):
    clock, _, _ = fake_cuda(completes_at_once=False)
    stages = Pipeline(range(4), _gather(clock), capacity=1, device="cuda")
    for _ in stages:
        assert stages.busy["gather"] == 0.0  # nothing has completed yet: nothing is read early
    assert stages.busy["gather"] == pytest.approx(4 * FakeClock.GATHER_MS / 1e3)


def test_on_a_cpu_the_gather_is_timed_by_the_host_clock():
    stages = Pipeline(range(3), lambda i: sum(range(20_000)) + i)
    assert list(stages) == [sum(range(20_000)) + i for i in range(3)]
    assert stages.busy["gather"] > 0 and stages.busy["sample"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("loader_name", ["uva", "gns"])
def test_on_a_gpu_the_pipeline_hands_training_what_the_sequential_path_does(tiny, loader_name):
    from suite.registry import create_loader
    from suite.training.trainer import Trainer

    loader = create_loader(loader_name, tiny, hot_fraction=0.25, device="cuda", progress=False)
    try:
        t = Trainer(tiny, loader, (10, 5), batch_size=200, seed=4)
        loader.start_epoch(0)
        sequential = [t._prepare(batch) for batch in t._batches("train", 0, shuffle=True)[0]]
        stages = Pipeline(t._batches("train", 0, shuffle=True)[0], t._prepare, device=t.device)
        piped = list(stages)
        assert len(piped) == len(sequential) == 7
        for (_, x, blocks), (_, x_ref, blocks_ref) in zip(piped, sequential):
            assert x.is_cuda and torch.equal(x, x_ref)
            for block, ref in zip(blocks, blocks_ref):
                assert len(block.tensors()) == len(ref.tensors()) == (2 if loader_name == "gns" else 1)
                assert all(a.is_cuda and torch.equal(a, b) for a, b in zip(block.tensors(), ref.tensors()))
        assert stages.busy["gather"] > 0  # from the events on the gather stream
    finally:
        loader.close()
