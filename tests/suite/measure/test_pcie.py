"""NVML's PCIe counters through a stand-in pynvml: value types, wrap-around, the 32-bit sampler, bus ids, errors."""

import sys
import threading
import time
import types

import pytest
import torch

from suite.measure.pcie import SCOPE, PCIeCounter, link_bytes_per_second
from tests.gpu_marker import unusable

RX, TX = 198, 197
UINT, ULL, DOUBLE = 1, 3, 0


class FakeNVML(types.ModuleType):
    """pynvml with one GPU at bus 0000:3b:00.0 whose counters advance by a fixed step at every read."""

    NVML_SUCCESS = 0
    NVML_VALUE_TYPE_DOUBLE = DOUBLE
    NVML_VALUE_TYPE_UNSIGNED_INT = UINT
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = ULL
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES = RX
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES = TX

    class NVMLError(Exception):
        pass

    def __init__(self, value_type=ULL, width=64, base=0, rx_step=1000, tx_step=7, link=(5, 16)):
        super().__init__("pynvml")
        self.value_type, self.width, self.base, self.link = value_type, width, base, link
        self.steps = (rx_step, tx_step)
        self.reads, self.bus_ids, self.failing = 0, [], None
        self.lock = threading.Lock()

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        raise AssertionError("NVML's index is not CUDA's: the handle must come from the bus id")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        self.bus_ids.append(bus_id)
        if bus_id != "0000:3b:00.0":
            raise self.NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        if self.link is None:
            raise self.NVMLError("Not Supported")
        return self.link[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        if self.link is None:
            raise self.NVMLError("Not Supported")
        return self.link[1]

    def nvmlDeviceGetFieldValues(self, handle, fields):
        assert handle == "handle" and fields == [RX, TX]
        with self.lock:
            self.reads += 1
            out = []
            for field, step in zip(fields, self.steps):
                raw = (self.base + self.reads * step) % 2**self.width
                # only the member that valueType names holds the value; the others hold garbage
                value = types.SimpleNamespace(dVal=-1.0, uiVal=raw if self.value_type == UINT else 12345,
                                              ullVal=raw if self.value_type == ULL else 12345)
                failed = 3 if field == self.failing else self.NVML_SUCCESS  # NVML_ERROR_NOT_SUPPORTED
                out.append(types.SimpleNamespace(fieldId=field, valueType=self.value_type, nvmlReturn=failed,
                                                 value=value))
            return out


@pytest.fixture
def gpu_at_bus_3b(monkeypatch):
    """CUDA device 1 (as this process numbers them) sits at PCI 0000:3b:00.0."""

    def properties(index):
        assert index == 1
        return types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)

    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)


def install(monkeypatch, **kwargs) -> FakeNVML:
    nvml = FakeNVML(**kwargs)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def test_the_handle_is_taken_by_pci_bus_id_not_by_cuda_index(monkeypatch, gpu_at_bus_3b):
    nvml = install(monkeypatch)
    counter = PCIeCounter(torch.device("cuda", 1))
    assert counter.available and nvml.bus_ids == ["0000:3b:00.0"]


def test_without_the_bus_id_in_torch_it_comes_from_cupy(monkeypatch):
    nvml = install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(name="old torch"))
    device = types.SimpleNamespace(pci_bus_id="0000:3B:00.0")
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda index: device if index == 1 else None))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    nvml.nvmlDeviceGetHandleByPciBusId = lambda bus_id: nvml.bus_ids.append(bus_id) or "handle"
    assert PCIeCounter("cuda:1").available and nvml.bus_ids == ["0000:3B:00.0"]


def test_a_64_bit_counter_that_wraps_gives_the_true_difference(monkeypatch, gpu_at_bus_3b):
    # reads: 1 in the constructor, 2 at start(), 3 at delta(); the RX counter passes 2**64 between 2 and 3
    install(monkeypatch, base=2**64 - 2400)
    counter = PCIeCounter(torch.device("cuda", 1))
    counter.start()
    assert counter._sampler is None  # 64 bits do not wrap within a measurement: no thread
    assert counter.delta() == {"rx_bytes": 1000, "tx_bytes": 7}
    assert counter.scope == SCOPE


