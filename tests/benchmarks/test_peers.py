"""The DGL comparison's checks and plumbing, without DGL: a fake worker stands in for DGL's process."""

import io
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import peers, peers_dgl
from benchmarks.peers_dgl import edge_keys, same_graph, valid_sample
from benchmarks.workloads import power_law_graph


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("peers")
    graph = power_law_graph(1 << 12, avg_degree=8.0)
    peers.write_graph_files(graph, directory)
    return directory, graph


def test_same_graph_ignores_the_order_within_a_list_and_nothing_else():
    indptr, indices = np.array([0, 2, 3, 3]), np.array([1, 2, 0])
    keys = edge_keys(indptr, indices)
    assert same_graph(indptr, np.array([2, 1, 0]), indptr, keys) is None
    assert same_graph(indptr, np.array([1, 2, 2]), indptr, keys) == "list entries differ from the reference"
    assert same_graph(np.array([0, 1, 3, 3]), np.array([1, 2, 0]), indptr, keys) == \
        "list lengths differ from the reference"


def test_a_sample_must_be_real_distinct_edges_of_the_sampled_nodes_with_the_right_count():
    indptr, indices = np.array([0, 3, 4, 4]), np.array([0, 1, 2, 0])  # lists: 0: {0, 1, 2}, 1: {0}, 2: {}
    keys = edge_keys(indptr, indices)
    nodes = np.array([1, 0, 2])

    def check(owners, entries, fanout=2):
        return valid_sample(np.array(owners), np.array(entries), nodes, fanout, indptr, keys)

    assert check([0, 0, 1], [2, 0, 0]) is None
    assert check([0, 0, 1], [2, 1, 1]) == "a sampled edge is not in the graph"
    assert check([0, 0, 1], [2, 2, 0]) == "an edge was sampled twice"
    assert check([0, 1], [2, 0]) == "a node did not get min(fanout=2, list length) samples"
    assert check([0, 0, 0, 1], [0, 1, 2, 0], fanout=3) is None
    nodes = np.array([0, 2])
    assert check([0, 0, 1], [2, 0, 0]) == "an edge belongs to a node that was not sampled"


def test_every_side_passes_its_checks_and_the_row_holds_the_best_times(graph_files):
    directory, graph = graph_files
    reference = peers_dgl.Reference(directory)
    ours = peers.TierbenchSide(directory, reference)
    sides = {"tierbench": ours, "SciPy": peers.SciPySide(ours)}

    class FakeDGL:  # answers as DGL's worker does, doing tierbench's work
        def __init__(self):
            self.requests = []

        def request(self, what, task, params, check):
            self.requests.append((task, check))
            seconds, result = peers._timed(ours, task, params, check)
            if not check:
                return {"seconds": seconds}
            problem, *extra = result if isinstance(result, tuple) else (result,)
            return {"seconds": seconds, "problem": problem, "extra": extra}

    for task, params, _ in peers.TASKS:
        fake = FakeDGL()
        row = peers._race(sides, fake, task, params, repeat=2, what=task)
        assert fake.requests == [(task, True), (task, False), (task, False)]
        has_scipy = hasattr(sides["SciPy"], task.replace("-", "_"))
        assert row["checks"].count(": ok") == (3 if has_scipy else 2), row["checks"]
        assert row["tierbench_s"] > 0 and row["DGL_s"] > 0
        if task == "minibatches":
            parts = row["input_nodes_per_batch"].split("; ")
            per_batch = [float(part.split(": ")[1].replace(",", "")) for part in parts]
            assert per_batch[0] == per_batch[1] > 1024


def test_a_wrong_answer_is_reported_in_the_row_not_hidden(graph_files):
    directory, _ = graph_files
    reference = peers_dgl.Reference(directory)
    ours = peers.TierbenchSide(directory, reference)

    class WrongDGL:
        def request(self, what, task, params, check):
            return {"seconds": 0.5, "problem": "list entries differ from the reference", "extra": []} if check \
                else {"seconds": 0.5}

    row = peers._race({"tierbench": ours, "SciPy": peers.SciPySide(ours)}, WrongDGL(), "coo-to-csr", {}, 1, "")
    assert "DGL: list entries differ from the reference" in row["checks"]


def test_the_worker_answers_a_bad_request_with_an_error_line_and_goes_on():
    requests = io.StringIO(json.dumps({"task": "reorder", "params": {}, "check": False}) + "\n"
                           + json.dumps({"task": "reorder", "params": {}, "check": False}) + "\n")
    replies = io.StringIO()
    peers_dgl.serve(requests, replies)
    lines = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert len(lines) == 2 and all(line["error"].startswith("AttributeError") for line in lines)


def test_a_missing_dgl_environment_is_one_clear_error(tmp_path, capsys):
    assert peers.main(["--dgl-python", str(tmp_path / "nothing" / "python"), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: no Python at ") and "tox -e peers-dgl" in err and err.count("\n") == 1


def test_an_unknown_graph_is_refused_before_anything_runs(tmp_path, capsys):
    assert peers.main(["--dgl-python", "python", "--graphs", "uniform,nope", "--out", str(tmp_path)]) == 2
    assert "unknown graph 'nope'" in capsys.readouterr().err


def test_the_committed_race_is_redrawn_from_its_records(tmp_path):
    """results/peers: the table and the figure come back from peers.csv and peers.json alone, without racing."""
    committed = Path(__file__).resolve().parents[2] / "results" / "peers"
    paths = peers.render(committed, tmp_path)
    assert [path.name for path in paths] == ["peers.md", "peers.png"]
    assert paths[0].read_text() == (committed / "peers.md").read_text()
    assert paths[1].stat().st_size > 0
