"""The fused sampler's CUDA C++ kernels (``fused.cu``, launched by ``tiering.sampling.fused_cupy``): the source ships
with the package and compiles for sm_90 without spills, a launch's arguments are the words the source's parameters
take, and bad input is refused.  Their minibatches are compared with the CPU sampler's in ``test_gpu_sampler.py``
(kernels compiled for the host without a GPU, CuPy's with one)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.cuda_cpp import assert_ships_as_package_data, needs_nvcc, sm90_usage
from tests.tiering.sampling import host_kernels
from tiering.graph.csr import CSRGraph
from tiering.sampling import fused, fused_cupy
from tiering.sampling.fused import FusedNeighborSampler
from tiering.sampling.fused_cupy import KernelArray, kernel_words, name_expression

REPO = Path(__file__).resolve().parents[3]


def test_the_kernel_source_ships_as_package_data():
    assert_ships_as_package_data(fused_cupy.SAMPLER, REPO / "pyproject.toml")


@needs_nvcc
def test_every_kernel_compiles_for_sm90_without_spills(tmp_path):
    usage = sm90_usage(fused_cupy.SAMPLER, tmp_path)
    assert all(stores == loads == 0 for _, stores, loads in usage), usage


def test_a_tensor_is_its_address_and_size_and_a_number_an_int64_unless_typed():
    a, b = torch.arange(6, dtype=torch.int64), torch.zeros((2, 3), dtype=torch.int64)
    kept = KernelArray(a)
    words = kernel_words((kept, b, 12, np.uint64(2**63 + 5), -1, np.int32(3)))
    assert words == (a.data_ptr(), 6, b.data_ptr(), 6, 12, 2**63 + 5, -1, 3)
    assert [type(word) for word in words] == [np.uint64, np.int64, np.uint64, np.int64, np.int64, np.uint64, np.int64,
                                              np.int64]  # 8 bytes each, an int32 count too
    with pytest.raises(ValueError, match="contiguous int32 or int64 tensors, got torch.int64 with strides"):
        KernelArray(b.t())
    with pytest.raises(ValueError, match="got torch.float32"):
        KernelArray(torch.zeros(3))


def test_an_array_outside_the_current_cuda_devices_memory_is_refused():
    with pytest.raises(ValueError, match="read tensors of the current CUDA device; this one is on cpu"):
        fused_cupy.CupyLaunches().arrays((torch.zeros(3, dtype=torch.int64), 5))


def test_sample_is_instantiated_for_the_graphs_index_type_and_every_other_array_is_int64():
    for dtype, c_type in ((torch.int32, "int"), (torch.int64, "long long")):
        indices = torch.zeros(3, dtype=dtype)
        indptr = torch.zeros(2, dtype=torch.int64)
        assert name_expression("sample", (indptr, KernelArray(indices))) == f"sample<{c_type}>"
        assert name_expression("sample", (indptr, indices)) == f"sample<{c_type}>"
    assert name_expression("marks", ()) == "marks"
    small = torch.zeros(3, dtype=torch.int32)
    assert kernel_words((indptr, small), "sample")[2:] == (small.data_ptr(), 3)  # the graph's indices
    with pytest.raises(ValueError, match="marks: argument 0 is torch.int32; the kernels read every array but"):
        kernel_words((small, 4), "marks")
    with pytest.raises(ValueError, match="sample: argument 2 is torch.int32"):
        kernel_words((indptr, small, KernelArray(small)), "sample")
    assert set(fused_cupy.NAME_EXPRESSIONS) == {"sample<int>", "sample<long long>", "insert_all", "marks", "write"}


@pytest.mark.skipif(host_kernels.compiler() is None, reason="runs fused.cu on the host: needs a C++ compiler (c++)")
def test_a_launch_with_an_argument_too_few_or_too_many_is_refused(tmp_path):
    launches = host_kernels.HostLaunches(host_kernels.build(tmp_path))
    ranks = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(AssertionError, match="marks: launched with 10 words, takes 12"):
        launches.launch("marks", 1, None, ranks, 4, ranks, 0, ranks, ranks)  # ranks left out
    with pytest.raises(AssertionError, match="marks: launched with 13 words, takes 12"):
        launches.launch("marks", 1, None, ranks, 4, ranks, 0, ranks, ranks, ranks, 1)
    with pytest.raises(AssertionError, match="no kernel named"):
        launches.function("gather")((1,), (32,), [])
    g = CSRGraph.from_edges([0, 1], [1, 0], 2)
    FusedNeighborSampler(g, (2, 2), kernels=launches).sample(torch.tensor([0]))
    assert launches.launched == ["sample<int>", "marks", "write"] * 2


def test_an_unknown_set_of_kernels_is_refused():
    with pytest.raises(ValueError, match=r"kernels must be one of \('numba', 'cupy'\), got 'triton'"):
        fused.kernel_launches("triton")
