"""Data-parallel training (Data Tiering §5.5): DDP on gloo processes, shares of the seeds, collective sampling."""

import json

import pytest
import torch
import torch.distributed as dist

from baselines.in_memory import InMemoryLoader
from suite.datasets import load_dataset
from suite.training.distributed import DistributedTrainer, share
from suite.training.trainer import majority_accuracy
from tests.gloo import run_gloo_groups


def test_shares_are_equal_cover_every_id_and_count_it_once():
    ids = torch.arange(10)
    parts = [share(ids, rank, 4) for rank in range(4)]
    assert [len(p) for p, _ in parts] == [3, 3, 3, 3]
    assert [c for _, c in parts] == [3, 3, 3, 1]
    counted = torch.cat([p[:c] for p, c in parts])
    assert torch.equal(torch.sort(counted).values, ids)
    assert share(torch.arange(0), 1, 2)[1] == 0
    few = [share(torch.tensor([7]), rank, 4) for rank in range(4)]  # fewer ids than processes
    assert [p.tolist() for p, _ in few] == [[7]] * 4 and [c for _, c in few] == [1, 0, 0, 0]


def train_on_tiny(rank, world, out_dir, samplings):
    """Four epochs on tiny sampled by each of ``samplings`` in turn, in one process group; rank 0 writes each's
    results to ``results-<sampling>.json``."""
    tiny = load_dataset("tiny", progress=False)
    for sampling in samplings:
        trainer = DistributedTrainer(tiny, InMemoryLoader(tiny.features), (10, 5), sampling=sampling, batch_size=128,
                                     seed=0)
        results = [trainer.train_epoch(epoch, progress=False) for epoch in range(4)]
        params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
        replicas = [torch.empty_like(params) for _ in range(world)]
        dist.all_gather(replicas, params)
        assert all(torch.equal(replicas[0], other) for other in replicas[1:]), f"the replicas diverged ({sampling})"
        assert trainer.evaluate("valid", epoch=3) == results[-1].valid_accuracy  # every process: the combined accuracy
        if rank == 0:
            (out_dir / f"results-{sampling}.json").write_text(json.dumps([r.as_record() for r in results]))


DDP_SAMPLINGS = {4: ("distributed",), 2: ("cpu", "distributed")}
"""The samplings ``train_on_tiny`` trains with on each number of processes."""


def train_and_run_the_bodies(rank, world, out_dir, runs, shm_dir):
    """In a gloo group of ``world`` processes: ``train_on_tiny`` with the world's samplings (``DDP_SAMPLINGS``), its
    results under ``out_dir/<world>``; in the group of 2, then every 2-process body of this module:
    ``refuse_gpu_samplings_on_cpu``, ``pipelined_and_plain`` and ``sweep_with_shm_dir``, one after the other, what
    each returned in ``<body>-rank<rank>.pt``."""
    results = out_dir / str(world)
    results.mkdir(exist_ok=True)
    train_on_tiny(rank, world, results, DDP_SAMPLINGS[world])
    if world == 2:
        for body, args in ((refuse_gpu_samplings_on_cpu, ()), (pipelined_and_plain, ()),
                           (sweep_with_shm_dir, (runs, shm_dir))):
            torch.save(body(rank, world, *args), out_dir / f"{body.__name__}-rank{rank}.pt")


@pytest.fixture(scope="module")
def groups(cache_dir, tiny, tmp_path_factory):
    """``train_and_run_the_bodies`` in a group of 4 processes and then of 2, started once for all this module's
    tests (a launch per test would start its processes again); the folder of what they wrote.  The processes have no
    numba CUDA simulator to stand in for a GPU (``refuse_gpu_samplings_on_cpu``); the other bodies sample on the CPU,
    which never runs it."""
    from suite.datasets.reordered import load_reordered

    out = tmp_path_factory.mktemp("distributed-training")
    (out / "shm").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIERBENCH_DATA", str(cache_dir))  # the processes' cache: the session's, where tiny is
        load_reordered("tiny", "wrpr", progress=False)  # prepared once, before the processes open it
        patch.setenv("NUMBA_ENABLE_CUDASIM", "0")
        run_gloo_groups(train_and_run_the_bodies, DDP_SAMPLINGS, out, out, str(out / "runs"), str(out / "shm"))
    return out


def returned(groups, body, world=2) -> list:
    """What ``body`` returned in each of the ``world`` processes of ``groups``, by rank."""
    return [torch.load(groups / f"{body.__name__}-rank{rank}.pt", weights_only=True) for rank in range(world)]


