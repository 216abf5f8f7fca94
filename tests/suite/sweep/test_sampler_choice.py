"""``--sampler-kernels measured``: the set of the fused sampler's kernels samplerbench measured faster on the device,
found where samplerbench's records are, else numba's, and a sweep, ``train`` and ``costs`` launching it."""

import pandas as pd
import pytest

from suite.cli import main
from suite.experiments.sampler_bench import FACTS
from suite.io import records
from suite.sweep import sampler_choice
from suite.sweep.run import plan_sweep

DEVICE = "cuda: NVIDIA Test GPU"


def bench_table(times: dict) -> pd.DataFrame:
    """samplerbench's rows: a one hop and a minibatch per sampler, the minibatch timed ``times[sampler]`` seconds."""
    rows = []
    for sampler, seconds in times.items():
        rows.append({"dataset": "papers-s", "case": "one hop", "fanouts": "12", "seeds": 100_000, "sampler": sampler,
                     "sampled_edges": 1_200_000, "best_s": 1e-3})
        rows.append({"dataset": "papers-s", "case": "minibatch", "fanouts": "12,12,12", "seeds": 1024,
                     "sampler": sampler, "sampled_edges": 1_000_000, "best_s": seconds})
    return pd.DataFrame(rows)


def cupy_installed(monkeypatch, installed: bool) -> None:
    """Whether CuPy's module is found here, whatever this machine has."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: (object() if installed else None) if name == "cupy" else real(name, *args))


def write_bench(root, times: dict):
    path = root / "cuda-nvidia-test-gpu" / "sampler-bench" / "sampler-bench.csv"
    path.parent.mkdir(parents=True)
    provenance = {"device": DEVICE, "git_revision": "abc", "time": "2026-11-26T00:00:00+00:00"}
    return records.write_records(path, bench_table(times), provenance, dict.fromkeys(FACTS, ""), index=False)


@pytest.mark.parametrize("times, kernels", [
    ({"cpu": 9e-3, "gpu": 3e-3, "uva": 5e-3, "gpu-cupy": 1e-3}, "cupy"),
    ({"cpu": 9e-3, "gpu": 1e-3, "uva": 5e-3, "gpu-cupy": 3e-3}, "numba"),
    ({"gpu": 2e-3, "gpu-cupy": 2e-3}, "numba"),  # a tie keeps the default
])
def test_the_faster_set_on_the_minibatch_is_chosen_and_says_why(times, kernels):
    choice = sampler_choice.choose(bench_table(times), "bench.csv")
    assert choice.kernels == kernels
    assert choice.basis.startswith("faster on papers-s's (12,12,12) minibatch of 1,024 seeds in bench.csv: numba ")
    assert f"cupy {1e3 * times['gpu-cupy']:.3g} ms" in choice.basis


def test_records_that_time_one_set_only_leave_the_default():
    choice = sampler_choice.choose(bench_table({"cpu": 9e-3, "gpu": 3e-3}), "bench.csv")
    assert choice == sampler_choice.KernelChoice("numba", "default: bench.csv times no minibatch of gpu-cupy")


def test_a_sampler_timed_twice_counts_by_its_best_time():
    table = pd.concat([bench_table({"gpu": 3e-3, "gpu-cupy": 1e-3}), bench_table({"gpu": 0.5e-3})])
    assert sampler_choice.choose(table, "bench.csv").kernels == "numba"


def test_the_records_are_looked_for_where_gpubench_puts_them_the_first_root_first(tmp_path):
    roots = (tmp_path / "out", tmp_path / "results")
    assert sampler_choice.samplerbench_records(DEVICE, roots) is None
    committed = write_bench(roots[1], {"gpu": 1e-3, "gpu-cupy": 2e-3})
    assert sampler_choice.samplerbench_records(DEVICE, roots) == committed
    fresh = write_bench(roots[0], {"gpu": 1e-3, "gpu-cupy": 2e-3})
    assert sampler_choice.samplerbench_records(DEVICE, roots) == fresh


def test_measured_reads_this_devices_records_only_where_the_fused_sampler_samples_on_cuda(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sampler_choice, "device_name", lambda device: DEVICE)
    cupy_installed(monkeypatch, True)
    measured = sampler_choice.sampler_kernels("measured", ["cpu", "gpu"], "cuda")
    assert measured.kernels == "numba" and measured.basis.startswith(f"default: no samplerbench records for {DEVICE}")
    path = write_bench(tmp_path / "out" / "gpu", {"gpu": 3e-3, "gpu-cupy": 1e-3})
    measured = sampler_choice.sampler_kernels("measured", ["cpu", "gpu"], "cuda")
    assert measured.kernels == "cupy" and str(path.relative_to(tmp_path)) in measured.basis
    assert sampler_choice.sampler_kernels("measured", ["uva"], "cuda").kernels == "cupy"  # the same kernels
    assert sampler_choice.sampler_kernels("measured", ["cpu"], "cuda").kernels == "numba"  # nothing launches them
    assert sampler_choice.sampler_kernels("measured", ["gpu"], "cpu").kernels == "numba"  # the simulator's
    assert sampler_choice.sampler_kernels("numba", ["gpu"], "cuda") == sampler_choice.KernelChoice(
        "numba", "chosen (--sampler-kernels)")


def test_records_that_cannot_be_read_or_cupy_missing_leave_the_default_saying_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sampler_choice, "device_name", lambda device: DEVICE)
    path = write_bench(tmp_path / "out" / "gpu", {"gpu": 3e-3, "gpu-cupy": 1e-3})
    cupy_installed(monkeypatch, False)
    missing = sampler_choice.sampler_kernels("measured", ["gpu"], "cuda")
    assert missing.kernels == "numba"
    assert missing.basis.startswith("default: CuPy, which launches the cupy kernels, is not installed (those were "
                                    "faster on papers-s's")
    records.sidecar_path(path).unlink()
    unread = sampler_choice.sampler_kernels("measured", ["gpu"], "cuda")
    assert unread.kernels == "numba" and unread.basis.startswith(f"default: {path.relative_to(tmp_path)} cannot be read")


def test_the_launcher_of_a_process_group_leaves_measured_to_its_processes(tiny, tmp_path, monkeypatch):
    def no_gpu(device):
        raise AssertionError("the launcher asked for the GPU's name")

    monkeypatch.setattr(sampler_choice, "device_name", no_gpu)
    sweep = plan_sweep("k", tmp_path, datasets=["tiny"], loaders=["in-memory"], fanouts=[(4, 4)], samplings=["uva"],
                       device="cuda", processes=2, sampler_kernels="measured")
    assert sweep.kernels == sampler_choice.KernelChoice("measured", "resolved by each process of the group")


def test_a_sweep_on_a_cpu_resolves_measured_to_the_default_and_names_no_kernels(tiny, tmp_path):
    sweep = plan_sweep("k", tmp_path, datasets=["tiny"], loaders=["in-memory"], fanouts=[(4, 4)],
                       sampler_kernels="measured")
    assert sweep.sampler_kernels == "numba" and sweep.describe_kernels() is None


def test_the_commands_default_to_measured(tiny, tmp_path, capsys):
    assert main(["run", "--experiment", "k", "--datasets", "tiny", "--loaders", "in-memory", "--fanout", "4,4",
                 "--epochs", "1", "--warmup", "0", "--minibatches", "1", "--no-validation", "--runs", str(tmp_path),
                 "-q"]) == 0
    assert "fused GPU sampler" not in capsys.readouterr().out  # it samples nothing here
    from suite.cli import build_parser

    for command in (["run", "--experiment", "k"], ["train", "--dataset", "tiny"], ["costs", "--dataset", "tiny"]):
        assert build_parser().parse_args(command).sampler_kernels == "measured"
