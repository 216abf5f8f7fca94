"""OGB's node-property-prediction layout, written by us and read by ``ogb`` itself.

Synthetic datasets are written exactly as OGB ships its binary datasets
(ogbn-papers100M is one)::

    <dir>/RELEASE_v1.txt
    <dir>/raw/data.npz            edge_index (2, E) int64, num_nodes_list, num_edges_list, node_feat (N, D) float32
    <dir>/raw/node-label.npz      node_label (N, 1): int64, or float32 with NaN for unlabelled nodes
    <dir>/split/<split>/{train,valid,test}.csv.gz

and every dataset, synthetic or a real ``ogbn-*`` a user already has, is read
back through ``ogb.nodeproppred.NodePropPredDataset`` with an explicit
``meta_dict``.  Three traps of that loader are handled here:

* **Version prompt.** ogb asks on stdin whether to delete the dataset when
  ``RELEASE_v<version>.txt`` is missing.  We write the file for synthetic
  datasets and refuse, with a message, to open a real one that lacks it.
* **Downloads.** ogb downloads when the raw files it looks for are missing.
  We check that raw or processed files exist first, and while ogb runs its
  download functions are replaced by one that raises: no path reaches the
  network.
* **``torch.load`` with ``weights_only``.** ogb caches what it read in
  ``processed/data_processed`` with ``torch.save`` and loads it with a plain
  ``torch.load``; on torch >= 2.6 that defaults to ``weights_only=True``,
  which rejects the file.  ogb's module is made to call ``safe_torch_load``
  instead (see ``safe_load``), never ``weights_only=False``: a processed
  file may come from someone else.
* **Start-up version check.** ``import ogb`` starts a thread that asks PyPI
  whether ogb is outdated (and importing ``outdated`` starts another).  We
  import ogb so that neither starts.

ogb slices the edge list and the feature table to the counts in
``num-edge-list`` and ``num-node-list``, so a truncated file would pass
silently; the edge count is checked against the listed one here, and the
feature and label rows against the node count in ``suite.datasets.validate``.
Every check runs on what ogb hands over, whether it read the raw files or
its ``processed/`` pickle of them: once the pickle exists ogb never looks at
the raw files again, so a pickle of a damaged copy would otherwise be
trusted for good.

For synthetic datasets ogb is kept from writing its ``processed/`` pickle
(tierbench keeps its own copy in ``.npy`` files; for papers-l the pickle
would be 17 GB more).  Nothing the user put in a real dataset is removed;
ogb adds its ``processed/`` cache there, as on any first read, and a read
that fails (a check, the split files, an interrupt) removes the pickle it
wrote, so no later read trusts an unchecked one.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import sys
import types
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from suite.datasets import validate
from suite.datasets.errors import DatasetFileError
from suite.datasets.safe_load import safe_torch_load
from suite.errors import BadValue, UnknownName
from suite.io.atomic import atomic_path

log = logging.getLogger(__name__)

OGB_VERSION = 1
SPLIT_NAME = "random"


# ----------------------------------------------------------------- importing
def import_ogb_node_dataset():
    """``NodePropPredDataset``, imported without ogb's network version check.

    ``ogb.version`` runs its check only when ``from outdated import
    check_outdated`` succeeds (and importing ``outdated`` starts a check of
    its own), so ogb is imported while ``outdated`` cannot be imported;
    any ``outdated`` module already loaded is put back afterwards.
    """
    if "ogb.nodeproppred" not in sys.modules:
        previous = sys.modules.get("outdated")
        sys.modules["outdated"] = None  # makes `import outdated` raise ImportError
        try:
            import ogb.nodeproppred  # noqa: F401
        finally:
            if previous is None:
                del sys.modules["outdated"]
            else:
                sys.modules["outdated"] = previous
    return sys.modules["ogb.nodeproppred"].NodePropPredDataset


def _skip_save(*args, **kwargs):
    pass


def _refuse_download(url, *args, **kwargs):
    raise DatasetFileError(f"ogb tried to download {url or 'the dataset'}; tierbench never downloads")


@contextlib.contextmanager
def _ogb_patched(cache_processed: bool):
    """ogb's dataset module loads with ``safe_torch_load``, saves its cache only if asked, and cannot download."""
    module = sys.modules["ogb.nodeproppred.dataset"]
    patches = {
        "torch": types.SimpleNamespace(load=safe_torch_load, save=torch.save if cache_processed else _skip_save),
        "decide_download": _refuse_download,
        "download_url": _refuse_download,
    }
    real = {name: getattr(module, name) for name in patches}
    for name, value in patches.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in real.items():
            setattr(module, name, value)


