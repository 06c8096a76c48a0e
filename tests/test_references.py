"""The bibliography as data, citation keys, their pages, and the legacy-citation rewrite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.references import (
    LEGACY_CITATION_PATTERN,
    REFERENCES,
    SEED_KEYS,
    THEORY_SECTION_PAGES,
    bibliography_markdown,
    cite,
    docs_page,
    docs_url,
    main,
    reference,
    rewrite_legacy_citations,
)

ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("fltheory", "experiments")
# This module defines the legacy patterns and documents them; it is the one allowed holder.
EXEMPT = {Path("fltheory/references.py")}
LEGACY = re.compile(r"THEORY\.md|\b[Ss]eeds?[- ]00[0-4]\b")


def code_files() -> list[Path]:
    return [p for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*.py"))
            if p.relative_to(ROOT) not in EXEMPT]


def test_every_key_has_the_required_fields_and_an_existing_page():
    assert set(REFERENCES) == {"EFL", "LocalAdaptivity", "BetterObjects", "FedElasticNet",
                               "SCAFFOLD-v1", "SCAFFOLD-ICML"}
    for key, ref in REFERENCES.items():
        assert ref.key == key and ref.title and ref.authors and ref.venue and 2015 < ref.year < 2030
        assert ref.arxiv_id is not None and re.fullmatch(r"\d{4}\.\d{5}", ref.arxiv_id)
        assert (ROOT / docs_page(key)).is_file(), docs_page(key)
    assert reference("SCAFFOLD-v1").arxiv == "arXiv:1910.06378v1"
    assert dict(SEED_KEYS) == {"000": "EFL", "001": "LocalAdaptivity", "002": "BetterObjects",
                               "003": "FedElasticNet", "004": "SCAFFOLD-v1"}


def test_cite_and_urls():
    assert cite("efl", "Theorem 2, eq. (11)") == "EFL (Ma et al. 2021, arXiv:2106.09433), Theorem 2, eq. (11)"
    assert cite("SCAFFOLD-v1") == "SCAFFOLD-v1 (Karimireddy et al. 2019, arXiv:1910.06378v1)"
    assert docs_url("LocalAdaptivity") == "theory/local-adaptivity/"
    assert docs_url("EFL", "https://example.org/fltheory/", "table-1") == \
        "https://example.org/fltheory/theory/efl/#table-1"
    with pytest.raises(InvalidHyperparameterError, match="unknown citation key 'seed 000'"):
        reference("seed 000")
    with pytest.raises(InvalidHyperparameterError, match="must be a str"):
        reference(3)  # type: ignore[arg-type]


def test_theory_section_pages_resolve_to_headings():
    for section, target in THEORY_SECTION_PAGES.items():
        page, _, anchor = target.partition("#")
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        if anchor:
            headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
                        for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
            assert anchor in headings, (section, target, headings)


def test_bibliography_page_is_generated_from_the_data():
    text = (ROOT / "docs" / "bibliography.md").read_text(encoding="utf-8")
    assert bibliography_markdown() in text


def test_rewrite_maps_every_legacy_form():
    cases = {
        "seed 000 Theorem 2, eq. (11)": "EFL Theorem 2, eq. (11)",
        "Seed 001 eq. 8": "LocalAdaptivity eq. 8",
        "seeds 002/003 models": "BetterObjects/FedElasticNet models",
        "seed 004 Theorem III as": "SCAFFOLD-ICML Theorem III as",
        "(seed 004 (SCAFFOLD, Karimireddy et al.) Theorem II)": "(SCAFFOLD-ICML Theorem II)",
        "seed 004 Alg. 1": "SCAFFOLD-v1 Alg. 1",
        "THEORY.md section 3 [derived]": "docs/theory/fixed-points.md [derived]",
        "THEORY.md sec. 2 (FedDyn)": "docs/theory/index.md#algorithms (FedDyn)",
        "see THEORY.md": "see docs/theory/index.md",
    }
    for old, new in cases.items():
        assert rewrite_legacy_citations(old) == new


def test_rewrite_leaves_no_legacy_citation_in_any_code_file():
    # What the coordinator's replacement will do (python -m fltheory.references --write FILES):
    # after it, no legacy citation may remain anywhere.
    for path in code_files():
        rewritten = rewrite_legacy_citations(path.read_text(encoding="utf-8"))
        left = LEGACY.findall(rewritten)
        assert not left, f"{path.relative_to(ROOT)}: {left[:5]} survive the rewrite"


def test_dry_run_changes_nothing(tmp_path):
    target = tmp_path / "m.py"
    target.write_text('"""seed 002 Alg. 2 (THEORY.md section 2)."""\n')
    lines: list[str] = []
    assert main([str(target)], echo=lines.append) == 0
    assert target.read_text() == '"""seed 002 Alg. 2 (THEORY.md section 2)."""\n'
    assert lines[-1] == "1 file(s) would change"
    assert main([str(target), "--write"], echo=lines.append) == 0
    assert target.read_text() == '"""BetterObjects Alg. 2 (docs/theory/index.md#algorithms)."""\n'
    assert not LEGACY_CITATION_PATTERN.search(target.read_text())


def test_no_legacy_citations_remain_in_code():
    offenders = {str(p.relative_to(ROOT)): LEGACY.findall(p.read_text(encoding="utf-8"))[:3]
                 for p in code_files() if LEGACY.search(p.read_text(encoding="utf-8"))}
    assert not offenders, f"{len(offenders)} files still cite 'seed 00N' / THEORY.md: {offenders}"


def test_main_and_rewrite_give_typed_errors_for_bad_input(tmp_path):
    from fltheory.references import main, rewrite_legacy_citations
    with pytest.raises(InvalidHyperparameterError, match=r"text must be a str, got float 1.5"):
        rewrite_legacy_citations(1.5)
    with pytest.raises(InvalidHyperparameterError, match=r"argv must be None or a list of strings, got 'abc'"):
        main("abc")
    with pytest.raises(InvalidHyperparameterError, match=r"the following arguments are required: files"):
        main([])
    missing = tmp_path / "missing.md"
    with pytest.raises(InvalidHyperparameterError, match=r"files: cannot read .*missing.md"):
        main([str(missing)])
    lines: list[str] = []
    good = tmp_path / "ok.md"
    good.write_text("nothing legacy here\n", encoding="utf-8")
    assert main([str(good)], echo=lines.append) == 0
    assert lines == ["0 file(s) would change"]
