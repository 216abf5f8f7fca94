"""OGB layout both ways: written by tierbench, read by ogb's own NodePropPredDataset."""

import dataclasses
import pickle
import sys

import numpy as np
import pytest
import torch

from suite.datasets import PRESETS, DatasetFileError, ogb_format
from suite.datasets.build import convert_ogb, generate_arrays, labels_from_ogb
from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment

HINT = "Rebuild it with the test's own command."


def write_and_read(tmp_path, preset):
    graph, features, labels, splits = generate_arrays(preset)
    ogb_dir = tmp_path / "ogb_dataset"
    ogb_format.write_node_dataset(ogb_dir, graph.to_edge_index(), features, labels, splits)
    meta = ogb_format.synthetic_meta_dict(ogb_dir, "tierbench-test", preset.num_classes)
    return (graph, features, labels, splits), meta


@pytest.mark.parametrize(
    "preset",
    [
        PRESETS["tiny-rmat"],
        # papers-like: most nodes unlabelled, stored as NaN by us and by ogbn-papers100M
        dataclasses.replace(PRESETS["tiny"], symmetric=False, train_fraction=0.05, valid_fraction=0.01, test_fraction=0.02),
    ],
    ids=["rmat-all-labelled", "dcsbm-mostly-unlabelled"],
)
def test_round_trip_through_ogbs_loader_gives_identical_arrays(tmp_path, preset):
    (graph, features, labels, splits), meta = write_and_read(tmp_path, preset)
    for attempt in ("raw files", "ogb's processed pickle"):  # the second read takes ogb's torch.load path
        graph_dict, ogb_labels, split = ogb_format.read_node_dataset(meta, HINT)
        g2, f2, l2, s2 = convert_ogb(graph_dict, ogb_labels, split, "test")
        assert torch.equal(g2.indptr, graph.indptr), attempt
        assert torch.equal(g2.indices, graph.indices), attempt
        np.testing.assert_array_equal(f2, features)
        np.testing.assert_array_equal(l2, labels)
        for k in ("train", "valid", "test"):
            np.testing.assert_array_equal(s2[k], splits[k])
    assert (tmp_path / "ogb_dataset" / "processed" / "data_processed").exists()
    unlabelled = labels < 0
    raw = np.load(tmp_path / "ogb_dataset" / "raw" / "node-label.npz")["node_label"]
    if unlabelled.any():
        assert raw.dtype == np.float32 and np.isnan(raw[unlabelled, 0]).all()
        assert not np.isnan(raw[~unlabelled, 0]).any()
    else:
        assert raw.dtype == np.int64


def test_labels_from_ogb_handles_int_and_nan_columns():
    assert labels_from_ogb(np.array([[3], [1]])).tolist() == [3, 1]
    assert labels_from_ogb(np.array([[2.0], [np.nan], [0.0]], dtype=np.float32)).tolist() == [2, -1, 0]
    with pytest.raises(ValueError, match="single-task"):
        labels_from_ogb(np.zeros((3, 2)))


def test_missing_release_file_is_an_error_not_a_prompt(tmp_path, monkeypatch):
    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    (tmp_path / "ogb_dataset" / "RELEASE_v1.txt").unlink()
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("ogb prompted on stdin"))
    with pytest.raises(DatasetFileError, match="RELEASE_v1.txt is missing"):
        ogb_format.read_node_dataset(meta, HINT)


def test_missing_raw_files_is_an_error_not_a_download(tmp_path):
    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    (tmp_path / "ogb_dataset" / "raw" / "data.npz").unlink()
    with pytest.raises(DatasetFileError, match="would try to download"):
        ogb_format.read_node_dataset(meta, HINT)


def test_truncated_raw_file_names_the_dataset_and_the_fix(tmp_path):
    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    data = tmp_path / "ogb_dataset" / "raw" / "data.npz"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(DatasetFileError, match=r"ogb could not read the dataset in .*ogb_dataset.*Rebuild it"):
        ogb_format.read_node_dataset(meta, HINT)


