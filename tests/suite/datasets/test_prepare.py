"""Reordered datasets in the cache (tierbench prepare) and the SciPy peers used by the benchmarks."""

import numpy as np
import pytest
import torch

from suite.cli import main
from suite.datasets.reordered import is_prepared, load_reordered, prepare_reordered
from suite.measure.peers import adjacency, scipy_permute, scipy_reverse_pagerank
from suite.registry import scorer_params
from tiering.graph.reorder import reorder_graph
from tiering.graph.scores import reverse_pagerank, weighted_reverse_pagerank


@pytest.fixture(scope="module")
def tiny_by_wrpr(tiny):
    return load_reordered("tiny", "wrpr", progress=False)


def test_reordered_tiny_is_tiny_renumbered_hottest_first(tiny, tiny_by_wrpr):
    r = tiny_by_wrpr
    scores = weighted_reverse_pagerank(tiny.graph, tiny.splits["train"])
    assert torch.equal(r.scores, scores[r.new_to_old])
    assert torch.all(r.scores[:-1] >= r.scores[1:])
    assert torch.equal(r.old_to_new[r.new_to_old], torch.arange(tiny.num_nodes))
    # features, labels and splits moved with their nodes
    assert torch.equal(r.features, tiny.features[r.new_to_old])
    assert torch.equal(r.labels, tiny.labels[r.new_to_old])
    for split in ("train", "valid", "test"):
        assert torch.equal(r.splits[split], r.old_to_new[tiny.splits[split]])
        assert torch.equal(r.labels[r.splits[split]], tiny.labels[tiny.splits[split]])
    # the graph is the same graph under old_to_new
    ei, ej = tiny.graph.to_edge_index(), r.graph.to_edge_index()
    mapped = sorted(zip(r.old_to_new[ei[0]].tolist(), r.old_to_new[ei[1]].tolist()))
    assert sorted(zip(ej[0].tolist(), ej[1].tolist())) == mapped
    assert r.manifest["source"]["scorer"] == "wrpr" and r.manifest["source"]["params"] == {"damping": 0.85, "iterations": 5}


def test_prepare_reuses_the_entry_and_keys_it_by_parameters(tiny_by_wrpr):
    again = prepare_reordered("tiny", "wrpr", progress=False)
    assert again == tiny_by_wrpr.path
    other = prepare_reordered("tiny", "wrpr", {"iterations": 3}, progress=False)
    assert other != tiny_by_wrpr.path
    assert prepare_reordered("tiny", "degree", progress=False) not in (other, tiny_by_wrpr.path)


def test_is_prepared_says_whether_the_cache_holds_both_entries_and_builds_nothing(tiny_by_wrpr, tmp_path,
                                                                                  monkeypatch):
    assert is_prepared("tiny", "wrpr")
    assert not is_prepared("tiny", "wrpr", {"iterations": 2})  # another entry, never prepared
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))  # an empty cache: a fresh machine
    assert not is_prepared("tiny", "wrpr") and list(tmp_path.iterdir()) == []
    prepare_reordered("tiny", "wrpr", progress=False)
    assert is_prepared("tiny", "wrpr") and not is_prepared("tiny", "degree")


def test_corrupt_reordered_file_names_the_prepare_command(tiny_by_wrpr, tmp_path, monkeypatch):
    import shutil

    from suite.datasets import DatasetFileError

    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))
    shutil.copytree(tiny_by_wrpr.path.parent, tmp_path, dirs_exist_ok=True)
    perm = tmp_path / tiny_by_wrpr.path.name / "old_to_new.npy"
    data = bytearray(perm.read_bytes())
    data[-1] ^= 1
    perm.write_bytes(bytes(data))
    with pytest.raises(DatasetFileError, match=r"old_to_new.npy is corrupt.*tierbench prepare --dataset tiny --scorer wrpr"):
        load_reordered("tiny", "wrpr", progress=False)


def test_scorer_params_are_checked():
    assert scorer_params("rpr", tol=1e-6) == {"damping": 0.85, "tol": 1e-6, "max_iter": 1000}
    with pytest.raises(ValueError, match="scorer degree has no parameter 'damping'"):
        scorer_params("degree", damping=0.5)
    with pytest.raises(KeyError, match="unknown scorer 'pagerank'"):
        scorer_params("pagerank")


def test_prepare_command(tiny, capsys):
    assert main(["prepare", "--dataset", "tiny", "--scorer", "degree", "-q"]) == 0
    assert "tiny reordered by degree" in capsys.readouterr().out
    assert main(["prepare", "--dataset", "tiny", "--scorer", "degree", "--iterations", "3"]) == 2
    assert "scorer degree takes no --iterations" in capsys.readouterr().err


def test_scorers_command_writes_tables_with_the_papers_numbers(tiny, tmp_path, capsys):
    assert main(["scorers", "--dataset", "tiny", "--out", str(tmp_path), "-q"]) == 0
    concentration = (tmp_path / "concentration.md").read_text()
    assert "weighted reverse PageRank" in concentration and "≥ 35% of accesses" in concentration
    assert "device cpu:" in concentration
    speed = (tmp_path / "speed.md").read_text()
    assert "scipy A[p][:, p]" in speed and "31 s" in speed
    assert (tmp_path / "concentration.png").read_bytes()[:4] == b"\x89PNG"


def test_scipy_peers_compute_the_same_results(tiny):
    graph = tiny.graph
    ours = reverse_pagerank(graph).numpy()
    theirs, iterations = scipy_reverse_pagerank(graph)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    assert iterations > 5
    scores = torch.from_numpy(np.random.default_rng(0).random(graph.num_nodes))
    new, _, new_to_old = reorder_graph(graph, scores)
    permuted = scipy_permute(adjacency(graph), new_to_old.numpy())
    # same matrix; scipy keeps the column order of each row, ours keeps list order mapped through old_to_new
    assert np.array_equal(permuted.indptr, new.indptr.numpy())
    for v in (0, 1, 17, graph.num_nodes - 1):
        row = slice(new.indptr[v], new.indptr[v + 1])
        assert sorted(permuted.indices[row].tolist()) == sorted(new.indices[row].tolist())


def test_prepare_verifies_an_entry_it_reuses_and_says_so(tiny_by_wrpr, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))
    shutil.copytree(tiny_by_wrpr.path.parent, tmp_path, dirs_exist_ok=True)
    assert main(["prepare", "--dataset", "tiny", "--scorer", "wrpr", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / tiny_by_wrpr.path.name}; reused cached entry, checksums verified" in out
    perm = tmp_path / tiny_by_wrpr.path.name / "new_to_old.npy"
    data = bytearray(perm.read_bytes())
    data[-1] ^= 1  # a reordering that no longer matches its manifest, of the same size
    perm.write_bytes(bytes(data))
    assert main(["prepare", "--dataset", "tiny", "--scorer", "wrpr", "-q"]) == 2
    out, err = capsys.readouterr()
    assert not out.strip().startswith("tiny reordered") and err.count("\n") == 1
    assert "new_to_old.npy is corrupt" in err and "tierbench prepare --dataset tiny --scorer wrpr --force" in err
