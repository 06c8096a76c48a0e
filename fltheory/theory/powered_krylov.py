"""Rate and fixed point of a matrix-free affine map from a Krylov space of M^j.

When the linear part M is applied in closed form (``theory.closed_form_maps``,
SCAFFOLD), a product costs far less than the Krylov basis it feeds: at
N = 10,000 clients in d = 20 (state 200,040 numbers) a product of two vectors
takes about 14 ms, while orthogonalising each new vector against the basis
streams the whole basis several times.  Building the space of M^j instead of M
(``POWER`` = 4 products per column) needs far fewer basis vectors for the same
accuracy, because powering pushes the bulk of the spectrum towards 0 relative
to the dominant eigenvalue (measured on that instance: 56 vectors for M, 40 for
M^2, 28 for M^4, 18 for M^8, each to a rate error below 3e-13).

Both results are exact consequences of the powered map:

* rate: rho(M_V^j) = rho(M_V)^j, so rho(M_V) = rho(M_V^j)^(1/j), and an error e of
  rho^j gives an error of at most e / (j rho^(j-1)) (mean value theorem, with
  rho^j - e >= 0 in the bound used below).  That factor grows as rho falls, so
  below ``MIN_RATE`` the space of M itself is used (``powered_applies``);
* fixed point: S~ = M S~ + c iff S~ = M^j S~ + (I + M + ... + M^(j-1)) c when 1 is
  not an eigenvalue of M^j on V (the rate is below 1), so with r = Phi(S) - S,
  z solves (I - M^j) z = (I + M + ... + M^(j-1)) r and S~ = S + P z; the space's
  first vector is that right-hand side (Galerkin, as ``theory.krylov``), refined with
  the residual of actual rounds.

The affinity checks near the fixed point, the conserved-subspace handling
(projector P from the declared invariants), the refusal of eigenvalues that
cannot be told from 1 and the drift test are those of ``theory.matrix_free``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidProblemError
from .affine_support import initial_vector, refuse_unclassified
from . import _checks
from .closed_form_maps import ClosedFormBlock
from ._fixed_point_accuracy import refuse_inaccurate, solve_accuracy
from .fixed_points import FixedPoint
from .krylov import DominantEigenvalues, KrylovResult, block_krylov
from .matrix_free import MatrixFreeAffineMap, rate_tolerance, refined_fixed_point, refuse_drift

__all__ = ["MIN_RATE", "POWER", "PoweredRate", "powered_applies", "powered_fixed_point", "powered_rate",
           "uses_powered_krylov"]

POWER = 4
#: Below this rate the powered space is not used: the rounding of rho^j (about eps ||M^j||) becomes
#: an error of about eps ||M^j|| / (j rho^(j-1)) in rho, e.g. 1e-4 instead of 8e-8 for a SCAFFOLD map
#: whose true rate is at the rounding level; ``theory.matrix_free`` (on M) is used instead.
MIN_RATE = 0.5
SOLVE_RTOL = 1e-13
_MAX_VECTORS = 1000


@dataclass(frozen=True)
class PoweredRate:
    """rho(M_V) from a Krylov space of M^``power``: ``rate``, its error bound ``error``,
    the space's ``dimension`` and number of block ``products`` (of M^power), and the
    Ritz estimate ``powered`` of M^power itself."""

    rate: float
    error: float
    dimension: int
    products: int
    power: int
    powered: DominantEigenvalues


def uses_powered_krylov(amap: Any) -> bool:
    """True for a matrix-free map whose products are closed-form (``ClosedFormBlock``)."""
    return isinstance(amap, MatrixFreeAffineMap) and isinstance(amap.block, ClosedFormBlock)


def powered_applies(amap: Any) -> bool:
    """Whether the rate and fixed point of ``amap`` come from the powered space: closed-form
    products, and a converged powered rate of at least ``MIN_RATE`` (computed once and cached).
    Otherwise the callers use ``theory.matrix_free`` on M itself (same closed-form products).
    UnclassifiedDirectionError propagates."""
    if not uses_powered_krylov(amap):
        return False
    if "powered_applies" not in amap.cache:
        try:
            ok = powered_rate(amap).rate >= MIN_RATE
        except InvalidProblemError:
            ok = False
        amap.cache["powered_applies"] = ok
    return bool(amap.cache["powered_applies"])


def _check_amap(name: str, amap: Any) -> MatrixFreeAffineMap:
    """``amap`` if it is a matrix-free map with closed-form products (``uses_powered_krylov``),
    else InvalidProblemError naming what was given (one isinstance check per call)."""
    if not uses_powered_krylov(amap):
        block = getattr(amap, "block", None)
        what = (f"a MatrixFreeAffineMap whose products are {type(block).__name__}, not closed-form"
                if isinstance(amap, MatrixFreeAffineMap) else f"{type(amap).__name__} {_short(amap)}")
        raise InvalidProblemError(
            f"{name}: amap must be a matrix-free affine map with closed-form block products "
            f"(uses_powered_krylov(amap) is True), got {what}")
    return amap


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _product(amap: MatrixFreeAffineMap, V: np.ndarray) -> np.ndarray:
    """M V by the closed-form block (never by rounds), ``copies`` columns at a time."""
    block = amap.block
    assert isinstance(block, ClosedFormBlock)
    b = block.copies
    return np.column_stack([block(V[:, k:k + b]) for k in range(0, V.shape[1], b)])


def _power_apply(amap: MatrixFreeAffineMap, j: int) -> Any:
    def apply(V: np.ndarray) -> np.ndarray:
        for _ in range(j):
            V = _product(amap, V)
        return V
    return apply


def _partial_sum(amap: MatrixFreeAffineMap, r: np.ndarray, j: int) -> np.ndarray:
    """(I + M + ... + M^(j-1)) r."""
    total, term = r.copy(), r[:, None]
    for _ in range(j - 1):
        term = _product(amap, term)
        total += term[:, 0]
    return total


def _run(amap: MatrixFreeAffineMap, S_init: np.ndarray, want_eig: bool) -> tuple[KrylovResult, np.ndarray]:
    j = POWER
    P = amap.projector
    r = P(amap(S_init) - S_init)
    rhs = P(_partial_sum(amap, r, j))
    start = np.where(amap.frozen[:, None], 0.0, np.random.default_rng(0).standard_normal((amap.dim, 2)))
    free = amap.dim - P.count - int(np.count_nonzero(amap.frozen))

    def eig_tol(rate_j: float) -> float:
        rho = max(rate_j, 0.0) ** (1.0 / j)
        return rate_tolerance(amap, rho) * j * rho ** (j - 1)

    res = block_krylov(_power_apply(amap, j), P, start, symmetric=amap.symmetric, rhs=rhs, want_eig=want_eig,
                       eig_tol=eig_tol, solve_tol=SOLVE_RTOL, max_vectors=int(max(8, min(free, _MAX_VECTORS))))
    return res, rhs


def _rate_of(amap: MatrixFreeAffineMap, res: KrylovResult) -> PoweredRate:
    j = POWER
    eig = res.eig
    assert eig is not None
    rho_j = max(float(eig.rate), 0.0)
    rate = rho_j ** (1.0 / j)
    low = max(rho_j - eig.error, 0.0) ** (1.0 / j)
    error = max(rate - low, (rho_j + eig.error) ** (1.0 / j) - rate)
    accepted = max(rate_tolerance(amap, rate), 1e-8 * max(rate, 1.0) if res.invariant else 0.0)
    if not error <= accepted:
        raise InvalidProblemError(
            f"{amap.algorithm}: the spectral rate did not converge: {rate:.15g} with error bound {error:.2e} "
            f"after a Krylov space of {res.dimension} vectors of M^{j}; use the dense route (matrix_free=False)")
    resolution = max(error, 16.0 * np.finfo(float).eps * max(1.0, rate))
    refuse_unclassified(np.array([rate]), resolution, amap.algorithm, amap.projector.names)
    return PoweredRate(rate=rate, error=error, dimension=res.dimension, products=res.blocks, power=j,
                       powered=eig)


def powered_rate(amap: MatrixFreeAffineMap) -> PoweredRate:
    """rho(M_V) from a Krylov space of M^POWER (module docstring); computed once per map,
    together with the fixed point reachable from ``amap.base``.

    Raises InvalidProblemError (no convergence; state too small) and
    UnclassifiedDirectionError (a dominant eigenvalue that cannot be told from 1); an ``amap``
    that is not a matrix-free map with closed-form products raises InvalidProblemError."""
    amap = _check_amap("powered_rate", amap)
    if "powered_rate" in amap.cache:
        cached: PoweredRate = amap.cache["powered_rate"]
        return cached
    if amap.dim <= 8 + amap.projector.count:
        raise InvalidProblemError(
            f"{amap.algorithm}: the state has only {amap.dim} numbers; use the dense route (matrix_free=False)")
    res, rhs = _run(amap, np.array(amap.base), True)
    amap.cache["powered_base_run"] = (res, rhs)
    result = _rate_of(amap, res)
    amap.cache["powered_rate"] = result
    return result


def powered_fixed_point(amap: MatrixFreeAffineMap, *, initial: Any = None, max_condition: float = 1e13
                        ) -> FixedPoint:
    """S~ = S_init + P z, (I - M^j) z = (I + ... + M^(j-1)) (Phi(S_init) - S_init) (module docstring),
    refined with the residual of actual rounds and checked for affinity near S~.

    ``condition`` (with ``condition_kind``) and ``error_estimate`` (with ``error_estimate_kind``)
    of the result read cond_2(I - M_V) and the relative error of S~ from the Krylov run
    (``theory._fixed_point_accuracy``: estimates, not guarantees); above ``max_condition``
    (a finite number > 1), or an estimated error above max_condition * eps, the dense
    route's InvalidHyperparameterError is raised instead of returning S~.

    Raises InvalidHyperparameterError (a conserved quantity drifts: no fixed point; the
    accuracy readings exceed ``max_condition``; ``max_condition`` not a finite number > 1),
    InvalidProblemError (rate >= 1, or the solve does not converge), NotAffineError
    (the map is not affine near the fixed point) and UnclassifiedDirectionError; an ``amap``
    that is not a matrix-free map with closed-form products raises InvalidProblemError."""
    amap = _check_amap("powered_fixed_point", amap)
    max_condition = _checks.condition_limit("max_condition", max_condition)
    S_init = initial_vector(amap, initial)
    P = amap.projector
    refuse_drift(amap, S_init)
    if initial is None and "powered_base_run" not in amap.cache:
        powered_rate(amap)
    rate = powered_rate(amap)
    if rate.rate >= 1.0:
        raise InvalidProblemError(
            f"{amap.algorithm}: the round map does not contract on the invariant subspace (spectral "
            f"rate {rate.rate:.12g} >= 1); the matrix-free fixed point needs a contraction to certify a "
            "unique solution: use the dense route (matrix_free=False)")
    if initial is None:
        res, rhs = amap.cache["powered_base_run"]
    else:
        res, rhs = _run(amap, S_init, False)
    if not res.solve_residual <= SOLVE_RTOL or res.z is None:
        raise InvalidProblemError(
            f"{amap.algorithm}: the Krylov solve did not reach relative residual {SOLVE_RTOL:.0e} for the "
            f"fixed point (got {res.solve_residual:.2e} with {res.dimension} vectors of M^{POWER}); use the "
            "dense route (matrix_free=False)")
    S, resid, steps, r = refined_fixed_point(amap, res, S_init + P(res.z),
                                             lambda v: _partial_sum(amap, v, POWER), 3)
    acc = solve_accuracy(amap, res, S, r, rate.rate, rate.error, lambda v: _partial_sum(amap, v, POWER),
                         powered=True)
    refuse_inaccurate(amap, acc, max_condition)
    return FixedPoint(
        x=S[amap.x_slice].copy(), residual=resid, spectral_rate=rate.rate,
        contraction_factor=rate.rate if amap.symmetric else None, success=True,
        message=f"matrix-free: Galerkin solve of (I - M^{POWER}) z = (I + ... + M^{POWER - 1}) r on a block "
                f"Krylov space of {res.dimension} vectors of M^{POWER} ({amap.block_note}) on the subspace "
                f"without {P.count} declared conserved functionals, {steps} refinement step(s); spectral rate "
                f"{rate.rate:.15g} +- {rate.error:.1e}"
                + ("" if amap.symmetric else "; contraction_factor not computed (needs M^T)")
                + f"; {acc.note}",
        method="matrix-free affine", condition=acc.condition, S=S, state=amap.to_state(S), initial=S_init,
        subspace=P, spectral_rate_error=float(rate.error), condition_kind=acc.condition_kind,
        error_estimate=acc.error, error_estimate_kind=acc.error_kind)
