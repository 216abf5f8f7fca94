"""Every ``module.name`` the code spells out exists, and every call of tierbench's own functions binds.

Much of tierbench runs only on a GPU (``torch.cuda`` streams, numba-cuda launches, CuPy's runtime): on a CPU machine
those lines never run, so a misspelt ``torch.cuda.current_stream``, or a keyword a renamed parameter no longer takes,
would first fail on a lent GPU, minutes into a visit.  This reads every source file instead of running it:

* **names**: each chain of attributes that starts at a name bound to an imported module
  (``torch.cuda.current_stream``, ``cuda.external_stream`` after ``from tiering.numba_cuda import cuda``) is looked up, module by
  module and class by class, in the packages installed here; a chain stops being checked where it reaches something
  that is neither (a function, an instance);
* **calls**: each call of a function or class of tierbench's own packages, named through an import, is bound to its
  signature (``inspect.Signature.bind``): too many arguments, a missing one or an unknown keyword fails.  Calls that
  unpack ``*args`` or ``**kwargs`` are left out, as are methods reached through an instance (``self.gather``).

An import inside a function binds its name for that function only, as Python does.  A name the file also binds to
something else (an assignment, an argument) is not checked, nor are packages not installed here (CuPy on a CPU
machine).  The lookup runs in a process forked from the tests' forkserver (``tests/processes.py``), which has not
imported ``numba.cuda``, with numba's settings read again without the CUDA simulator that ``tests/conftest.py``
turns on, so that ``numba.cuda`` is the real one whose names the GPU runs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
from pathlib import Path

from tests.processes import context as forkserver_context
from tests.processes import in_callers_environment

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("tiering", "baselines", "suite", "benchmarks", "tests")
OWN = frozenset(SOURCES)
"""The top-level packages whose functions' calls are bound to their signatures."""
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - not installed here, or not importable without a GPU: not checked
        return None


def _bindings(node: ast.ImportFrom | ast.Import) -> dict[str, object]:
    """What one import binds: each name to the module or object it names (``None`` where that is not importable
    here)."""
    if isinstance(node, ast.Import):
        return {alias.asname or alias.name.split(".")[0]: _module(alias.name if alias.asname else
                                                                  alias.name.split(".")[0]) for alias in node.names}
    parent = _module(node.module) if node.module and node.level == 0 else None
    bound = {}
    for alias in node.names:
        value = getattr(parent, alias.name, None) if parent is not None else None
        if value is None and parent is not None:
            value = _module(f"{node.module}.{alias.name}")
        bound[alias.asname or alias.name] = value
    return bound


def _own_imports(scope: ast.AST) -> dict[str, object]:
    """The names the imports of ``scope`` bind, leaving out those inside the functions it defines."""
    bound, todo = {}, list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= _bindings(node)
        elif not isinstance(node, SCOPES):
            todo += ast.iter_child_nodes(node)
    return bound


def _rebound(tree: ast.AST) -> set[str]:
    """The names the file also binds otherwise than by an import: assignments, loop targets, arguments, handlers."""
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    names |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.name}
    names |= {node.name for node in ast.walk(tree) if isinstance(node, (*SCOPES[:2], ast.ClassDef))}
    return names


def _scoped(tree: ast.AST):
    """Every node of ``tree`` with the names the imports bind where it stands: (node, {name: module or object})."""
    rebound = _rebound(tree)
    todo = [(tree, {})]
    while todo:
        scope, outer = todo.pop()
        names = outer | {name: value for name, value in _own_imports(scope).items()
                         if name not in rebound and value is not None}
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, SCOPES):
                todo.append((node, names))
                continue
            yield node, names
            stack += ast.iter_child_nodes(node)


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """``name.a.b`` as ``("name", ["a", "b"])``; None where the chain does not start at a plain name."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def _lookup(value, attributes: list[str]) -> tuple[object, int | None]:
    """``value`` followed through ``attributes`` while it is a module or a class: (where it got, the index of the
    first attribute that does not exist or None)."""
    for depth, attribute in enumerate(attributes):
        if not isinstance(value, (types.ModuleType, type)):
            return None, None
        if hasattr(value, attribute):
            value = getattr(value, attribute)
        elif isinstance(value, types.ModuleType) and _module(f"{value.__name__}.{attribute}") is not None:
            value = _module(f"{value.__name__}.{attribute}")
        else:
            return None, depth
    return value, None


def _is_own(value) -> bool:
    return (inspect.isfunction(value) or inspect.isclass(value)) and \
        (getattr(value, "__module__", None) or "").split(".")[0] in OWN


def _unbound_call(call: ast.Call, names: dict) -> str | None:
    """Why ``call`` does not bind to its function's signature ("" where it does), where it calls tierbench's own
    function named by an import (None for any other call)."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        return None
    chain = _chain(call.func)
    if chain is None or chain[0] not in names:
        return None
    function, _ = _lookup(names[chain[0]], chain[1]) if chain[1] else (names[chain[0]], None)
    function = getattr(function, "py_func", function)  # a numba dispatcher: the Python function it compiles
    if not _is_own(function):
        return None
    try:
        signature = inspect.signature(function)
    except ValueError:  # an exception class: its signature is the builtin one, unknown to inspect
        return None
    try:
        signature.bind(*call.args, **{keyword.arg: keyword.value for keyword in call.keywords})
    except TypeError as err:
        return str(err)
    return ""