# ------------------------------------------------------------------- writing
def synthetic_meta_dict(dir_path, name: str, num_classes: int) -> dict:
    """The ``meta_dict`` ogb needs for a binary single-graph node dataset."""
    return {
        "dir_path": str(dir_path),
        "version": OGB_VERSION,
        "download_name": name,
        "url": "",  # never used: raw files always exist before ogb is called
        "num tasks": 1,
        "task type": "multiclass classification",
        "eval metric": "acc",
        "num classes": num_classes,
        "is hetero": "False",
        "binary": "True",
        "add_inverse_edge": "False",  # ogb refuses it for binary files; symmetric graphs store both directions
        "additional node files": "None",
        "additional edge files": "None",
        "split": SPLIT_NAME,
    }


def _label_column(labels: np.ndarray) -> np.ndarray:
    if (labels >= 0).all():
        return labels.astype(np.int64).reshape(-1, 1)
    column = labels.astype(np.float32).reshape(-1, 1)
    column[labels < 0] = np.nan
    return column


def _save_npz(path: Path, **arrays) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def write_node_dataset(dir_path, edge_index, features, labels, splits) -> list[Path]:
    """Write one graph in OGB's binary node-property layout; returns the files written.

    ``labels`` holds -1 for nodes without a label; they are stored as NaN, as
    in ogbn-papers100M, unless every node is labelled.
    """
    dir_path = Path(dir_path)
    raw = dir_path / "raw"
    num_nodes = len(labels)
    files = [raw / "data.npz", raw / "node-label.npz"]
    _save_npz(
        files[0],
        edge_index=edge_index,
        num_nodes_list=np.array([num_nodes], dtype=np.int64),
        num_edges_list=np.array([edge_index.shape[1]], dtype=np.int64),
        node_feat=features,
    )
    _save_npz(files[1], node_label=_label_column(labels))
    for split, ids in splits.items():
        if len(ids) == 0:
            raise ValueError(f"the {split} split is empty; ogb cannot read an empty split file")
        path = dir_path / "split" / SPLIT_NAME / f"{split}.csv.gz"
        text = "\n".join(map(str, np.asarray(ids, dtype=np.int64).tolist())) + "\n"
        with atomic_path(path) as tmp, open(tmp, "wb") as raw_file:
            # no name and no time stamp in the gzip header: the same ids give the same bytes
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw_file, mtime=0) as gz:
                gz.write(text.encode())
        files.append(path)
    release = dir_path / f"RELEASE_v{OGB_VERSION}.txt"
    with atomic_path(release) as tmp:
        tmp.write_text("written by tierbench in OGB's node-property layout\n")
    files.append(release)
    return files


# ------------------------------------------------------------------- reading
def real_meta_dict(name: str, root) -> dict:
    """ogb's own meta information for a real ``ogbn-*`` dataset stored under ``root``."""
    import_ogb_node_dataset()  # the first import of ogb must skip its network check
    package_dir = Path(sys.modules["ogb.nodeproppred"].__file__).parent
    master = pd.read_csv(package_dir / "master.csv", index_col=0, keep_default_na=False)
    if name not in master:
        raise UnknownName(f"{name!r} is not an OGB node-property dataset; known: {', '.join(master.keys())}")
    meta = dict(master[name])
    meta["dir_path"] = str(Path(root) / "_".join(name.split("-")))
    return meta