class _Exploit:
    def __reduce__(self):
        return (print, ("arbitrary code ran",))


def test_a_processed_pickle_with_code_in_it_is_refused(tmp_path, capsys):
    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    processed = tmp_path / "ogb_dataset" / "processed"
    processed.mkdir(exist_ok=True)
    torch.save({"graph": _Exploit(), "labels": None}, processed / "data_processed", pickle_protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(DatasetFileError, match="ogb could not read"):
        ogb_format.read_node_dataset(meta, HINT)
    assert "arbitrary code ran" not in capsys.readouterr().out


def test_a_processed_pickle_with_code_beside_tensors_is_refused_in_one_line_without_torchs_advice(tmp_path, capsys):
    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    processed = tmp_path / "ogb_dataset" / "processed"
    processed.mkdir(exist_ok=True)
    torch.save({"graph": _Exploit(), "labels": torch.zeros(3)}, processed / "data_processed")  # torch.load's path
    with pytest.raises(DatasetFileError) as refused:
        ogb_format.read_node_dataset(meta, HINT)
    message = str(refused.value)
    assert "holds a reference to print" in message and "could run code" in message
    assert "\n" not in message and "weights_only" not in message
    assert "arbitrary code ran" not in capsys.readouterr().out


def test_real_meta_dict_comes_from_ogbs_master_table(tmp_path):
    meta = ogb_format.real_meta_dict("ogbn-arxiv", tmp_path)
    assert meta["dir_path"] == str(tmp_path / "ogbn_arxiv")
    assert int(meta["num classes"]) == 40 and meta["binary"] == "False"
    with pytest.raises(KeyError, match="not an OGB node-property dataset"):
        ogb_format.real_meta_dict("ogbn-nope", tmp_path)
    with pytest.raises(DatasetFileError, match="tierbench never downloads|no dataset directory"):
        ogb_format.read_node_dataset(meta, HINT)


def import_ogb_offline() -> None:
    """Import ogb through tierbench with every connection and name lookup recorded instead of made, and with an
    ``outdated`` module loaded whose version check records its calls (the real one may answer from a cache of its
    last check and connect to nothing); fail if there were any, or if a thread is left running half a second
    later."""
    import socket
    import threading
    import time
    import types

    assert not any(name == "ogb" or name.startswith("ogb.") for name in sys.modules), "ogb was imported already"
    calls = []
    socket.socket.connect = lambda self, addr, *a: calls.append(addr)
    socket.getaddrinfo = lambda *a, **k: calls.append(a) or []
    outdated = types.ModuleType("outdated")
    outdated.check_outdated = lambda *a, **k: calls.append(("check_outdated", a)) or (False, "")
    outdated.warn_if_outdated = lambda *a, **k: calls.append(("warn_if_outdated", a))
    sys.modules["outdated"] = outdated
    from suite.datasets.ogb_format import import_ogb_node_dataset

    import_ogb_node_dataset()
    time.sleep(0.5)
    names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    assert not calls and not names, (calls, names)
    assert sys.modules["outdated"] is outdated, "the outdated module loaded before is not put back"


def test_importing_ogb_through_tierbench_starts_no_version_check():
    """In a process that has not imported ogb (forked from the tests' forkserver, ``tests/processes.py``)."""
    process = forkserver_context().Process(target=in_callers_environment(import_ogb_offline))
    process.start()
    process.join(120)
    assert process.exitcode == 0


def write_mini_ogbn_products(root, n=60, e=200, d=5, seed=0):
    """A miniature of a real OGB download: CSV layout, one direction per edge (add_inverse_edge)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    base = root / "ogbn_products"
    raw = base / "raw"
    raw.mkdir(parents=True)
    edges = rng.integers(0, n, (e, 2))
    features = rng.standard_normal((n, d)).astype(np.float32)
    labels = rng.integers(0, 47, (n, 1))
    for name, frame in {
        "edge": edges,
        "num-node-list": [[n]],
        "num-edge-list": [[e]],
        "node-feat": features,
        "node-label": labels,
    }.items():
        pd.DataFrame(frame).to_csv(raw / f"{name}.csv.gz", header=False, index=False, compression="gzip")
    order = rng.permutation(n)
    split_dir = base / "split" / "sales_ranking"
    split_dir.mkdir(parents=True)
    for name, ids in (("train", order[:10]), ("valid", order[10:15]), ("test", order[15:])):
        pd.DataFrame(ids).to_csv(split_dir / f"{name}.csv.gz", header=False, index=False, compression="gzip")
    (base / "RELEASE_v1.txt").write_text("")
    return edges, features, labels[:, 0], order


def test_a_real_ogb_download_is_converted_through_ogbs_csv_reader(tmp_path):
    from suite.datasets import load_dataset

    edges, features, labels, order = write_mini_ogbn_products(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    ds = load_dataset("ogbn-products", ogb_root=tmp_path, progress=False)
    assert ds.num_classes == 47 and ds.manifest["source"] == {"kind": "ogb", "dir": str((tmp_path / "ogbn_products").resolve())}
    # ogb adds the inverse of every edge for ogbn-products; sampling lists hold both directions
    expected = sorted(map(tuple, np.concatenate([edges, edges[:, ::-1]]).tolist()))
    ei = ds.graph.to_edge_index()
    assert sorted(zip(ei[0].tolist(), ei[1].tolist())) == expected
    np.testing.assert_array_equal(ds.features.numpy(), features)
    np.testing.assert_array_equal(ds.labels.numpy(), labels)
    np.testing.assert_array_equal(ds.splits["train"].numpy(), order[:10])
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert set(before) <= set(after)  # tierbench removed nothing from the user's copy


def test_an_edge_file_cut_at_a_line_boundary_is_caught_by_the_listed_count(tmp_path, capsys):
    import gzip

    from suite.cli import main
    from suite.datasets import load_dataset

    write_mini_ogbn_products(tmp_path)
    edge_file = tmp_path / "ogbn_products" / "raw" / "edge.csv.gz"
    lines = gzip.decompress(edge_file.read_bytes()).splitlines(keepends=True)
    edge_file.write_bytes(gzip.compress(b"".join(lines[:100])))  # a valid gzip file of whole lines, half of them
    with pytest.raises(DatasetFileError, match=r"edge.csv.gz holds 100 edges but .*num-edge-list.csv.gz lists 200"):
        load_dataset("ogbn-products", ogb_root=tmp_path, progress=False)
    assert not (tmp_path / "ogbn_products" / "processed" / "data_processed").exists()  # ogb's pickle of it is gone
    assert main(["datasets", "generate", "ogbn-products", "--ogb-root", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: ") and err.count("\n") == 1 and "lists 200" in err


def test_ogb_cannot_download_even_past_tierbenchs_own_check(tmp_path, monkeypatch):
    import urllib.request

    _, meta = write_and_read(tmp_path, PRESETS["tiny"])
    (tmp_path / "ogb_dataset" / "raw" / "data.npz").unlink()
    monkeypatch.setattr(ogb_format, "check_readable_without_download", lambda *a: None)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("ogb reached the network"))
    with pytest.raises(DatasetFileError, match="ogb tried to download .*tierbench never downloads"):
        ogb_format.read_node_dataset(meta, HINT)
    module = sys.modules["ogb.nodeproppred.dataset"]
    assert module.download_url.__module__ == "ogb.utils.url"  # put back afterwards


def test_a_missing_dataset_is_a_one_line_error_without_a_network_attempt(tmp_path, capsys):
    from suite.cli import main

    assert main(["datasets", "generate", "ogbn-products", "--ogb-root", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: no dataset directory") and err.count("\n") == 1
    write_mini_ogbn_products(tmp_path)
    (tmp_path / "ogbn_products" / "raw" / "edge.csv.gz").unlink()
    assert main(["datasets", "generate", "ogbn-products", "--ogb-root", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "would try to download the dataset; tierbench never downloads" in err and err.count("\n") == 1


def test_a_heterogeneous_dataset_is_refused_before_ogb_reads_it(tmp_path):
    meta = ogb_format.real_meta_dict("ogbn-mag", tmp_path)
    with pytest.raises(ValueError, match="ogbn_mag holds a heterogeneous graph"):
        ogb_format.read_node_dataset(meta, HINT)


def _generate_products(tmp_path, capsys):
    from suite.cli import main

    status = main(["datasets", "generate", "ogbn-products", "--ogb-root", str(tmp_path), "-q"])
    return status, capsys.readouterr().err


def _write_split(path, ids):
    import gzip

    path.write_bytes(gzip.compress("".join(f"{i}\n" for i in ids).encode()))


def test_a_failed_import_leaves_no_processed_pickle_that_a_later_import_trusts(tmp_path, capsys):
    import gzip

    _, _, _, order = write_mini_ogbn_products(tmp_path)
    base = tmp_path / "ogbn_products"
    edge_file = base / "raw" / "edge.csv.gz"
    lines = gzip.decompress(edge_file.read_bytes()).splitlines(keepends=True)
    edge_file.write_bytes(gzip.compress(b"".join(lines[:-100])))  # 100 edges short of the listed 200
    valid = base / "split" / "sales_ranking" / "valid.csv.gz"
    valid.write_bytes(gzip.compress(b""))
    status, err = _generate_products(tmp_path, capsys)
    assert status == 2 and err.count("\n") == 1 and "valid.csv.gz is empty" in err
    assert not (base / "processed" / "data_processed").exists()
    _write_split(valid, order[10:15])  # the split is fixed; the edge list is still short
    status, err = _generate_products(tmp_path, capsys)
    assert status == 2 and err.count("\n") == 1 and "holds 100 edges but" in err and "lists 200" in err
    assert not (base / "processed" / "data_processed").exists()


def test_the_edge_count_is_checked_on_ogbs_processed_pickle_too(tmp_path, capsys):
    import gzip

    write_mini_ogbn_products(tmp_path)
    base = tmp_path / "ogbn_products"
    edge_file = base / "raw" / "edge.csv.gz"
    lines = gzip.decompress(edge_file.read_bytes()).splitlines(keepends=True)
    edge_file.write_bytes(gzip.compress(b"".join(lines[:-100])))
    meta = ogb_format.real_meta_dict("ogbn-products", tmp_path)
    (base / "processed").mkdir()
    with ogb_format._ogb_patched(cache_processed=True):  # ogb pickles the short list, unchecked, as ogb alone would
        ogb_format.import_ogb_node_dataset()(name="ogbn-products", meta_dict=meta)
    assert (base / "processed" / "data_processed").exists()
    capsys.readouterr()  # ogb's own progress bars
    status, err = _generate_products(tmp_path, capsys)
    assert status == 2 and err.count("\n") == 1
    assert "data_processed (ogb's pickle of the raw files" in err and "holds 100 edges but" in err


def test_a_truncated_split_file_is_one_line_and_leaves_no_pickle(tmp_path, capsys):
    write_mini_ogbn_products(tmp_path)
    base = tmp_path / "ogbn_products"
    valid = base / "split" / "sales_ranking" / "valid.csv.gz"
    valid.write_bytes(valid.read_bytes()[:-12])  # cut inside the gzip trailer
    status, err = _generate_products(tmp_path, capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert "valid.csv.gz is truncated or corrupt" in err and "Traceback" not in err
    assert not (base / "processed" / "data_processed").exists()


def test_a_missing_real_dataset_says_where_ogbs_layout_expects_it_not_to_force(tmp_path, capsys):
    for force in ([], ["--force"]):
        from suite.cli import main

        assert main(["datasets", "generate", "ogbn-products", "--ogb-root", str(tmp_path), "-q", *force]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--force" not in err
        assert f"ogb's layout expects the graph in {tmp_path / 'ogbn_products' / 'raw' / 'edge.csv.gz'}" in err