def findings(source: str, filename: str = "<source>") -> dict:
    """How many attribute lookups and calls of tierbench's own functions ``source`` has that were checked, and as
    ``"line: ..."`` every chain naming something that does not exist and every call that does not bind."""
    found = {"attributes": 0, "calls": 0, "missing": [], "unbound": []}
    inner = set()  # the chains inside a longer one, which is checked whole
    for node, names in _scoped(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
            chain = _chain(node)
            if id(node) in inner or chain is None or chain[0] not in names:
                continue
            found["attributes"] += len(chain[1])
            _, depth = _lookup(names[chain[0]], chain[1])
            if depth is not None:
                found["missing"].append(f"{node.lineno}: {chain[0]}.{'.'.join(chain[1][:depth + 1])}")
        elif isinstance(node, ast.Call) and (why := _unbound_call(node, names)) is not None:
            found["calls"] += 1
            if why:
                found["unbound"].append(f"{node.lineno}: {ast.unparse(node.func)}: {why}")
    return found


def unresolved_names() -> dict:
    """``findings`` over every source file of the repository, each finding prefixed by its file."""
    total = {"attributes": 0, "calls": 0, "missing": [], "unbound": []}
    for path in sorted(p for source in SOURCES for p in (REPO / source).rglob("*.py")):
        found = findings(path.read_text(), str(path))
        for key in ("attributes", "calls"):
            total[key] += found[key]
        for key in ("missing", "unbound"):
            total[key] += [f"{path.relative_to(REPO)}:{line}" for line in found[key]]
    return total


def names_without_the_simulator() -> tuple[dict, bool]:
    """``unresolved_names()`` in a process whose numba runs no CUDA simulator, and whether the simulator was off."""
    from numba.core import config

    return unresolved_names(), not config.ENABLE_CUDASIM


def test_every_module_attribute_the_code_names_exists_and_every_own_call_binds(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    with forkserver_context().Pool(1) as pool:
        found, real_cuda = pool.apply(in_callers_environment(names_without_the_simulator))
    assert real_cuda
    assert found["attributes"] > 3000 and found["calls"] > 2000  # torch's, numba's and tierbench's names are read
    assert found["missing"] == []
    assert found["unbound"] == []


def test_a_misspelt_name_and_a_stale_keyword_on_lines_that_never_run_here_are_found():
    found = findings(
        "import torch\n"
        "from tiering.sampling.fused import numba_stream\n\n"
        "def on_a_gpu(device):\n"
        "    return torch.cuda.currentnumba_stream(device), torch.cuda.current_stream(device).cuda_stream\n\n"
        "def renamed(device):\n"
        "    return numba_stream(device=device), numba_stream(device, gpu=1), numba_stream(device, 0)\n")
    assert found["missing"] == ["5: torch.cuda.currentnumba_stream"]
    assert sorted(found["unbound"]) == ["8: numba_stream: got an unexpected keyword argument 'gpu'",
                                        "8: numba_stream: too many positional arguments"]
    assert found["calls"] == 3


def test_an_import_inside_a_function_binds_its_name_there_only():
    unbound = findings(
        "def one():\n"
        "    from suite.experiments.gpu import measure\n"
        "    return measure('records', table_bytes=1)\n\n"
        "def other():\n"
        "    from suite.experiments.scorers import measure\n"
        "    return measure('papers-s', 'records', table_bytes=1)\n")["unbound"]
    assert unbound == ["7: measure: got an unexpected keyword argument 'table_bytes'"]

