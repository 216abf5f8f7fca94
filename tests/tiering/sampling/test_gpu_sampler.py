"""The fused GPU sampler against the CPU sampler, its independent reference: identical minibatches.

Without a GPU the kernels run in numba's CUDA simulator (tests/conftest.py sets NUMBA_ENABLE_CUDASIM), one Python
thread per CUDA thread, so the graphs here have tens to a few hundred nodes.  With a GPU the same tests run the real
kernels; those marked ``gpu`` only make sense there.
"""

import contextlib
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from tiering.numba_cuda import cuda

from tests.tiering.sampling import host_kernels
from tiering import rng
from tiering.graph.csr import CSRGraph
from tiering.sampling import fused, fused_kernels
from tiering.sampling.fused import FusedNeighborSampler, append_new_nodes_hashed
from tiering.sampling.neighbors import NeighborSampler, append_new_nodes

REPO = Path(__file__).resolve().parents[3]

# the simulator evaluates the hash on numpy uint64 scalars, which warn where SplitMix64 wraps, as it is meant to
pytestmark = pytest.mark.filterwarnings("ignore:.*overflow encountered in scalar:RuntimeWarning")

DEVICE = "cpu" if fused_kernels.SIMULATED else "cuda"


@pytest.fixture(scope="module")
def cupy_kernels(tmp_path_factory):
    """The CUDA C++ kernels: CuPy's on a GPU, else compiled for the host (``host_kernels``)."""
    return host_kernels.cuda_cpp_kernels(tmp_path_factory)


@pytest.fixture(params=fused.KERNELS)
def kernels(request):
    """Each set of the sampler's kernels."""
    return request.getfixturevalue("cupy_kernels") if request.param == "cupy" else request.param


def graph(index_dtype=torch.int32, hub=110):
    """150 nodes: node 0's list has ``hub`` entries, nodes 140..149 are isolated (no list, in no list),
    the rest have about 4 entries each."""
    rng_ = np.random.default_rng(3)
    n, linked = 150, 140
    src = list(range(1, hub + 1)) + rng_.integers(0, linked, 500).tolist()
    dst = [0] * hub + rng_.integers(1, linked, 500).tolist()
    g = CSRGraph.from_edges(src, dst, n).coalesce()
    return CSRGraph(g.indptr, g.indices.to(index_dtype))


def assert_same(expected, got):
    assert torch.equal(got.seeds.cpu(), expected.seeds)
    assert torch.equal(got.input_nodes.cpu(), expected.input_nodes)
    assert len(got.blocks) == len(expected.blocks)
    for want, have in zip(expected.blocks, got.blocks):
        assert (have.num_src, have.num_dst) == (want.num_src, want.num_dst)
        assert torch.equal(have.edge_index.cpu(), want.edge_index) and have.edge_index.is_contiguous()
        assert have.edge_weight is None


def both(g, fanouts, seeds, seed, graph_memory="gpu", max_load=0.5, kernels="numba"):
    seeds = torch.tensor(seeds, dtype=torch.int64)
    expected = NeighborSampler(g, fanouts).sample(seeds, torch.Generator().manual_seed(seed))
    got = FusedNeighborSampler(g, fanouts, graph_memory, max_load=max_load, kernels=kernels).sample(
        seeds, torch.Generator().manual_seed(seed))
    return expected, got


