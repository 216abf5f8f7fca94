"""A dataset is checked once, on the way in; a manifest on every read. Each bad input is one named error."""

import json
import shutil

import numpy as np
import pytest

from suite.cli import main
from suite.datasets import PRESETS, DatasetFileError, entry_path, load_dataset, validate
from suite.datasets.build import generate_arrays
from suite.datasets.dataset import load_entry
from suite.datasets.ogb_format import write_node_dataset

HINT = r"in OGB.s layout \(--ogb-root names the folder above it\): put a complete copy of OGB.s download there"


@pytest.fixture(scope="module")
def tiny_arrays():
    graph, features, labels, splits = generate_arrays(PRESETS["tiny"])
    return graph.to_edge_index(), features, labels, splits


def import_fake_papers100m(root, edge_index, features, labels, splits):
    """``tiny``'s arrays, stored as ogbn-papers100M is (binary files, split "time"), then imported."""
    base = root / "ogbn_papers100M"
    write_node_dataset(base, edge_index, features, labels, splits)
    (base / "split" / "random").rename(base / "split" / "time")
    return load_dataset("ogbn-papers100M", ogb_root=root, progress=False)


def test_a_well_formed_import_passes(tmp_path, tiny_arrays):
    ds = import_fake_papers100m(tmp_path, *tiny_arrays)
    assert ds.num_nodes == 4096 and ds.num_classes == 172 and ds.features.shape == (4096, 32)


