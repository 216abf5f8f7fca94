"""Measured PCIe traffic from NVML's cumulative counters, recorded beside the model, never instead of it.

``PCIeCounter(device_index)`` reads the field values
``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` and ``..._TX_BYTES`` (bytes the GPU
received and sent over PCIe since the driver loaded) before and after the
measured region; the deltas are the measurement.  RX is the direction a
gather of host rows uses.  Where NVML, the GPU or the fields are missing,
``delta()`` returns ``None`` and ``reason`` says why: "unavailable" is
recorded, never zero.
"""

from __future__ import annotations


class PCIeCounter:
    def __init__(self, device_index: int | None):
        self.reason = None
        self._handle = None
        self._start = None
        if device_index is None:
            self.reason = "no GPU in use"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self._fields = [pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES]
            self._read()
        except Exception as err:  # NVML missing, no driver, or the fields unsupported on this GPU
            self.reason = f"NVML PCIe counters unavailable: {type(err).__name__}: {err}"
            self._handle = None

    def _read(self) -> tuple[int, int]:
        values = self._nvml.nvmlDeviceGetFieldValues(self._handle, self._fields)
        for value in values:
            if value.nvmlReturn != self._nvml.NVML_SUCCESS:
                raise RuntimeError(f"field {value.fieldId} returned NVML error {value.nvmlReturn}")
        return int(values[0].value.ullVal), int(values[1].value.ullVal)

    @property
    def available(self) -> bool:
        return self._handle is not None

    def start(self) -> None:
        if self.available:
            self._start = self._read()

    def delta(self) -> dict | None:
        """``{"rx_bytes", "tx_bytes"}`` since ``start()``, or ``None`` when unavailable."""
        if not self.available or self._start is None:
            return None
        rx, tx = self._read()
        return {"rx_bytes": rx - self._start[0], "tx_bytes": tx - self._start[1]}
