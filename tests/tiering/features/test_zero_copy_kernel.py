"""The zero-copy gather kernel: its source ships with the package and compiles without spills, its per-lane
addressing (``tiering.features.addressing``) copies every byte once and touches exactly what the traffic model
counts, the .cu source compiled for the host copies exactly what that addressing says, lane by lane, its host calls
go through CuPy as intended, and on a GPU every variant is bit-exact against the CPU reference in every table dtype
and at every offset."""

import contextlib
import gc
import importlib.resources
import subprocess
import types
from pathlib import Path

import pytest
import torch

from tests.cuda_cpp import assert_ships_as_package_data, needs_nvcc, sm90_usage
from tests.tables import bits, table_at
from tiering import cuda_cpp
from tiering.cuda_cpp import COMPILE_OPTIONS
from tiering.features import combined, zero_copy
from tiering.features.addressing import LINE, SECTOR, UNROLL, VARIANTS, WARP, copy_unit, warp_steps
from tiering.features.combined import CombinedTensor
from tiering.features.device_counters import DeviceCounters
from tiering.features.traffic import zero_copy_traffic
from tiering.features.zero_copy import KERNEL_NAMES

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def test_the_kernel_source_ships_as_package_data():
    assert zero_copy.GATHER.name_expressions == tuple(KERNEL_NAMES[variant, counting] for variant in VARIANTS
                                                      for counting in (False, True))
    assert_ships_as_package_data(zero_copy.GATHER, Path(__file__).parents[3] / "pyproject.toml")


@needs_nvcc
def test_every_kernel_instantiation_compiles_for_sm90_without_spills(tmp_path):
    usage = sm90_usage(zero_copy.GATHER, tmp_path)  # each name expression instantiated as NVRTC instantiates it
    assert all(kernel == (0, 0, 0) for kernel in usage), usage  # no stack frame, no spills


ROW_BYTES = (2, 6, 14, 30, 64, 100, 126, 128, 144, 400, 512, 516, 1028, 2050, 4144)

# Runs the kernel source's per-lane copy (copy_row_lane) on the host: for each case read from stdin (variant, source
# and destination offsets from 128-byte aligned buffers, row bytes), the unit, then for each lane the destination
# units it wrote ("offset:width ..."), and whether each written byte is the source's.
LANE_HARNESS = r"""
#include <cstdio>
#include <cstring>
#include SOURCE

alignas(128) static unsigned char source[1 << 15];
alignas(128) static unsigned char target[1 << 15];

template <int VARIANT>
void run(int src_offset, int dst_offset, long long row_bytes)
{
    const unsigned char* src = source + src_offset;
    unsigned char* dst = target + dst_offset;
    printf("unit %d\n", copy_unit<VARIANT>(src, dst, row_bytes));
    for (int lane = 0; lane < WARP; ++lane) {
        memset(dst, 0, row_bytes);
        copy_row_lane<VARIANT>(src, dst, row_bytes, lane);
        bool exact = true;
        printf("lane %d", lane);
        for (long long b = 0; b < row_bytes;) {
            if (dst[b] == 0) { ++b; continue; }
            long long e = b;
            while (e < row_bytes && dst[e] != 0) { exact = exact && dst[e] == src[e]; ++e; }
            printf(" %lld:%lld", b, e - b);
            b = e;
        }
        printf(exact ? " exact\n" : " wrong\n");
    }
}

int main()
{
    printf("constants %d %d %d %d %d %d\n", NAIVE, ALIGNED, WIDE, WARP, LINE, UNROLL);
    for (int i = 0; i < (int)sizeof source; ++i) source[i] = (unsigned char)(i % 251 + 1);  // never 0
    int variant, src_offset, dst_offset;
    long long row_bytes;
    while (scanf("%d %d %d %lld", &variant, &src_offset, &dst_offset, &row_bytes) == 4) {
        if (variant == NAIVE) run<NAIVE>(src_offset, dst_offset, row_bytes);
        if (variant == ALIGNED) run<ALIGNED>(src_offset, dst_offset, row_bytes);
        if (variant == WIDE) run<WIDE>(src_offset, dst_offset, row_bytes);
    }
}
"""


def lane_units(steps, dst: int) -> list[list[tuple[int, int]]]:
    """Per lane, the (destination offset, width) of each unit it copies, in order."""
    lanes = [[] for _ in range(WARP)]
    for step in steps:
        for access in step:
            lanes[access.lane].append((access.dst - dst, access.width))
    return lanes


