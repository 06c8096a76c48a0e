"""The papers fltheory checks, as data, and how to cite them.

Every paper has a short citation key used in code, output and the
documentation (``"EFL"``, ``"LocalAdaptivity"``, ``"BetterObjects"``,
``"FedElasticNet"``, ``"SCAFFOLD-v1"``, ``"SCAFFOLD-ICML"``).  A key resolves
to a :class:`Reference` (title, authors, venue, year, arXiv id and version)
and to the page of the documentation that restates the paper's algorithms and
statements in fltheory's words (``docs/theory/<page>.md``).

>>> from fltheory.references import cite, reference
>>> reference("EFL").arxiv_id
'2106.09433'
>>> cite("EFL", "Theorem 2, eq. (11)")
'EFL (Ma et al. 2021, arXiv:2106.09433), Theorem 2, eq. (11)'
>>> docs_page("SCAFFOLD-v1")
'docs/theory/scaffold.md'

Older code and output cite the papers as "EFL" ... "SCAFFOLD-v1" and a
maths note as "docs/theory/index.md section N".  :func:`rewrite_legacy_citations`
rewrites such text to citation keys and documentation pages;
``python -m fltheory.references FILE...`` shows the rewrite of files (and
applies it with ``--write``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from .errors import InvalidHyperparameterError

__all__ = [
    "LEGACY_CITATION_PATTERN",
    "REFERENCES",
    "SEED_KEYS",
    "THEORY_SECTION_PAGES",
    "Reference",
    "bibliography_markdown",
    "cite",
    "docs_page",
    "docs_url",
    "main",
    "reference",
    "rewrite_legacy_citations",
]


@dataclass(frozen=True)
class Reference:
    """One paper.

    Attributes
    ----------
    key : str
        Short citation key used in code and output (``"EFL"``).
    title, authors, venue : str, tuple of str, str
        As the paper prints them (``venue`` says "arXiv preprint" when the
        paper has no other venue).
    year : int
        Year of the version fltheory follows.
    arxiv_id : str or None
        arXiv identifier without version (``"2106.09433"``).
    arxiv_version : str or None
        The arXiv version fltheory follows (``"v1"``), or ``None`` when the
        text fltheory was built from does not say which version it is.
    short : str
        Author-year label (``"Ma et al. 2021"``).
    page : str
        Documentation page, relative to ``docs/`` (``"theory/efl.md"``).
    seed : str or None
        Number of the seed text this paper was read from (``"000"``), for the
        rewrite of legacy "seed 00N" citations.
    note : str
        Anything a reader needs to find the right text (other versions, the
        review forum).
    """

    key: str
    title: str
    authors: tuple[str, ...]
    venue: str
    year: int
    arxiv_id: str | None
    arxiv_version: str | None
    short: str
    page: str
    seed: str | None = None
    note: str = ""

    @property
    def arxiv(self) -> str | None:
        """``"arXiv:ID"`` with the version when known (``"arXiv:1910.06378v1"``)."""
        if self.arxiv_id is None:
            return None
        return f"arXiv:{self.arxiv_id}{self.arxiv_version or ''}"

    @property
    def arxiv_url(self) -> str | None:
        """The abstract page on arxiv.org (of the followed version when known)."""
        if self.arxiv_id is None:
            return None
        return f"https://arxiv.org/abs/{self.arxiv_id}{self.arxiv_version or ''}"


_ALL = (
    Reference(
        key="EFL", title="Towards Heterogeneous Clients with Elastic Federated Learning",
        authors=("Zichen Ma", "Yu Lu", "Zihan Lu", "Wenye Li", "Jinfeng Yi", "Shuguang Cui"),
        venue="arXiv preprint", year=2021, arxiv_id="2106.09433", arxiv_version=None,
        short="Ma et al. 2021", page="theory/efl.md", seed="000",
        note="The text fltheory was built from does not state its arXiv version."),
    Reference(
        key="LocalAdaptivity", title="Local Adaptivity in Federated Learning: Convergence and Consistency",
        authors=("Jianyu Wang", "Zheng Xu", "Zachary Garrett", "Zachary Charles", "Luyang Liu",
                 "Gauri Joshi"),
        venue="arXiv preprint", year=2021, arxiv_id="2106.02305", arxiv_version=None,
        short="Wang et al. 2021", page="theory/local-adaptivity.md", seed="001",
        note=("The text fltheory was built from is a draft with the authors' inline review notes that prints "
              "no arXiv version; it lost its equations, which the theory page restates.")),
    Reference(
        key="BetterObjects",
        title="Towards More Efficient Federated Learning with Better Optimization Objects",
        authors=("Zirui Zhu", "Ziyi Ye"), venue="arXiv preprint", year=2021,
        arxiv_id="2108.08577", arxiv_version=None, short="Zhu & Ye 2021",
        page="theory/better-objects.md", seed="002",
        note="The text fltheory was built from does not state its arXiv version."),
    Reference(
        key="FedElasticNet",
        title="Communication-Efficient and Drift-Robust Federated Learning via Elastic Net",
        authors=("Seonhyeong Kim", "Jiheon Woo", "Daewon Seo", "Yongjune Kim"),
        venue="ICLR 2023 submission (OpenReview -59_mb1lOf4, not accepted)", year=2022,
        arxiv_id="2210.02940", arxiv_version=None, short="Kim et al. 2022",
        page="theory/fedelasticnet.md", seed="003",
        note=("fltheory follows the OpenReview submission (anonymous, item numbers as printed there); the "
              "arXiv v1 of 6 Oct 2022 has the same title and authors but a different abstract, so it is "
              "another version, not the one followed.")),
    Reference(
        key="SCAFFOLD-v1",
        title="SCAFFOLD: Stochastic Controlled Averaging for On-Device Federated Learning",
        authors=("Sai Praneeth Karimireddy", "Satyen Kale", "Mehryar Mohri", "Sashank J. Reddi",
                 "Sebastian U. Stich", "Ananda Theertha Suresh"),
        venue="arXiv preprint", year=2019, arxiv_id="1910.06378", arxiv_version="v1",
        short="Karimireddy et al. 2019", page="theory/scaffold.md", seed="004",
        note=("The text fltheory's algorithm follows; its strongly convex rates are Theorems 4 "
              "(full participation) and 6 (client sampling). Theorems I-III, the (G, B) assumption "
              "and the FedAvg lower bound appear only in SCAFFOLD-ICML.")),
    Reference(
        key="SCAFFOLD-ICML",
        title="SCAFFOLD: Stochastic Controlled Averaging for Federated Learning",
        authors=("Sai Praneeth Karimireddy", "Satyen Kale", "Mehryar Mohri", "Sashank J. Reddi",
                 "Sebastian U. Stich", "Ananda Theertha Suresh"),
        venue="ICML 2020, PMLR 119", year=2020, arxiv_id="1910.06378", arxiv_version=None,
        short="Karimireddy et al. 2020", page="theory/scaffold.md", seed=None,
        note="The published version; the bounds fltheory evaluates follow its numbering (Theorems I-III)."),
)

REFERENCES: Mapping[str, Reference] = MappingProxyType({r.key: r for r in _ALL})
"""Every paper by citation key."""

SEED_KEYS: Mapping[str, str] = MappingProxyType({r.seed: r.key for r in _ALL if r.seed is not None})
"""Seed number ("000") -> citation key, for legacy citations."""

THEORY_SECTION_PAGES: Mapping[int, str] = MappingProxyType({
    1: "theory/problems.md",
    2: "theory/index.md#algorithms",
    3: "theory/fixed-points.md",
    4: "theory/index.md#bounds",
    5: "theory/checks.md",
})
"""Section of the former maths note -> documentation page that replaces it."""


def reference(key: str) -> Reference:
    """The :class:`Reference` of a citation key (case-insensitive).

    Raises
    ------
    InvalidHyperparameterError
        For an unknown key (the message lists the known ones).
    """
    if not isinstance(key, str):
        raise InvalidHyperparameterError(f"reference: key must be a str, got {type(key).__name__}")
    for k, ref in REFERENCES.items():
        if k.lower() == key.lower():
            return ref
    raise InvalidHyperparameterError(
        f"reference: unknown citation key {key!r}; expected one of {sorted(REFERENCES)}")


def cite(key: str, locator: str = "") -> str:
    """Citation text: ``"KEY (Authors year, arXiv:ID), locator"``.

    ``locator`` is the theorem, equation or section as printed in the paper
    (e.g. ``"Theorem 2, eq. (11)"``).
    """
    ref = reference(key)
    where = f"{ref.short}, {ref.arxiv}" if ref.arxiv else ref.short
    text = f"{ref.key} ({where})"
    return f"{text}, {locator}" if locator else text


def docs_page(key: str) -> str:
    """Repository path of the documentation page of a paper (``docs/theory/efl.md``)."""
    return "docs/" + reference(key).page


def docs_url(key: str, base: str = "", anchor: str = "") -> str:
    """URL of a paper's page in the built site (mkdocs directory URLs).

    ``base`` is the site root (``""`` gives a site-relative URL such as
    ``"theory/efl/"``); ``anchor`` an optional heading id.
    """
    page = reference(key).page.removesuffix(".md")
    page = page.removesuffix("index")
    url = (base.rstrip("/") + "/" if base else "") + (page + "/" if page and not page.endswith("/") else page)
    return url + (f"#{anchor}" if anchor else "")


def bibliography_markdown() -> str:
    """The bibliography as a Markdown list (one entry per key)."""
    lines = []
    for ref in _ALL:
        arxiv = f", [{ref.arxiv}]({ref.arxiv_url})" if ref.arxiv else ""
        lines.append(f"- **{ref.key}**: {', '.join(ref.authors)}. *{ref.title}*. {ref.venue}, "
                     f"{ref.year}{arxiv}. {ref.note}".rstrip())
    return "\n".join(lines)


LEGACY_CITATION_PATTERN = re.compile(
    r"(?P<icml>[Ss]eed 004(?:,| \(SCAFFOLD(?:, Karimireddy et al\.)?\),?)? Theorem (?:III|II|I)\b)"
    r"|THEORY\.md,?\s+sec(?:tion|s?\.)s?\s+(?P<sec>[1-5])"
    r"|(?P<seedword>[Ss]eeds?)\s+(?P<seed>00[0-4](?:\s*(?:/|,|and)\s*00[0-4])*)"
    r"|THEORY\.md")
"""Matches "SCAFFOLD-ICML Theorem I/II/III" (SCAFFOLD-ICML numbering), "docs/theory/index.md section N" /
"sec. N", "seed 00N" (and lists like "BetterObjects/FedElasticNet") and a bare "docs/theory/index.md"."""


def _replace(match: re.Match[str]) -> str:
    if match.group("icml"):                     # Theorems I-III exist only in the ICML version
        return "SCAFFOLD-ICML Theorem " + match.group("icml").rsplit("Theorem ", 1)[1]
    if match.group("sec"):
        return "docs/" + THEORY_SECTION_PAGES[int(match.group("sec"))]
    if match.group("seed"):
        numbers = re.findall(r"00[0-4]", match.group("seed"))
        sep = match.group("seed")[3:].strip()[:1] or "/"
        joiner = {"/": "/", ",": ", ", "a": " and "}[sep]
        return joiner.join(SEED_KEYS[n] for n in numbers)
    return "docs/theory/index.md"


def rewrite_legacy_citations(text: str) -> str:
    """Replace "seed 00N" by the citation key and "docs/theory/index.md section N" by its docs page.

    >>> rewrite_legacy_citations("EFL Theorem 2 (docs/theory/index.md#bounds)")
    'EFL Theorem 2 (docs/theory/index.md#bounds)'
    >>> rewrite_legacy_citations("BetterObjects/FedElasticNet models")
    'BetterObjects/FedElasticNet models'
    >>> rewrite_legacy_citations("SCAFFOLD-ICML Theorem II; SCAFFOLD-v1 Alg. 1")
    'SCAFFOLD-ICML Theorem II; SCAFFOLD-v1 Alg. 1'
    """
    if not isinstance(text, str):
        raise InvalidHyperparameterError(
            f"rewrite_legacy_citations: text must be a str, got {type(text).__name__} {text!r:.60}")
    return LEGACY_CITATION_PATTERN.sub(_replace, text)


class _ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are typed (InvalidHyperparameterError) instead of SystemExit,
    so that ``main`` called from Python keeps the bad-input contract; the command line prints them."""

    def error(self, message: str) -> NoReturn:
        raise InvalidHyperparameterError(f"{self.prog}: {message}")