@pytest.mark.parametrize("world", [2, 4], ids=["2-cpu-distributed", "4-distributed"])
def test_ddp_training_on_tiny_reduces_the_loss_and_keeps_replicas_identical(tiny, groups, world):
    for sampling in DDP_SAMPLINGS[world]:
        results = json.loads((groups / str(world) / f"results-{sampling}.json").read_text())
        losses = [r["loss"] for r in results]
        assert losses[-1] < losses[0] * 0.8, (sampling, losses)
        assert results[-1]["valid_accuracy"] > majority_accuracy(tiny) + 0.1, sampling
        # each process runs its share of the seeds, 128 per minibatch
        assert results[0]["batches"] == -(-len(tiny.splits["train"]) // (128 * world))
        assert results[0]["hit_ratio"] == 1.0 and results[0]["sampled_edges"] > 0


def refuse_gpu_samplings_on_cpu(rank, world):
    tiny = load_dataset("tiny", progress=False)
    for sampling in ("uva", "gpu"):
        with pytest.raises(ValueError, match="CUDA"):
            DistributedTrainer(tiny, InMemoryLoader(tiny.features), (5,), sampling=sampling)
    with pytest.raises(ValueError, match="sampling"):
        DistributedTrainer(tiny, InMemoryLoader(tiny.features), (5,), sampling="nvme")


def test_unsupported_settings_are_refused(groups):
    assert returned(groups, refuse_gpu_samplings_on_cpu) == [None, None]  # it ran to its end in both processes


def test_run_with_gpus_launches_processes_that_train_identically_with_either_sampler(tiny, tmp_path, capsys):
    from suite.cli import main
    from suite.sweep.run import read_records

    argv = ["run", "--experiment", "fig11", "--datasets", "tiny", "--hot-fractions", "0,0.3", "--fanout", "5,5",
            "--epochs", "1", "--warmup", "0", "--batch-size", "256", "--gpus", "2", "--device", "cpu",
            "--runs", str(tmp_path), "-q"]
    assert main(argv) == 0
    records = read_records(tmp_path / "fig11.csv")
    assert len(records) == 4 and set(records["sampling"]) == {"cpu", "distributed"}
    assert (records["processes"] == 2).all() and (records["gpus"] == 0).all()
    # the same minibatches whichever sampler drew them and wherever the rows lived: the same training
    assert records["loss"].nunique() == 1 and records["valid_accuracy"].nunique() == 1
    by_hot = records.groupby("hot_fraction")
    assert (by_hot["hit_ratio"].max()[0.0], by_hot["hit_ratio"].min()[0.3]) == (0.0, by_hot["hit_ratio"].max()[0.3])
    assert by_hot["hit_ratio"].min()[0.3] > 0.3  # the hot tier holds the most requested 30% of the rows
    assert by_hot["pcie_payload_bytes"].max()[0.3] < by_hot["pcie_payload_bytes"].min()[0.0]
    assert main(["report", "--experiment", "fig11", "--runs", str(tmp_path), "--out", str(tmp_path / "fig11")]) == 0
    assert "Not a multi-GPU measurement" in (tmp_path / "fig11" / "fig11.md").read_text()
    assert (tmp_path / "fig11" / "fig11.png").read_bytes()[:4] == b"\x89PNG"


def pipelined_and_plain(rank, world):
    tiny = load_dataset("tiny", progress=False)
    runs = {}
    for pipeline in (True, False):
        trainer = DistributedTrainer(tiny, InMemoryLoader(tiny.features), (10, 5), sampling="distributed",
                                     batch_size=128, seed=0)
        runs[pipeline] = [trainer.train_epoch(epoch, progress=False, pipeline=pipeline) for epoch in range(2)]
        trainer.close()
        trainer.close()
    return {pipeline: [(r.losses, r.valid_accuracy, r.sampled_edges) for r in results]
            for pipeline, results in runs.items()}


def test_a_pipelined_epoch_with_distributed_sampling_trains_as_an_unpipelined_one(tiny, groups):
    # the sampler thread's all-to-alls run beside the training thread's all-reduces, on a group of their own
    for result in returned(groups, pipelined_and_plain):
        assert result[True] == result[False]
        assert all(len(losses) == -(-len(tiny.splits["train"]) // 256) for losses, _, _ in result[True])


def sweep_with_shm_dir(rank, world, runs, shm_dir):
    from suite.sweep.run import run_sweep

    sweep = dict(datasets=["tiny"], loaders=["tiered"], hot_fractions=[0.3], fanouts=[(5, 5)],
                 samplings=["distributed"], epochs=1, warmup=0, batch_size=256, progress=False)
    try:
        run_sweep("pipelined", runs, **sweep, shm_dir=f"{shm_dir}/missing")
    except ValueError as error:
        refused = str(error)
    for pipeline in (False, True):
        run_sweep("pipelined", runs, **sweep, pipeline=pipeline, shm_dir=shm_dir)
    return refused


def test_a_sweep_pipelines_distributed_sampling_with_its_host_tier_in_the_given_shm_dir(groups):
    from suite.sweep.run import read_records

    shm_dir = groups / "shm"
    refusals = returned(groups, sweep_with_shm_dir)
    assert refusals == [f"the shared-memory directory {shm_dir}/missing is not a directory: pass --shm-dir DIR "
                        "(shm_dir=), a directory on a tmpfs such as /dev/shm"] * 2
    records = read_records(groups / "runs" / "pipelined.csv")
    assert sorted(records["pipeline"]) == [False, True] and (records["sampling"] == "distributed").all()
    assert records["loss"].nunique() == 1 and records["valid_accuracy"].nunique() == 1
    assert (records["hit_ratio"] > 0.3).all() and list(shm_dir.iterdir()) == []


def test_run_refuses_a_shm_dir_that_is_not_a_directory_before_launching(tmp_path, capsys):
    from suite.cli import main

    argv = ["run", "--experiment", "fig11", "--datasets", "tiny", "--gpus", "2", "--device", "cpu",
            "--shm-dir", str(tmp_path / "missing"), "--runs", str(tmp_path), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: the shared-memory directory") and err.count("\n") == 1
    assert "--shm-dir DIR" in err and list(tmp_path.iterdir()) == []
