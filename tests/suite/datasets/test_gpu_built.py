"""papers-100m's route at CI size: a ``gpu_built`` papers preset is drawn and sorted into lists with torch (on the CPU
here, on the GPU there), cached without a feature table, and opened with its table made in memory; it is the same
preset built on the CPU, array for array, and so is its reordered entry, its table within float32 rounding.  The
tests build the pair at 65,536 nodes, a quarter of ``papers-xs`` (whose ``gpu_built`` twin differs from it in
nothing else, as one test checks), so that the torch route's draws take seconds on a CI machine's CPU."""

import dataclasses

import numpy as np
import pytest
import torch

from suite.cli import main
from suite.datasets import load_dataset
from suite.datasets.build import build_device
from suite.datasets.dataset import array_file
from suite.datasets.generated import FIELD, table_device
from suite.datasets.presets import PRESETS
from suite.datasets.reordered import load_reordered
from suite.sweep.records import read_records

BASE, BUILT = "papers-64k", "papers-64k-gpu-built"


@pytest.fixture(scope="module")
def pair(cache_dir):
    """``(BASE, BUILT)``: ``papers-xs`` at 65,536 nodes and its ``gpu_built`` twin, registered as presets for this
    module, each in its original order and reordered by wrpr."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TIERBENCH_DATA", str(cache_dir))
    base = dataclasses.replace(PRESETS["papers-xs"], name=BASE, num_nodes=1 << 16)
    mp.setitem(PRESETS, BASE, base)
    mp.setitem(PRESETS, BUILT, dataclasses.replace(base, name=BUILT, gpu_built=True))
    try:
        yield {order: (load(BASE, progress=False), load(BUILT, progress=False))
               for order, load in (("base", load_dataset), ("wrpr", lambda name, **kw: load_reordered(name, "wrpr",
                                                                                                       **kw)))}
    finally:
        mp.undo()


def test_papers_xs_gpu_built_is_papers_xs_built_the_paper_scale_way():
    built = PRESETS["papers-xs-gpu-built"]
    assert built.gpu_built and dataclasses.replace(built, name="papers-xs", gpu_built=False) == PRESETS["papers-xs"]


@pytest.mark.parametrize("order", ["base", "wrpr"])
def test_the_graph_labels_and_splits_are_the_cpu_builds(pair, order):
    cpu_built, gpu_built = pair[order]
    assert torch.equal(gpu_built.graph.indptr, cpu_built.graph.indptr)
    assert torch.equal(gpu_built.graph.indices, cpu_built.graph.indices)
    assert gpu_built.graph.indices.dtype == torch.int32
    assert torch.equal(gpu_built.labels, cpu_built.labels)
    for split in ("train", "valid", "test"):
        assert torch.equal(gpu_built.splits[split], cpu_built.splits[split])
    if order == "wrpr":
        assert torch.equal(gpu_built.new_to_old, cpu_built.new_to_old)
        assert torch.equal(gpu_built.scores, cpu_built.scores)


@pytest.mark.parametrize("order", ["base", "wrpr"])
def test_no_feature_table_is_cached_and_one_is_made_in_page_aligned_memory(pair, order):
    cpu_built, gpu_built = pair[order]
    assert not array_file(gpu_built.path, "features").exists() and array_file(cpu_built.path, "features").exists()
    assert gpu_built.manifest[FIELD] == {"dtype": "float32"}
    assert gpu_built.features_in_memory and not cpu_built.features_in_memory
    assert gpu_built.features.data_ptr() % 4096 == 0
    assert gpu_built.features.shape == cpu_built.features.shape and gpu_built.features.dtype == torch.float32


def test_the_table_in_the_original_order_is_the_cpu_builds(pair):
    cpu_built, gpu_built = pair["base"]
    if table_device() is None:  # the same CPU kernel: bit for bit
        assert torch.equal(gpu_built.features, cpu_built.features)
    else:  # the GPU's twin of the kernel: within one float32 step (its log and cos are not the CPU's to the last bit)
        np.testing.assert_array_max_ulp(gpu_built.features.numpy(), cpu_built.features.numpy(), maxulp=1)
    assert gpu_built.manifest["build"]["device"] == str(build_device())


def test_the_reordered_table_is_the_cpu_builds_within_float32_rounding(pair):
    cpu_built, gpu_built = pair["wrpr"]
    made, permuted = gpu_built.features, cpu_built.features
    # the same terms summed in float64 in another order: at most one float32 step apart, and most rows bit for bit
    np.testing.assert_array_max_ulp(made.numpy(), permuted.numpy(), maxulp=1)
    same_rows = (made == permuted).all(dim=1).float().mean().item()
    assert same_rows > 0.5


def test_the_generated_entry_verifies_and_lists(pair, capsys):
    assert main(["datasets", "verify", BUILT]) == 0
    assert "damaged" not in capsys.readouterr().out


def test_a_sweep_trains_on_it_for_a_fixed_number_of_minibatches(pair, tmp_path):
    assert main(["run", "--experiment", "fig8", "--datasets", BUILT, "--loaders", "tiered,uva", "--hot-fractions",
                 "0.1", "--epochs", "1", "--warmup", "0", "--rounds", "1", "--minibatches", "3", "--batch-size", "64",
                 "--runs", str(tmp_path), "-q"]) == 0
    records = read_records(tmp_path / "fig8.csv")
    assert len(records) == 2 and (records["batches"] == 3).all() and (records["batch_limit"] == 3).all()
    train = len(pair["base"][1].splits["train"])
    assert (records["epoch_batches"] == -(-train // records["batch_size"])).all()
