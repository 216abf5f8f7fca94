"""GraphSAGE training through the loader interface, and measured reuse (Figures 7 and 9)."""

import numpy as np
import pandas as pd
import pytest
import torch

from baselines.in_memory import InMemoryLoader
from suite.cli import main
from suite.experiments.reuse import access_counts, coverage
from suite.training.model import GraphSAGE
from suite.training.trainer import Trainer, majority_accuracy
from tiering.features.lookahead import LookaheadLoader
from tiering.sampling.neighbors import NeighborSampler, minibatches


def trainer(tiny, seed=0):
    return Trainer(tiny, InMemoryLoader(tiny.features), (10, 5), batch_size=256, seed=seed)


def test_blocks_feed_sageconv_and_the_loss_decreases_on_tiny(tiny):
    t = trainer(tiny)
    results = [t.train_epoch(epoch, progress=False) for epoch in range(4)]
    losses = [r.loss for r in results]
    assert losses[-1] < losses[0] * 0.8, losses
    assert results[-1].valid_accuracy > majority_accuracy(tiny) + 0.1
    r = results[0]
    assert r.batches == 5 and r.sampled_edges > 0 and r.hit_ratio == 1.0
    assert r.sample_s > 0 and r.gather_s > 0 and r.train_s > 0 and r.epoch_s >= r.train_s
    assert r.pcie_rx_bytes_measured is None and r.as_record()["pcie_measured_scope"] == "no GPU in use"


def input_rows(trainer, epoch: int) -> int:
    """The unique input nodes of the epoch's training minibatches, summed: the rows its gathers ask for."""
    batches, _, _ = trainer._batches("train", epoch, shuffle=True)
    return sum(len(batch.input_nodes) for batch in batches)


def test_an_epoch_counts_the_rows_its_training_minibatches_gather_and_their_size(tiny):
    t = trainer(tiny)
    r = t.train_epoch(1, progress=False)
    assert r.rows_gathered == input_rows(t, 1) > 0  # the validation pass's gathers are not counted
    assert t.loader.stats().accesses > r.rows_gathered  # ... though the loader served them
    assert r.row_bytes == tiny.feature_dim * 4  # float32 rows


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_table_trains_as_the_same_values_in_float32_do(tiny, dtype):
    rows = tiny.features.to(dtype)
    half, wide = (Trainer(tiny, InMemoryLoader(table), (10, 5), batch_size=256, seed=0).train_epoch(0, progress=False)
                  for table in (rows, rows.float()))  # each trainer made (seeded) just before its epoch
    assert half.loss == wide.loss  # the rows widened as they enter the model


def count_rows_over_two_processes(rank, world):
    from suite.datasets import load_dataset
    from suite.training.distributed import DistributedTrainer

    tiny = load_dataset("tiny", progress=False)
    t = DistributedTrainer(tiny, InMemoryLoader(tiny.features), (10, 5), batch_size=256, seed=0)
    result = t.train_epoch(0, progress=False)
    return result.rows_gathered, input_rows(t, 0), result.hit_ratio


def test_a_data_parallel_epoch_sums_the_rows_every_process_gathered_for_training(tiny, tmp_path):
    from tests.gloo import run_gloo

    (combined, mine, hit_ratio), (combined_1, theirs, _) = run_gloo(count_rows_over_two_processes, 2, tmp_path)
    assert combined == combined_1 == mine + theirs and mine > 0 and theirs > 0
    assert hit_ratio == 1.0


def test_a_step_on_cuda_waits_for_the_training_stream_not_the_whole_gpu(tiny, monkeypatch):
    t = trainer(tiny)
    waited = []
    stream = type("Stream", (), {"synchronize": lambda self: waited.append(self)})()

    def whole_device(device=None):
        raise AssertionError("torch.cuda.synchronize would wait for the pipeline's gather stream too")

    monkeypatch.setattr(torch.cuda, "synchronize", whole_device)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: {torch.device("cuda:0"): stream}[device])
    t.device = torch.device("cuda:0")
    t._sync()
    assert waited == [stream]


