"""Examples are tests: every python block of the README and the docs runs, and every docstring example.

Blocks of one Markdown file run in order in one namespace (like a notebook), from the repository root,
with a non-interactive matplotlib backend. A block whose first line is ``# not run: <reason>`` is skipped
and the reason reported (APIs pending a merge); every other ``python`` block must run.
"""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import re
import sys
import types
from pathlib import Path

import pytest

import fltheory

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    return [m.group(1) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def test_the_docs_have_examples():
    counts = {p.relative_to(ROOT).as_posix(): len(python_blocks(p)) for p in MARKDOWN}
    assert counts["README.md"] >= 1 and counts["docs/getting-started.md"] >= 2
    for tutorial in ("check-your-bound", "add-an-algorithm", "add-a-federation", "add-an-experiment"):
        assert counts[f"docs/tutorials/{tutorial}.md"] >= 2, tutorial


@pytest.mark.parametrize("path", [p for p in MARKDOWN if python_blocks(p)],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_examples_run(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    module = types.ModuleType(f"fltheory_example_{path.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)   # dataclasses look their module up
    namespace = module.__dict__
    skipped = []
    for k, block in enumerate(python_blocks(path)):
        first = block.lstrip().splitlines()[0] if block.strip() else ""
        if first.startswith("# not run:"):
            skipped.append(first)
            continue
        try:
            exec(compile(block, f"{path.relative_to(ROOT)}[block {k}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{path.relative_to(ROOT)}, python block {k} failed: "
                                 f"{type(exc).__name__}: {exc}\n---\n{block}") from exc
    for reason in skipped:
        assert len(reason) > len("# not run: "), f"{path}: a skipped block must say why"


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(fltheory.__path__, "fltheory."):
        spec = importlib.util.find_spec(info.name)
        if spec and spec.origin and spec.origin.endswith(".py") and ">>>" in Path(spec.origin).read_text():
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
    assert result.attempted > 0


def test_experiments_page_lists_every_registered_experiment():
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from fltheory.reproduce import discover
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    missing = [e.name for e in discover("experiments") if f"`{e.name}`" not in text]
    assert not missing, f"docs/experiments.md does not describe {missing}"
