"""The house's layout: imports point one way, no module imports itself back, and the README's "Where things live"
names every package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("tiering", "baselines", "suite")


def _modules() -> dict[str, Path]:
    """Every module of the three packages by its dotted name (a package by its own name, for its ``__init__``)."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """The modules of the three packages ``path`` imports (``from p import m`` names module ``p.m`` where there is
    one), at the top level only or anywhere (inside functions too)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                      for alias in node.names}
    return {name for name in names if name in MODULES}


@pytest.mark.parametrize(("importer", "forbidden"), [
    ("tiering", ("baselines", "suite")),
    ("baselines", ("suite",)),
    ("suite.sweep", ("suite.figures",)),
    ("suite.experiments", ("suite.figures",)),
])
def test_imports_point_one_way(importer, forbidden):
    wrong = sorted(f"{module} imports {target}" for module, path in MODULES.items()
                   if module == importer or module.startswith(importer + ".")
                   for target in _imports(path, top_level_only=False)
                   if any(target == f or target.startswith(f + ".") for f in forbidden))
    assert not wrong


def test_no_module_imports_itself_back():
    """No cycle among the modules' top-level imports (a package's ``__init__`` importing its own modules is how a
    package exports them, so edges into a package's own modules from its ``__init__`` are left out)."""
    graph = {module: {target for target in _imports(path, top_level_only=True)
                      if not (path.name == "__init__.py" and target.startswith(module + "."))}
             for module, path in MODULES.items()}
    state, cycle = {}, []

    def visit(module, trail):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle.append(trail + [module, target])
            elif target not in state:
                visit(target, trail + [module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert not cycle, " -> ".join(cycle[0])


def test_where_things_live_names_every_package():
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Where things live"):]
    table = table[:table.index("\n## ")]
    named = {cell.strip("`").rstrip("/") for line in table.splitlines() if line.startswith("| `")
             for cell in line.split("|")[1].replace(",", " ").split() if cell.startswith("`")}
    packages = {str(path.parent.relative_to(REPO)) for package in PACKAGES
                for path in (REPO / package).rglob("*/__init__.py")}  # the subpackages: each has a row
    missing = sorted(p for p in packages if p not in named)
    assert not missing, f"packages the README's table does not name: {missing}"
    assert all((REPO / name).exists() for name in named), sorted(n for n in named if not (REPO / n).exists())
