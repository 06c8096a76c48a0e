"""How accurate a matrix-free fixed point is, without forming the map.

The error of a computed fixed state S against the exact one S* of S -> M S + c is, on
the invariant subspace V the orbit moves in,

    S - S* = -(I - M_V)^{-1} P r,      r = Phi(S) - S  (the residual of an exact round),

so ||S - S*||_2 <= ||(I - M_V)^{-1}||_2 ||P r||_2.  A round computed in floating point
returns r only up to its own rounding: at least about eps ||S||, and measured as
delta = ||P (r' - r)||_2 with r' the residual of one more round at S (1 + eps) (a change of
about one unit in the last place of every coordinate: two evaluations of the same residual
differ by their rounding, which grows with the state's size and the round's arithmetic;
measured 15 eps ||S|| for SCAFFOLD at N = 50, d = 20).  Hence the estimate

    error_estimate = kappa * max(||P r||_2, delta, eps ||S||_2) / ||S||_2,

with kappa a reading of ||(I - M_V)^{-1}||_2 obtained from the Krylov run of the solve:

* symmetric M_V (the eigenvalues are real, and ||(I - M_V)^{-1}||_2 = 1 / (1 - lambda_max)
  when the rate is below 1): kappa = 1 / (1 - rate - rate_error), an UPPER bound whenever
  the rate's error bound holds (lambda_max <= rho(M_V) <= rate + rate_error);
* otherwise an ESTIMATE: the largest of 1 / sigma_min(Hbar) (a lower bound on
  ||(I - M_V)^{-1}||_2, :func:`~fltheory.theory.krylov.projected_singular_values`; Krylov
  spaces of M only), ||z|| / ||P r|| for the Galerkin correction z of the final residual on
  the space (z approximates (I - M_V)^{-1} P r) and 1 / (1 - rate) (exact when the
  dominant eigenvalue is real and positive).

The condition number reported next to it reads cond_2(I - M_V):

* Krylov spaces of M: sigma_max(Hbar) / sigma_min(Hbar), a LOWER bound (exact arithmetic;
  equal to cond_2 once the space holds both extreme singular vectors, which for a symmetric
  M_V is when both ends of the spectrum have converged);
* Krylov spaces of M^j (``theory.powered_krylov``): (1 + rate + rate_error) kappa, an
  UPPER bound for a symmetric M_V (||I - M_V|| <= 1 + rho) and an ESTIMATE otherwise
  (||M_V|| may exceed the rate).

Neither is a guarantee: the estimate takes the rounding of a round as the larger of eps ||S||
and one measured difference delta, and the bounds assume (as the rate's error bound does)
that the Krylov space found the extreme eigenvalues.  :func:`refuse_inaccurate` applies the
dense route's rule (refuse above ``max_condition``, i.e. a relative error above about
max_condition * eps) to these readings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidHyperparameterError
from .krylov import KrylovResult, projected_singular_values

__all__ = ["SolveAccuracy", "refuse_inaccurate", "solve_accuracy"]

_EPS = float(np.finfo(float).eps)


@dataclass(frozen=True)
class SolveAccuracy:
    """Accuracy readings of a matrix-free fixed point (module docstring).

    condition, condition_kind : the reading of cond_2(I - M_V) and "lower bound" /
        "upper bound" / "estimate";
    inverse_norm, error_kind : kappa (the reading of ||(I - M_V)^{-1}||_2) and what kind of
        quantity it is, which is also the kind of ``error``;
    error : the estimated relative error of the fixed state;
    note : one line for the result's message."""

    condition: float
    condition_kind: str
    inverse_norm: float
    error: float
    error_kind: str
    note: str


def solve_accuracy(amap: Any, result: KrylovResult, S: np.ndarray, r: np.ndarray, rate: float,
                   rate_error: float, rhs: Callable[[np.ndarray], np.ndarray], *, powered: bool
                   ) -> SolveAccuracy:
    """Accuracy readings of the fixed state ``S`` (module docstring).

    ``amap``: the matrix-free map (its ``projector`` P and ``symmetric``); ``result``: the
    Krylov run the solve used; ``r``: Phi(S) - S from an actual round; ``rate`` and
    ``rate_error``: the spectral rate and its error bound; ``rhs``: the right-hand side the
    space solves for a residual (the identity for M, I + ... + M^(j-1) for M^j);
    ``powered``: the space is of M^j, not of M (Hbar then describes I - M^j and is not used).
    Cost: one round (the rounding level delta), one Galerkin solve on the existing space and,
    for a space of M, the singular values of its (k + b) x k projected matrix."""
    P = amap.projector
    Pr = P(r)
    rn = float(np.linalg.norm(Pr))
    Sn = float(np.linalg.norm(S))
    S_next = S * (1.0 + _EPS)
    with np.errstate(all="ignore"):
        delta = float(np.linalg.norm(P(amap.round_map(S_next) - S_next - r)))
    if not np.isfinite(delta):
        delta = float("inf")
    sigma_max = sigma_min = float("nan")
    if not powered:
        sigma_max, sigma_min = projected_singular_values(result)
    room = 1.0 - rate - rate_error
    if amap.symmetric:
        kappa = 1.0 / room if room > 0.0 else float("inf")
        kind = "estimate (from an upper bound on ||(I - M_V)^{-1}||)"
    else:
        readings = [1.0 / (1.0 - rate) if rate < 1.0 else float("inf")]
        if not powered and sigma_min > 0.0:
            readings.append(1.0 / sigma_min)
        if rn > 0.0:
            z, _ = result.space.galerkin(rhs(r), P, False)
            readings.append(float(np.linalg.norm(P(z))) / rn)
        kappa = max(readings)
        kind = "estimate"
    if powered:
        condition = (1.0 + rate + rate_error) * kappa
        condition_kind = "upper bound" if amap.symmetric else "estimate"
    else:
        condition = sigma_max / sigma_min if sigma_min > 0.0 else float("inf")
        condition_kind = "lower bound"
    scale = Sn if Sn > 0.0 else 1.0
    error = kappa * max(rn, delta, _EPS * scale) / scale
    note = (f"cond(I - M_V) {condition:.3e} ({condition_kind}), estimated relative error of the fixed "
            f"state {error:.1e}")
    return SolveAccuracy(condition=float(condition), condition_kind=condition_kind, inverse_norm=float(kappa),
                         error=float(error), error_kind=kind, note=note)


def refuse_inaccurate(amap: Any, accuracy: SolveAccuracy, max_condition: float) -> None:
    """InvalidHyperparameterError (as on the dense route) when the reading of cond_2(I - M_V)
    exceeds ``max_condition`` or the estimated relative error exceeds max_condition * eps:
    the fixed point cannot be trusted to the accuracy the dense route guarantees."""
    limit = max_condition * _EPS
    if not (accuracy.condition <= max_condition and accuracy.error <= limit):
        raise InvalidHyperparameterError(
            f"{amap.algorithm}: I - M has condition number {accuracy.condition:.3e} "
            f"({accuracy.condition_kind}) and the matrix-free fixed point an estimated relative error "
            f"{accuracy.error:.1e}, beyond max_condition={max_condition:.1e} (relative error "
            f"{limit:.1e}): the fixed point cannot be trusted to that accuracy (state of {amap.dim} numbers, "
            f"{amap.projector.count} declared conserved functionals; the dense route, "
            "affine_round_map(..., matrix_free=False), computes the condition number exactly; "
            f"max_condition={max(accuracy.condition, accuracy.error / _EPS):.1e} would accept this "
            "reading)")
