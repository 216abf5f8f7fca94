"""``tierbench doctor``, the measured ceilings and the machine profile that records reference.

The GPU branches run here with fake ``torch.cuda``, NVML and CuPy objects
(their arithmetic and formatting); the GPU tests at the end measure for real.
"""

import datetime
import importlib.metadata
import json
import math
import platform
import re
import sys
import time
import types

import pytest
import torch

import suite.io.atomic
import suite.measure.ceilings
import suite.measure.pcie
import tiering.cuda_cpp
import tiering.features.zero_copy
from suite.cli import main
from suite.io.provenance import (
    caption,
    machine_profile_name,
    machine_profile_path,
    provenance,
    slug,
)
from suite.measure import doctor

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
PROFILE_KEYS = {"format", "host", "time", "git_revision", "source_sha256", "device", "versions", "gpus", "peer_access",
                "memlock", "shm", "host_register", "kernel_compilers", "ceilings", "missing_packages"}


def _row(table: str, label: str) -> str:
    """The value printed after ``label`` in the doctor's table."""
    line = next(line.lstrip() for line in table.splitlines() if line.lstrip().startswith(label + "  "))
    return line[len(label):].strip()


# ----------------------------------------------------------------- this machine
def test_doctor_runs_here_and_writes_the_profile_through_a_rename(tmp_path, monkeypatch, capsys):
    renamed = []
    real_replace = suite.io.atomic.os.replace
    monkeypatch.setattr(suite.io.atomic.os, "replace",
                        lambda src, dst: (renamed.append((src, dst)), real_replace(src, dst)))
    assert main(["doctor", "--out", str(tmp_path), "--no-measure"]) == 0
    out = capsys.readouterr().out
    path = tmp_path / machine_profile_name()
    assert f"wrote {path}" in out
    assert [dst for _, dst in renamed] == [path] and list(tmp_path.iterdir()) == [path]  # no temporary file left
    profile = json.loads(path.read_text())
    assert set(profile) == PROFILE_KEYS
    assert profile["versions"]["python"] == platform.python_version()
    assert profile["versions"]["torch"] == torch.__version__
    assert set(profile["versions"]) == {"python", "torch", "cuda", "driver", "cupy", "numba", "numba-cuda",
                                        "torch-geometric", "ogb"}
    assert profile["shm"]["size_bytes"] >= profile["shm"]["free_bytes"] > 0
    assert profile["host_register"]["bytes"] == doctor.DEFAULT_HOST_TIER_BYTES
    assert isinstance(profile["missing_packages"], list)
    for label in ("torch", "memlock ulimit", "/dev/shm", "cudaHostRegister", "ceilings", "missing packages"):
        assert _row(out, label)


