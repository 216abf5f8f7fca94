"""Domain-parallel full-batch GraphSAGE (SAR): vanilla and SAR give single-process full-batch training's loss
and gradients with 1, 2 and 4 gloo workers; SAR holds less; a partition that does not fit is refused."""

import json

import numpy as np
import pytest
import torch

from baselines.sar.metis import Partition, metis_partition
from suite.datasets import load_dataset
from suite.datasets.partitions import cached_partition
from suite.training.domain_parallel import LocalGraph
from suite.training.full_batch import WorkerData, reference_loss, sage_layers, step_loss, train_step
from tests.gloo import run_gloo_groups
from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment

HIDDEN, LAYERS = 16, 3
WORLDS = (4, 2, 1)


def one_step(rank, world, aggregation):
    tiny = load_dataset("tiny", progress=False)
    partition, _, _ = cached_partition(tiny, world)
    graph = LocalGraph.build(tiny.graph, partition, rank, world)
    data = WorkerData.of(tiny, graph.nodes)
    layers = sage_layers(tiny.feature_dim, HIDDEN, tiny.num_classes, LAYERS, seed=0)
    optimizer = torch.optim.Adam(layers.parameters(), lr=0.01)
    first = train_step(layers, optimizer, graph, data, aggregation)
    grads = [p.grad.clone() for p in layers.parameters()]
    second = train_step(layers, optimizer, graph, data, aggregation)
    return {"losses": [first.loss, second.loss], "grads": grads, "halo": graph.halo_rows(),
            "params": [p.detach().clone() for p in layers.parameters()]}


def reference(tiny):
    layers = sage_layers(tiny.feature_dim, HIDDEN, tiny.num_classes, LAYERS, seed=0)
    optimizer = torch.optim.Adam(layers.parameters(), lr=0.01)
    loss = reference_loss(layers, tiny)
    loss.backward()
    grads = [p.grad.clone() for p in layers.parameters()]
    optimizer.step()
    optimizer.zero_grad()
    second = reference_loss(layers, tiny)
    return [loss.item(), second.item()], grads


AGGREGATIONS = ("vanilla", "sar")


def one_step_of_each_aggregation(rank, world):
    """``one_step`` of every aggregation in one process group (a group per aggregation would start its processes
    again)."""
    return {aggregation: one_step(rank, world, aggregation) for aggregation in AGGREGATIONS}


def save_one_step_of_each_aggregation(rank, world, out_dir):
    """``one_step_of_each_aggregation`` in a group of ``world``, saved as ``world<W>-rank<rank>.pt``."""
    torch.save(one_step_of_each_aggregation(rank, world), f"{out_dir}/world{world}-rank{rank}.pt")


@pytest.fixture(scope="module")
def steps_by_world(cache_dir, tiny, tmp_path_factory):
    """Every rank's ``one_step_of_each_aggregation`` in each of ``WORLDS``, by world: one group per world, all of them
    in the same ``max(WORLDS)`` processes (started once, not once per world)."""
    out = tmp_path_factory.mktemp("full-batch")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIERBENCH_DATA", str(cache_dir))  # the processes' cache: the session's, where tiny is
        run_gloo_groups(save_one_step_of_each_aggregation, WORLDS, out, str(out))
    return {world: [torch.load(out / f"world{world}-rank{rank}.pt", weights_only=True) for rank in range(world)]
            for world in WORLDS}


@pytest.mark.parametrize("world", [1, 2, 4])
def test_a_step_equals_single_process_full_batch_training(tiny, steps_by_world, world):
    losses, grads = reference(tiny)
    by_rank = steps_by_world[world]
    for aggregation in AGGREGATIONS:
        results = [of_rank[aggregation] for of_rank in by_rank]
        if world > 1:
            assert all(r["halo"] > 0 for r in results)  # the parts do read each other's rows
        for result in results:
            assert result["losses"] == pytest.approx(losses, rel=1e-5), aggregation
            for got, want in zip(result["grads"], grads):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
            for got, want in zip(result["params"], results[0]["params"]):
                assert torch.equal(got, want)  # the workers' replicas agree exactly


def test_one_worker_needs_no_process_group(tiny):
    partition = metis_partition(tiny.graph, 1)
    graph = LocalGraph.build(tiny.graph, partition, 0, 1)
    layers = sage_layers(tiny.feature_dim, HIDDEN, tiny.num_classes, LAYERS, seed=0)
    loss = step_loss(layers, graph, WorkerData.of(tiny, graph.nodes), "sar")
    assert loss.item() == pytest.approx(reference_loss(layers, tiny).item(), rel=1e-5)


def test_metis_cuts_fewer_edges_than_a_random_split_and_balances(tiny):
    partition = metis_partition(tiny.graph, 4, seed=0)
    random = Partition(np.random.default_rng(0).integers(0, 4, tiny.num_nodes).astype(np.int32), 4)
    assert partition.edge_cut(tiny.graph) < 0.6 * random.edge_cut(tiny.graph)
    assert partition.balance() <= 1.05
    assert sorted(np.unique(partition.parts)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="at least 1"):
        metis_partition(tiny.graph, 0)


