"""Count public parameters of fltheory annotated ``Any``.

A public parameter is a parameter (not ``self``/``cls``) of a function or
method, or a field of a dataclass (a constructor parameter), whose name, and
whose enclosing class and module names, do not start with an underscore.
Prints the totals and, with ``-v``, every ``Any`` parameter.  Usage: ``python .ci/public_any.py [-v] [package_dir]``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _is_public_module(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).with_suffix("").parts
    return not any(p.startswith("_") and p != "__init__" for p in parts)


def _mentions_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    return any(
        (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(annotation)
    ) or (isinstance(annotation, ast.Constant) and "Any" in str(annotation.value))


def _is_dataclass(node: ast.ClassDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def _dataclass_fields(tree: ast.Module) -> list[tuple[ast.ClassDef, ast.AnnAssign]]:
    """Public fields of public dataclasses (``ClassVar`` annotations excluded)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and _is_dataclass(node):
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and not item.target.id.startswith("_") and "ClassVar" not in ast.unparse(item.annotation)):
                    found.append((node, item))
    return found


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not item.name.startswith("_") or item.name == "__init__"
                ):
                    found.append(item)
    return found


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    root = Path(args[0] if args else "fltheory")
    total = annotated_any = exactly_any = 0
    for path in sorted(root.rglob("*.py")):
        if not _is_public_module(path, root.parent):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for func in _public_functions(tree):
            a = func.args
            params = a.posonlyargs + a.args + a.kwonlyargs
            params += [p for p in (a.vararg, a.kwarg) if p is not None]
            for p in params:
                if p.arg in ("self", "cls"):
                    continue
                total += 1
                if _mentions_any(p.annotation):
                    annotated_any += 1
                    exact = isinstance(p.annotation, ast.Name) and p.annotation.id == "Any"
                    exactly_any += exact
                    if verbose:
                        print(f"{path}:{func.lineno} {func.name}({p.arg}: {ast.unparse(p.annotation)})")
        for cls, item in _dataclass_fields(tree):
            total += 1
            if _mentions_any(item.annotation):
                annotated_any += 1
                exact = isinstance(item.annotation, ast.Name) and item.annotation.id == "Any"
                exactly_any += exact
                if verbose:
                    name = item.target.id if isinstance(item.target, ast.Name) else "?"
                    print(f"{path}:{item.lineno} {cls.name}({name}: {ast.unparse(item.annotation)})")
    print(f"public parameters: {total}")
    print(f"annotated exactly `Any`: {exactly_any} ({100 * exactly_any / total:.1f}%)")
    print(f"annotation mentions `Any`: {annotated_any} ({100 * annotated_any / total:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
