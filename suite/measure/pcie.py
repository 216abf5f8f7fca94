"""Measured PCIe traffic from NVML's cumulative counters, recorded beside the model, never instead of it.

``PCIeCounter(device)`` reads the field values
``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` and ``..._TX_BYTES`` (bytes the GPU
received and sent over PCIe since the driver loaded) at ``start()`` and at
``delta()``; the differences are the measurement.  RX is the direction a
gather of host rows uses.

* The GPU is found by its PCI bus id, not by its CUDA index: NVML ignores
  ``CUDA_VISIBLE_DEVICES``, so NVML's device 0 need not be CUDA's.
* Each value is read through the member of NVML's value union that its
  ``valueType`` names, and differences are taken modulo the counter's width
  (2**32 or 2**64), since NVML says the counters can wrap.  A 32-bit counter
  wraps after 4 GiB, about 70 ms at PCIe Gen5 x16, so while a measurement
  runs a daemon thread reads it several times per wrap period of the
  link's top byte rate (generation x width from NVML) and adds up the
  differences; ``delta()`` stops it.
* The counters count the whole GPU: every process's traffic, and the
  protocol's headers and acknowledgements besides the payload.  ``scope``
  says so, and goes into the records beside the bytes.

Where NVML, the GPU or the fields are missing, ``delta()`` returns ``None``
and ``reason`` says why: "unavailable" is recorded, never zero.
"""

from __future__ import annotations

import ctypes
import threading

import torch

SCOPE = "whole GPU, all processes, incl. protocol overhead (NVML)"
"""What the measured bytes cover."""

GIGATRANSFERS_PER_LANE = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""Raw transfer rate of one PCIe lane per generation (GT/s, one bit each, encoding included)."""

READS_PER_WRAP = 4
"""How many times a 32-bit counter is read in the time the link needs, at its top rate, to wrap it once."""

_INTEGER_MEMBERS = {
    "UNSIGNED_INT": ("uiVal", 32),
    "UNSIGNED_LONG": ("ulVal", 8 * ctypes.sizeof(ctypes.c_ulong)),
    "UNSIGNED_LONG_LONG": ("ullVal", 64),
    "SIGNED_LONG_LONG": ("sllVal", 64),
    "SIGNED_INT": ("siVal", 32),
}
"""NVML value type (``NVML_VALUE_TYPE_*``) -> the member of ``nvmlValue_t`` holding it and its width in bits."""


def pci_bus_id(device: torch.device) -> str:
    """The PCI bus id of a CUDA device in NVML's form ("0000:3b:00.0"): from torch's device
    properties where torch has them, else from CuPy."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    if hasattr(properties, "pci_bus_id"):
        return f"{properties.pci_domain_id:04x}:{properties.pci_bus_id:02x}:{properties.pci_device_id:02x}.0"
    import cupy

    return cupy.cuda.Device(index).pci_bus_id


def link_bytes_per_second(generation: int | None, width: int) -> float:
    """The top byte rate of a PCIe link in one direction, protocol overhead included (unknown
    generations count as the fastest known)."""
    return GIGATRANSFERS_PER_LANE.get(generation, max(GIGATRANSFERS_PER_LANE.values())) * 1e9 * width / 8


class PCIeCounter:
    """Bytes over one GPU's PCIe link between ``start()`` and ``delta()``, from NVML (see above)."""

    def __init__(self, device: torch.device | str | None):
        self.reason = None
        self._handle = None
        self._last = None  # the raw counter values at the latest read of a running measurement
        self._sampler = None
        device = None if device is None else torch.device(device)
        if device is None or device.type != "cuda":
            self.reason = "no GPU in use"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._members = {getattr(pynvml, f"NVML_VALUE_TYPE_{name}"): member
                             for name, member in _INTEGER_MEMBERS.items() if hasattr(pynvml, f"NVML_VALUE_TYPE_{name}")}
            self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id(device))
            self._fields = [pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES]
            widths = [width for _, width in self._read()]
            self._interval = self._sampling_interval() if min(widths) < 64 else None
        except Exception as err:  # NVML missing, no driver, or the fields unsupported on this GPU
            self.reason = f"NVML PCIe counters unavailable: {type(err).__name__}: {err}"
            self._handle = None

    def _sampling_interval(self) -> float:
        """Seconds between reads of a 32-bit counter: a ``READS_PER_WRAP``-th of its wrap period at the
        link's top rate, counting at least 16 lanes (and the fastest generation where NVML cannot say)."""
        try:
            generation = self._nvml.nvmlDeviceGetMaxPcieLinkGeneration(self._handle)
            width = self._nvml.nvmlDeviceGetMaxPcieLinkWidth(self._handle)
        except self._nvml.NVMLError:
            generation, width = None, 16
        return 2**32 / link_bytes_per_second(generation, max(width, 16)) / READS_PER_WRAP

    def _read(self) -> list[tuple[int, int]]:
        """``(value, width in bits)`` of each field, the value as an unsigned number."""
        out = []
        for value in self._nvml.nvmlDeviceGetFieldValues(self._handle, self._fields):
            if value.nvmlReturn != self._nvml.NVML_SUCCESS:
                raise RuntimeError(f"field {value.fieldId} returned NVML error {value.nvmlReturn}")
            if value.valueType not in self._members:
                raise RuntimeError(f"field {value.fieldId} has value type {value.valueType}, not an integer counter")
            member, width = self._members[value.valueType]
            out.append((int(getattr(value.value, member)) % 2**width, width))
        return out

    def _advance(self) -> None:
        """Add what each counter moved since the last read (modulo its width) to the totals."""
        now = self._read()
        for i, ((before, _), (after, width)) in enumerate(zip(self._last, now)):
            self._totals[i] += (after - before) % 2**width
        self._last = now

    def _sample_until_stopped(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self._advance()
            except Exception as err:  # reported by delta()
                self._failure = err
                return

    @property
    def available(self) -> bool:
        return self._handle is not None

    @property
    def scope(self) -> str:
        """What the measured bytes cover, or why there are none."""
        return SCOPE if self.reason is None else self.reason

    def start(self) -> None:
        """Begin a measurement (ending one still running)."""
        self.close()
        if not self.available:
            return
        self.reason = None
        self._failure = None
        self._totals = [0] * len(self._fields)
        self._last = self._read()
        if self._interval is not None:
            self._stopping = threading.Event()
            self._sampler = threading.Thread(target=self._sample_until_stopped, name="tierbench-nvml", daemon=True)
            self._sampler.start()

    def close(self) -> None:
        """Stop the background reads of a measurement that ``delta()`` will not end (an interrupted region)."""
        if self._sampler is not None:
            self._stopping.set()
            self._sampler.join()
            self._sampler = None

    def delta(self) -> dict | None:
        """End the measurement: ``{"rx_bytes", "tx_bytes"}`` since ``start()``, or ``None`` when unavailable."""
        if not self.available or self._last is None:
            return None
        self.close()
        failure = self._failure
        if failure is None:
            try:
                self._advance()
            except Exception as err:  # NVML stopped answering
                failure = err
        self._last = None
        if failure is not None:
            self.reason = f"NVML PCIe counters failed during the measurement: {type(failure).__name__}: {failure}"
            return None
        return {"rx_bytes": self._totals[0], "tx_bytes": self._totals[1]}
