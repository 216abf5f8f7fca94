"""asv's benchmark of the fused GPU sampler (``benchmarks.bench_sampling.FusedMinibatch``): it skips in asv's way
without a GPU, and on one draws the minibatch with every fused sampler of samplerbench's, against the CPU sampler."""

import pytest
import torch

from benchmarks.bench_sampling import FusedMinibatch
from benchmarks.workloads import make_graphs
from suite.experiments.sampler_bench import FUSED_SAMPLERS


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip asv makes where no GPU is visible")
@pytest.mark.parametrize("sampler", list(FUSED_SAMPLERS))
def test_without_a_gpu_each_fused_sampler_is_skipped_in_asvs_way(tmp_path, sampler):
    with pytest.raises(NotImplementedError, match=f"^{sampler} needs a CUDA GPU"):
        FusedMinibatch().setup(str(tmp_path), sampler)


@pytest.mark.gpu
def test_on_a_gpu_every_fused_sampler_draws_the_minibatch_timed_against_the_cpu_sampler():
    root = make_graphs()
    for sampler in FUSED_SAMPLERS:
        bench = FusedMinibatch()
        bench.setup(root, sampler)
        bench.time_sample_minibatch(root, sampler)
        assert bench.track_time_ratio_vs_cpu_sampler(root, sampler) > 0