def test_a_100_row_feature_table_for_4096_nodes_is_refused(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    with pytest.raises(DatasetFileError, match=r"raw/data.npz holds 100 feature rows for 4096 nodes\. .*" + HINT):
        import_fake_papers100m(tmp_path, edge_index, features[:100], labels, splits)
    assert not (tmp_path / "ogbn_papers100M" / "processed" / "data_processed").exists()  # no unchecked pickle left
    assert not entry_path("ogbn-papers100M", tmp_path).exists()


def test_nan_features_are_refused_with_the_row(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    features = features.copy()
    features[7, 3] = np.nan
    with pytest.raises(DatasetFileError, match=r"raw/data.npz: feature row 7 holds NaN or infinity"):
        import_fake_papers100m(tmp_path, edge_index, features, labels, splits)


def test_split_ids_outside_the_graph_are_refused(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    splits = {**splits, "train": np.append(splits["train"], 4096)}
    with pytest.raises(DatasetFileError, match=r"split/time/train.csv.gz: node id 4096 is outside \[0, 4096\)"):
        import_fake_papers100m(tmp_path, edge_index, features, labels, splits)


def test_an_empty_train_split_is_refused(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    with pytest.raises(ValueError, match="the train split is empty"):
        write_node_dataset(tmp_path / "x", edge_index, features, labels, {**splits, "train": np.array([], np.int64)})
    # a train.csv.gz that holds no id, as a user's file might
    base = tmp_path / "ogbn_papers100M"
    write_node_dataset(base, edge_index, features, labels, splits)
    (base / "split" / "random").rename(base / "split" / "time")
    train = base / "split" / "time" / "train.csv.gz"
    import gzip

    with gzip.open(train, "wb") as f:
        f.write(b"\n")
    with pytest.raises(DatasetFileError, match=r"split/time/train.csv.gz is empty: every split needs a node id"):
        load_dataset("ogbn-papers100M", ogb_root=tmp_path, progress=False)
    # an empty array, as ogb's split_dict.pt could hold one
    with pytest.raises(DatasetFileError, match=r"train.pt: the train split is empty"):
        validate.check_splits({"train": np.array([], np.int64), "valid": [1], "test": [2]}, 10, np.ones(10, bool),
                              dict.fromkeys(("train", "valid", "test"), tmp_path / "train.pt"), "hint")


def test_labels_outside_the_classes_are_refused(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    labels = labels.copy()
    labels[5] = 172  # ogbn-papers100M has 172 classes
    with pytest.raises(DatasetFileError, match=r"raw/node-label.npz: node 5 has label 172, outside \[0, 172\)"):
        import_fake_papers100m(tmp_path, edge_index, features, labels, splits)


def test_a_split_node_without_a_label_is_refused(tmp_path, tiny_arrays):
    edge_index, features, labels, splits = tiny_arrays
    labels = labels.copy()
    node = int(splits["valid"][0])
    labels[node] = -1  # stored as NaN
    with pytest.raises(DatasetFileError, match=rf"valid.csv.gz: node {node} is in the valid split but has no label"):
        import_fake_papers100m(tmp_path, edge_index, features, labels, splits)


def test_bad_imports_are_one_line_errors_on_the_command_line(tmp_path, tiny_arrays, capsys):
    edge_index, features, labels, splits = tiny_arrays
    base = tmp_path / "ogbn_papers100M"
    write_node_dataset(base, edge_index, features[:100], labels, splits)
    (base / "split" / "random").rename(base / "split" / "time")
    assert main(["datasets", "generate", "ogbn-papers100M", "--ogb-root", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierbench: error: ") and err.count("\n") == 1 and "100 feature rows" in err


# ------------------------------------------------------------------ manifest
@pytest.fixture
def copy_of_tiny(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path / "cache"))
    target = entry_path("tiny")
    shutil.copytree(tiny.path, target)
    return target


def rewrite_manifest(entry, change):
    path = entry / "manifest.json"
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: [m], "is not a tierbench manifest"),
        (lambda m: {**m, "files": None}, r"lacks or mistypes files \(dict\)"),
        (lambda m: {**m, "num_nodes": "4096"}, r"lacks or mistypes num_nodes \(int\)"),
        (lambda m: {k: v for k, v in m.items() if k != "split_sizes"}, r"lacks or mistypes split_sizes"),
        (lambda m: {**m, "files": {**m["files"], "../secret.npy": m["files"]["labels.npy"]}}, "outside its entry"),
        (lambda m: {**m, "files": {**m["files"], "/etc/passwd": m["files"]["labels.npy"]}}, "outside its entry"),
        (lambda m: {**m, "files": {**m["files"], "labels.npy": {"bytes": 1}}}, "needs a byte count and a SHA-256"),
    ],
    ids=["a-list", "files-null", "num_nodes-a-string", "no-split_sizes", "dotdot-key", "absolute-key", "no-sha256"],
)
def test_a_manifest_of_the_wrong_shape_is_refused(copy_of_tiny, change, message):
    rewrite_manifest(copy_of_tiny, change)
    with pytest.raises(DatasetFileError, match=message) as err:
        load_dataset("tiny", progress=False)
    assert "manifest.json" in str(err.value) and "tierbench datasets generate tiny --force" in str(err.value)


def test_a_manifest_name_through_a_symlink_out_of_the_entry_is_refused(copy_of_tiny, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(copy_of_tiny / "labels.npy", outside / "labels.npy")
    (copy_of_tiny / "elsewhere").symlink_to(outside)
    link = {"elsewhere/labels.npy": json.loads((copy_of_tiny / "manifest.json").read_text())["files"]["labels.npy"]}
    rewrite_manifest(copy_of_tiny, lambda m: {**m, "files": {**m["files"], **link}})
    with pytest.raises(DatasetFileError, match="leads outside the entry"):
        load_dataset("tiny", progress=False)


def test_an_array_whose_shape_disagrees_with_the_manifest_is_refused_on_open(copy_of_tiny):
    train = copy_of_tiny / "train.npy"
    np.save(train, np.load(train)[:-1])  # a consistent size in the manifest, so only the shape check can notice
    record = {"bytes": train.stat().st_size, "sha256": "0" * 64}
    rewrite_manifest(copy_of_tiny, lambda m: {**m, "files": {**m["files"], "train.npy": record}})
    with pytest.raises(DatasetFileError, match=r"train.npy has shape \(1228,\), but the manifest says \(1229,\)"):
        load_entry(copy_of_tiny, "hint", verify=False)
