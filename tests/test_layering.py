"""Import layering of the fltheory package (docs: DESIGN.md, "Layers").

Layers, top to bottom:

    cli -> reproduce / experiments / testing -> search -> theory -> algorithms, nn
        -> problems, optim, participation, compression, plotting -> results, _validate -> errors

A module may import from its own layer or below, never above.  Every import
statement counts, at module level or inside a function (a function-level
import is still a dependency), except those under ``if TYPE_CHECKING:``
(annotations only).  The imports are read with ``ast`` from the source files,
so the test sees exactly what is written, not what happens to be imported.
A second test finds import cycles between modules (again counting
function-level imports).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fltheory

PACKAGE_ROOT = Path(fltheory.__file__).resolve().parent

LAYERS: dict[str, int] = {
    "errors": 0, "aliases": 0,
    "_validate": 1, "_threads": 0, "_import_stamps": 0, "results": 1, "references": 1,
    "display": 2, "problems": 2, "optim": 2, "participation": 2, "compression": 2, "plotting": 2,
    "plotting_checks": 2,
    "algorithms": 3, "nn": 3,
    "theory": 4,
    "search": 5,
    "reproduce": 6, "experiments": 6, "testing": 6, "contracts": 6, "pytest_plugin": 6,
    "cli": 7, "cli_format": 7, "__main__": 8,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _exists(module: str) -> bool:
    base = PACKAGE_ROOT.parent.joinpath(*module.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = (test.id if isinstance(test, ast.Name)
                    else test.attr if isinstance(test, ast.Attribute) else "")
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skip.update(id(n) for n in ast.walk(child))
    return skip


def imports_of(path: Path, module: str | None = None) -> list[tuple[str, int]]:
    """(imported fltheory module, line) for every import statement of the file
    (``module``: the file's dotted name, by default from its place in the package)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    me = module or _module_name(path)
    package = me if _is_package(path) else me.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names
                    if alias.name.split(".")[0] == "fltheory"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                target = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "fltheory":
                continue
            for alias in node.names:          # "from pkg import submodule" depends on the submodule
                sub = f"{target}.{alias.name}"
                out.append((sub if _exists(sub) else target, node.lineno))
    return out


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) == 1:
        return 0                              # the top-level package (version, errors)
    return LAYERS.get(parts[1])


def _sources() -> list[Path]:
    return sorted(PACKAGE_ROOT.rglob("*.py"))


def test_every_top_level_module_has_a_layer():
    names = {p.relative_to(PACKAGE_ROOT).parts[0].removesuffix(".py") for p in _sources()}
    names.discard("__init__")
    assert names - set(LAYERS) == set(), "assign a layer to every top-level module"


def test_no_module_imports_a_higher_layer():
    violations = []
    for path in _sources():
        me = _module_name(path)
        mine = _layer(me)
        for target, line in imports_of(path):
            theirs = _layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                violations.append(f"{path.relative_to(PACKAGE_ROOT)}:{line} ({me}, layer {mine}) "
                                  f"imports {target} (layer {theirs})")
    assert violations == []


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _sources():
        me = _module_name(path)
        deps = {t for t, _ in imports_of(path) if t != me}
        if _is_package(path):
            # a package's __init__ re-exporting its submodules is not a dependency of them
            deps = {t for t in deps if not t.startswith(me + ".")}
        graph[me] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_checker_sees_violations_and_cycles(tmp_path):
    """The checks see a planted cycle, a function-level upward import and a relative
    import, and skip annotation-only imports."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    planted = tmp_path / "planted.py"
    planted.write_text("from typing import TYPE_CHECKING\n"
                       "from .base import Algorithm\n"
                       "def f():\n    from ..theory import round_map\n"
                       "if TYPE_CHECKING:\n    from fltheory.cli import main\n")
    found = [t for t, _ in imports_of(planted, "fltheory.algorithms.planted")]
    assert found == ["fltheory.algorithms.base", "fltheory.theory"]
    assert _layer("fltheory.theory") > _layer("fltheory.algorithms.planted")


@pytest.mark.parametrize("low, high", [("algorithms", "theory"), ("problems", "algorithms"),
                                       ("results", "problems")])
def test_layer_order_matches_the_design(low, high):
    assert LAYERS[low] < LAYERS[high]
