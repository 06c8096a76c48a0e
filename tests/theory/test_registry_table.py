"""The README's coverage table is the one generated from the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.registry import ITEMS, coverage_counts, coverage_table, update_readme
from fltheory.theory.registry.table import BEGIN, END, readme_block

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_matches_the_registry():
    assert readme_block(README) == coverage_table(), \
        "README coverage table is stale: run `python -m fltheory.theory.registry.table README.md`"


def test_counts_add_up_per_paper_and_in_total():
    counts = coverage_counts()
    assert sum(row["items"] for row in counts.values()) == len(ITEMS)
    for row in counts.values():
        assert row["full"] + row["partial"] + row["not evaluated"] + row["not checkable"] == row["items"]
    before = coverage_counts(before=True)
    assert sum(row["items"] for row in before.values()) == len(ITEMS)
    assert sum(r["full"] for r in before.values()) <= sum(r["full"] for r in counts.values())


def test_update_rewrites_only_the_block(tmp_path):
    f = tmp_path / "R.md"
    f.write_text(f"# title\n\n{BEGIN}\nold\n{END}\n\ntail\n")
    assert update_readme(f) is True
    text = f.read_text()
    assert text.startswith("# title\n\n") and text.endswith("\n\ntail\n") and coverage_table() in text
    assert update_readme(f) is False
    (tmp_path / "bad.md").write_text("no markers")
    with pytest.raises(InvalidHyperparameterError, match="markers"):
        update_readme(tmp_path / "bad.md")