def test_a_partition_that_does_not_match_the_graph_is_refused(tiny):
    with pytest.raises(ValueError, match="the partition has 3 parts for 2 workers"):
        LocalGraph.build(tiny.graph, metis_partition(tiny.graph, 3), 0, 2)
    with pytest.raises(ValueError, match="covers 10 nodes; the graph has 4,096"):
        LocalGraph.build(tiny.graph, Partition(np.zeros(10, dtype=np.int32), 1), 0, 1)


def train_until_a_peer_dies(rank, world, store, out_dir):
    import datetime
    import os
    import time

    import torch.distributed as dist

    import suite.training.domain_parallel as domain_parallel
    from suite.training.errors import PeerLost

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    tiny = load_dataset("tiny", progress=False)
    graph = LocalGraph.build(tiny.graph, metis_partition(tiny.graph, world), rank, world)
    data = WorkerData.of(tiny, graph.nodes)
    layers = sage_layers(tiny.feature_dim, HIDDEN, tiny.num_classes, LAYERS, seed=0)
    swap, calls = domain_parallel._swap, []

    def dies_on_its_second_swap(*args):
        calls.append(1)
        if rank == 1 and len(calls) == 2:
            os._exit(3)  # killed in the middle of the forward pass
        return swap(*args)

    domain_parallel._swap = dies_on_its_second_swap
    start = time.perf_counter()
    try:
        train_step(layers, torch.optim.Adam(layers.parameters()), graph, data, "sar")
        message = "no error"
    except PeerLost as err:
        message = str(err)
    (out_dir / f"rank{rank}.txt").write_text(f"{time.perf_counter() - start:.1f}\n{message}")


def test_a_worker_that_dies_mid_step_makes_the_others_fail_clearly(tiny, tmp_path):
    context = forkserver_context()
    workers = [context.Process(target=in_callers_environment(train_until_a_peer_dies),
                               args=(rank, 2, tmp_path / "store", tmp_path))
               for rank in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert workers[1].exitcode == 3 and not (tmp_path / "rank1.txt").exists()
    seconds, message = (tmp_path / "rank0.txt").read_text().split("\n", 1)
    assert message.startswith("worker 0 of 2: another worker stopped during the step ("), message
    assert "\n" not in message and float(seconds) < 30  # before the group's timeout


def test_tierbench_sar_runs_each_aggregation_under_torchrun(tiny, tmp_path, capsys, monkeypatch):
    import pandas as pd

    from suite.cli import main

    out = tmp_path / "sar"
    assert main(["sar", "--dataset", "tiny", "--workers", "2", "--epochs", "2", "--hidden", "8", "--no-minibatch",
                 "--out", str(out), "-q"]) == 0
    table = pd.read_csv(out / "sar.csv")
    assert table[["workers", "aggregation"]].values.tolist() == [[2, "vanilla"], [2, "sar"]]
    assert table["loss"].nunique() == 1  # SAR trains exactly as vanilla does
    assert (table["peak GiB"] >= table["held GiB"]).all() and (table["held GiB"] >= table["process GiB"]).all()
    assert table["edge cut"].gt(0).all() and table["balance"].le(1.05).all()
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["sar-2-sar.json", "sar-2-vanilla.json"]
    text = (out / "sar.md").read_text()
    assert "Measured on a CPU" in text and "2x for GraphSAGE" in text and "--workers 2 " in text

    import suite.experiments.sar as sar

    launched = []
    monkeypatch.setattr(sar, "launch", lambda argv, workers: launched.append((workers, argv[argv.index("--aggregation")
                                                                                             + 1])))
    again = ["sar", "--dataset", "tiny", "--workers", "2", "--epochs", "2", "--hidden", "8", "--no-minibatch",
             "--out", str(out), "-q"]
    assert main(again) == 0 and launched == []  # recorded with the same settings: reused, nothing runs again
    assert pd.read_csv(out / "sar.csv")["loss"].tolist() == table["loss"].tolist()
    (out / "runs" / "sar-2-sar.json").write_text("{not json")  # a run cut off while writing is run again
    assert main(again) == 2 and launched == [(2, "sar")]  # (the stand-in launch wrote nothing to read)
    launched.clear()
    assert main([*again, "--rerun"]) == 2 and launched == [(2, "vanilla")]
    assert "the 2-worker run of vanilla ended without its records" in capsys.readouterr().err

    bad = next((tiny.path.parent / "partitions").glob("tiny-*-metis-2-seed0.npz"))
    with np.load(bad) as archive:
        meta = str(archive["meta"])
    for parts, claims, message in [
        (np.zeros(7, dtype=np.int32), {}, "has parts for 7 nodes; the graph has 4,096"),  # of another graph
        (np.zeros(4096, dtype=np.int32), {}, "leaves part 1 of 2 without a node"),  # all in one part
        (np.arange(4096, dtype=np.int32) % 2, {"fingerprint": "another graph"}, "computed with fingerprint "
         "'another graph'"),  # a graph of the same size
        (np.arange(4096, dtype=np.int32) % 2, {"seed": 5}, "computed with seed 5, not 0"),
    ]:
        np.savez(bad, parts=parts, meta=np.array(json.dumps({**json.loads(meta), **claims})))
        assert main(["sar", "--dataset", "tiny", "--workers", "2", "--no-minibatch", "--out", str(tmp_path / "x"),
                     "--rerun", "-q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tierbench: error: partition file ") and message in err, err
        assert err.count("\n") == 1 and not (tmp_path / "x").exists()
