"""Compiling the package's CUDA C++ sources (``tiering.cuda_cpp.KernelSource``) with nvcc for sm_90, as NVRTC
compiles them on a GPU: every kernel instantiated as its name expression names it, with each kernel's resource
usage."""

import importlib.resources
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tiering.cuda_cpp import COMPILE_OPTIONS, KernelSource

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")


def sm90_usage(source: KernelSource, folder: Path) -> list[tuple[int, int, int]]:
    """Each kernel's (stack frame, spill stores, spill loads) in bytes, compiling ``source`` for sm_90 in
    ``folder``."""
    cu = folder / source.name
    cu.write_text(source.text() + "extern void* const instantiated[];\nvoid* const instantiated[] = {"
                  + ", ".join(f"(void*){expression}" for expression in source.name_expressions) + "};\n")
    result = subprocess.run(["nvcc", *COMPILE_OPTIONS, "-arch=sm_90", "--resource-usage", "-c", str(cu), "-o",
                             str(folder / "kernels.o")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    usage = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                       result.stdout + result.stderr)
    assert len(usage) == len(source.name_expressions), result.stdout + result.stderr
    return [tuple(map(int, kernel)) for kernel in usage]


def assert_ships_as_package_data(source: KernelSource, pyproject: Path) -> None:
    """``source`` is a file of its package, every kernel it names is a ``__global__`` function of it, it includes no
    header (NVRTC has none of the C++ standard library's, which nvcc would find), and ``pyproject.toml`` ships it as
    package data."""
    import importlib.resources

    import tomllib

    assert importlib.resources.files(source.package).joinpath(source.name).is_file()
    for expression in source.name_expressions:
        assert f"__global__ void {expression.split('<')[0]}(" in source.text()
    assert not re.search(r"^\s*#\s*include", source.text(), re.MULTILINE)
    package_data = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
    assert source.name in package_data[source.package]
