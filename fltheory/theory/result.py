"""The one result type of every bound and closed-form check in fltheory.theory.

A :class:`BoundResult` holds the value of a published bound, the hypotheses it
needs (each marked held/violated, with the numbers), the reference (paper,
theorem, equation), the reading of the formula (``variant``) and its named
components.  A bound whose hypotheses fail has ``value=None``: it is never
evaluated into a meaningless number.  ``strict=True`` in the functions that
build results raises :class:`~fltheory.errors.AssumptionError` instead.

Write your own bound as a function that checks its hypotheses and returns
:func:`bound_result` (exported as ``fltheory.theory.bound_result``)::

    >>> from fltheory.theory import Assumption, bound_result
    >>> def gd_contraction(L, mu, lr, steps, measured=None):
    ...     # ||x_K - x*||^2 <= (1 - lr mu)^(2K) ||x_0 - x*||^2 for lr <= 1/L (ratio form)
    ...     hyp = [Assumption("0 < mu <= L", 0 < mu <= L, f"mu = {mu}, L = {L}"),
    ...            Assumption("lr <= 1/L", lr <= 1 / L, f"lr = {lr}, 1/L = {1 / L}")]
    ...     return bound_result((1 - lr * mu) ** (2 * steps), hyp, reference="my note, Lemma 1",
    ...                         variant="as_stated", measured=measured)
    >>> r = gd_contraction(L=2.0, mu=1.0, lr=0.5, steps=3, measured=0.01)
    >>> r.value, r.holds
    (0.015625, True)
    >>> gd_contraction(L=2.0, mu=1.0, lr=1.0, steps=3).value is None   # lr > 1/L: not evaluated
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import _short, flag, real_array
from ..display import BoundDisplay
from ..errors import AssumptionError, InvalidHyperparameterError

__all__ = ["Assumption", "BoundResult", "bound_result", "make_result"]


@dataclass(frozen=True)
class Assumption:
    """One hypothesis of a theorem.

    Attributes
    ----------
    name : str
        The hypothesis as the paper states it (e.g. ``"lambda_2 > 27 beta"``).
    held : bool
        Whether it holds for the given constants.
    detail : str
        The numbers that decided it (e.g. ``"lambda_2 = 1.0, 27 beta = 2.7"``).
    """

    name: str
    held: bool
    detail: str


@dataclass(frozen=True, repr=False)
class BoundResult(BoundDisplay):
    """Value of a bound with its hypotheses (scipy.optimize-like, fixed fields).

    Attributes
    ----------
    value : float or None
        The bound; ``None`` when a hypothesis fails (see ``assumptions``).
    assumptions : tuple of Assumption
        Every hypothesis checked, held or not.
    reference : str
        Paper key, theorem and equation as printed (see :mod:`fltheory.references`).
    variant : str
        Which reading of the formula was evaluated (``"as_printed"``,
        ``"corrected"``, ...); each reading is stated on the paper's theory page.
    terms : dict
        Named components of the bound (constants, summands).
    measured : float or None
        The quantity the bound is held against, when the routine computes it
        (e.g. the exact objective shift), else ``None``.
    """

    value: float | None
    assumptions: tuple[Assumption, ...]
    reference: str
    variant: str
    terms: dict[str, Any] = field(default_factory=dict)
    measured: float | None = None

    @property
    def valid(self) -> bool:
        """True when every hypothesis holds (and so ``value`` is a number)."""
        return all(a.held for a in self.assumptions)

    @property
    def violated(self) -> tuple[Assumption, ...]:
        """The hypotheses that fail."""
        return tuple(a for a in self.assumptions if not a.held)

    @property
    def ratio(self) -> float | None:
        """measured / value when both are known and value > 0, else None."""
        if self.measured is None or self.value is None or self.value <= 0:
            return None
        return self.measured / self.value

    @property
    def holds(self) -> bool | None:
        """measured <= value (None when either is unknown)."""
        if self.measured is None or self.value is None:
            return None
        return self.measured <= self.value

    def __str__(self) -> str:
        lines = [f"{self.reference} [{self.variant}]",
                 f"  value    = {self.value!r}"]
        if self.measured is not None:
            lines.append(f"  measured = {self.measured!r}  ratio = {self.ratio!r}")
        for a in self.assumptions:
            lines.append(f"  [{'ok' if a.held else 'VIOLATED'}] {a.name}: {a.detail}")
        return "\n".join(lines)


def bound_result(value: float | None, assumptions: Iterable[Assumption], *, reference: str,
                 variant: str, terms: Mapping[str, Any] | None = None,
                 measured: float | None = None, strict: bool = False) -> BoundResult:
    """Build the :class:`BoundResult` of a bound; drop the value when a hypothesis fails.

    Parameters
    ----------
    value : float or None
        The bound evaluated at the given constants (ignored when a hypothesis fails).
    assumptions : iterable of Assumption
        Every hypothesis of the statement, each with ``held`` and the numbers that decided it.
    reference : str
        Paper, theorem and equation as printed (see :func:`fltheory.references.cite`).
    variant : str
        The reading of the formula (``"as_printed"``, ``"corrected"``, ...).
    terms : mapping, optional
        Named components (constants, summands), kept for failure messages.
    measured : float, optional
        The quantity the bound is held against.
    strict : bool
        Raise instead of returning a result without a value.

    Raises
    ------
    AssumptionError

        With ``strict=True``, when a hypothesis fails (naming the hypothesis,
        the values and the reference); and when the value is not finite although
        every hypothesis holds (a hypothesis the formula needs is missing from
        the list), rather than returning NaN.
    """
    assumptions = _checked_assumptions(assumptions)
    value = _optional_real("value", value, finite=False)
    measured = _optional_real("measured", measured, finite=True)
    for name, text in (("reference", reference), ("variant", variant)):
        if not isinstance(text, str):
            raise InvalidHyperparameterError(f"bound_result: {name} must be a string, got {_short(text)}")
    if terms is not None and not isinstance(terms, Mapping):
        raise InvalidHyperparameterError(f"bound_result: terms must be a mapping or None, got {_short(terms)}")
    strict = flag("bound_result: strict", strict)
    bad = [a for a in assumptions if not a.held]
    if bad:
        if strict:
            text = "; ".join(f"{a.name} fails ({a.detail})" for a in bad)
            raise AssumptionError(f"{reference}: {text}")
        value = None
    elif value is not None:
        value = float(value)
        if not math.isfinite(value):
            raise AssumptionError(
                f"{reference}: the bound evaluates to {value!r} although every stated "
                f"hypothesis holds; terms = {dict(terms or {})}")
    return BoundResult(value=value, assumptions=assumptions, reference=reference,
                       variant=variant, terms=dict(terms or {}), measured=measured)


def _checked_assumptions(assumptions: Any) -> tuple[Assumption, ...]:
    if isinstance(assumptions, (str, bytes)) or not isinstance(assumptions, Iterable) \
            or (isinstance(assumptions, np.ndarray) and assumptions.ndim == 0):   # a 0-d array is not iterable
        raise InvalidHyperparameterError(
            f"bound_result: assumptions must be an iterable of Assumption, got {_short(assumptions)}")
    out = tuple(assumptions)
    for a in out:
        if not isinstance(a, Assumption):
            raise InvalidHyperparameterError(
                f"bound_result: every assumption must be an Assumption(name, held, detail), got {_short(a)}")
    return out


def _optional_real(name: str, value: Any, *, finite: bool) -> float | None:
    """None, or a real number (a 0-d real array is accepted) as a float."""
    if value is None:
        return None
    arr = real_array(f"bound_result: {name}", value, InvalidHyperparameterError)
    if arr.ndim != 0:
        raise InvalidHyperparameterError(f"bound_result: {name} must be a number or None, got shape {arr.shape}")
    v = float(arr)
    if finite and not math.isfinite(v):
        raise InvalidHyperparameterError(f"bound_result: {name} must be a finite number or None, got {v!r}")
    return v


#: Former name of :func:`bound_result` (kept for existing code).
make_result = bound_result