def check_readable_without_download(meta: dict, regenerate_hint: str) -> None:
    """Raise unless ogb can open ``meta['dir_path']`` without prompting or downloading."""
    if meta["is hetero"] == "True":
        raise BadValue(f"{meta['dir_path']} holds a heterogeneous graph; tierbench reads homogeneous node datasets")
    root = Path(meta["dir_path"])
    needed = root / "raw" / ("data.npz" if meta["binary"] == "True" else "edge.csv.gz")
    if not root.is_dir():
        raise DatasetFileError(f"no dataset directory {root}: ogb's layout expects the graph in {needed}. "
                               f"{regenerate_hint}")
    release = root / f"RELEASE_v{meta['version']}.txt"
    if not release.exists():
        raise DatasetFileError(
            f"{release} is missing, so ogb would ask whether to delete the dataset. If this copy is "
            f"current, create the file (touch it); otherwise replace the dataset. {regenerate_hint}"
        )
    if not needed.exists() and not (root / "processed" / "data_processed").exists():
        raise DatasetFileError(
            f"neither {needed} nor {root / 'processed' / 'data_processed'} exists, so ogb would try "
            f"to download the dataset; tierbench never downloads. {regenerate_hint}"
        )


def source_files(meta: dict) -> dict[str, Path]:
    """The file ogb reads each part of the dataset from (its ``processed/`` pickle once it has one)."""
    root = Path(meta["dir_path"])
    raw = root / "raw"
    processed = root / "processed" / "data_processed"
    if processed.exists():
        edges = features = labels = processed
    elif meta["binary"] == "True":
        edges = features = raw / "data.npz"
        labels = raw / "node-label.npz"
    else:
        edges, features, labels = raw / "edge.csv.gz", raw / "node-feat.csv.gz", raw / "node-label.csv.gz"
    split_dir = root / "split" / meta["split"]
    split_files = {k: split_dir / f"{k}.csv.gz" for k in ("train", "valid", "test")}
    if (split_dir / "split_dict.pt").is_file():
        split_files = dict.fromkeys(split_files, split_dir / "split_dict.pt")
    return {"edges": edges, "features": features, "labels": labels, **split_files}


def _listed_edge_count(meta: dict, hint: str) -> tuple[int, Path] | None:
    """The first graph's edge count as OGB's own count file states it, and that file (None without the file)."""
    raw = Path(meta["dir_path"]) / "raw"
    listed = raw / ("data.npz" if meta["binary"] == "True" else "num-edge-list.csv.gz")
    if not listed.is_file():
        return None
    try:
        if meta["binary"] == "True":
            with np.load(listed) as data:
                return int(data["num_edges_list"][0]), listed
        return int(pd.read_csv(listed, header=None, compression="gzip").iloc[0, 0]), listed
    except Exception as err:  # numpy, zipfile, gzip or pandas, on a damaged count file
        raise DatasetFileError(f"{listed}: the edge count cannot be read ({type(err).__name__}: "
                               f"{str(err).rstrip('.')}). {hint}") from err


def check_edge_count(meta: dict, graph: dict, sources: dict[str, Path], regenerate_hint: str) -> None:
    """ogb cuts the edge list at the listed count without a word: a shorter edge list is an error here.

    The list checked is the one ogb handed over, read from the raw files or
    from its ``processed/`` pickle of them; without a count file (raw files
    removed after ogb pickled them) there is nothing to count against.
    """
    count = _listed_edge_count(meta, regenerate_hint)
    if count is None:
        return
    listed, count_file = count
    per_edge = 2 if meta["add_inverse_edge"] == "True" else 1  # ogb adds the reverse of each edge
    read = graph["edge_index"].shape[1] // per_edge
    if read != listed:
        source = sources["edges"]
        cached = (" (ogb's pickle of the raw files: delete it so that ogb reads them again, and check them)"
                  if source.name == "data_processed" else "")
        raise DatasetFileError(
            f"{source}{cached} holds {read} edges but {count_file} lists {listed}: the edge list is truncated or "
            f"belongs to another dataset. {regenerate_hint}"
        )


