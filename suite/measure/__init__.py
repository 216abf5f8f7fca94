"""Measuring the machine: NVML PCIe counters, bandwidth ceilings and ``tierbench doctor``, SciPy peers, devices, timing."""