@needs_nvcc
def test_the_kernel_source_copies_what_the_addressing_defines_lane_by_lane(tmp_path):
    harness = tmp_path / "lanes.cu"
    harness.write_text(LANE_HARNESS.replace("SOURCE", f'"{importlib.resources.files("tiering.features") / zero_copy.GATHER.name}"'))
    build = subprocess.run(["nvcc", *COMPILE_OPTIONS, str(harness), "-o", str(tmp_path / "lanes")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    cases = [(variant, offset + row * row_bytes, row * row_bytes, row_bytes) for variant in VARIANTS
             for row_bytes in ROW_BYTES for offset in range(0, LINE, 2) for row in (0, 1, 3)]
    stdin = "".join(f"{VARIANTS.index(v)} {src} {dst} {n}\n" for v, src, dst, n in cases)
    run = subprocess.run([str(tmp_path / "lanes")], input=stdin, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = iter(run.stdout.splitlines())
    assert next(lines).split()[1:] == [str(i) for i in range(len(VARIANTS))] + [str(WARP), str(LINE), str(UNROLL)]
    for variant, src, dst, row_bytes in cases:
        assert next(lines) == f"unit {copy_unit(variant, src, row_bytes, dst)}", (variant, src, dst, row_bytes)
        for lane, units in enumerate(lane_units(warp_steps(variant, src, dst, row_bytes), dst)):
            assert next(lines) == " ".join([f"lane {lane}", *(f"{o}:{w}" for o, w in units), "exact"]), (
                variant, src, dst, row_bytes, lane)
    assert next(lines, None) is None


# Runs the kernel source's count of a row's traffic (row_traffic) on the host: for each case read from stdin (variant,
# source offset from a 128-byte aligned buffer, row bytes; the destination 16-byte aligned), its payload and requests.
TRAFFIC_HARNESS = r"""
#include <cstdio>
#include SOURCE

alignas(128) static unsigned char source[1 << 15];
alignas(128) static unsigned char target[1 << 15];

template <int VARIANT>
void run(int src_offset, long long row_bytes)
{
    long long payload = 0, requests = 0;
    row_traffic<VARIANT>(source + src_offset, target, row_bytes, payload, requests);
    printf("%lld %lld\n", payload, requests);
}

int main()
{
    int variant, src_offset;
    long long row_bytes;
    while (scanf("%d %d %lld", &variant, &src_offset, &row_bytes) == 3) {
        if (variant == NAIVE) run<NAIVE>(src_offset, row_bytes);
        if (variant == ALIGNED) run<ALIGNED>(src_offset, row_bytes);
        if (variant == WIDE) run<WIDE>(src_offset, row_bytes);
    }
}
"""


@needs_nvcc
def test_the_kernel_counts_each_host_row_as_the_traffic_model_does(tmp_path):
    """The kernel adds each row it reads from the host to the loader's counters with ``row_traffic``, the model
    re-stated in C++: built for the host, it gives ``zero_copy_traffic``'s payload and requests at every offset."""
    harness = tmp_path / "traffic.cu"
    harness.write_text(TRAFFIC_HARNESS.replace(
        "SOURCE", f'"{importlib.resources.files("tiering.features") / zero_copy.GATHER.name}"'))
    build = subprocess.run(["nvcc", *COMPILE_OPTIONS, str(harness), "-o", str(tmp_path / "traffic")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    cases = [(variant, offset, row, row_bytes) for variant in VARIANTS for row_bytes in ROW_BYTES
             for offset in range(0, LINE, 2) for row in (0, 1, 3)]
    stdin = "".join(f"{VARIANTS.index(v)} {offset + row * n} {n}\n" for v, offset, row, n in cases)
    run = subprocess.run([str(tmp_path / "traffic")], input=stdin, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    counted = [tuple(map(int, line.split())) for line in run.stdout.splitlines()]
    assert len(counted) == len(cases)
    for (variant, offset, row, row_bytes), kernel in zip(cases, counted, strict=True):
        assert kernel == zero_copy_traffic(torch.tensor([row]), row_bytes, offset, variant), (
            variant, offset, row, row_bytes)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("row_bytes", ROW_BYTES)
def test_each_lane_copies_its_bytes_once_and_touches_what_the_model_counts(variant, row_bytes):
    for offset in range(0, LINE, 2):  # every start a float16 or bfloat16 table can have
        for row in (0, 1, 3):
            src, dst = offset + row * row_bytes, row * row_bytes  # the output starts 16-byte aligned
            steps = warp_steps(variant, src, dst, row_bytes)
            assert steps[0][0].width == copy_unit(variant, offset, row_bytes)
            copied = [(a.src - src + k, a.dst - dst + k) for step in steps for a in step for k in range(a.width)]
            assert sorted(copied) == [(b, b) for b in range(row_bytes)], (offset, row)  # each byte once, in place
            sectors = sum(len({(a.src + k) // SECTOR for a in step for k in range(a.width)}) for step in steps)
            lines = sum(len({(a.src + k) // LINE for a in step for k in range(a.width)}) for step in steps)
            model = zero_copy_traffic(torch.tensor([row]), row_bytes, offset, variant)
            assert model == (sectors * SECTOR, lines), (offset, row)


def test_wide_loads_four_steps_of_whole_lines_per_iteration():
    steps = warp_steps("wide", 64, 0, 4096)  # 256 units of 16 bytes, shifted back 4 units to the line
    assert len(steps) == 3 * UNROLL and all(a.width == 16 for step in steps for a in step)
    assert [len(step) for step in steps[:UNROLL]] == [28, 32, 32, 32]  # the 4 lanes before the row idle
    assert [a.src % LINE for a in steps[1][::8]] == [0, 0, 0, 0]  # each 8 lanes read one whole line


def test_rows_that_are_not_16_byte_multiples_fall_back_to_the_aligned_copy():
    for offset, row_bytes in ((16, 100), (8, 512), (0, 14)):
        assert warp_steps("wide", offset, 0, row_bytes) == warp_steps("aligned", offset, 0, row_bytes)
    assert copy_unit("wide", 16, 512) == 16 and copy_unit("aligned", 16, 512) == 4 and copy_unit("naive", 0, 14) == 2


def test_odd_half_precision_rows_move_in_2_byte_units_with_64_byte_steps():
    # 14-byte fp16 rows (D = 7) at offset 0: row 9 = [126, 140) crosses the line at 128
    assert zero_copy_traffic(torch.tensor([9]), 14, 0, "aligned") == (2 * SECTOR, 2)  # sectors 3, 4; halves 1, 2
    assert zero_copy_traffic(torch.tensor([9]), 14, 0, "naive") == (2 * SECTOR, 2)  # one 64-byte step: lines 0 and 1
    # 200-byte rows of fp16 D = 100 at offset 0, row 1 = [200, 400): 4-byte units, as float32 rows of D = 50
    assert zero_copy_traffic(torch.tensor([1]), 200, 0, "aligned") == (7 * SECTOR, 3)  # sectors 6..12, lines 1..3


class FakeCUDARuntimeError(RuntimeError):
    pass


class FakeRuntime:
    """The part of ``cupy.cuda.runtime`` the module calls, recording each call; like the driver, it refuses to
    register a range that overlaps one registered already, and reports registered bytes as page-locked host memory."""

    CUDARuntimeError = FakeCUDARuntimeError

    def __init__(self, refuse=False, host_pointer_ok=1, alias=0xD000):
        self.calls = []
        self.registered = {}  # start -> size
        self.refuse, self.host_pointer_ok, self.alias = refuse, host_pointer_ok, alias

    def _registered_at(self, ptr):
        return any(start <= ptr < start + size for start, size in self.registered.items())

    def hostRegister(self, ptr, size, flags):
        self.calls.append(("hostRegister", ptr, size, flags))
        if self.refuse:
            raise FakeCUDARuntimeError("cudaErrorInvalidValue: invalid argument")
        if any(start < ptr + size and ptr < start + length for start, length in self.registered.items()):
            raise FakeCUDARuntimeError("cudaErrorHostMemoryAlreadyRegistered: part or all of the requested memory "
                                       "range is already mapped")
        self.registered[ptr] = size

    def hostUnregister(self, ptr):
        self.calls.append(("hostUnregister", ptr))
        self.registered.pop(ptr)

    def deviceGetAttribute(self, attribute, device):
        self.calls.append(("deviceGetAttribute", attribute, device))
        return self.host_pointer_ok

    def pointerGetAttributes(self, ptr):
        self.calls.append(("pointerGetAttributes", ptr))
        return types.SimpleNamespace(devicePointer=self.alias, hostPointer=ptr, type=int(self._registered_at(ptr)))


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in ``cupy`` module: the runtime above, a no-op device context, and streams from the CUDA protocol."""
    runtime = FakeRuntime()

    def from_external(obj):
        return types.SimpleNamespace(protocol=obj.__cuda_stream__())

    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=runtime, Device=lambda index: contextlib.nullcontext(),
                                   Stream=types.SimpleNamespace(from_external=from_external)),
        uint64=int, int64=int, int32=int,
    )
    monkeypatch.setitem(__import__("sys").modules, "cupy", cupy)
    monkeypatch.setattr(zero_copy, "_registrations", {})  # what this fake runtime registered, and nothing else
    return cupy


def test_registration_passes_the_mapped_flags_and_explains_a_refusal(fake_cupy):
    runtime = fake_cupy.cuda.runtime
    features = torch.zeros(4, 8)
    assert zero_copy.register_host_memory(features, read_only=True)
    assert runtime.calls[-1] == ("hostRegister", features.data_ptr(), 128, 1 | 2 | 8)
    zero_copy.unregister_host_memory(features)
    assert runtime.calls[-1] == ("hostUnregister", features.data_ptr())
    runtime.refuse = True
    with pytest.raises(RuntimeError, match=r"cudaHostRegister refused 128 bytes .*cudaErrorInvalidValue.*load them"):
        zero_copy.register_host_memory(features)


def test_memory_registered_twice_here_is_unpinned_by_its_last_owner(fake_cupy):
    runtime = fake_cupy.cuda.runtime
    table = torch.zeros(64, 32)
    assert zero_copy.register_host_memory(table) and zero_copy.register_host_memory(table)  # two loaders, one table
    zero_copy.unregister_host_memory(table)  # the first owner is done: the second still reads it
    assert zero_copy.is_page_locked(table)
    zero_copy.unregister_host_memory(table)
    assert not zero_copy.is_page_locked(table)
    assert [call[0] for call in runtime.calls if call[0].startswith("host")] == ["hostRegister", "hostUnregister"]
    assert zero_copy.register_host_memory(table)  # registered afresh, counted from one again
    zero_copy.unregister_host_memory(table)
    assert not zero_copy.is_page_locked(table)


def test_a_view_into_registered_memory_is_not_registered_again(fake_cupy):
    """A table that is a view of a registered buffer which starts after its storage does (a page-aligned buffer
    cut from a larger allocation) is page-locked, though ``Tensor.is_pinned`` asks about the storage and says not."""
    runtime = fake_cupy.cuda.runtime
    buffer = torch.empty(8192, dtype=torch.uint8)[100:4196]
    assert zero_copy.register_host_memory(buffer)
    table = buffer[64 : 64 + 1024].view(torch.float32).view(16, 16)
    assert not table.is_pinned() and zero_copy.is_page_locked(table)
    assert not zero_copy.register_host_memory(table)  # already page-locked: nothing to undo later
    assert [c[0] for c in runtime.calls].count("hostRegister") == 1
    zero_copy.unregister_host_memory(buffer)
    assert not zero_copy.is_page_locked(table)
    with pytest.raises(ValueError, match="pinned CPU tensor"):
        zero_copy.mapped_view(table, "cuda:0")


def test_a_view_whose_storage_starts_in_a_registration_it_outruns_is_not_page_locked(fake_cupy, monkeypatch):
    """``Tensor.is_pinned`` answers for the storage's first byte: a table cut from a buffer whose first page is
    registered (memory freed while registered and handed out again) reads as pinned there, yet most of it is not."""
    runtime = fake_cupy.cuda.runtime
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: runtime._registered_at(self.untyped_storage().data_ptr()))
    buffer = torch.empty(12288, dtype=torch.uint8)
    runtime.registered[buffer.data_ptr()] = 4096  # a stale registration of the buffer's first page
    table = buffer[1024:9216].view(torch.float32).view(64, 32)
    assert table.is_pinned() and not zero_copy.is_page_locked(table)
    with pytest.raises(RuntimeError, match="cudaHostRegister refused .*AlreadyRegistered"):
        zero_copy.register_host_memory(table)


def test_the_device_reads_host_memory_at_the_host_address_only_where_the_attribute_allows(fake_cupy):
    runtime = fake_cupy.cuda.runtime
    features = torch.zeros(4, 8)
    assert zero_copy.mapped_pointer(features, "cuda:1") == features.data_ptr()
    assert runtime.calls == [("deviceGetAttribute", 91, 1)]  # cudaDevAttrCanUseHostPointerForRegisteredMem
    runtime.host_pointer_ok = 0
    assert zero_copy.mapped_pointer(features, "cuda:1") == 0xD000
    assert runtime.calls[-1] == ("pointerGetAttributes", features.data_ptr())
    runtime.alias = 0
    with pytest.raises(RuntimeError, match="not mapped for cuda:1"):
        zero_copy.mapped_pointer(features, "cuda:1")


def test_a_launch_runs_on_torchs_current_stream_with_the_rows_byte_size(fake_cupy, monkeypatch):
    launches = []

    def kernel(grid, block, args, stream):
        launches.append((grid, block, args, stream.protocol))

    looked_up = []
    monkeypatch.setattr(cuda_cpp, "_function", lambda source, expression: looked_up.append((source, expression))
                        or kernel)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0xABC))
    ids = torch.arange(100)
    out = torch.empty(100, 7, dtype=torch.float16)  # 14-byte rows
    tiers = torch.tensor([0x1000])
    zero_copy.launch_gather(tiers, 0x2000, ids, out, 500, replicated=10, host_start=10, variant="wide", max_blocks=3)
    zero_copy.launch_gather(tiers, 0x2000, ids, out, 500, replicated=10, host_start=10)
    (grid, block, args, protocol), (uncapped, _, _, _) = launches
    assert looked_up == [(zero_copy.GATHER, KERNEL_NAMES["wide", False]),
                         (zero_copy.GATHER, KERNEL_NAMES["aligned", False])]
    assert (grid, block, uncapped, protocol) == ((3,), (256,), (13,), (0, 0xABC))  # 100 ids / 8 warps per block
    assert args == (tiers.data_ptr(), 0x2000, ids.data_ptr(), out.data_ptr(), 100, 500, 10, 10, 0, 1, 0, 14, 0)
    counters = torch.zeros(3, dtype=torch.int64)
    zero_copy.launch_gather(tiers, 0x2000, ids, out, 500, replicated=10, host_start=10, counters=counters)
    assert launches[-1][2][-1] == counters.data_ptr()  # the kernel adds hits, payload and requests there
    assert looked_up[-1] == (zero_copy.GATHER, KERNEL_NAMES["aligned", True])  # the instantiation that counts
    int64 = torch.int64
    for wrong in (torch.zeros(3, dtype=torch.int32), torch.zeros(2, dtype=int64), torch.zeros(6, dtype=int64)[::2]):
        with pytest.raises(ValueError, match="counts into three contiguous int64"):
            zero_copy.launch_gather(tiers, 0x2000, ids, out, 500, replicated=10, host_start=10, counters=wrong)
    with pytest.raises(ValueError, match="contiguous"):
        zero_copy.launch_gather(tiers, 0x2000, ids, out.t(), 500, replicated=10, host_start=10)
    with pytest.raises(ValueError, match="unknown gather kernel variant 'fast'"):
        zero_copy.launch_gather(tiers, 0x2000, ids, out, 500, replicated=10, host_start=10, variant="fast")
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        zero_copy.launch_gather(tiers, 0x2000, ids, out.double(), 500, replicated=10, host_start=10)


class FakeEvent:
    log: list

    def record(self, stream):
        self.stream = stream
        FakeEvent.log.append(("record", stream.name, id(self)))


class FakeStream:
    def __init__(self, name):
        self.name = name

    def wait_event(self, event):
        FakeEvent.log.append(("wait", self.name, id(event)))


def test_device_counters_apply_in_call_order_across_streams(monkeypatch):
    FakeEvent.log = []
    current = {"stream": FakeStream("side")}
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current["stream"])
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    counters = DeviceCounters(2, torch.device("cpu"))
    counters.on_cuda = True  # the stream and event calls of a CUDA device, on CPU tensors
    counters.add(torch.tensor([1, 2]))  # a gather on the pipeline's side stream
    current["stream"] = FakeStream("main")
    counters.zero()  # reset_stats on the main stream: waits for that gather
    current["stream"] = FakeStream("side")
    counters.add(torch.tensor([5, 0]))  # the next gather waits for the reset
    current["stream"] = FakeStream("main")
    assert counters.read() == [5, 0]
    log = FakeEvent.log
    assert [entry[:2] for entry in log] == [("record", "side"), ("wait", "main"), ("record", "main"),
                                            ("wait", "side"), ("record", "side"), ("wait", "main"), ("record", "main")]
    assert log[1][2] == log[0][2] and log[3][2] == log[2][2] and log[5][2] == log[4][2]  # each waits for the last


def test_close_synchronises_the_device_before_unpinning(monkeypatch):
    order = []
    loader = CombinedTensor(table_at(8, 4), hot_rows=2)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: order.append(("synchronize", device)))
    monkeypatch.setattr(combined, "unregister_host_memory", lambda tensor: order.append(("unregister", tensor)))
    loader.device, loader._registered = torch.device("cuda", 0), True  # as a CUDA loader that pinned its table
    host = loader.host
    loader.close()
    loader.close()
    assert order == [("synchronize", torch.device("cuda", 0)), ("unregister", host)]


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [1, 7, 100, 129, 256, 1030])
def test_gpu_kernel_matches_the_cpu_reference_bit_for_bit(variant, dtype, dim):
    element = torch.empty((), dtype=dtype).element_size()
    for offset in (0, element, 16, 64, 128 - element):
        features = table_at(3000, dim, dtype, offset)
        ids = torch.randint(0, 3000, (5000,), generator=torch.Generator().manual_seed(dim))
        reference = CombinedTensor(features, hot_rows=700, variant=variant)
        expected = reference.gather(ids)
        loader = CombinedTensor(features, hot_rows=700, device="cuda", variant=variant, max_blocks=4)
        assert loader.host_offset == offset
        out = loader.gather(ids.cuda())
        assert out.dtype == dtype and torch.equal(bits(out.cpu()), bits(expected)), offset
        assert loader.stats() == reference.stats(), offset
        alone = torch.empty_like(out)
        loader.launch_kernel(ids.cuda(), alone)
        assert torch.equal(bits(alone), bits(torch.index_select(features.cuda(), 0, ids.cuda()))), offset
        loader.close()


@pytest.mark.gpu
def test_a_loader_collected_without_close_unpins_its_table():
    features = table_at(3000, 100)
    loader = CombinedTensor(features, hot_rows=700, device="cuda")
    assert loader._registered and zero_copy.is_page_locked(features)
    del loader
    gc.collect()
    assert not zero_copy.is_page_locked(features)
    CombinedTensor(features, hot_rows=700, device="cuda").close()  # registers it again: nothing was left behind


@pytest.mark.gpu
def test_gpu_reads_host_memory_at_the_host_address_on_this_machine():
    features = table_at(64, 32)
    loader = CombinedTensor(features, hot_rows=0, device="cuda")
    assert zero_copy.mapped_pointer(features, "cuda") == features.data_ptr() == loader._host_pointer
    loader.close()


@pytest.mark.gpu
def test_a_refused_registration_leaves_no_error_for_the_next_torch_launch():
    with pytest.raises(RuntimeError, match="cudaHostRegister refused"):
        zero_copy.register_host_memory(torch.empty(0))  # a null pointer: cudaErrorInvalidValue
    assert torch.ones(4, device="cuda").sum().item() == 4
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_gpu_counters_follow_gathers_on_a_side_stream():
    features = table_at(1000, 100)
    loader = CombinedTensor(features, hot_rows=100, device="cuda")
    side = torch.cuda.Stream()
    ids = torch.arange(100, 1000, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the side stream is busy while the main stream moves on
        loader._gather(ids)  # what a pipeline's gather enqueues, without the range check's synchronisation
    loader.reset_stats()  # on the main stream: must apply after that gather's counts
    with torch.cuda.stream(side):
        loader._gather(ids[:10])  # and this one's after the reset
    stats = loader.stats()
    expected = zero_copy_traffic(ids[:10].cpu(), 400, loader.host_offset, loader.variant)
    assert (stats.accesses, stats.hits, stats.pcie_payload_bytes, stats.pcie_requests) == (10, 0, *expected)
    loader.close()