def _bad_split_file(split_files) -> str | None:
    """What is wrong with the first empty or unreadable ``.csv.gz`` split file (None if each holds something)."""
    for path in split_files:
        if path.name.endswith(".csv.gz") and path.is_file():
            try:
                with gzip.open(path, "rb") as f:
                    empty = not f.read(4096).strip()
            except (OSError, EOFError, zlib.error) as err:  # gzip's errors on a truncated or corrupt file
                return f"{path} is truncated or corrupt ({type(err).__name__}: {str(err).rstrip('.') or 'no detail'})"
            if empty:
                return f"{path} is empty: every split needs a node id"
    return None


def read_node_dataset(meta: dict, regenerate_hint: str, cache_processed: bool = True, progress: bool = True):
    """Read through ``NodePropPredDataset`` and check; returns ``(graph_dict, labels, split_dict)`` as ogb gives them.

    The edge count is checked against OGB's count file and the arrays by
    ``validate.check_ogb_arrays``, whether ogb read the raw files or its
    ``processed/`` pickle; a failure names the file it came from
    (``source_files``).  A pickle ogb wrote on this read is kept only when
    every check passed: a read that fails in any way, or is interrupted,
    removes it, so that no later read trusts an unchecked pickle.
    ``cache_processed=False`` stops ogb from writing that pickle (a second
    copy of the whole dataset), for data tierbench caches itself.
    """
    check_readable_without_download(meta, regenerate_hint)
    NodePropPredDataset = import_ogb_node_dataset()  # noqa: N806 (a class)
    sources = source_files(meta)
    processed = Path(meta["dir_path"]) / "processed" / "data_processed"
    written_now = not processed.exists()
    if cache_processed:
        processed.parent.mkdir(exist_ok=True)  # ogb saves its cache there
    try:
        graph, labels, split = _read_through_ogb(NodePropPredDataset, meta, sources, regenerate_hint, cache_processed)
        check_edge_count(meta, graph, sources, regenerate_hint)
        validate.check_ogb_arrays(graph, labels, split, int(meta["num classes"]), sources, regenerate_hint, progress)
    except BaseException:  # removed on any way out but success, then raised on
        if written_now:
            processed.unlink(missing_ok=True)
        raise
    return graph, labels, split


def _read_through_ogb(NodePropPredDataset, meta: dict, sources: dict[str, Path], regenerate_hint: str,
                      cache_processed: bool):
    """``(graph_dict, labels, split_dict)`` as ogb reads them, its failures told as ``DatasetFileError``."""
    chatter = io.StringIO()
    try:
        with (
            _ogb_patched(cache_processed),
            contextlib.redirect_stdout(chatter),
            contextlib.redirect_stderr(chatter),
        ):
            try:
                dataset = NodePropPredDataset(name=meta["download_name"], meta_dict=meta)
            except DatasetFileError:
                raise
            except Exception as err:  # ogb raises whatever numpy, zipfile, pandas or pickle raised
                raise DatasetFileError(
                    f"ogb could not read the dataset in {meta['dir_path']}: {type(err).__name__}: "
                    f"{str(err).rstrip('.')}. A truncated or corrupt file there is the usual cause. {regenerate_hint}"
                ) from err
            try:
                split = dataset.get_idx_split()
            except Exception as err:
                what = _bad_split_file(sources[k] for k in ("train", "valid", "test")) or (
                    f"ogb could not read the split files in {sources['train'].parent}: {type(err).__name__}: "
                    f"{str(err).rstrip('.')}")
                raise DatasetFileError(f"{what}. {regenerate_hint}") from err
    finally:
        if chatter.getvalue().strip():
            log.debug("ogb: %s", chatter.getvalue().strip())
    graph, labels = dataset[0]
    return graph, labels, split
