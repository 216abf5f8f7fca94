"""``tierbench doctor``: a preflight of the machine before a sweep, written as its profile.

It checks what the GPU paths of Data Tiering §4 and PyTorch-Direct §3 rely on: the
versions of python, torch (and its CUDA), the driver, CuPy, numba, numba-cuda,
torch-geometric and ogb; each GPU's memory and PCIe link (generation and
width, current and maximum, from NVML); which GPUs can access each other's
memory (the multi-GPU tier of Data Tiering §4.2); the ``memlock`` limit and the
size of ``/dev/shm`` (the multi-GPU host tier lives there); whether
``cudaHostRegister`` pins a buffer the size of the planned host tier; whether
NVML's PCIe counters can be read; whether numba-cuda (NVVM, the fused sampler's
numba kernels) and CuPy (NVRTC, the gather kernel and the fused sampler's C++
kernels) each compile and run a kernel on the GPU; the measured ceilings (``suite.measure.ceilings``); and which of
tierbench's dependencies are missing or too old.

Every probe runs on its own: an error inside one is reported in its row and
the others still run.  Without CUDA the GPU rows say so and the rest is
reported.  The profile is JSON, written through a temporary file under
``out/machines/`` (by default) with the name ``suite.io.provenance.machine_profile_name``
gives it, which is how every later record finds it.  A profile already there, which earlier records name, is first renamed
to ``<name>.<its time>.json`` beside it (``suite.measure.ceilings.archived_profile``): every lent machine has the same
host name, so one name serves every visit to one GPU model, and each record's report takes the profile written last
before the record.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import resource
import time
from pathlib import Path

import torch

from suite.errors import BadValue
from suite.io import atomic
from suite.io.provenance import (
    MACHINES_DIR,
    device_name,
    git_revision,
    machine_profile_name,
    source_digest,
)
from suite.measure.ceilings import archived_profile, profile_written
from suite.measure.host_memory import available_bytes
from tiering.features.placement import hot_rows

PROFILE_FORMAT = 1
DEFAULT_HOST_TIER_BYTES = 1 << 30
SHM_PATH = "/dev/shm"
NO_GPU = "no CUDA GPU visible"
INSTALL_HINT = "install with pip install --no-deps, from wheels brought along where there is no internet (README)"


def _probe(function, *args):
    """``function(*args)``, or ``{"error": ...}`` naming what it raised: a failure is its row, never a traceback."""
    try:
        return function(*args)
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ----------------------------------------------------------------- packages
def _distribution_version(module: str, providers: dict) -> str:
    """The version of the distribution providing ``module`` (``providers``: ``packages_distributions()``)."""
    names = providers.get(module)
    return importlib.metadata.version(names[0]) if names else "missing"


def missing_packages(gpu: bool = True) -> list[str]:
    """tierbench's dependencies (and, with ``gpu``, its ``gpu`` extra) that are not installed, or installed older
    than required.

    Each entry is a distribution name, with the version found when it is too
    old.  Any CuPy wheel (``cupy-cuda12x``, ``cupy-cuda13x``, ...) satisfies
    the ``gpu`` extra's CuPy: it is one module built per CUDA major version.
    A machine without a GPU needs no ``gpu`` extra.
    """
    from packaging.requirements import Requirement

    try:
        requirements = importlib.metadata.requires("tierbench") or []
    except importlib.metadata.PackageNotFoundError:
        return ["tierbench (pip install --no-deps --no-build-isolation -e . in the checkout)"]
    missing = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": "gpu" if gpu else ""}):
            continue  # another extra (test, bench; gpu without one), or a platform this is not
        if requirement.name.startswith("cupy"):
            version = _distribution_version("cupy", importlib.metadata.packages_distributions())
            version = None if version == "missing" else version
        else:
            try:
                version = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                version = None
        if version is None:
            missing.append(requirement.name)
        elif not requirement.specifier.contains(version, prereleases=True):
            missing.append(f"{requirement.name} ({version} installed, needs {requirement.specifier})")
    return missing


def _versions(cuda: bool) -> dict:
    """The versions of what the GPU paths rely on; without a visible CUDA GPU, an NVML that cannot load (no driver)
    and an absent CuPy (only the GPU paths use it) are what a CPU machine is, not errors."""
    providers = importlib.metadata.packages_distributions()
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none (a CPU build of torch)",
        "driver": _probe(_driver_version),
        **{name: _probe(_distribution_version, module, providers) for name, module in
           (("cupy", "cupy"), ("numba", "numba"), ("numba-cuda", "numba_cuda"), ("torch-geometric", "torch_geometric"),
            ("ogb", "ogb"))},
    }
    if not cuda:
        if _error(versions["driver"]):
            versions["driver"] = f"none: {NO_GPU}"
        if versions["cupy"] == "missing":
            versions["cupy"] = f"not installed, not needed: {NO_GPU}"
    return versions


# ----------------------------------------------------------------- NVML
def _nvml():
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _driver_version() -> str:
    return _text(_nvml().nvmlSystemGetDriverVersion())


def _pcie_link(index: int) -> dict:
    from suite.measure.pcie import pci_bus_id

    nvml = _nvml()
    handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id(torch.device("cuda", index)))  # NVML's own numbering
    return {
        "generation": nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
        "width": nvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
        "max_generation": nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
        "max_width": nvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
    }


def _pcie_counters(index: int) -> dict:
    from suite.measure.pcie import PCIeCounter

    counter = PCIeCounter(torch.device("cuda", index))
    return {"readable": counter.available, "reason": counter.reason}


# ----------------------------------------------------------------- GPUs
def _gpus() -> list[dict]:
    gpus = []
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        gpus.append({
            "index": index, "name": properties.name, "memory_bytes": properties.total_memory,
            "multiprocessors": properties.multi_processor_count,
            "compute_capability": f"{properties.major}.{properties.minor}",
            "pcie": _probe(_pcie_link, index), "pcie_counters": _probe(_pcie_counters, index),
        })
    return gpus


def _peer_access() -> list[list[bool | None]]:
    """``[i][j]``: whether GPU i can access GPU j's memory (``None`` on the diagonal)."""
    count = torch.cuda.device_count()
    return [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)]
            for i in range(count)]


