"""Every ``module.name`` the code spells out exists in the installed packages.

Much of tierbench runs only on a GPU (``torch.cuda`` streams, numba-cuda launches): on a CPU machine those lines never
run, so a misspelt ``torch.cuda.current_stream`` would first fail on a lent GPU, minutes into a visit.  This reads
every source file instead of running it: each chain of attributes that starts at a name bound to an imported module
(``torch.cuda.current_stream``, ``cuda.external_stream`` after ``from numba import cuda``) is looked up, module by
module and class by class, in the packages installed here.  A chain stops being checked where it reaches something
that is neither (a function, an instance).  Packages not installed here (CuPy on a CPU machine) are not checked, and
neither is a name that the file also binds to something else (an assignment, an argument).

The lookup runs in a fresh interpreter without numba's CUDA simulator, which ``tests/conftest.py`` turns on, so that
``numba.cuda`` is the real one whose names the GPU runs.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("tiering", "baselines", "suite", "benchmarks", "tests")


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - not installed here, or not importable without a GPU: not checked
        return None


def _imported_modules(tree: ast.AST) -> dict[str, str]:
    """The names the file binds to modules by its imports (anywhere in it), each with the module's dotted name."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                parent = _module(node.module)
                value = getattr(parent, alias.name, None) if parent is not None else None
                if isinstance(value, types.ModuleType):
                    names[alias.asname or alias.name] = value.__name__
                elif value is None and _module(f"{node.module}.{alias.name}") is not None:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _rebound(tree: ast.AST) -> set[str]:
    """The names the file also binds otherwise than by an import: assignments, loop targets, arguments, handlers."""
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    names |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.name}
    names |= {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef))}
    return names


def _chains(tree: ast.AST):
    """Every outermost ``name.a.b...`` attribute chain: (line, name, [a, b, ...])."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            attributes, current = [], node
            while isinstance(current, ast.Attribute):
                attributes.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name):
                yield node.lineno, current.id, attributes[::-1]


def _missing(module: types.ModuleType, attributes: list[str]) -> int | None:
    """How many of ``attributes`` resolve before one that does not exist (None: all do, or the chain left the
    modules and classes it can check)."""
    value = module
    for depth, attribute in enumerate(attributes):
        if not isinstance(value, (types.ModuleType, type)):
            return None
        if hasattr(value, attribute):
            value = getattr(value, attribute)
        elif isinstance(value, types.ModuleType) and _module(f"{value.__name__}.{attribute}") is not None:
            value = _module(f"{value.__name__}.{attribute}")
        else:
            return depth
    return None


def unresolved_names() -> tuple[int, list[str]]:
    """(how many attribute lookups were checked, every chain naming something that does not exist)."""
    checked, unresolved = 0, []
    for path in sorted(p for source in SOURCES for p in (REPO / source).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        modules = _imported_modules(tree)
        for name in _rebound(tree):
            modules.pop(name, None)
        for line, name, attributes in _chains(tree):
            module = _module(modules[name]) if name in modules else None
            if module is None:
                continue
            checked += len(attributes)
            depth = _missing(module, attributes)
            if depth is not None:
                unresolved.append(f"{path.relative_to(REPO)}:{line}: {name}.{'.'.join(attributes[:depth + 1])}")
    return checked, unresolved


def test_every_module_attribute_the_code_names_exists():
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-m", "tests.test_attribute_names"], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    checked, unresolved = json.loads(done.stdout.splitlines()[-1])
    assert checked > 3000  # torch, numba, numpy, pandas and tierbench's own modules are all read
    assert unresolved == []


def test_a_misspelt_name_on_a_path_that_never_runs_here_is_found():
    tree = ast.parse("import torch\n\n\ndef f(device):\n"
                     "    return torch.cuda.currentnumba_stream(device), torch.cuda.current_stream(device).cuda_stream\n")
    modules = _imported_modules(tree)
    found = [(line, name, attributes[: _missing(_module(modules[name]), attributes) + 1])
             for line, name, attributes in _chains(tree)
             if name in modules and _missing(_module(modules[name]), attributes) is not None]
    assert found == [(5, "torch", ["cuda", "currentnumba_stream"])]


if __name__ == "__main__":
    print(json.dumps(unresolved_names()))