@no_cuda
def test_without_cuda_the_gpu_rows_say_so_and_nothing_is_measured(tmp_path, capsys):
    assert main(["doctor", "--out", str(tmp_path), "--dataset", "papers-s", "--hot-fraction", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "no CUDA GPU visible" in out and "Traceback" not in out
    profile = json.loads((tmp_path / machine_profile_name()).read_text())
    assert profile["gpus"] == profile["peer_access"] == doctor.NO_GPU
    assert profile["ceilings"] == {"skipped": doctor.NO_GPU}
    assert profile["kernel_compilers"] == doctor.NO_GPU and _row(out, "kernel compilers") == doctor.NO_GPU
    cold_rows = 1_048_576 - 262_144  # papers-s: 1,048,576 rows of 128 float32, a quarter of them hot
    assert profile["host_register"] == {"bytes": cold_rows * 128 * 4, "planned": True, "skipped": doctor.NO_GPU}
    assert f"{cold_rows * 512:,} bytes" in out
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        suite.measure.ceilings.measure_ceilings()


def test_doctor_arguments_are_checked_in_one_line(capsys):
    assert main(["doctor", "--hot-fraction", "0.2"]) == 2
    assert "give the dataset too" in capsys.readouterr().err
    assert main(["doctor", "--dataset", "nope"]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["doctor", "--host-tier-bytes", "-1"]) == 2
    assert "cannot have -1 bytes" in capsys.readouterr().err


def test_records_reference_the_machine_profile_once_doctor_wrote_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert machine_profile_path() is None and provenance()["machine_profile"] is None
    assert "machine" not in caption(provenance())
    _, path = doctor.run_doctor(measure=False)
    assert path.resolve() == tmp_path / "out" / "machines" / machine_profile_name()
    assert machine_profile_path("cpu") == f"out/machines/{machine_profile_name()}"
    record = provenance("cpu")
    assert record["machine_profile"] == machine_profile_path()
    assert caption(record).endswith(f" | machine {record['machine_profile']}")
    assert caption({**record, "machine_profile": math.nan}) == caption({**record, "machine_profile": None})


def test_a_second_doctor_keeps_the_first_profile_for_the_records_made_under_it(tmp_path, monkeypatch):
    from suite.measure.ceilings import profile_candidates, ran_under

    def profile_of_record(path, made):
        return ran_under(profile_candidates(path), made)

    monkeypatch.chdir(tmp_path)
    first, path = doctor.run_doctor(measure=False)
    record = provenance("cpu")  # a record made under the first profile
    time.sleep(1.1)  # the profiles' times are to the second
    second, again = doctor.run_doctor(measure=False)
    assert again == path and json.loads(path.read_text())["time"] == second["time"] != first["time"]
    (kept,) = path.parent.glob(f"{path.stem}.*.json")
    assert json.loads(kept.read_text()) == first
    made = datetime.datetime.fromisoformat(first["time"])
    assert profile_of_record(record["machine_profile"], made) == str(kept)
    assert profile_of_record(record["machine_profile"], datetime.datetime.fromisoformat(second["time"])) == \
        record["machine_profile"]
    assert profile_of_record(record["machine_profile"], made - datetime.timedelta(seconds=1)) is None


# ----------------------------------------------------------------- missing packages
def _fake_metadata(monkeypatch, requires, versions, providers):
    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    def requires_of(name):
        if requires is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return requires

    monkeypatch.setattr(importlib.metadata, "requires", requires_of)
    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: providers)


def test_missing_packages_lists_absent_and_too_old_distributions(monkeypatch):
    requires = ["torch>=2.4", "numba>=0.60", "ogb>=1.3.6", "platformdirs>=4", "torch-geometric>=2.5",
                'cupy-cuda13x>=14; extra == "gpu"', 'pytest>=8; extra == "test"', 'asv>=0.6.4; extra == "bench"']
    versions = {"torch": "2.11.0+cu130", "numba": "0.59.1", "torch-geometric": "2.8.0.post1", "cupy-cuda12x": "13.6.0"}
    _fake_metadata(monkeypatch, requires, versions, {"cupy": ["cupy-cuda12x"]})
    assert doctor.missing_packages() == [
        "numba (0.59.1 installed, needs >=0.60)", "ogb", "platformdirs", "cupy-cuda13x (13.6.0 installed, needs >=14)",
    ]
    versions.update({"numba": "0.61.0", "ogb": "1.3.6", "platformdirs": "4.3.6", "cupy-cuda12x": "14.0.1"})
    assert doctor.missing_packages() == []  # any CuPy wheel of the right version serves the gpu extra
    _fake_metadata(monkeypatch, None, versions, {})
    assert doctor.missing_packages()[0].startswith("tierbench (pip install --no-deps --no-build-isolation -e .")


def test_a_machine_without_a_gpu_reads_no_nvml_error_and_no_missing_cupy(monkeypatch, tmp_path):
    """Without a CUDA GPU, NVML failing to load (no driver) and CuPy not installed are what a CPU machine is: their
    rows say there is no GPU, and the gpu extra is not listed as missing."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_driver():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(doctor, "_nvml", no_driver)
    requires = ["torch>=2.4", 'cupy-cuda13x>=14; extra == "gpu"']
    _fake_metadata(monkeypatch, requires, {"torch": "2.11.0"}, {})
    profile, _ = doctor.run_doctor(tmp_path, measure=False)
    table = doctor.format_profile(profile)
    assert _row(table, "driver") == "none: no CUDA GPU visible"
    assert _row(table, "cupy") == "not installed, not needed: no CUDA GPU visible"
    assert profile["missing_packages"] == [] and _row(table, "missing packages") == "none"
    assert "error" not in table
    assert doctor.missing_packages(gpu=True) == ["cupy-cuda13x"]  # a GPU machine needs it


def test_missing_packages_of_this_installation_agree_with_pyproject():
    try:
        import tomllib
    except ImportError:
        pytest.skip("tomllib is Python 3.11+")
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())["project"]
    names = {line.split(">")[0].split("=")[0].strip() for line in project["dependencies"]}
    for entry in doctor.missing_packages():
        assert entry.split(" ")[0] in names | {"cupy-cuda13x", "tierbench"}  # tierbench: a checkout not installed


# ----------------------------------------------------------------- the GPU branches, faked
class _FakeNVML(types.ModuleType):
    """The pynvml calls doctor makes, for two GPUs; GPU 1's link generation cannot be read."""

    def __init__(self):
        super().__init__("pynvml")
        self.bus_ids = []

    def nvmlInit(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        self.bus_ids.append(bus_id)
        return bus_id

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        if handle.startswith("0000:86"):
            raise RuntimeError("Not Supported")
        return 1  # an idle H100 trains its link down

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16


class _FakeCounter:
    def __init__(self, device: torch.device):
        self.available = device.index == 0
        self.reason = None if self.available else "NVML PCIe counters unavailable: Not Supported"


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two fake H100s: torch.cuda, NVML, pinning and the ceilings replaced; returns what the fakes recorded."""
    seen = {"registered": [], "unregistered": [], "ceilings": []}
    nvml = _FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    properties = [types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85_520_809_984,
                                        multi_processor_count=132, major=9, minor=0, pci_domain_id=0, pci_bus_id=bus,
                                        pci_device_id=0) for bus in (0x3B, 0x86)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: properties[index])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda i, j: (i, j) == (0, 1))
    monkeypatch.setattr(suite.measure.pcie, "PCIeCounter", _FakeCounter)
    monkeypatch.setattr(tiering.features.zero_copy, "register_host_memory",
                        lambda t: seen["registered"].append(t.numel()) or True)
    monkeypatch.setattr(tiering.features.zero_copy, "unregister_host_memory", lambda t: seen["unregistered"].append(t.numel()))

    def ceilings(device):
        seen["ceilings"].append(device)
        return {"h2d_memcpy_bytes_per_s": 55.1e9, "zero_copy_read_bytes_per_s": 35.2e9,
                "d2d_copy_bytes_per_s": 1.45e12, "buffer_bytes": 512 << 20}

    monkeypatch.setattr(suite.measure.ceilings, "measure_ceilings", ceilings)

    def numba_add_one(device):
        seen["compiled on"] = device
        return torch.arange(1, doctor.KERNEL_CHECK_SIZE + 1)

    def cupy_add_one(device):
        raise RuntimeError("NVRTC_ERROR_COMPILATION (6)")

    monkeypatch.setattr(doctor, "_numba_add_one", numba_add_one)
    monkeypatch.setattr(doctor, "_cupy_add_one", cupy_add_one)
    seen["nvml"] = nvml
    return seen


def test_gpu_branches_probe_every_gpu_and_keep_one_probe_error_in_its_row(fake_gpus, tmp_path):
    profile, path = doctor.run_doctor(tmp_path, host_tier_bytes=3 << 20, device="cuda:0")
    assert path.name == f"nvidia-h100-80gb-hbm3-{slug(platform.node())}.json"
    assert json.loads(path.read_text()) == json.loads(json.dumps(profile))
    assert fake_gpus["nvml"].bus_ids == ["0000:3b:00.0", "0000:86:00.0"]  # by PCI bus id, not NVML's index
    gpu0, gpu1 = profile["gpus"]
    assert gpu0["pcie"] == {"generation": 1, "width": 16, "max_generation": 5, "max_width": 16}
    assert gpu1["pcie"] == {"error": "RuntimeError: Not Supported"}
    assert gpu0["pcie_counters"] == {"readable": True, "reason": None}
    assert profile["peer_access"] == [[None, True], [False, None]]
    assert profile["versions"]["driver"] == "580.159.04"
    assert profile["host_register"]["ok"] and profile["host_register"]["bytes"] == 3 << 20
    assert fake_gpus["registered"] == fake_gpus["unregistered"] == [3 << 20]
    assert fake_gpus["ceilings"] == [torch.device("cuda:0")]

    table = doctor.format_profile(profile)
    assert _row(table, "GPU 0").startswith("NVIDIA H100 80GB HBM3, 79.6 GiB, 132 SMs, compute 9.0, "
                                           "PCIe Gen1 x16 (max Gen5 x16), below its maximum now")
    assert _row(table, "GPU 1").endswith("compute 9.0, PCIe link error: RuntimeError: Not Supported")
    assert _row(table, "PCIe counters 0") == "readable"
    assert _row(table, "PCIe counters 1") == "not readable: NVML PCIe counters unavailable: Not Supported"
    lines = table.splitlines()
    matrix = lines.index(next(line for line in lines if line.startswith("peer access")))
    assert [line.split() for line in lines[matrix:matrix + 3]] == [
        ["peer", "access", "from", "\\", "to", "0", "1"], ["GPU", "0", "-", "yes"], ["GPU", "1", "no", "-"]]
    assert _row(table, "cudaHostRegister").startswith("3.0 MiB (the planned host tier): pinned and released")
    assert _row(table, "ceilings").startswith("H2D memcpy 55.1 GB/s, zero-copy read 35.2 GB/s, D2D copy 1450 GB/s")
    assert fake_gpus["compiled on"] == torch.device("cuda:0")
    assert profile["kernel_compilers"]["numba-cuda"]["ok"]
    assert profile["kernel_compilers"]["cupy"] == {"error": "RuntimeError: NVRTC_ERROR_COMPILATION (6)"}
    assert re.fullmatch(r"numba-cuda compiled and ran a kernel, \d+\.\d\d s; "
                        r"cupy error: RuntimeError: NVRTC_ERROR_COMPILATION \(6\)", _row(table, "kernel compilers"))


def test_a_kernel_that_runs_but_adds_wrongly_is_reported_as_such(fake_gpus, tmp_path, monkeypatch):
    monkeypatch.setattr(doctor, "_numba_add_one", lambda device: torch.zeros(doctor.KERNEL_CHECK_SIZE, dtype=torch.int64))
    profile, _ = doctor.run_doctor(tmp_path, measure=False)
    assert profile["kernel_compilers"]["numba-cuda"] == {"ok": False, "error": "the kernel ran but its output is wrong"}


def test_a_refused_registration_and_unmeasured_ceilings_are_reported(fake_gpus, tmp_path, monkeypatch):
    def refuse(tensor):
        raise RuntimeError("cudaHostRegister refused 1024 bytes (CUDA error 1)")

    monkeypatch.setattr(tiering.features.zero_copy, "register_host_memory", refuse)
    profile, _ = doctor.run_doctor(tmp_path, host_tier_bytes=1024, measure=False)
    assert profile["host_register"] == {"bytes": 1024, "planned": True, "ok": False,
                                        "error": "cudaHostRegister refused 1024 bytes (CUDA error 1)"}
    assert fake_gpus["ceilings"] == []
    table = doctor.format_profile(profile)
    assert _row(table, "cudaHostRegister") == ("1.0 KiB (the planned host tier): failed: cudaHostRegister refused "
                                               "1024 bytes (CUDA error 1)")
    assert _row(table, "ceilings") == "not measured (--no-measure)"

    profile, _ = doctor.run_doctor(tmp_path, host_tier_bytes=1 << 62, measure=False)
    assert not profile["host_register"]["ok"] and "exceed the" in profile["host_register"]["error"]
    with pytest.raises(ValueError, match="examines a CUDA device"):
        doctor.run_doctor(tmp_path, device="cpu")


def test_one_gpu_has_no_peers_and_an_error_replaces_a_whole_section():
    assert doctor._peer_rows([[None]]) == [("peer access", "one GPU: no peers")]
    assert doctor._peer_rows({"error": "RuntimeError: boom"}) == [("peer access", "error: RuntimeError: boom")]
    assert doctor._memlock_line({"soft": 65536, "hard": "unlimited"}) == "64.0 KiB (hard limit unlimited)"
    assert doctor._ceilings_line({"error": "CUDADriverError: x"}) == "error: CUDADriverError: x"
    assert doctor._missing_line(["ogb", "platformdirs"]).startswith("ogb, platformdirs: install with pip install")


def test_the_read_kernel_runs_on_torchs_current_stream(monkeypatch):
    made = []
    fake_cupy = types.ModuleType("cupy")
    fake_cupy.cuda = types.SimpleNamespace(Stream=types.SimpleNamespace(from_external=lambda s: made.append(s) or s))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: types.SimpleNamespace(cuda_stream=0x5EED))
    stream = tiering.cuda_cpp.cupy_stream(torch.device("cuda", 0))
    assert made == [stream] and stream.__cuda_stream__() == (0, 0x5EED)  # the CUDA stream protocol


# ----------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_read_kernel_copies_pinned_host_memory_exactly():
    per_sm = suite.measure.ceilings._BLOCKS_PER_SM * suite.measure.ceilings._THREADS
    threads = torch.cuda.get_device_properties(0).multi_processor_count * per_sm
    # past four grid strides (the unrolled loop) and not a multiple of the grid (the remainder loop)
    host = torch.randint(0, 256, (16 * (5 * threads + 12345),), dtype=torch.uint8).pin_memory()
    out = torch.zeros(host.numel(), dtype=torch.uint8, device="cuda")
    suite.measure.ceilings.read_host_into(host, out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), host)
    with pytest.raises(ValueError, match="multiple of 16"):
        suite.measure.ceilings.read_host_into(host[:15], out[:15])


@pytest.mark.gpu
def test_ceilings_are_measured_on_the_gpu(tmp_path):
    ceilings = suite.measure.ceilings.measure_ceilings("cuda", buffer_bytes=64 << 20, repeats=3)
    assert set(ceilings) == {"h2d_memcpy_bytes_per_s", "zero_copy_read_bytes_per_s", "d2d_copy_bytes_per_s",
                             "buffer_bytes"}
    assert ceilings["buffer_bytes"] == 64 << 20
    for key in ("h2d_memcpy_bytes_per_s", "zero_copy_read_bytes_per_s", "d2d_copy_bytes_per_s"):
        assert 1e8 < ceilings[key] < 1e14  # between 0.1 GB/s and 100 TB/s: a time was really measured
    profile, _ = doctor.run_doctor(tmp_path, host_tier_bytes=64 << 20, measure=False)
    assert profile["host_register"]["ok"], profile["host_register"]
    assert all("error" not in gpu["pcie"] for gpu in profile["gpus"]), profile["gpus"]


@pytest.mark.gpu
def test_numba_cuda_and_cupy_each_compile_and_run_a_kernel_on_the_gpu():
    compilers = doctor._kernel_compilers(torch.device("cuda"))
    assert set(compilers) == {"numba-cuda", "cupy"}
    assert all(result.get("ok") for result in compilers.values()), compilers
