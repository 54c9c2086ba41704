"""The layout of docs/architecture.md, checked: no import cycle, dependencies point one way, small modules.

Every ``import``/``from ... import`` of a ``contrastlab`` module counts, module-level or inside a function (a
lazy import hides a cycle, it does not remove it); imports under ``if TYPE_CHECKING:`` do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "contrastlab"
MAX_LINES = 420
""""About 400 lines at most" (DEVELOPERS.md), with a little slack."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The longest known module prefix of ``name`` (``a.b.C`` → ``a.b`` when ``C`` is a class)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(module: str) -> set[str]:
    """The ``contrastlab`` modules ``module`` imports."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            target = _resolve(name) if name.startswith("contrastlab") else None
            # a module's own enclosing packages are already being imported when it runs: not an edge
            if target and target != module and not module.startswith(target + "."):
                found.add(target)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "contrastlab"


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for dep in sorted(GRAPH[m]):
            if dep == "contrastlab":  # the public-API facade re-exports the core; it is not a layer
                continue
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep):], dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


ALLOWED = {
    "platform": {"platform"},
    "experiments": {"experiments", "platform"},
    "cli": {"cli", "experiments", "platform"},
    "losses": {"losses", "platform"},
    "samplers": {"samplers", "losses", "platform"},
}
"""Which top-level folders each layer may import (the core imports no task plugin, cli or experiments)."""


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_dependencies_point_one_way(layer: str) -> None:
    bad = [(m, d) for m in GRAPH if _layer(m) == layer for d in GRAPH[m]
           if _layer(d) not in ALLOWED[layer] | {"contrastlab"}]
    assert not bad, f"{layer} imports outside {sorted(ALLOWED[layer])}: {bad}"


def test_no_plugin_imports_another_and_nothing_imports_a_plugin() -> None:
    for m, deps in GRAPH.items():
        for d in deps:
            if not d.startswith("contrastlab.plugins."):
                continue
            owner = m.split(".")[2] if m.startswith("contrastlab.plugins.") and m.count(".") >= 2 else None
            assert owner == d.split(".")[2], f"{m} imports the task plugin module {d}"


def test_modules_stay_small() -> None:
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_test_files_have_unique_names() -> None:
    """The test folders have no ``__init__.py``, so pytest imports each test file by its bare name: two
    ``test_base.py`` in different folders make the second one a collection error."""
    seen: dict[str, Path] = {}
    clashes = []
    root = SRC.parent
    for path in sorted([*root.joinpath("tests").rglob("test_*.py"), *root.joinpath("examples").rglob("test_*.py")]):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(root)} and {path.relative_to(root)}")
        seen.setdefault(path.name, path)
    assert not clashes, f"test files with the same name: {clashes}"