# ----------------------------------------------------------------- host memory
def _memlock() -> dict:
    """``RLIMIT_MEMLOCK`` in bytes, ``"unlimited"`` where it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {name: "unlimited" if value == resource.RLIM_INFINITY else value
            for name, value in (("soft", soft), ("hard", hard))}


def _shm() -> dict:
    stats = os.statvfs(SHM_PATH)
    return {"path": SHM_PATH, "size_bytes": stats.f_blocks * stats.f_frsize,
            "free_bytes": stats.f_bavail * stats.f_frsize}


def _host_register(nbytes: int) -> dict:
    """Whether ``cudaHostRegister`` pins (and unregisters) ``nbytes`` of fresh host memory, and how long it took."""
    from tiering.features.zero_copy import register_host_memory, unregister_host_memory

    available = available_bytes()
    if nbytes > available:
        return {"ok": False, "error": f"{nbytes} bytes exceed the {available} bytes of memory available"}
    buffer = torch.empty(nbytes, dtype=torch.uint8)
    start = time.perf_counter()
    try:
        register_host_memory(buffer)
    except RuntimeError as err:
        return {"ok": False, "error": str(err)}
    seconds = time.perf_counter() - start
    unregister_host_memory(buffer)
    return {"ok": True, "seconds": seconds}


def host_tier_bytes_of(dataset: str, hot_fraction: float) -> int:
    """The bytes of a preset dataset's cold rows (float32 features) when ``hot_fraction`` of its rows are hot."""
    from suite.datasets import get_preset

    preset = get_preset(dataset)
    return (preset.num_nodes - hot_rows(preset.num_nodes, hot_fraction)) * preset.feature_dim * 4


# ----------------------------------------------------------------- kernel compilers
_ADD_ONE = r"""
extern "C" __global__ void add_one(long long* values, long long n)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) values[i] += 1;
}
"""
KERNEL_CHECK_SIZE = 256


def _numba_add_one(device: torch.device) -> torch.Tensor:
    """Compile (NVVM) and launch a kernel through numba-cuda on ``device``, as the fused sampler's are."""
    import warnings

    from tiering.numba_cuda import cuda

    @cuda.jit
    def add_one(values):
        i = cuda.grid(1)
        if i < values.size:
            values[i] += 1

    with torch.cuda.device(device), warnings.catch_warnings():
        # one small block, on purpose; numba-cuda's warning class is its own, not numba's, so it is matched by text
        warnings.filterwarnings("ignore", message=r"Grid size \d+ will likely result in GPU under-utilization")
        values = torch.arange(KERNEL_CHECK_SIZE, dtype=torch.int64, device=device)
        add_one[1, KERNEL_CHECK_SIZE](cuda.as_cuda_array(values))
        return values.cpu()