@cuda.jit
def _uniforms(seeds, streams, counters, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = fused_kernels.uniform(seeds[i], streams[i], counters[i])


def test_the_device_hash_draws_what_tiering_rng_draws_bit_for_bit():
    draws = np.random.default_rng(0)
    seeds = draws.integers(0, 2**62, 40, dtype=np.uint64)
    streams = np.concatenate([draws.integers(0, 2**40, 20, dtype=np.uint64), np.arange(20, dtype=np.uint64)])
    counters = draws.integers(0, 64, 40, dtype=np.uint64)
    out = np.zeros(40)
    _uniforms[2, 32](seeds, streams, counters, out)
    expected = np.array([rng.uniform(s, t, c) for s, t, c in zip(seeds, streams, counters)])
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanouts", [(3,), (5, 2), (2, 3, 1), (1, 2, 1, 2), (2, 1, 1, 1, 1)])
def test_minibatches_equal_the_cpu_samplers(index_dtype, fanouts, kernels):
    # seeds: the hub (fanout below its degree), low-degree nodes (fanout above theirs), an isolated node
    expected, got = both(graph(index_dtype), fanouts, [0, 7, 145, 30, 2], seed=11, kernels=kernels)
    assert_same(expected, got)


@pytest.mark.parametrize("graph_memory", ["gpu", "host"])
def test_both_graph_placements_sample_the_same_minibatch(graph_memory, kernels):
    expected, got = both(graph(), (4, 3), [0, 1, 2, 3, 99], seed=5, graph_memory=graph_memory, kernels=kernels)
    assert_same(expected, got)


def test_a_fanout_above_every_degree_takes_whole_lists(kernels):
    expected, got = both(graph(hub=30), (40, 40), [0, 12], seed=2, kernels=kernels)
    assert_same(expected, got)
    assert got.blocks[-1].edge_index.shape[1] == int(graph(hub=30).degrees()[[0, 12]].sum())


def test_an_empty_minibatch_and_an_isolated_one(kernels):
    for seeds in ([], [140, 149]):
        expected, got = both(graph(), (3, 2), seeds, seed=4, kernels=kernels)
        assert_same(expected, got)
        assert all(block.edge_index.shape == (2, 0) for block in got.blocks)


@pytest.mark.parametrize("fanouts", [(3, 2), (3,)])
def test_one_sampler_reused_across_minibatches_of_growing_and_shrinking_size(fanouts, kernels):
    # each hop clears what the hop before left in the other table, the tables grow with the minibatch, and the work
    # buffers are kept between minibatches of one size (the first minibatch of another makes them again)
    g = graph()
    cpu, gpu = NeighborSampler(g, fanouts), FusedNeighborSampler(g, fanouts, kernels=kernels)
    cpu_generator, gpu_generator = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    for seeds in ([5], list(range(20, 60)), list(range(60, 100)), [1, 2, 3], [4, 6, 8], [0], list(range(100, 150))):
        assert_same(cpu.sample(torch.tensor(seeds), cpu_generator), gpu.sample(torch.tensor(seeds), gpu_generator))


@pytest.mark.parametrize("graph_memory", ["gpu", "host"])
def test_a_sampler_with_other_fanouts_shares_the_placed_graph_and_samples_as_a_new_one(graph_memory, kernels):
    g, seeds = graph(), torch.tensor(list(range(20, 60)))
    first = FusedNeighborSampler(g, (3,), graph_memory, kernels=kernels)
    first.sample(seeds, torch.Generator().manual_seed(1))  # its tables hold this minibatch's ids
    other = first.with_fanouts((3, 2))
    assert other.fanouts == (3, 2) and first.fanouts == (3,)
    assert other.graph.indptr is first.graph.indptr and other.graph.indices is first.graph.indices
    assert_same(NeighborSampler(g, (3, 2)).sample(seeds, torch.Generator().manual_seed(4)),
                other.sample(seeds, torch.Generator().manual_seed(4)))
    assert_same(NeighborSampler(g, (3,)).sample(seeds, torch.Generator().manual_seed(5)),
                first.sample(seeds, torch.Generator().manual_seed(5)))
    with pytest.raises(ValueError, match="fanouts must be one or more positive numbers"):
        first.with_fanouts(())


def test_the_sampler_wraps_what_it_keeps_once_and_a_minibatch_only_its_seeds_and_outputs(monkeypatch):
    # wrapping a tensor for numba is a host cost of every launch: the graph's two arrays, the minibatch's sizes, the
    # tables' counts to clear and an empty list of slots are wrapped when the sampler is made; the two tables' four
    # arrays when they are made; each hop's four work buffers and the two tables' slots when the frontier bounds
    # change (a minibatch of another size); and at each minibatch only its seeds and each hop's two outputs
    wrapped = []
    real = fused.kernel_array
    monkeypatch.setattr(fused, "kernel_array", lambda tensor: wrapped.append(tuple(tensor.shape)) or real(tensor))
    g, fanouts = graph(), (3, 2, 2)
    sampler = FusedNeighborSampler(g, fanouts)
    assert wrapped == [(g.num_nodes + 1,), (g.num_edges,), (2 * len(fanouts) + 2,), (2,), (0,)]
    expected = NeighborSampler(g, fanouts)
    outputs, work = 1 + 2 * len(fanouts), 4 * len(fanouts) + 2
    for seed, num_seeds, count in ((1, 20, 4 + work + outputs), (2, 20, outputs), (3, 30, work + outputs),
                                   (4, 30, outputs)):
        wrapped.clear()
        seeds = torch.arange(20, 20 + num_seeds)
        assert_same(expected.sample(seeds, torch.Generator().manual_seed(seed)),
                    sampler.sample(seeds, torch.Generator().manual_seed(seed)))
        assert len(wrapped) == count


def test_a_table_filled_near_its_limit_still_relabels_exactly(kernels):
    # max_load 1: 32 seeds and fanout 1 may bring 64 distinct ids, so the table has 64 slots
    expected, got = both(graph(), (1,), list(range(40, 136, 3)), seed=6, max_load=1.0, kernels=kernels)
    assert_same(expected, got)
    assert got.blocks[0].num_src / 64 > 0.75


@pytest.mark.parametrize("case", range(4))
def test_hashed_relabelling_equals_append_new_nodes_on_random_inputs(case, kernels):
    draws = np.random.default_rng(case)
    frontier = torch.from_numpy(draws.permutation(1000)[: draws.integers(0, 40)])
    neighbors = torch.from_numpy(draws.integers(0, [30, 1000, 60, 5][case], draws.integers(0, 300)))  # many repeats
    expected = append_new_nodes(frontier, neighbors)
    got = append_new_nodes_hashed(frontier.to(DEVICE), neighbors.to(DEVICE), kernels=kernels)
    assert torch.equal(got[0].cpu(), expected[0])
    assert torch.equal(got[1].cpu(), expected[1])


def test_hashed_relabelling_with_the_table_at_its_load_limit(kernels):
    # 256 distinct ids in a table of 256 slots (load 1), then 60 distinct ids among 64 entries in 64 slots
    draws = np.random.default_rng(8)
    ids = torch.from_numpy(draws.permutation(10_000)[:256])
    full = (ids[:100], ids[100:])
    values = torch.from_numpy(draws.permutation(np.arange(50, 108)))
    crowded = (torch.tensor([7, 3]), torch.cat([values, values[:4]]))
    for frontier, neighbors in (full, crowded):
        expected = append_new_nodes(frontier, neighbors)
        got = append_new_nodes_hashed(frontier.to(DEVICE), neighbors.to(DEVICE), max_load=1.0, kernels=kernels)
        assert torch.equal(got[0].cpu(), expected[0])
        assert torch.equal(got[1].cpu(), expected[1])


def test_bad_arguments_are_refused():
    g = graph()
    with pytest.raises(ValueError, match="graph_memory"):
        FusedNeighborSampler(g, (2,), graph_memory="disk")
    with pytest.raises(ValueError, match="fanouts"):
        FusedNeighborSampler(g, (2, 0))
    with pytest.raises(ValueError, match="max_load"):
        FusedNeighborSampler(g, (2,), max_load=1.5)
    with pytest.raises(ValueError, match="distinct"):
        FusedNeighborSampler(g, (2,)).sample(torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="not a node id"):
        FusedNeighborSampler(g, (2,)).sample(torch.tensor([150]))


def test_the_sampler_takes_its_stream_and_launches_with_its_device_made_current(monkeypatch, kernels):
    # numba and CuPy work in the current CUDA context: a sampler on cuda:1, in a thread where cuda:0 is current, makes
    # cuda:1 current around a minibatch (fused.made_current), and its stream and launches come inside
    depth, seen = [0], []
    real = fused.made_current

    @contextlib.contextmanager
    def counted(device):
        depth[0] += 1
        try:
            with real(device):
                yield
        finally:
            depth[0] -= 1

    launches = fused.kernel_launches(kernels)
    monkeypatch.setattr(fused, "made_current", counted)
    monkeypatch.setattr(launches, "stream", lambda device, real=launches.stream: seen.append(depth[0]) or real(device))
    monkeypatch.setattr(launches, "launch", lambda *args, real=launches.launch: seen.append(depth[0]) or real(*args))
    expected, got = both(graph(), (3, 2), [0, 7, 30], seed=1, kernels=launches)
    assert_same(expected, got)
    assert len(seen) == 1 + 3 * 2 and all(seen)  # the stream, then each hop's three launches
    seen.clear()
    append_new_nodes_hashed(torch.tensor([3, 1], device=DEVICE), torch.tensor([1, 5, 5], device=DEVICE),
                            kernels=launches)
    assert len(seen) == 1 + 3 and all(seen)


def test_a_minibatch_reads_the_device_once_after_its_last_launch(monkeypatch, kernels):
    # each hop's outputs are sized by their bound and its kernels read the frontier's size from device memory, so the
    # host enqueues every hop without waiting and reads all the totals at the end (before the first launch it reads
    # only host tensors: the seeds' checks and the hops' draws from the generator)
    events = []

    def noted(name, real):
        return lambda *args: events.append(name) or real(*args)

    launches = fused.kernel_launches(kernels)
    monkeypatch.setattr(launches, "launch", lambda name, *args, real=launches.launch: events.append(name) or real(
        name, *args))
    # every way to read a tensor but numpy(), which under the simulator is how a launch takes a CPU tensor
    for read in ("tolist", "item", "__int__", "__float__", "__bool__", "__index__", "cpu"):
        monkeypatch.setattr(torch.Tensor, read, noted(read, getattr(torch.Tensor, read)))
    g, seeds = graph(), torch.tensor([0, 7, 30, 99])
    sampler = FusedNeighborSampler(g, (3, 2, 2), kernels=launches)
    for seed in (1, 2):  # the second minibatch reuses the tables the first made
        events.clear()
        got = sampler.sample(seeds, torch.Generator().manual_seed(seed))
        assert events[events.index("sample"):] == ["sample", "marks", "write"] * 3 + ["tolist"]
        assert_same(NeighborSampler(g, (3, 2, 2)).sample(seeds, torch.Generator().manual_seed(seed)), got)


def test_a_minibatch_cut_short_between_its_kernels_leaves_the_next_one_exact(monkeypatch, kernels):
    # the failed hop's sample kernel filled a table that its write never cleared
    launches = fused.kernel_launches(kernels)

    def fail_at_marks(name, *args, real=launches.launch):
        if name == "marks":
            raise KeyboardInterrupt
        real(name, *args)

    g, seeds = graph(), torch.tensor([0, 7, 30, 99, 5, 60])
    sampler = FusedNeighborSampler(g, (3, 2), kernels=launches)
    for cut, then in ((10, 20), (11, 21), (12, 22)):
        with monkeypatch.context() as patched:
            patched.setattr(launches, "launch", fail_at_marks)
            with pytest.raises(KeyboardInterrupt):
                sampler.sample(seeds, torch.Generator().manual_seed(cut))
        got = sampler.sample(seeds, torch.Generator().manual_seed(then))
        assert_same(NeighborSampler(g, (3, 2)).sample(seeds, torch.Generator().manual_seed(then)), got)


def test_a_full_table_refuses_the_minibatch_instead_of_probing_forever(monkeypatch, kernels):
    # the sizing rules a full table out; one too small stands in for a bug in it
    launches = fused.kernel_launches(kernels)
    g, seeds = graph(), torch.tensor([0, 7, 30, 99, 5, 60])
    sampler = FusedNeighborSampler(g, (3, 2), kernels=launches)
    with monkeypatch.context() as patched:
        patched.setattr(fused, "_capacity", lambda distinct, max_load: 8)
        with pytest.raises(RuntimeError, match="found a hash table full, which its sizing should rule out"):
            sampler.sample(seeds, torch.Generator().manual_seed(1))
        with pytest.raises(RuntimeError, match="found a hash table full"):
            append_new_nodes_hashed(torch.arange(6, device=DEVICE), torch.arange(6, 20, device=DEVICE),
                                    kernels=launches)
    got = sampler.sample(seeds, torch.Generator().manual_seed(2))  # new tables, the flag cleared
    assert_same(NeighborSampler(g, (3, 2)).sample(seeds, torch.Generator().manual_seed(2)), got)


def test_numba_stream_and_launch_make_the_device_current(monkeypatch):
    # numba works in the current CUDA context: the feature table's kernels (suite.datasets.node_data_cuda) launch
    # through fused.launch, which makes the device current around wrapping torch's stream and around the launch
    # (stand-ins for torch.cuda and numba here)
    current = [0]

    @contextlib.contextmanager
    def device(index):
        previous, current[0] = current[0], torch.device(index).index
        try:
            yield
        finally:
            current[0] = previous

    seen = []
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: types.SimpleNamespace(cuda_stream=7))
    monkeypatch.setattr(cuda, "external_stream", lambda handle: seen.append(("stream", handle, current[0])) or handle,
                        raising=False)

    class Kernel:
        def __getitem__(self, config):
            return lambda *args: seen.append(("launch", config, args, current[0]))

    on = torch.device("cuda", 1)
    fused.launch(Kernel(), 2, 32, fused.numba_stream(on), on, 5, np.uint64(3))
    assert seen == [("stream", 7, 1), ("launch", (2, 32, 7), (5, np.uint64(3)), 1)]
    assert current == [0]  # the thread's own device again afterwards


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("graph_memory", ["gpu", "host"])
def test_real_kernels_on_a_larger_graph_return_cuda_tensors(graph_memory, index_dtype, kernels):
    assert not fused_kernels.SIMULATED
    draws = np.random.default_rng(1)
    n = 20_000
    g = CSRGraph.from_edges(draws.integers(0, n, 200_000), draws.integers(0, n, 200_000), n).coalesce()
    g = CSRGraph(g.indptr, g.indices.to(index_dtype))  # each instantiation of the C++ sample kernel
    seeds = torch.from_numpy(draws.permutation(n)[:512])
    expected = NeighborSampler(g, (10, 5, 3)).sample(seeds, torch.Generator().manual_seed(3))
    sampler = FusedNeighborSampler(g, (10, 5, 3), graph_memory, device="cuda", kernels=kernels)
    assert sampler.device == torch.device("cuda", torch.cuda.current_device())  # "cuda" named: made current later
    got = sampler.sample(seeds, torch.Generator().manual_seed(3))
    assert got.input_nodes.is_cuda and all(block.edge_index.is_cuda for block in got.blocks)
    assert_same(expected, got)


