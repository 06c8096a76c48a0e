"""The registry's paper versions and fltheory.references describe the same texts: every registry paper
names its citation key, and the two records agree on title, authors, year, seed, arXiv id and version
(an arXiv version is given in both or in neither)."""

from __future__ import annotations

import re

import pytest

from fltheory.references import REFERENCES
from fltheory.theory.registry import PAPERS


def _surnames(authors):
    names = authors.split(",") if isinstance(authors, str) else list(authors)
    return [n.strip().split()[-1] for n in names if n.strip()]


@pytest.mark.parametrize("key", sorted(PAPERS))
def test_registry_paper_and_reference_agree(key):
    paper = PAPERS[key]
    assert paper.reference in REFERENCES, f"{key}: reference {paper.reference!r} is not a citation key"
    ref = REFERENCES[paper.reference]
    assert paper.title == ref.title
    assert _surnames(paper.authors) == _surnames(ref.authors)
    assert paper.year == ref.year
    assert (paper.seed or None) == ref.seed
    assert (paper.arxiv or None) == ref.arxiv_id
    numbered = re.fullmatch(r"v\d+", paper.version) is not None
    assert (paper.version if numbered else None) == ref.arxiv_version, (paper.version, ref.arxiv_version)


def test_every_seed_reference_has_a_registry_paper():
    named = {p.reference for p in PAPERS.values()}
    assert {k for k, r in REFERENCES.items() if r.seed is not None} <= named