def _cupy_add_one(device: torch.device) -> torch.Tensor:
    """Compile (NVRTC) and launch a kernel through CuPy on ``device``, as the gather kernel and the fused sampler's
    C++ kernels are."""
    import cupy

    with cupy.cuda.Device(device.index):
        values = cupy.arange(KERNEL_CHECK_SIZE, dtype=cupy.int64)
        cupy.RawKernel(_ADD_ONE, "add_one")((1,), (KERNEL_CHECK_SIZE,), (values, cupy.int64(KERNEL_CHECK_SIZE)))
        return torch.from_numpy(cupy.asnumpy(values))


def _compiles_and_runs(add_one, device: torch.device) -> dict:
    """Whether ``add_one(device)`` compiles, runs and adds one to every value, and how long that took."""
    start = time.perf_counter()
    values = add_one(device)
    seconds = time.perf_counter() - start
    if not torch.equal(values, torch.arange(1, KERNEL_CHECK_SIZE + 1)):
        return {"ok": False, "error": "the kernel ran but its output is wrong"}
    return {"ok": True, "seconds": seconds}


def _kernel_compilers(device: torch.device) -> dict:
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return {name: _probe(_compiles_and_runs, add_one, device)
            for name, add_one in (("numba-cuda", _numba_add_one), ("cupy", _cupy_add_one))}


# ----------------------------------------------------------------- the profile
def _ceilings(device: torch.device) -> dict:
    from suite.measure.ceilings import measure_ceilings

    return measure_ceilings(device)


