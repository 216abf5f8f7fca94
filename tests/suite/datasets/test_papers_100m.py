"""The paper-scale presets ``papers-100m`` and ``papers-100m-half``: ogbn-papers100M's shape, in bytes."""

import dataclasses

from suite.datasets.presets import PRESETS, get_preset

N = 111_059_956


def test_papers_100m_has_ogbn_papers100m_shape():
    p = get_preset("papers-100m")
    assert (p.num_nodes, p.feature_dim, p.num_classes) == (N, 128, 172)
    assert p.list_entries == 1_615_922_360  # OGB's 1,615,685,872 directed edges, to the drawn degree's rounding
    assert not p.symmetric and p.gpu_built
    assert p.train_size == round(N * 0.011) == 1_221_660  # ~1.1% of the nodes in the training split
    assert p.feature_bytes == N * 128 * 4  # 56.9 GB
    assert p.csr_bytes == (N + 1) * 8 + p.list_entries * 4  # int64 indptr, int32 indices: ~7.4 GB
    assert 7e9 < p.csr_bytes < 7.5e9
    assert p.disk_bytes == p.csr_bytes + p.label_bytes  # its entry holds no feature table
    assert get_preset("papers-s").disk_bytes == get_preset("papers-s").estimated_bytes()


def test_papers_100m_has_the_degree_skew_of_papers_s():
    p, s = get_preset("papers-100m"), get_preset("papers-s")
    same = ("generator", "degree_exponent", "homophily", "class_skew", "train_fraction", "valid_fraction",
            "test_fraction", "signal", "neighbor_signal", "seed", "imitates")
    assert all(getattr(p, k) == getattr(s, k) for k in same)


def test_half_differs_only_in_its_feature_type_and_halves_the_table():
    full, half = get_preset("papers-100m"), get_preset("papers-100m-half")
    assert dataclasses.replace(half, name=full.name, feature_dtype="float32") == full
    assert half.feature_bytes == N * 128 * 2 == full.feature_bytes // 2  # 28.4 GB
    assert half.csr_bytes == full.csr_bytes
    assert half.key() != full.key()


def test_the_new_traits_leave_the_keys_of_float32_presets_as_they_were():
    # the keys of entries built (and named in committed records) before feature_dtype and gpu_built existed
    assert PRESETS["papers-s"].key() == "8f0970345f60"
    assert PRESETS["tiny"].key() == "c5a79d153e59"
    assert dataclasses.replace(PRESETS["tiny"], gpu_built=True).key() == "c5a79d153e59"


def test_at_the_imitated_graphs_size_the_paper_regime_is_the_papers_batch_without_bisecting():
    import time

    from suite.datasets import regime

    start = time.perf_counter()
    assert regime.resolve("papers-100m") == (1024, "paper") == regime.resolve("papers-100m-half")
    assert time.perf_counter() - start < 1  # no footprint model drawn over 111M nodes
    assert regime.imitated_graph("papers-100m").num_nodes == get_preset("papers-100m").num_nodes
