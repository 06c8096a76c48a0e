"""Pieces shared by the dense (``theory.affine``) and matrix-free
(``theory.matrix_free``) treatments of an affine round map: detection of the
coordinates a round leaves fixed, the initial state of an orbit, and the
refusal to classify an eigenvalue that rounding cannot tell from 1.

Kept apart so that ``affine`` may use ``matrix_free`` (to choose it for large
states) while both import these, with no import cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import real_array
from ..errors import InvalidProblemError, UnclassifiedDirectionError
from .round_maps import RoundMap

__all__ = ["drift_scale", "eigenvalue_resolution", "frozen_coordinates", "initial_vector",
           "refuse_unclassified"]


def frozen_coordinates(rm: RoundMap, S0: np.ndarray, h: float, gen: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(Phi(S0), mask of the coordinates of frozen fields): fields whose value after a
    round is bit for bit the same at S0 and at two random points (module docstring)."""
    n = rm.dim
    with np.errstate(all="ignore"):
        F0 = rm(S0)
        outs = [rm(S0 + h * gen.standard_normal(n)) for _ in range(2)]
    frozen = np.zeros(n, dtype=bool)
    for path in rm.layout.paths:
        sl = rm.layout.slices[path]
        if all(np.array_equal(out[sl], F0[sl]) for out in outs):
            frozen[sl] = True
    return F0, frozen


def initial_vector(amap: Any, initial: Any) -> np.ndarray:
    """S_init as a finite (n,) vector (InvalidProblemError otherwise: a NaN start
    would come back as a NaN fixed point)."""
    if initial is None:
        return np.array(amap.base, dtype=np.float64)
    import dataclasses
    if not (dataclasses.is_dataclass(initial) or hasattr(initial, "_fields")):
        S = real_array("initial", initial, InvalidProblemError).astype(np.float64)
        if S.shape != (amap.dim,):
            raise InvalidProblemError(f"initial state vector must have shape ({amap.dim},), got {S.shape}")
    else:
        S = amap.to_vector(initial)
    if not np.all(np.isfinite(S)):
        bad = int(np.flatnonzero(~np.isfinite(S))[0])
        raise InvalidProblemError(
            f"initial state must be finite; entry {bad} is {S[bad]!r} (layout {amap.layout.describe()})")
    return S


def eigenvalue_resolution(M_V: np.ndarray) -> float:
    """Rounding level of the computed eigenvalues of M_V: 16 eps max(1, ||M_V||_F).

    Only decides whether an eigenvalue can be told from 1 (else
    UnclassifiedDirectionError); it never changes a returned number."""
    return 16.0 * np.finfo(float).eps * max(1.0, float(np.linalg.norm(M_V)))


def refuse_unclassified(lam: np.ndarray, resolution: float, algorithm: str, names: tuple[str, ...]) -> None:
    """UnclassifiedDirectionError when an eigenvalue lies within ``resolution`` of 1."""
    if lam.size == 0:
        return
    gap = np.abs(lam - 1.0)
    j = int(np.argmin(gap))
    if gap[j] <= resolution:
        declared = ", ".join(names) if names else "none"
        raise UnclassifiedDirectionError(
            f"{algorithm}: the round map has the eigenvalue {complex(lam[j]).real:.17g} "
            f"(|lambda - 1| = {gap[j]:.2e} <= {resolution:.2e}, the resolution of the computed "
            f"spectrum) on a direction the algorithm does not declare conserved (declared: "
            f"{declared}). It is either a conserved quantity missing from "
            "Algorithm.linear_invariants, a flat direction of the problem (singular Hessian), or "
            "a mode slower than double precision resolves; no rate or fixed point is returned")


def drift_scale(c: np.ndarray, S_init: np.ndarray) -> float:
    """Scale against which a drift w^T c is measured."""
    return max(1.0, float(np.abs(c).max(initial=0.0)), float(np.abs(S_init).max(initial=0.0)))
