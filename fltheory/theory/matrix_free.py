"""Exact theory of an affine round map S -> M S + c without forming M.

The dense route (``theory.affine``) probes the round map dim(S) + 7 times and
decomposes an n x n matrix; for SCAFFOLD at N = 10,000 clients in d = 20
(n = 200,040) neither fits.  Here M is a ``scipy.sparse.linalg.LinearOperator``
whose product is one round:

    M v = (Phi(S0 + s v) - Phi(S0)) / s,   s = h / ||v||_inf,   h = max(1, ||S0||_inf),

exact for an affine Phi up to the rounding of one round (the same difference
the dense recovery uses for each column).  Frozen coordinates (fields whose
value after a round ignores the state, ``theory.affine``) get zero columns:
``v`` is zeroed there before the round.

Invariant subspace.  The declared conserved functionals W (n, K)
(``Algorithm.linear_invariants`` via :mod:`fltheory.theory.invariants`) give
the orthogonal projector onto V = {v : W^T v = 0},

    P v = v - W (W^T W)^{-1} W^T v

(the Gram matrix W^T W is sparse and factorised once; declared functionals
that are linearly dependent make it singular and raise InvalidProblemError).
V is M-invariant, so P M P has the spectrum of M_V plus K zeros.

* :func:`spectral_rate`: the largest |lambda| of P M P by ARPACK (``eigs``,
  implicitly restarted Arnoldi) to relative residual 1e-12 (which bounds
  |lambda - true eigenvalue| by 1e-12 |lambda| for a normal M_V); an
  eigenvalue within that bound (at least 16 eps) of 1 is unclassified
  (UnclassifiedDirectionError), as on the dense route.  Computed once per map.
* :func:`fixed_point`: S~ = S_init + z with P (I - M) z = P r,
  r = Phi(S_init) - S_init, by restarted GMRES; the residual is then measured
  by an actual round (||Phi(S~) - S~||_inf).
* :func:`orbit_rate`: Arnoldi (no restarts, full reorthogonalisation) on M_V
  started at the initial error e0 = P (S_init - S~).  The Krylov space of e0
  holds only the eigenvectors e0 excites, so the largest converged Ritz value
  whose share of e0 exceeds ``tol`` is the orbit's rate.
* ``contraction_factor`` (||M_V||_2) needs products with M^T, which a round
  does not give: :func:`contraction_factor` raises InvalidProblemError.

Affinity is verified matrix-free (:func:`matrix_free_affine_map`): additivity
M(u + v) = M u + M v, homogeneity at a small scale, the same map after the
round counters advance, and a perturbation of the computed fixed point
(checked in :func:`fixed_point`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

from ..algorithms.base import Algorithm, RoundInfo
from ..errors import InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ..participation import Participation
from ..problems.base import Federation
from . import _checks
from .affine_support import drift_scale, frozen_coordinates, initial_vector, refuse_unclassified
from .fixed_points import FixedPoint
from .invariants import ConservedFunctionals, check_conserved, conserved_functionals
from .round_maps import RoundMap, StateLayout, counters_of, round_map

__all__ = [
    "MatrixFreeAffineMap",
    "Projector",
    "contraction_factor",
    "fixed_point",
    "matrix_free_affine_map",
    "orbit_rate",
    "spectral_rate",
]

_SMALL_SCALE = 1e-3
_NEAR_FIXED = 1e-2


class Projector:
    """P = I - W (W^T W)^{-1} W^T, the orthogonal projector onto V = ker W^T."""

    def __init__(self, funcs: ConservedFunctionals, algorithm: str) -> None:
        self.W = funcs.W
        self.names = funcs.names
        self.count = funcs.count
        self._solve = None
        if self.count:
            G = (self.W.T @ self.W).tocsc()
            try:
                lu = spla.splu(G)
            except RuntimeError as exc:          # exactly singular Gram matrix
                raise InvalidProblemError(
                    f"{algorithm}: the declared conserved functionals ({', '.join(funcs.names)}) are "
                    f"linearly dependent ({exc})") from None
            self._solve = lu.solve

    def __call__(self, v: np.ndarray) -> np.ndarray:
        if self._solve is None:
            return v
        return v - self.W @ self._solve(np.asarray(self.W.T @ v))

    def coefficients(self, v: np.ndarray) -> np.ndarray:
        """W^T v (the conserved values of v)."""
        return np.asarray(self.W.T @ v)


@dataclass(frozen=True, eq=False)
class MatrixFreeAffineMap:
    """S -> M S + c with M applied by rounds (module docstring).

    Attributes
    ----------
    dim : int
    layout : StateLayout
    x_slice : slice
    base : (n,) S0;  F0 : (n,) Phi(S0);  c : (n,) F0 - M S0
    step : float, the difference scale h
    residual : float, residuals : dict, the affinity checks
    algorithm : str;  warmup : int;  counter_step : dict;  info : RoundInfo
    round_map : RoundMap
    frozen : (n,) bool;  frozen_fields : tuple of str
    rtol : float, accuracy the map was verified to
    projector : Projector onto the subspace without the declared conserved directions
    """

    dim: int
    layout: StateLayout
    x_slice: slice
    base: np.ndarray
    F0: np.ndarray
    c: np.ndarray
    step: float
    residual: float
    residuals: dict[str, float]
    algorithm: str
    warmup: int
    counter_step: dict[str, np.ndarray]
    info: RoundInfo | None
    round_map: RoundMap = field(repr=False)
    frozen: np.ndarray = field(repr=False)
    frozen_fields: tuple[str, ...]
    rtol: float
    projector: Projector = field(repr=False)
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def apply_linear(self, V: np.ndarray) -> np.ndarray:
        """M V for V of shape (n,) or (n, p): one round per column."""
        V = np.asarray(V, dtype=np.float64)
        if V.ndim == 1:
            return self._apply_one(V)
        return np.column_stack([self._apply_one(V[:, j]) for j in range(V.shape[1])])

    def _apply_one(self, v: np.ndarray) -> np.ndarray:
        v = np.where(self.frozen, 0.0, v)
        a = float(np.abs(v).max(initial=0.0))
        if a == 0.0:
            return np.zeros(self.dim)
        s = self.step / a
        return (self.round_map(self.base + s * v) - self.F0) / s

    def __call__(self, S: Any) -> np.ndarray:
        """M S + c = F0 + M (S - S0) for one state vector S (n,)."""
        S = np.asarray(S, dtype=np.float64)
        return self.F0 + self.apply_linear(S - self.base)

    def restricted_operator(self) -> spla.LinearOperator:
        """P M P as a LinearOperator (spectrum of M_V plus K zeros)."""
        P = self.projector
        return spla.LinearOperator((self.dim, self.dim), matvec=lambda v: P(self._apply_one(P(np.ravel(v)))),
                                   dtype=np.float64)

    @property
    def slices(self) -> dict[str, slice]:
        return self.layout.slices

    def to_vector(self, state: Any) -> np.ndarray:
        return self.round_map.to_vector(state)

    def to_state(self, S: Any) -> Any:
        return self.round_map.to_state(S)


def _relative(out: np.ndarray, pred: np.ndarray, *parts: np.ndarray) -> float:
    scale = sum(float(np.abs(p).max(initial=0.0)) for p in parts) + np.finfo(float).tiny
    return float(np.abs(out - pred).max() / scale)


def matrix_free_affine_map(algorithm: Algorithm, problem: Federation, *, x0: Any = None,
                           rtol: float = 1e-9, state: Any = None,
                           participation: Participation | None = None,
                           rng: np.random.Generator | None = None) -> MatrixFreeAffineMap:
    """The affine round map of ``algorithm`` on ``problem`` as an operator (module docstring).

    Same arguments and errors as ``theory.affine.affine_round_map`` (without
    ``max_dim``): NotAffineError when a check fails.  Costs about 12 rounds."""
    rtol = _checks.tolerance("rtol", rtol)
    rng = _checks.optional_generator("rng", rng)
    gen = rng if rng is not None else np.random.default_rng(0)
    rm = round_map(algorithm, problem, x0=x0, state=state, participation=participation)
    n = rm.dim
    S0 = rm.to_vector(rm.template)
    h = max(1.0, float(np.abs(S0).max(initial=0.0)))
    F0, frozen = frozen_coordinates(rm, S0, h, gen)
    if np.any(frozen) and not np.array_equal(S0[frozen], F0[frozen]):
        nxt, _ = rm.step(rm.template)
        rm = RoundMap(algorithm, problem, nxt, warmup=rm.warmup + 1, initial=rm.initial)
        S0 = rm.to_vector(nxt)
        h = max(1.0, float(np.abs(S0).max(initial=0.0)))
        F0 = rm(S0)
    info = rm.last_info
    free = ~frozen
    funcs = conserved_functionals(algorithm, problem, rm.layout, frozen)
    proj = Projector(funcs, algorithm.name)
    amap = MatrixFreeAffineMap(
        dim=n, layout=rm.layout, x_slice=rm.x_slice, base=S0, F0=F0, c=F0, step=h, residual=0.0,
        residuals={}, algorithm=algorithm.name, warmup=rm.warmup, counter_step={}, info=info,
        round_map=rm, frozen=frozen, frozen_fields=(), rtol=rtol, projector=proj)
    residuals: dict[str, float] = {}

    def require(name: str, r: float) -> None:
        residuals[name] = r
        if not (r <= rtol):
            raise NotAffineError(
                f"{algorithm.name} is not affine on this problem: matrix-free check '{name}' has "
                f"relative residual {r:.3e} > rtol={rtol:.1e}")

    def finite(out: np.ndarray, name: str) -> np.ndarray:
        if not np.all(np.isfinite(out)):
            raise NotAffineError(
                f"{algorithm.name} is not affine on this problem: check '{name}' gives non-finite values")
        return out

    u = free * gen.standard_normal(n)
    v = free * gen.standard_normal(n)
    with np.errstate(all="ignore"):
        Mu = finite(amap.apply_linear(u), "random point")
        Mv = finite(amap.apply_linear(v), "random point")
        Muv = finite(amap.apply_linear(u + v), "additivity")
        require("additivity", _relative(Muv, Mu + Mv, Mu, Mv))
        small = finite(rm(S0 + _SMALL_SCALE * h * u), "small perturbation")
        require("small perturbation", _relative(small - F0, _SMALL_SCALE * h * Mu, small, F0))
        nxt, _ = rm.step(rm.template)
        later = rm.with_template(nxt)
        S = S0 + h * v
        out = finite(later(S), "round counter advanced")
        require("round counter advanced", _relative(out, F0 + h * Mv, out, F0, h * Mv))
    scale = max(1.0, float(np.abs(Mu).max() / max(float(np.abs(u).max()), 1e-300)))
    check_conserved(funcs, lambda V: np.column_stack([Mu, Mv]), np.column_stack([u, v]), rtol=rtol,
                    scale=scale, algorithm=algorithm.name)
    c = F0 - amap.apply_linear(S0)
    before, after = counters_of(rm.template), counters_of(nxt)
    counter_step = {p: np.asarray(after[p]) - np.asarray(before[p]) for p in before}
    return MatrixFreeAffineMap(
        dim=n, layout=rm.layout, x_slice=rm.x_slice, base=S0, F0=F0, c=c, step=h,
        residual=max(residuals.values()), residuals=residuals, algorithm=algorithm.name,
        warmup=rm.warmup, counter_step=counter_step, info=info, round_map=rm, frozen=frozen,
        frozen_fields=tuple(p for p in rm.layout.paths if frozen[rm.layout.slices[p]].all()),
        rtol=rtol, projector=proj)


ARPACK_TOL = 1e-12   # relative residual of the Ritz pairs: eigenvalue error <= 1e-12 |lambda| (normal M_V)


def _dominant(amap: MatrixFreeAffineMap) -> np.ndarray:
    """The largest-magnitude eigenvalue(s) of M_V (computed once per map and cached).

    ARPACK stops when every Ritz pair has ||P M P u - lambda u|| <= ARPACK_TOL |lambda|,
    which bounds |lambda - eigenvalue| by that amount when M_V is normal.  Two
    eigenvalues are computed (a dominant pair may be complex conjugate); when the
    largest modulus is at least 0.999 the six largest are computed instead, and one
    within max(that bound, 16 eps) of 1 is unclassified (below 0.999 no eigenvalue
    can be near 1)."""
    if "dominant" in amap.cache:
        return amap.cache["dominant"]
    n = amap.dim
    if n <= 8 + amap.projector.count:
        raise InvalidProblemError(
            f"{amap.algorithm}: the state has only {n} numbers; use the dense route (matrix_free=False)")
    op = amap.restricted_operator()
    v0 = amap.projector(np.where(amap.frozen, 0.0, np.random.default_rng(0).standard_normal(n)))

    def largest(k: int) -> np.ndarray:
        # a wider search space on failure: heavy-ball maps have whole circles of equal modulus
        for kk, ncv in ((k, max(2 * k + 1, 20)), (k + 4, max(2 * k + 9, 40))):
            kk = min(kk, n - 2 - amap.projector.count)
            try:
                return spla.eigs(op, k=kk, which="LM", v0=v0, tol=ARPACK_TOL, ncv=min(n, ncv),
                                 maxiter=max(1000, 10 * n), return_eigenvectors=False)
            except spla.ArpackNoConvergence as exc:
                got = len(exc.eigenvalues)
        raise InvalidProblemError(
            f"{amap.algorithm}: ARPACK did not converge on the dominant eigenvalues of the round map "
            f"({got} of {kk} converged); use the dense route (matrix_free=False)")

    lam = largest(2)                          # 2: a dominant complex-conjugate pair
    if np.abs(lam).max() >= 0.999:
        lam = largest(6)
    for value in lam:
        resolution = max(ARPACK_TOL * abs(value), 16.0 * np.finfo(float).eps)
        refuse_unclassified(np.array([value]), resolution, amap.algorithm, amap.projector.names)
    amap.cache["dominant"] = lam
    return lam


def spectral_rate(amap: MatrixFreeAffineMap) -> float:
    """rho(M_V) by ARPACK (module docstring)."""
    return float(np.abs(_dominant(amap)).max())


def contraction_factor(amap: MatrixFreeAffineMap) -> float:
    """||M_V||_2 needs M^T, which a round does not give: always raises."""
    raise InvalidProblemError(
        f"{amap.algorithm}: the contraction factor ||M_V||_2 needs products with M^T, which the "
        "matrix-free map does not provide; use the dense route (affine_round_map(..., matrix_free=False))")


def fixed_point(amap: MatrixFreeAffineMap, *, initial: Any = None, max_condition: float = 1e13,
                gmres_rtol: float = 1e-13, maxiter: int = 50) -> FixedPoint:
    """S~ = S_init + z with P (I - M) z = P (Phi(S_init) - S_init) by GMRES (module docstring).

    ``max_condition`` is accepted for the same signature as the dense route;
    the condition number is not computed here (``condition`` is None).

    Raises
    ------
    InvalidHyperparameterError
        A conserved quantity drifts (no fixed point).
    InvalidProblemError
        The spectral rate is >= 1 (GMRES could return one of several solutions), or
        GMRES does not reach ``gmres_rtol`` within ``maxiter`` restarts, or the
        fixed point fails the affinity check near it.
    UnclassifiedDirectionError
        As :func:`spectral_rate`.
    """
    S_init = initial_vector(amap, initial)
    P = amap.projector
    n = amap.dim
    if P.count:
        drift = float(np.abs(P.coefficients(amap.c)).max())
        wmax = float(np.abs(P.W.data).max()) if P.W.nnz else 1.0
        if drift > amap.rtol * wmax * drift_scale(amap.c, S_init):
            raise InvalidHyperparameterError(
                f"{amap.algorithm}: a conserved quantity of the round map drifts by {drift:.3e} per "
                "round (w^T c != 0 for a declared conserved w): no fixed point")
    rate = float(np.abs(_dominant(amap)).max())
    if rate >= 1.0:
        raise InvalidProblemError(
            f"{amap.algorithm}: the round map does not contract on the invariant subspace (spectral "
            f"rate {rate:.12g} >= 1); the matrix-free fixed point needs a contraction to certify a "
            "unique solution: use the dense route (matrix_free=False)")
    r = P(amap(S_init) - S_init)

    def matvec(z: np.ndarray) -> np.ndarray:
        z = P(np.ravel(z))
        return P(z - amap._apply_one(z))

    A = spla.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    bnorm = float(np.linalg.norm(r))
    if bnorm == 0.0:
        z = np.zeros(n)
        iters = 0
    else:
        count = [0]

        def cb(_: Any) -> None:
            count[0] += 1

        z, info = spla.gmres(A, r, rtol=gmres_rtol, atol=0.0, restart=min(n, 100), maxiter=maxiter,
                             callback=cb, callback_type="pr_norm")
        iters = count[0]
        if info != 0:
            got = float(np.linalg.norm(matvec(z) - r)) / bnorm
            raise InvalidProblemError(
                f"{amap.algorithm}: GMRES did not reach relative residual {gmres_rtol:.0e} for the fixed "
                f"point (got {got:.2e} after {iters} iterations; spectral rate {rate:.12g}); use the "
                "dense route (matrix_free=False)")
    S = S_init + P(z)
    out = amap.round_map(S)
    resid = float(np.abs(out - S).max())
    pred = amap(S)
    near = _relative(out, pred, out, amap.F0)
    if not near <= amap.rtol:
        raise NotAffineError(
            f"{amap.algorithm} is not affine on this problem: matrix-free check 'near fixed point' has "
            f"relative residual {near:.3e} > rtol={amap.rtol:.1e}")
    hf = _NEAR_FIXED * max(1.0, float(np.abs(S).max()))
    pert = S + hf * np.where(amap.frozen, 0.0, np.random.default_rng(1).standard_normal(n))
    near2 = _relative(amap.round_map(pert), amap(pert), out, amap.F0)
    if not near2 <= amap.rtol:
        raise NotAffineError(
            f"{amap.algorithm} is not affine on this problem: matrix-free check 'near fixed point' has "
            f"relative residual {near2:.3e} > rtol={amap.rtol:.1e}")
    return FixedPoint(
        x=S[amap.x_slice].copy(), residual=resid, spectral_rate=rate, contraction_factor=None,
        success=True,
        message=f"matrix-free: GMRES in {iters} iterations on the subspace without {P.count} declared "
                "conserved functionals; contraction_factor not computed (needs M^T)",
        method="matrix-free affine", condition=None, S=S, state=amap.to_state(S), initial=S_init,
        subspace=P)


def orbit_rate(amap: MatrixFreeAffineMap, *, initial: Any = None, tol: float = 1e-9,
               krylov_dim: int = 80, converged: float = 1e-8) -> float:
    """Asymptotic rate of the orbit from ``initial`` by Arnoldi on M_V from the initial
    error (module docstring).  The largest |theta| over Ritz pairs whose share of the
    initial error exceeds ``tol`` (relative) and whose residual is below ``converged``
    (relative to ||M_V||) is returned.

    Raises InvalidProblemError when the excited dominant Ritz value has not converged
    within ``krylov_dim`` steps."""
    fp = fixed_point(amap, initial=initial)
    assert fp.S is not None and fp.initial is not None
    P = amap.projector
    e0 = P(fp.initial - fp.S)
    norm0 = float(np.linalg.norm(e0))
    if float(np.abs(e0).max(initial=0.0)) <= 1e3 * np.finfo(float).eps * max(1.0, float(np.abs(fp.S).max())):
        return 0.0
    m = min(krylov_dim, amap.dim - P.count)
    Qk = np.zeros((amap.dim, m + 1))
    H = np.zeros((m + 1, m))
    Qk[:, 0] = e0 / norm0
    size = m
    for j in range(m):
        w = P(amap._apply_one(Qk[:, j]))
        for _ in range(2):                                   # full reorthogonalisation, twice
            coef = Qk[:, :j + 1].T @ w
            H[:j + 1, j] += coef
            w = w - Qk[:, :j + 1] @ coef
        H[j + 1, j] = float(np.linalg.norm(w))
        if H[j + 1, j] <= 1e-14 * max(1.0, float(np.abs(H[:j + 2, :j + 1]).max())):
            size = j + 1                                      # invariant subspace found
            break
        Qk[:, j + 1] = w / H[j + 1, j]
    Hm = H[:size, :size]
    theta, Y = np.linalg.eig(Hm)
    share = np.abs(np.linalg.solve(Y, np.eye(size)[:, 0].astype(complex)))
    if size < m:                                              # exact invariant subspace: no residual
        resid = np.zeros(size)
    else:
        resid = abs(H[size, size - 1]) * np.abs(Y[size - 1, :]) / np.linalg.norm(Y, axis=0)
    scale = max(1.0, float(np.abs(theta).max()))
    excited = share > tol * share.max()
    order = np.argsort(-np.abs(theta))
    for j in order:
        if not excited[j]:
            continue
        if resid[j] <= converged * scale:
            return float(np.abs(theta[j]))
        raise InvalidProblemError(
            f"{amap.algorithm}: the dominant excited Ritz value {theta[j]:.6g} has residual "
            f"{resid[j]:.2e} after {size} Arnoldi steps; raise krylov_dim or use the dense route")
    return 0.0