def run_doctor(out_dir=MACHINES_DIR, *, host_tier_bytes: int | None = None, measure: bool = True,
               device=None) -> tuple[dict, Path]:
    """Probe the machine, write its profile to ``out_dir`` (atomically) and return it with the path.

    ``host_tier_bytes`` is the size ``cudaHostRegister`` is tried at (default
    1 GiB); ``measure=False`` skips the ceilings; ``device`` is the GPU they
    are measured on (default: the current one).
    """
    cuda = torch.cuda.is_available()
    if cuda:
        device = torch.device(device if device is not None else "cuda")
        if device.type != "cuda":
            raise BadValue(f"tierbench doctor examines a CUDA device, got {device}")
    planned = host_tier_bytes is not None
    host_tier_bytes = host_tier_bytes if planned else DEFAULT_HOST_TIER_BYTES
    if host_tier_bytes < 0:
        raise BadValue(f"the host tier cannot have {host_tier_bytes} bytes")
    register = {"bytes": host_tier_bytes, "planned": planned}
    if not cuda:
        register["skipped"] = NO_GPU
    elif host_tier_bytes == 0:
        register["skipped"] = "no host tier (every row is hot)"
    else:
        register.update(_probe(_host_register, host_tier_bytes))
    if not cuda:
        ceilings = {"skipped": NO_GPU}
    elif not measure:
        ceilings = {"skipped": "not measured (--no-measure)"}
    else:
        ceilings = _probe(_ceilings, device)
    profile = {
        "format": PROFILE_FORMAT,
        "host": platform.node(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "source_sha256": source_digest(),
        "device": device_name(device if cuda else "cpu"),
        "versions": _versions(cuda),
        "gpus": _probe(_gpus) if cuda else NO_GPU,
        "peer_access": _probe(_peer_access) if cuda else NO_GPU,
        "memlock": _probe(_memlock),
        "shm": _probe(_shm),
        "host_register": register,
        "kernel_compilers": _kernel_compilers(device) if cuda else NO_GPU,
        "ceilings": ceilings,
        "missing_packages": _probe(missing_packages, cuda),
    }
    path = Path(out_dir) / machine_profile_name(device if cuda else "cpu")
    kept = profile_written(path)
    if kept is not None:  # an earlier run's, which its records name: kept beside the new one (archived_profile)
        os.replace(path, archived_profile(path, kept))
    atomic.write_json(path, profile)
    return profile, path


# ----------------------------------------------------------------- the table
def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{nbytes:.0f} B"
        nbytes /= 1024


def _error(value) -> str | None:
    return f"error: {value['error']}" if isinstance(value, dict) and "error" in value else None


def _link(pcie) -> str:
    if _error(pcie):
        return f"PCIe link {_error(pcie)}"
    line = f"PCIe Gen{pcie['generation']} x{pcie['width']} (max Gen{pcie['max_generation']} x{pcie['max_width']})"
    if (pcie["generation"], pcie["width"]) != (pcie["max_generation"], pcie["max_width"]):
        line += ", below its maximum now: links train down while idle"
    return line


def _gpu_line(gpu: dict) -> str:
    return (f"{gpu['name']}, {_size(gpu['memory_bytes'])}, {gpu['multiprocessors']} SMs, "
            f"compute {gpu['compute_capability']}, {_link(gpu['pcie'])}")


def _counters(gpu: dict) -> str:
    counters = gpu["pcie_counters"]
    if _error(counters):
        return _error(counters)
    return "readable" if counters["readable"] else f"not readable: {counters['reason']}"


def _peer_rows(matrix) -> list[tuple[str, str]]:
    if isinstance(matrix, str) or _error(matrix):
        return [("peer access", _error(matrix) or matrix)]
    if len(matrix) < 2:
        return [("peer access", "one GPU: no peers")]
    header = "from \\ to " + " ".join(f"{j:>4}" for j in range(len(matrix)))
    rows = [("peer access", header)]
    for i, row in enumerate(matrix):
        cells = " ".join(f"{'-' if ok is None else 'yes' if ok else 'no':>4}" for ok in row)
        rows.append(("", f"{f'GPU {i}':<10}{cells}"))
    return rows


def _memlock_line(memlock) -> str:
    if _error(memlock):
        return _error(memlock)
    show = {name: value if value == "unlimited" else _size(value) for name, value in memlock.items()}
    return f"{show['soft']} (hard limit {show['hard']})"


def _register_line(register: dict) -> str:
    size = f"{_size(register['bytes'])} ({'the planned host tier' if register['planned'] else 'default size'})"
    if "skipped" in register:
        return f"{size}: skipped, {register['skipped']}"
    if register.get("ok"):
        return f"{size}: pinned and released, {register['seconds']:.2f} s to pin"
    return f"{size}: failed: {register['error']}"


def _compilers_line(compilers) -> str:
    if isinstance(compilers, str):
        return compilers
    return "; ".join(f"{name} " + (_error(result) or f"compiled and ran a kernel, {result['seconds']:.2f} s")
                     for name, result in compilers.items())


def _ceilings_line(ceilings: dict) -> str:
    if "skipped" in ceilings:
        return ceilings["skipped"]
    if _error(ceilings):
        return _error(ceilings)
    return (f"H2D memcpy {ceilings['h2d_memcpy_bytes_per_s'] / 1e9:.1f} GB/s, "
            f"zero-copy read {ceilings['zero_copy_read_bytes_per_s'] / 1e9:.1f} GB/s, "
            f"D2D copy {ceilings['d2d_copy_bytes_per_s'] / 1e9:.0f} GB/s (bytes copied once; "
            f"best of repeated {_size(ceilings['buffer_bytes'])} copies)")


def _missing_line(missing) -> str:
    if _error(missing):
        return _error(missing)
    return f"{', '.join(missing)}: {INSTALL_HINT}" if missing else "none"


def format_profile(profile: dict) -> str:
    """The profile as a two-column table to print."""
    versions = profile["versions"]
    rows = [("machine", f"{profile['host']}, {profile['device']}, git {profile['git_revision']}, {profile['time']}")]
    rows += [(name, _error(value) or str(value)) for name, value in versions.items()]
    gpus = profile["gpus"]
    if isinstance(gpus, str) or _error(gpus):
        rows.append(("GPUs", _error(gpus) or gpus))
    else:
        for gpu in gpus:
            rows += [(f"GPU {gpu['index']}", _gpu_line(gpu)), (f"  PCIe counters {gpu['index']}", _counters(gpu))]
    rows += _peer_rows(profile["peer_access"])
    rows.append(("memlock ulimit", _memlock_line(profile["memlock"])))
    shm = profile["shm"]
    rows.append((SHM_PATH, _error(shm) or f"{_size(shm['size_bytes'])}, {_size(shm['free_bytes'])} free"))
    rows.append(("cudaHostRegister", _register_line(profile["host_register"])))
    rows.append(("kernel compilers", _compilers_line(profile["kernel_compilers"])))
    rows.append(("ceilings", _ceilings_line(profile["ceilings"])))
    rows.append(("missing packages", _missing_line(profile["missing_packages"])))
    width = max(len(label) for label, _ in rows) + 2
    return "\n".join(f"{label:<{width}}{value}" for label, value in rows)
