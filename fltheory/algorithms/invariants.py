"""Linear invariants: quantities of an algorithm state that every round conserves.

Some algorithms carry state whose round map has the eigenvalue 1 for a
structural reason, not because of the problem: SCAFFOLD never changes
N c - sum_i c_i, FedDyn never changes N h - sum_k grad_k, EFL without
compression never changes x - x_client.  The exact theory of affine round
maps (``fltheory.theory.affine``) must exclude such directions before it
computes a rate or a fixed point, and it must not guess them from the
spectrum: a slowly contracting mode of an ill-conditioned problem (eigenvalue
1 - 1e-10) is numerically indistinguishable from a conserved one.  So each
algorithm *declares* its conserved linear functionals, proved in the
docstring of its ``linear_invariants`` method, and the theory verifies the
declaration against the recovered map.

Representation
--------------
A :class:`LinearInvariant` is a family of linear functionals of the state.
Each term names a floating-point field of the state by its path (the dotted
path of ``fltheory.theory.round_maps.StateLayout``: ``"x"``, ``"c_clients"``,
``"server.trace"``) and gives a coefficient matrix A of shape (k, rows), where
the field is viewed as an array of shape (rows, cols) (a (d,) field has
rows = 1, an (N, d) field rows = N).  The family's value is

    value(state) = sum over terms of A_term @ field_term.reshape(rows, cols),

a (k, cols) array: k * cols functionals, all of which a full-participation,
exact-gradient round leaves unchanged.  Every term of one family must have the
same cols.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidHyperparameterError

__all__ = ["LinearInvariant"]


@dataclass(frozen=True)
class LinearInvariant:
    """A family of conserved linear functionals of an algorithm state (module docstring).

    Parameters
    ----------
    name : str
        What is conserved, in words (``"N c - sum_i c_i"``).
    terms : mapping str -> array (k, rows)
        Coefficient matrix per state field path.
    """

    name: str
    terms: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.terms:
            raise InvalidHyperparameterError(f"LinearInvariant {self.name!r} needs at least one term")
        clean: dict[str, np.ndarray] = {}
        k: int | None = None
        for path, coef in self.terms.items():
            A = np.atleast_2d(np.asarray(coef, dtype=np.float64))
            if A.ndim != 2 or not np.all(np.isfinite(A)):
                raise InvalidHyperparameterError(
                    f"LinearInvariant {self.name!r}: coefficients of {path!r} must be a finite "
                    f"(k, rows) matrix, got shape {np.shape(coef)}")
            if k is not None and A.shape[0] != k:
                raise InvalidHyperparameterError(
                    f"LinearInvariant {self.name!r}: every term needs the same k rows; {path!r} has "
                    f"{A.shape[0]}, expected {k}")
            k = A.shape[0]
            clean[path] = A
        object.__setattr__(self, "terms", clean)

    @property
    def count(self) -> int:
        """k, the number of coefficient rows (functionals per column)."""
        return int(next(iter(self.terms.values())).shape[0])

    def value(self, state: Any) -> np.ndarray:
        """The (k, cols) values of the functionals at ``state`` (fields by attribute path)."""
        total: np.ndarray | None = None
        for path, A in self.terms.items():
            leaf = state
            for part in path.split("."):
                leaf = getattr(leaf, part)
            arr = np.asarray(leaf, dtype=np.float64).reshape(A.shape[1], -1)
            total = A @ arr if total is None else total + A @ arr
        assert total is not None
        return total


def difference(name: str, plus: str, minus: str) -> LinearInvariant:
    """The functionals field ``plus`` - field ``minus`` (two (d,) fields)."""
    return LinearInvariant(name, {plus: np.ones((1, 1)), minus: -np.ones((1, 1))})


def total_minus_sum(name: str, total: str, rows: str, n_rows: int) -> LinearInvariant:
    """The functionals n_rows * ``total`` - sum_i ``rows``[i] ((d,) and (n_rows, d) fields)."""
    return LinearInvariant(name, {total: np.full((1, 1), float(n_rows)),
                                  rows: -np.ones((1, n_rows))})
