"""The paper's regime: the footprint model against the sampler, and the batch every experiment takes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from suite.datasets import regime
from suite.datasets.build import generate_graph
from suite.datasets.presets import PRESETS
from tiering.sampling.neighbors import NeighborSampler, minibatches


@pytest.fixture(scope="module")
def papers_like():
    """A papers-like graph of 65,536 nodes: the papers presets' generator at a size CI builds in a second."""
    preset = dataclasses.replace(PRESETS["papers-s"], name="papers-64k", num_nodes=1 << 16)
    return preset, generate_graph(preset)[0]


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_the_footprint_model_predicts_the_measured_footprint(papers_like, batch):
    """The model draws the generator's lists lazily; on the built graph the sampler touches the same share
    (measured: within 4% here, and on papers-s and products-s at batches 1-1024)."""
    preset, graph = papers_like
    sampler = NeighborSampler(graph, (12, 12, 12))
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[: 40 * batch]
    sizes = [len(b.input_nodes) for b in minibatches(sampler, seeds, batch, 0, 0, shuffle=True)]
    measured = np.mean(sizes) / graph.num_nodes
    modelled = regime.footprint_model(preset, graph.num_nodes, batch, (12, 12, 12), batches=32)
    assert modelled == pytest.approx(measured, rel=0.06)


def test_a_graph_that_imitates_none_keeps_the_papers_batch_and_a_given_batch_wins():
    assert regime.resolve("tiny") == (1024, "unscaled")
    assert regime.resolve("tiny", "unscaled") == (1024, "unscaled")
    assert regime.resolve("papers-s", "paper", 77) == (77, "fixed")
    assert regime.default_fanouts("papers-m") == (12, 12, 12) and regime.default_fanouts("tiny") == (10, 10)
    with pytest.raises(ValueError, match="unknown regime 'small'; choose from paper, unscaled"):
        regime.resolve("tiny", "small")


def test_the_paper_regimes_batch_matches_the_imitated_graphs_footprint(monkeypatch):
    """tiny made to imitate a graph 16x its size: the batch whose footprint share matches 1024 seeds there."""
    imitated = regime.ImitatedGraph("tiny x16", 16 * 4096, 1024, (10, 5))
    monkeypatch.setitem(regime.IMITATED, PRESETS["tiny"].imitates, imitated)
    regime._matched_batch.cache_clear()
    try:
        batch, name = regime.resolve("tiny")
        target = regime.footprint_model(PRESETS["tiny"], imitated.num_nodes, 1024, (10, 5))
        shares = [regime.footprint_model(PRESETS["tiny"], 4096, b, (10, 5)) for b in (batch - 1, batch, batch + 1)]
    finally:
        regime._matched_batch.cache_clear()
    assert name == "paper" and 1 < batch < 1024 // 4
    assert abs(shares[1] - target) <= min(abs(shares[0] - target), abs(shares[2] - target))
    assert regime.resolve("tiny", "unscaled") == (1024, "unscaled")


def test_a_modelled_share_is_kept_in_the_cache_and_read_back_by_the_next_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))

    def share():
        regime._footprint.cache_clear()  # as a new process finds it
        return regime.footprint_model(PRESETS["tiny"], 4096, 64, (10, 5))

    modelled = share()
    kept = list((tmp_path / regime.FOOTPRINTS).glob("*.json"))
    assert len(kept) == 1
    with monkeypatch.context() as patch:
        patch.setattr(regime, "_modelled_footprint", lambda *args: pytest.fail("modelled again"))
        assert share() == modelled

    text = kept[0].read_text()
    for damaged in ("{not json", text.replace(repr(modelled), "1.5"), text.replace('"batch_size": 64', '"batch_size": 65')):
        kept[0].write_text(damaged)  # a damaged file, a share out of range, a file of another setting
        assert share() == modelled and kept[0].read_text() == text  # modelled again and kept in its place


def test_a_read_only_cache_keeps_no_share_and_no_cache_root_is_no_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERBENCH_DATA", str(tmp_path))
    monkeypatch.setattr(regime, "writable", lambda directory: False)
    regime._footprint.cache_clear()
    modelled = regime.footprint_model(PRESETS["tiny"], 4096, 32, (10, 5))
    assert not (tmp_path / regime.FOOTPRINTS).exists()
    monkeypatch.delenv("TIERBENCH_DATA")
    monkeypatch.setattr(regime, "cache_root", lambda: (_ for _ in ()).throw(regime.BadValue("no platformdirs")))
    regime._footprint.cache_clear()
    assert regime.footprint_model(PRESETS["tiny"], 4096, 32, (10, 5)) == modelled
    regime._footprint.cache_clear()