def test_an_interrupted_epoch_stops_the_nvml_reader(tiny, monkeypatch):
    t = trainer(tiny)
    calls = []
    monkeypatch.setattr(t.pcie, "start", lambda: calls.append("start"))
    monkeypatch.setattr(t.pcie, "close", lambda: calls.append("close"))
    monkeypatch.setattr(t.model, "forward", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        t.train_epoch(0, progress=False)
    assert calls == ["start", "close"]


def test_training_is_reproducible_for_a_seed(tiny):
    a = [trainer(tiny, seed=3).train_epoch(e, progress=False).loss for e in range(2)]
    b = [trainer(tiny, seed=3).train_epoch(e, progress=False).loss for e in range(2)]
    assert a == b


def test_model_output_has_one_row_per_seed(tiny):
    batch = NeighborSampler(tiny.graph, (4, 3, 2)).sample(torch.arange(10))
    model = GraphSAGE(tiny.feature_dim, tiny.num_classes, num_layers=3, hidden=16)
    out = model(tiny.features[batch.input_nodes], batch.blocks)
    assert out.shape == (10, tiny.num_classes)


def test_in_memory_loader_gathers_exact_rows_and_refuses_bad_ids(tiny):
    loader = InMemoryLoader(tiny.features)
    ids = torch.tensor([5, 0, 5, 4095], dtype=torch.int32)
    assert torch.equal(loader.gather(ids), tiny.features[ids.long()])
    assert loader.gather(torch.tensor([], dtype=torch.int64)).shape == (0, tiny.feature_dim)
    with pytest.raises(IndexError, match=r"ids\[1\] = 4096 is not a row"):
        loader.gather(torch.tensor([1, 4096]))
    stats = loader.stats()
    assert stats.accesses == 4 and stats.hits == 4 and stats.gpu_bytes_resident == tiny.features.numel() * 4
    loader.reset_stats()
    assert loader.stats().accesses == 0 and loader.stats().gpu_bytes_resident > 0


def test_access_counts_count_each_node_once_per_minibatch(tiny):
    train = tiny.splits["train"]
    counts = access_counts(tiny.graph, train, (5, 5), batch_size=300, epochs=2, progress=False)
    expected = torch.zeros(tiny.num_nodes, dtype=torch.int64)
    sampler = NeighborSampler(tiny.graph, (5, 5))
    for epoch in range(2):
        for batch in minibatches(sampler, train, 300, 0, epoch, shuffle=True):
            expected[batch.input_nodes] += 1
    np.testing.assert_array_equal(counts, expected.numpy())
    assert counts.max() <= 2 * 5  # five minibatches per epoch, two epochs
    assert (counts[train.numpy()] >= 2).all()  # every seed is needed at least once per epoch


def test_coverage_curves_are_monotone_and_the_ideal_is_an_upper_bound():
    rng = np.random.default_rng(0)
    counts = rng.zipf(1.5, 1000).astype(np.int64)
    ideal = coverage(counts, counts.astype(float))
    noisy = coverage(counts, counts + rng.normal(0, 5, 1000))
    assert ideal[0] == 0 and ideal[-1] == pytest.approx(1.0) and noisy[-1] == pytest.approx(1.0)
    assert np.all(np.diff(ideal) >= 0) and np.all(np.diff(noisy) >= -1e-12)
    assert np.all(ideal >= noisy - 1e-12)
    assert coverage(np.array([0, 10, 0, 0]), np.array([0.0, 1.0, 0.0, 0.0]))[50] == pytest.approx(1.0)


@pytest.mark.parametrize("figure", [7, 9])
def test_profile_command_writes_table_curves_and_plot(tiny, tmp_path, figure, capsys):
    assert main(["profile", "--dataset", "tiny", "--figure", str(figure), "--out", str(tmp_path), "-q"]) == 0
    table = (tmp_path / f"fig{figure}.md").read_text()
    assert "device cpu:" in table and ("≥ 35%" in table if figure == 7 else "52% / 28%" in table)
    assert (tmp_path / f"fig{figure}.png").read_bytes()[:4] == b"\x89PNG"
    curves = (tmp_path / f"fig{figure}-curves.csv").read_text()
    assert "ideal (measured counts)" in curves


def test_train_command_prints_epochs_and_writes_a_table(tiny, tmp_path, capsys):
    assert main(["train", "--dataset", "tiny", "--epochs", "2", "--fanout", "5,5", "--out", str(tmp_path), "-q"]) == 0
    out = capsys.readouterr().out
    assert "epoch 1:" in out and "majority-class valid accuracy" in out
    table = (tmp_path / "train-tiny.md").read_text()
    assert "valid_accuracy" in table and "device cpu:" in table
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "tiny", "--fanout", "5,x"])
    assert exit_info.value.code == 2
    assert "fanouts are comma-separated integers" in capsys.readouterr().err