def test_a_32_bit_counter_is_sampled_often_enough_to_count_every_wrap(monkeypatch, gpu_at_bus_3b):
    step = 3 * 2**30  # 3 GiB between reads: every second read wraps the 32-bit counter
    nvml = install(monkeypatch, value_type=UINT, width=32, rx_step=step, tx_step=1)
    counter = PCIeCounter(torch.device("cuda", 1))
    assert counter._interval == pytest.approx(2**32 / link_bytes_per_second(5, 16) / 4)  # Gen5 x16: ~17 ms
    counter.start()
    deadline = time.monotonic() + 10
    while nvml.reads < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    measured = counter.delta()
    reads = nvml.reads - 2  # the reads after start()'s
    assert reads >= 6
    assert measured == {"rx_bytes": reads * step, "tx_bytes": reads}  # > 4 GiB: what a bare difference loses
    assert not any(t.name == "tierbench-nvml" for t in threading.enumerate())  # delta() stopped the sampler
    time.sleep(3 * counter._interval)
    assert nvml.reads == reads + 2


def test_the_sampler_assumes_the_fastest_link_where_nvml_cannot_say(monkeypatch, gpu_at_bus_3b):
    install(monkeypatch, value_type=UINT, width=32, link=None)
    assert PCIeCounter(torch.device("cuda", 1))._interval == pytest.approx(2**32 / (64e9 * 16 / 8) / 4)


def test_close_stops_the_sampler_of_an_interrupted_measurement(monkeypatch, gpu_at_bus_3b):
    install(monkeypatch, value_type=UINT, width=32)
    counter = PCIeCounter(torch.device("cuda", 1))
    counter.start()
    assert counter._sampler.is_alive()
    sampler = counter._sampler
    counter.close()
    assert not sampler.is_alive()


def test_a_field_that_returns_an_error_is_unavailable_with_a_reason_never_zero(monkeypatch, gpu_at_bus_3b):
    nvml = install(monkeypatch)
    nvml.failing = RX
    counter = PCIeCounter(torch.device("cuda", 1))
    counter.start()
    assert not counter.available and counter.delta() is None
    assert counter.reason == f"NVML PCIe counters unavailable: RuntimeError: field {RX} returned NVML error 3"
    assert counter.scope == counter.reason


def test_a_field_that_fails_during_a_measurement_makes_that_measurement_unavailable(monkeypatch, gpu_at_bus_3b):
    nvml = install(monkeypatch)
    counter = PCIeCounter(torch.device("cuda", 1))
    counter.start()
    nvml.failing = TX
    assert counter.delta() is None and "failed during the measurement" in counter.scope
    nvml.failing = None
    counter.start()  # the next measurement starts afresh
    assert counter.delta() == {"rx_bytes": 1000, "tx_bytes": 7} and counter.scope == SCOPE


def test_a_value_that_is_not_an_integer_counter_is_refused(monkeypatch, gpu_at_bus_3b):
    install(monkeypatch, value_type=DOUBLE)
    counter = PCIeCounter(torch.device("cuda", 1))
    assert not counter.available and "not an integer counter" in counter.reason


def test_no_gpu_means_no_nvml_at_all(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # importing it would fail: it must not be imported
    for device in (None, torch.device("cpu"), "cpu"):
        counter = PCIeCounter(device)
        counter.start()
        assert counter.delta() is None and counter.reason == counter.scope == "no GPU in use"


def test_a_failure_in_the_32_bit_sampler_is_reported_by_delta(monkeypatch, gpu_at_bus_3b):
    nvml = install(monkeypatch, value_type=UINT, width=32)
    counter = PCIeCounter(torch.device("cuda", 1))
    counter.start()
    nvml.failing = RX
    counter._sampler.join(10)  # the sampler stops at its first failed read
    nvml.failing = None  # NVML answers again, but the wraps in between are lost
    assert counter.delta() is None and counter.reason.startswith("NVML PCIe counters failed during the measurement")


@pytest.mark.gpu
def test_on_a_gpu_the_counter_is_the_cuda_devices_and_sees_a_host_to_device_copy():
    from suite.measure.pcie import pci_bus_id

    device = torch.device("cuda", torch.cuda.current_device())
    counter = PCIeCounter(device)
    if not counter.available:  # NVML or the fields missing here: recorded as unavailable, as tested above
        unusable("needs NVML's PCIe counters of the GPU", counter.reason)
    import pynvml

    info = pynvml.nvmlDeviceGetPciInfo(counter._handle)
    domain, bus, rest = pci_bus_id(device).split(":")
    assert (info.domain, info.bus, info.device) == (int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16))
    host = torch.ones(64 * 2**20).pin_memory()  # 256 MiB
    counter.start()
    host.to(device, non_blocking=True)
    torch.cuda.synchronize(device)
    time.sleep(0.5)  # let NVML's counters catch up
    measured = counter.delta()
    assert measured is not None, counter.reason
    assert measured["rx_bytes"] >= host.numel() * host.element_size()  # the payload; more with overhead and others