@pytest.mark.gpu
def test_one_sampler_on_alternating_streams_orders_its_launches_after_the_last_streams(kernels):
    # the pipeline's sampler thread samples on a stream of its own, the validation pass on the training stream
    assert not fused_kernels.SIMULATED
    draws = np.random.default_rng(2)
    n = 20_000
    g = CSRGraph.from_edges(draws.integers(0, n, 200_000), draws.integers(0, n, 200_000), n).coalesce()
    cpu, gpu = NeighborSampler(g, (10, 5)), FusedNeighborSampler(g, (10, 5), kernels=kernels)
    cpu_generator, gpu_generator = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    streams = [torch.cuda.Stream(), torch.cuda.current_stream(), torch.cuda.Stream()]
    for i in range(9):
        seeds = torch.from_numpy(draws.permutation(n)[: 64 * (1 + i % 4)])
        with torch.cuda.stream(streams[i % 3]):
            got = gpu.sample(seeds, gpu_generator)
            torch.cuda.current_stream().synchronize()
        assert_same(cpu.sample(seeds, cpu_generator), got)


@pytest.mark.gpu
def test_the_small_grids_of_a_small_minibatch_warn_of_no_low_occupancy():
    # a few blocks for a few seeds: numba would warn once per distinct grid size
    with warnings.catch_warnings(record=True) as caught:
        expected, got = both(graph(), (3, 2), [0, 7, 30], seed=1)
    assert_same(expected, got)
    assert not [w for w in caught if "under-utilization" in str(w.message)]


def test_numba_cuda_is_told_not_to_warn_of_small_grids_whatever_becomes_of_the_warning_filters():
    """Making a launch configuration is where numba-cuda warns, and it needs no GPU: the real numba.cuda (no
    simulator) is asked here, after an import of the kernels inside a ``catch_warnings`` block, as pytest collects."""
    code = ("import warnings\n"
            "with warnings.catch_warnings():\n"
            "    from tiering.sampling import fused_kernels\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    fused_kernels.marks[1, fused_kernels.THREADS]\n"
            "    fused_kernels.sample[3, fused_kernels.THREADS]\n"
            "print(sum('under-utilization' in str(w.message) for w in caught), fused_kernels.SIMULATED)\n")
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "False"]