def test_train_without_validation_prints_and_records_no_accuracy(tiny, tmp_path, capsys):
    argv = ["train", "--dataset", "tiny", "--epochs", "2", "--fanout", "5,5", "-q", "--no-validation"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    assert "valid acc -  " in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "train-tiny.csv")["valid_accuracy"].isna().all()


def test_train_times_the_first_minibatches_of_each_epoch_when_asked(tiny, tmp_path, capsys):
    argv = ["train", "--dataset", "tiny", "--epochs", "2", "--fanout", "5,5", "--batch-size", "64", "-q"]
    assert main(argv + ["--minibatches", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    whole = -(-len(tiny.splits["train"]) // 64)
    assert whole > 3 and f"epoch 1: 3 of {whole} minibatches" in out
    table = pd.read_csv(tmp_path / "train-tiny.csv")
    assert list(table["batches"]) == [3, 3] and list(table["epoch_batches"]) == [whole, whole]
    assert list(table["batch_limit"]) == [3, 3]
    assert "batch_limit 3" in (tmp_path / "train-tiny.md").read_text()
    assert main(argv + ["--minibatches", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "tierbench: error: minibatches per epoch (--minibatches) must be an integer of at least 1, got 0\n"


@pytest.mark.parametrize("loader_name", ["in-memory", "cpu-gather", "uva"])
def test_the_pipeline_gives_the_same_minibatches_and_losses(tiny, loader_name):
    from suite.registry import create_loader

    def run(pipeline):
        t = Trainer(tiny, create_loader(loader_name, tiny), (10, 5), batch_size=200, seed=4)
        return [t.train_epoch(e, progress=False, pipeline=pipeline) for e in range(2)]

    plain, piped = run(False), run(True)
    assert [r.losses for r in piped] == [r.losses for r in plain]
    assert [r.valid_accuracy for r in piped] == [r.valid_accuracy for r in plain]
    assert piped[0].pipeline and not plain[0].pipeline and len(piped[0].losses) == 7
    assert piped[0].sample_s > 0 and piped[0].gather_s > 0 and piped[0].train_s > 0


def test_the_pipeline_changes_nothing_the_lookahead_cache_keeps(tiny):
    """The pipeline's sampler announces minibatches to the lookahead loader as it samples them, ahead of the window;
    the cache keeps the same rows, so the hits and PCIe bytes are those of an epoch without the pipeline."""

    def run(pipeline):
        loader = LookaheadLoader(tiny.features, tiny.num_nodes // 10, window=1)
        t = Trainer(tiny, loader, (10, 5), batch_size=40, seed=4)
        return [t.train_epoch(e, progress=False, pipeline=pipeline) for e in range(2)]

    plain, piped = run(False), run(True)
    assert len(plain[0].losses) > 10
    assert [r.losses for r in piped] == [r.losses for r in plain]
    assert [(r.hit_ratio, r.pcie_payload_bytes) for r in piped] == [(r.hit_ratio, r.pcie_payload_bytes) for r in plain]
    assert 0 < plain[1].hit_ratio < 1


@pytest.mark.parametrize("pipeline", [False, True])
def test_after_an_epoch_cut_short_the_lookahead_cache_is_still_run_by_its_rule(tiny, monkeypatch, pipeline):
    """An exception in the third training step leaves minibatches announced and never gathered; the next epoch (the
    trainer starts it with ``start_epoch``) gathers the minibatches it announces, admits rows and leaves none
    pending."""
    loader = LookaheadLoader(tiny.features, tiny.num_nodes // 10, window=3)
    t = Trainer(tiny, loader, (10, 5), batch_size=40, seed=4, validate=False)
    step, steps = t._step, []

    def third_step_fails(*args, **kwargs):
        steps.append(None)
        if len(steps) == 3:
            raise RuntimeError("cut short")
        return step(*args, **kwargs)

    monkeypatch.setattr(t, "_step", third_step_fails)
    with pytest.raises(RuntimeError, match="cut short"):
        t.train_epoch(0, progress=False, pipeline=pipeline)
    assert loader._pending  # announced, never gathered
    result = t.train_epoch(1, progress=False, pipeline=pipeline)
    assert result.batches > 10 and loader.rows_admitted > 0 and not loader._pending


def _finishes(fn, seconds=60):
    """Run ``fn`` in a thread; return what it raised (or None), failing if it hangs."""
    import threading

    outcome = {}

    def target():
        try:
            fn()
        except BaseException as error:  # noqa: B036 (recorded for the assertion)
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the pipeline hung"
    return outcome.get("error")


@pytest.mark.parametrize("stage", ["sample", "gather", "train"])
def test_an_exception_in_any_stage_stops_the_epoch_with_that_error(tiny, stage, monkeypatch):
    import threading

    t = trainer(tiny)
    boom = RuntimeError(f"boom in {stage}")
    if stage == "sample":
        monkeypatch.setattr(t.sampler, "sample", lambda *a, **k: (_ for _ in ()).throw(boom))
    elif stage == "gather":
        monkeypatch.setattr(t.loader, "gather", lambda ids: (_ for _ in ()).throw(boom))
    else:
        monkeypatch.setattr(t.model, "forward", lambda *a: (_ for _ in ()).throw(boom))
    before = threading.active_count()
    error = _finishes(lambda: t.train_epoch(0, progress=False, pipeline=True))
    assert error is boom
    assert threading.active_count() == before  # the stage threads were joined


def test_stopping_early_shuts_the_pipeline_down(tiny):
    import threading

    from suite.training.pipeline import Pipeline

    before = threading.active_count()
    stages = Pipeline(range(1000), lambda i: i * 2, capacity=2)
    for value in stages:
        if value == 10:
            break
    assert threading.active_count() == before
    assert list(Pipeline(range(5), lambda i: i + 1)) == [1, 2, 3, 4, 5]


def test_an_interrupted_train_writes_the_epochs_that_finished(tiny, tmp_path, capsys, monkeypatch):
    real = Trainer.train_epoch

    def interrupted_in_the_third(self, epoch, **kwargs):
        if epoch == 2:
            raise KeyboardInterrupt
        return real(self, epoch, **kwargs)

    monkeypatch.setattr(Trainer, "train_epoch", interrupted_in_the_third)
    out = tmp_path / "out"
    assert main(["train", "--dataset", "tiny", "--epochs", "4", "--batch-size", "512", "--out", str(out), "-q"]) == 130
    captured = capsys.readouterr()
    csv = out / "train-tiny.csv"
    assert captured.err == (f"tierbench: interrupted: training tiny after 2 of 4 epochs; their records are in "
                            f"{out / 'train-tiny.md'} and {csv}\n")
    import pandas as pd

    assert pd.read_csv(csv)["epoch"].tolist() == [0, 1]
    assert main(["train", "--dataset", "tiny", "--epochs", "4", "--batch-size", "512", "-q"]) == 130
    assert capsys.readouterr().err.endswith("after 2 of 4 epochs; their records are printed above (--out writes them)\n")


def test_a_train_interrupted_while_opening_its_dataset_is_one_line(tiny, tmp_path, capsys, monkeypatch):
    import suite.sweep.run

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(suite.sweep.run, "open_dataset", interrupted)
    assert main(["train", "--dataset", "tiny", "--out", str(tmp_path / "out"), "-q"]) == 130
    assert capsys.readouterr().err == ("tierbench: interrupted: opening tiny before training; no epoch ran, nothing "
                                       "written\n")
    assert not (tmp_path / "out").exists()