def main(argv: Sequence[str] | None = None, echo: Callable[[str], None] = print) -> int:
    """``python -m fltheory.references [--write] FILE...``: show or apply the rewrite.

    ``argv`` is None (the command line) or a list/tuple of strings; ``echo`` a callable taking
    one string.  Usage errors and unreadable files raise InvalidHyperparameterError."""
    if argv is not None and (not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv)):
        raise InvalidHyperparameterError(f"argv must be None or a list of strings, got {argv!r:.80}")
    if not callable(echo):
        raise InvalidHyperparameterError(f"echo must be a callable taking one string, got {echo!r:.80}")
    parser = _ArgumentParser(prog="python -m fltheory.references",
                             description="Rewrite legacy seed/docs/theory/index.md citations.")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true", help="rewrite the files in place")
    args = parser.parse_args(argv)
    changed = 0
    for path in args.files:
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidHyperparameterError(f"files: cannot read {str(path)!r} as UTF-8 text ({exc})") from None
        new = rewrite_legacy_citations(old)
        if new == old:
            continue
        changed += 1
        for a, b in zip(old.splitlines(), new.splitlines(), strict=False):
            if a != b:
                echo(f"{path}: {a.strip()}\n{' ' * len(str(path))}  -> {b.strip()}")
        if args.write:
            path.write_text(new, encoding="utf-8")
    echo(f"{changed} file(s) {'rewritten' if args.write else 'would change'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main())
    except InvalidHyperparameterError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
