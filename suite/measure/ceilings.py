"""The machine's bandwidth ceilings, measured: what a gather is judged against (PyTorch-Direct §3.2, Data Tiering §4.1).

Three copies of one buffer, each timed with CUDA events on torch's current
stream and reported as the best of ``repeats`` timings after a warm-up (each
timing spans a few copies back to back):

* ``h2d_memcpy_bytes_per_s``: pinned host memory to device memory by
  ``cudaMemcpyAsync`` (the copy engines): the ceiling of DMA loaders;
* ``zero_copy_read_bytes_per_s``: a sequential read of pinned, mapped host
  memory by the SMs (16-byte loads, grid-stride, every SM full of warps),
  written to device memory: the best a zero-copy gather can reach over the
  link.  On H100 this is reported to be well below the memcpy ceiling;
* ``d2d_copy_bytes_per_s``: device to device by ``cudaMemcpyAsync``,
  counting the bytes copied once (size / time), not read plus write, so it is
  half the figure tools that count both directions print; the ceiling of a
  hot-tier gather, whose bytes are counted the same way.

The data-loading lower bound of a minibatch is cold bytes / H2D + hot bytes /
D2D.  The read kernel is CUDA C compiled by CuPy's NVRTC at first use, like
the gather kernel (``tiering.features.zero_copy``).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
from pathlib import Path

import torch

from suite.errors import BadValue
from suite.io.provenance import PROFILE_DIRS
from suite.measure.timing import best_cuda_seconds

BUFFER_BYTES = 512 << 20  # larger than any L2 (50-60 MB on H100/H200), long enough to time
REPEATS = 10
_BATCH = 4
_THREADS = 256
_BLOCKS_PER_SM = 8  # 8 x 256 = 2048 resident threads, the most an SM holds (sm_80 to sm_90)

_SOURCE = r"""
extern "C" __global__ void read_host(const int4* src, int4* dst, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {  // four 16-byte loads in flight before the stores
        const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}
"""


@functools.lru_cache(maxsize=None)
def _read_kernel(device_index: int):
    import cupy

    with cupy.cuda.Device(device_index):
        return cupy.RawKernel(_SOURCE, "read_host")


def read_host_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Launch the sequential read kernel: ``dst`` (device) = ``src`` (pinned host), on torch's current stream.

    Both are contiguous, of the same size in bytes, a multiple of 16, and
    16-byte aligned; the kernel reads ``src`` where ``tiering.features.zero_copy``'s
    gather reads host rows (``mapped_pointer``).
    """
    import cupy

    from tiering.cuda_cpp import cupy_stream
    from tiering.features.zero_copy import mapped_pointer

    nbytes = src.numel() * src.element_size()
    if not (src.is_pinned() and dst.is_cuda and src.is_contiguous() and dst.is_contiguous()):
        raise ValueError("read_host_into reads a contiguous pinned host tensor into a contiguous CUDA tensor")
    if nbytes != dst.numel() * dst.element_size() or nbytes % 16 or src.data_ptr() % 16 or dst.data_ptr() % 16:
        raise ValueError(f"source and destination must be {nbytes} bytes each, a multiple of 16 and 16-byte aligned")
    device = dst.device
    properties = torch.cuda.get_device_properties(device)
    blocks = properties.multi_processor_count * _BLOCKS_PER_SM
    with cupy.cuda.Device(device.index), cupy_stream(device):
        _read_kernel(device.index)(
            (blocks,), (_THREADS,),
            (cupy.uint64(mapped_pointer(src, device)), cupy.uint64(dst.data_ptr()), cupy.int64(nbytes // 16)),
        )


def measure_ceilings(device=None, buffer_bytes: int = BUFFER_BYTES, repeats: int = REPEATS) -> dict:
    """Bytes per second of pinned H2D memcpy, the zero-copy read kernel and D2D copy on ``device``.

    Every figure is ``buffer_bytes`` divided by the best of ``repeats`` timed
    runs; for D2D that counts each byte copied once.  Raises ``RuntimeError``
    without CUDA.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("measuring the ceilings needs a CUDA GPU and none is visible")
    device = torch.device(device if device is not None else "cuda")
    if device.type != "cuda":
        raise ValueError(f"the ceilings are measured on a CUDA device, got {device}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    buffer_bytes -= buffer_bytes % 16
    with torch.cuda.device(device):
        host = torch.empty(buffer_bytes, dtype=torch.uint8, pin_memory=True)
        host.fill_(1)  # touch every page before timing
        gpu = torch.empty(buffer_bytes, dtype=torch.uint8, device=device)
        other = torch.empty(buffer_bytes, dtype=torch.uint8, device=device)
        h2d = best_cuda_seconds(lambda: gpu.copy_(host, non_blocking=True), device, repeats, _BATCH)
        zero_copy = best_cuda_seconds(lambda: read_host_into(host, gpu), device, repeats, _BATCH)
        d2d = best_cuda_seconds(lambda: other.copy_(gpu), device, repeats, _BATCH)
        torch.cuda.current_stream(device).synchronize()
    return {
        "h2d_memcpy_bytes_per_s": buffer_bytes / h2d,
        "zero_copy_read_bytes_per_s": buffer_bytes / zero_copy,
        "d2d_copy_bytes_per_s": buffer_bytes / d2d,
        "buffer_bytes": buffer_bytes,
    }


def read_profile(path) -> dict:
    """The machine profile ``tierbench doctor`` wrote at ``path``; one that is not UTF-8 JSON holding an object is the
    user's ``BadValue`` naming it."""
    try:
        profile = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise _not_a_profile(path, "not UTF-8 text") from None
    except (OSError, ValueError) as err:
        raise _not_a_profile(path, err) from None
    if not isinstance(profile, dict):
        raise _not_a_profile(path, f"JSON {type(profile).__name__}, not an object")
    return profile


def _not_a_profile(path, why) -> BadValue:
    return BadValue(f"{path} is not a machine profile of tierbench doctor ({why}); run `tierbench doctor` again to "
                    "rewrite it")


def profile_ceilings(path) -> dict[str, float]:
    """The measured ceilings (bytes/s by name, those that are positive numbers) of the machine profile at ``path``;
    empty where there is no such file (a path is relative to the working directory, as ``suite.io.provenance``
    writes it) or it holds none (a CPU machine's, or one made with ``--no-measure``)."""
    if not isinstance(path, (str, Path)) or not Path(path).is_file():
        return {}
    ceilings = read_profile(path).get("ceilings")
    if not isinstance(ceilings, dict):
        return {}
    return {name: float(value) for name, value in ceilings.items() if name.endswith("_bytes_per_s")
            and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0}


def profile_written(path) -> datetime.datetime | None:
    """When ``tierbench doctor`` wrote the machine profile at ``path`` (its ``time``, with a time zone), or None where
    there is no such file or it holds no such time."""
    if not isinstance(path, (str, Path)) or not Path(path).is_file():
        return None
    try:
        written = datetime.datetime.fromisoformat(str(read_profile(path).get("time")))
    except ValueError:
        return None
    return written if written.tzinfo is not None else None


def archived_profile(path: Path, written: datetime.datetime) -> Path:
    """Where ``tierbench doctor`` keeps the profile at ``path``, written at ``written``, before it writes a new one
    there: ``<name>.<time>.json`` beside it, so that the records made under the old one still find its ceilings."""
    stamp = written.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    return path.with_name(f"{path.stem}.{stamp}.json")


def profile_candidates(path) -> list[tuple[datetime.datetime | None, str]]:
    """The machine profiles a record's ``machine_profile`` column may mean by ``path``, each with when doctor wrote it.

    Records name the profile relative to the working directory they were made in (a GPU visit's records made into
    ``out/`` and committed to ``results/`` name ``out/machines/<name>.json``), and every lent machine's host has the
    same name, so one file name serves every visit to one GPU model.  The candidates are the file at ``path`` and the
    files of that name in ``PROFILE_DIRS``, with the profiles doctor kept from earlier runs (``archived_profile``), in
    that order.
    """
    if not isinstance(path, str) or not path:
        return []
    name = Path(path)
    folders = dict.fromkeys([name.parent, *(Path(folder) for folder in PROFILE_DIRS)])
    return [(profile_written(candidate), str(candidate)) for folder in folders
            for candidate in (folder / name.name, *sorted(folder.glob(f"{name.stem}.*.json"))) if candidate.is_file()]


def ran_under(candidates: list[tuple[datetime.datetime | None, str]],
              made_at: datetime.datetime | None = None) -> str | None:
    """Of ``candidates`` (``profile_candidates``), the profile a record made at ``made_at`` ran under: the one written
    last no later than ``made_at``, one without a time where none has one; None where every one was written after the
    record (a later doctor's ceilings are not the ones it ran under).  Without ``made_at``, the first candidate."""
    if not candidates or made_at is None:
        return candidates[0][1] if candidates else None
    before = [(when, candidate) for when, candidate in candidates if when is not None and when <= made_at]
    if before:
        return max(before)[1]
    untimed = [candidate for when, candidate in candidates if when is None]
    return untimed[0] if untimed else None


def newest_gpu_profile(machines, needed) -> tuple[Path, dict] | None:
    """``(path, profile)`` of the newest machine profile in directory ``machines`` (or in any of several
    directories) with every ceiling in ``needed`` measured, or None."""
    folders = [machines] if isinstance(machines, (str, Path)) else machines
    found = []
    for path in sorted(path for folder in folders for path in Path(folder).glob("*.json")):
        if set(needed) <= set(profile_ceilings(path)):
            profile = read_profile(path)
            found.append((str(profile.get("time", "")), path, profile))
    if not found:
        return None
    _, path, profile = max(found, key=lambda item: item[0])
    return path, profile
