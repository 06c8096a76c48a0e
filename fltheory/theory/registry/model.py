"""The records of the theorem registry: papers, items and verdicts.

An :class:`Item` is one checkable statement of a seed paper (an algorithm or
one of its options, an assumption, a definition, a theorem, corollary or
lemma, an equation with its own content, a table or an empirical claim),
numbered as printed in the version of the paper it comes from.  It names the
code that evaluates it, the tests and the experiment checks that hold it to
mathematics, and how completely it is checked (``coverage``).  Its
:class:`Verdict` comes from the last ``fltheory reproduce`` (the experiments'
``figures/NAME.json``) when an experiment checks it, and otherwise from the
item itself (checked by tests only, not checkable, or not evaluated, each
with the reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..._validate import choice, flag, real_scalar
from ...errors import InvalidHyperparameterError
from ._arguments import strings, text

__all__ = ["COVERAGES", "KINDS", "VERDICT_STATUSES", "Item", "Paper", "Verdict"]

Coverage = Literal["full", "partial", "none"]
COVERAGES: tuple[str, ...] = ("full", "partial", "none")
KINDS: tuple[str, ...] = ("algorithm", "option", "definition", "assumption", "theorem", "corollary", "lemma",
                          "equation", "table", "figure", "claim")
VERDICT_STATUSES: tuple[str, ...] = ("holds", "violated", "not checkable", "not evaluated")


@dataclass(frozen=True)
class Paper:
    """One version of a seed paper.

    Attributes
    ----------
    key : str
        Short identifier used by items and by ``fltheory theorems --paper``.
    seed : str
        The seed file it was read from (``"004"``), or ``""`` for a version that
        is not among the seeds (items imported from it are entries of that version).
    title, authors, venue : str
        As published.
    year : int
    arxiv : str
        arXiv identifier without version (``""`` if none).
    version : str
        The version the item numbers refer to (``"v1"``, ``"ICML 2020 proceedings"``, ...).
    note : str
        Where the metadata comes from and what is uncertain about it.
    reference : str
        Citation key of the same paper in :mod:`fltheory.references` (``"SCAFFOLD-v1"``); the two
        records must agree on title, authors, year, arXiv id and version (a test holds them together).
    """

    key: str
    seed: str
    title: str
    authors: str
    venue: str
    year: int
    arxiv: str
    version: str
    note: str = ""
    reference: str = ""

    def citation(self) -> str:
        """``"Karimireddy et al., SCAFFOLD ... (arXiv:1910.06378v1)"``-style one-liner."""
        names = [a.strip().split()[-1] for a in self.authors.split(",") if a.strip()]
        lead = " and ".join(names) if len(names) == 2 else (names[0] + " et al." if len(names) > 2 else
                                                              (names[0] if names else "?"))
        numbered = re.fullmatch(r"v\d+", self.version) is not None
        arxiv = f", arXiv:{self.arxiv}{self.version if numbered else ''}" if self.arxiv else ""
        return f"{lead}, \"{self.title}\" ({self.venue} {self.year}{arxiv})"


@dataclass(frozen=True)
class Item:
    """One checkable statement of a paper version.

    Attributes
    ----------
    key : str
        Unique, ``"<paper>:<slug>"``.
    paper : str
        Key of a :class:`Paper`.
    number : str
        Labels as printed in that version, comma separated (``"Theorem 1, eq. 7"``);
        ``"sec. 4.2"`` for an unnumbered statement of a section.
    kind : str
        One of :data:`KINDS`.
    statement : str
        One line, in our words.
    hypotheses : tuple of str
        What the statement assumes.
    code : tuple of str
        Dotted paths of the functions/classes that implement or evaluate it.
    tests : tuple of str
        ``"tests/<path>.py::test_name"`` of the tests that hold it to mathematics.
    checks : tuple of str
        ``"<experiment>:<theorem key>"`` of the experiment checks that evaluate it.
    coverage : {"full", "partial", "none"}
        Checked in full against independent mathematics, partly, or not at all.
    note : str
        What a partial check misses, or why the item is not checkable / not evaluated.
    checkable : bool
        False when no computation in this package can check it (e.g. accuracies of
        networks trained on data sets at paper scale); ``note`` says why.
    coverage_before : str or None
        Coverage before the registry's gap-closing work, when it changed.
    """

    key: str
    paper: str
    number: str
    kind: str
    statement: str
    hypotheses: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    coverage: Coverage = "partial"
    note: str = ""
    checkable: bool = True
    coverage_before: Coverage | None = field(default=None)

    def __post_init__(self) -> None:
        for name in ("key", "paper", "number", "kind", "statement", "note"):
            text(f"item {name}", getattr(self, name))
        for name in ("hypotheses", "code", "tests", "checks"):
            strings(f"item {self.key!r}: {name}", getattr(self, name))
        flag(f"item {self.key!r}: checkable", self.checkable)
        if self.kind not in KINDS:
            raise InvalidHyperparameterError(f"item {self.key!r}: kind must be one of {KINDS}, got "
                                             f"{self.kind!r}")
        choice(f"item {self.key!r}: coverage", self.coverage, COVERAGES)
        if self.coverage_before is not None:
            choice(f"item {self.key!r}: coverage_before", self.coverage_before, COVERAGES)
        if not self.key.startswith(self.paper + ":"):
            raise InvalidHyperparameterError(f"item key {self.key!r} must start with its paper "
                                             f"{self.paper!r}:")
        if (self.coverage != "full" or not self.checkable) and not self.note:
            raise InvalidHyperparameterError(
                f"item {self.key!r}: a partial, unchecked or not checkable item needs a note saying why")
        for c in self.checks:
            if c.count(":") != 1:
                raise InvalidHyperparameterError(f"item {self.key!r}: check {c!r} is not "
                                                 f"'experiment:theorem'")

    @property
    def labels(self) -> tuple[str, ...]:
        """The printed labels of ``number``, one per comma-separated part."""
        return tuple(p.strip() for p in self.number.split(",") if p.strip())

    @property
    def before(self) -> str:
        """Coverage before the registry's gap-closing work."""
        return self.coverage_before or self.coverage


@dataclass(frozen=True)
class Verdict:
    """The verdict on an item.

    Attributes
    ----------
    status : {"holds", "violated", "not checkable", "not evaluated"}
    ratio : float or None
        Worst measured / bound over the experiment checks of that status (the tightness).
    detail : str
        The instance of a violation, why it is not checkable / not evaluated, or a summary.
    source : str
        ``"reproduce (<files>)"``, ``"tests"`` or ``"registry"``.
    """

    status: str
    ratio: float | None
    detail: str
    source: str

    def __post_init__(self) -> None:
        choice("verdict status", self.status, VERDICT_STATUSES)
        if self.ratio is not None:
            real_scalar("verdict ratio", self.ratio)
        text("verdict detail", self.detail)
        text("verdict source", self.source)

    def short(self) -> str:
        """``"holds (0.94)"``, ``"violated (4.63)"``, ``"not evaluated"``."""
        tag = " [tests]" if self.source == "tests" else ""
        return self.status + (f" ({self.ratio:.3g})" if self.ratio is not None else "") + tag
