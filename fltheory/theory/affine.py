"""Exact affine round maps S -> M S + c, their fixed points and rates (THEORY.md section 3).

"General rule worth building on" (THEORY.md section 3): on quadratic clients
with linear local updates (FedAvg, FedProx gd/exact, FedOpt with fixed
preconditioners, SCAFFOLD, FedDyn, FedCurv with its constant Fisher diag(H_i),
under full participation with exact gradients) the round map on the full state
is affine,

    S_{t+1} = M S_t + c.

:func:`affine_round_map` recovers M and c from dim(S) + 1 evaluations of the
round map (:mod:`fltheory.theory.round_maps`):

    F0 = Phi(S0),   M e_j = (Phi(S0 + h e_j) - F0) / h,   c = F0 - M S0,

with S0 the algorithm's state at x0 (after warm-up) and h = max(1, ||S0||_inf)
(a step of the size of the state keeps the cancellation error of the
difference at the rounding level of Phi itself; the map is exactly affine, so
the step size carries no truncation error).  Affinity is then verified where
a piecewise-affine map (l1 terms, thresholding) or a non-linear one (adaptive
preconditioners, logistic clients) would show it:

1. at S0 + h z (z standard normal),
2. at S0 + 1e-3 h z' (small scale),
3. near the fixed point of the recovered map, where client changes are small
   and thresholds are active: S~ + 1e-2 max(1, ||S~||_inf) z'',
4. at point 1 with the round counters advanced by one round (the map must not
   depend on t: bias-corrected averages and server Adam do),

each by the relative residual (perturbing only the free coordinates, see
"Frozen fields")
||Phi(S) - M S - c||_inf / (||M||_inf ||S||_inf + ||c||_inf + ||Phi(S)||_inf),
which must not exceed ``rtol``; otherwise :class:`NotAffineError` names the
algorithm, the check and the residual.  Limitation: a piecewise-affine map
(l1 prox, thresholding) that is affine on a region containing all these
points passes (e.g. FedElasticNet when every |e_i - x| stays far above the
l1 threshold); the recovered map is then exact on that region only.

Frozen fields
-------------
A field whose value after a round does not depend on the state (identical
output at S0 and at a random point) is *frozen*: FedCurv's Fisher diagonals
on quadratic clients are diag(H_i) whatever the local models.  The map need
not be affine in such a field (FedCurv's penalty is bilinear in the Fisher
diagonals and the local models), but every state after one round has it at
its constant value, and on that set the map is affine in the free fields.
Recovery therefore keeps frozen fields at their constant (one more ordinary
round is run when the base state does not have it: ``warmup`` counts it),
sets the columns of M for frozen coordinates to zero (their rows are zero
and c holds the constant), and perturbs only free coordinates in the checks.
M S + c is exact for states whose frozen fields have their constant value.

Invariant subspace
------------------
I - M can be singular: SCAFFOLD conserves N c - sum_i c_i and FedDyn conserves
h - (1/m) sum_k grad_k under full participation, which gives M the eigenvalue
1 with left eigenvectors w (w^T M = w^T).  Every such w is a *conserved
quantity*: w^T S_{t+1} = w^T S_t + w^T c, so (when w^T c = 0) the orbit of an
initial state S_init stays in the affine subspace

    S_init + V,   V = {v : w^T v = 0 for all w in W},   W = left null space of I - M,

which is M-invariant.  Rule used everywhere below: W is spanned by the left
singular vectors of I - M whose singular values are <= ``null_tol`` times the
largest; Q is an orthonormal basis of V (the remaining left singular
vectors); the restricted operator is M_V = Q^T M Q (exact since M Q = Q M_V).
Then

* fixed point: S~ = S_init + Q z with (I - M_V) z = Q^T (S_1 - S_init),
  S_1 = M S_init + c (unique when I - M_V is non-singular, which is the case
  whenever the eigenvalue 1 of M is semisimple); it depends on S_init only
  through the conserved quantities W^T S_init.  The server-model part is the
  same for every start that satisfies the algorithm's invariant (SCAFFOLD:
  c = mean c_i; FedDyn: h = (1/m) sum grad_k, both true at ``init``); a start
  that breaks it moves the server model too (the tests show it for SCAFFOLD);
* ``spectral_rate`` = rho(M_V): the exact asymptotic rate of
  ||S_t - S~|| (and of ||x_t - x~|| unless x does not see the slowest mode);
* ``contraction_factor`` = ||M_V||_2 = max_{v in V} ||M v|| / ||v||: one-round
  contraction of the error in the Euclidean norm on V.

A drift w^T c != 0 means no fixed point (InvalidHyperparameterError).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..algorithms.base import Algorithm, RoundInfo
from ..display import SummaryDisplay
from ..errors import InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ..participation import Participation
from ..problems.base import Federation
from .round_maps import RoundMap, StateLayout, counters_of, round_map

__all__ = [
    "AffineRoundMap", "AffineFixedPoint", "InvariantSubspace", "affine_round_map",
    "invariant_subspace", "fixed_point", "spectral_rate", "contraction_factor", "orbit_rate",
]

logger = logging.getLogger(__name__)

_SMALL_SCALE = 1e-3     # check 2: relative size of the small perturbation
_NEAR_FIXED = 1e-2      # check 3: relative size of the perturbation of the fixed point


@dataclass(frozen=True, eq=False, repr=False)
class AffineRoundMap(SummaryDisplay):
    """S_{t+1} = M S_t + c, recovered and verified (module docstring).

    Attributes
    ----------
    M : ndarray (n, n)
    c : ndarray (n,)
    dim : int
        n = dim(S).
    layout : StateLayout
        Where each state field sits in S (``layout.slices``).
    x_slice : slice
        The server model x in S.
    base : ndarray (n,)
        S0, the state the map was recovered at (the algorithm's state at x0,
        after ``warmup`` ordinary rounds).
    step : float
        The basis step h.
    residual : float
        Largest relative residual of the affinity checks.
    residuals : dict str -> float
        Relative residual of each check.
    algorithm : str
    warmup : int
        Ordinary rounds from ``algorithm.init`` to the state at ``base``.
    counter_step : dict str -> ndarray
        Increment of each integer counter per round (t, optimizer counts).
    info : RoundInfo
        Diagnostics of the ordinary round at ``base``.
    round_map : RoundMap
        The underlying map (converts between states and vectors).
    frozen : ndarray (n,) of bool
        Coordinates of frozen fields (see the module docstring).
    frozen_fields : tuple of str
        Their paths (FedCurv: ``"I"``, the Fisher diagonals diag(H_i)).
    """

    M: np.ndarray
    c: np.ndarray
    dim: int
    layout: StateLayout
    x_slice: slice
    base: np.ndarray
    step: float
    residual: float
    residuals: dict[str, float]
    algorithm: str
    warmup: int
    counter_step: dict[str, np.ndarray]
    info: RoundInfo
    round_map: RoundMap = field(repr=False)
    frozen: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=bool))
    frozen_fields: tuple[str, ...] = ()

    def __call__(self, S: Any) -> np.ndarray:
        """M S + c (S of shape (n,) or (k, n) rows)."""
        S = np.asarray(S, dtype=np.float64)
        return S @ self.M.T + self.c

    @property
    def slices(self) -> dict[str, slice]:
        """Slice of every state field in S."""
        return self.layout.slices

    def block(self, rows: str, cols: str) -> np.ndarray:
        """The block of M mapping field ``cols`` to field ``rows``."""
        return self.M[self.layout.slices[rows], self.layout.slices[cols]]

    def to_vector(self, state: Any) -> np.ndarray:
        """S of an algorithm state (same layout)."""
        return self.round_map.to_vector(state)

    def to_state(self, S: Any) -> Any:
        """Algorithm state of vector S (counters of the recovery template)."""
        return self.round_map.to_state(S)


def _rel_residual(out: np.ndarray, pred: np.ndarray, S: np.ndarray, M: np.ndarray, c: np.ndarray) -> float:
    scale = (np.abs(M).sum(axis=1).max() * np.abs(S).max() + np.abs(c).max()
             + np.abs(out).max() + np.finfo(float).tiny)
    return float(np.abs(out - pred).max() / scale)


def affine_round_map(algorithm: Algorithm, problem: Federation, *, x0: ArrayLike | None = None,
                     rtol: float = 1e-9, state: Any = None,
                     participation: Participation | None = None,
                     rng: np.random.Generator | None = None,
                     max_dim: int = 4096) -> AffineRoundMap:
    """Recover the affine round map S -> M S + c of ``algorithm`` on ``problem``.

    Parameters
    ----------
    algorithm : Algorithm
    problem : Federation
        Exact oracle (a stochastic one raises InvalidProblemError).
    x0 : array (d,), optional
        Initial server model (zeros by default); S0 is the state there.
    rtol : float
        Largest accepted relative residual of the affinity checks.
    state : optional
        Recover at this state instead of ``algorithm.init(problem, x0)``.
    participation : None or FullParticipation
        Anything else raises NotAffineError.
    rng : Generator, optional
        Draws the check points (``numpy.random.default_rng(0)`` by default).
    max_dim : int
        Refuse states larger than this (recovery costs dim(S) + 7 rounds and
        dim(S)^2 floats); e.g. SCAFFOLD carries (N + 2) d numbers.

    Returns
    -------
    AffineRoundMap

    Raises
    ------
    NotAffineError
        When a check fails (names the algorithm, the check and the residual),
        when the algorithm draws random numbers, or under partial participation.
    InvalidProblemError
        Stochastic oracle; state larger than ``max_dim``.
    """
    if not (np.isfinite(rtol) and rtol > 0):
        raise InvalidHyperparameterError(f"rtol must be finite and > 0, got {rtol!r}")
    gen = rng if rng is not None else np.random.default_rng(0)
    rm = round_map(algorithm, problem, x0=x0, state=state, participation=participation)
    n = rm.dim
    if n > max_dim:
        raise InvalidProblemError(
            f"{algorithm.name}: the state has {n} numbers ({rm.layout.describe()}), more than "
            f"max_dim={max_dim}; recovering M needs {n + 7} rounds and {n * n} floats")
    S0 = rm.to_vector(rm.template)
    h = max(1.0, float(np.abs(S0).max(initial=0.0)))
    with np.errstate(all="ignore"):
        F0 = rm(S0)
        Fz = rm(S0 + h * gen.standard_normal(n))
    frozen = np.zeros(n, dtype=bool)
    for path in rm.layout.paths:             # fields whose next value ignores the state
        sl = rm.layout.slices[path]
        tol = rtol * max(1.0, float(np.abs(F0[sl]).max(initial=0.0)))
        if np.all(np.isfinite(Fz[sl])) and np.abs(Fz[sl] - F0[sl]).max(initial=0.0) <= tol:
            frozen[sl] = True
    if np.any(frozen) and not np.allclose(S0[frozen], F0[frozen], rtol=rtol, atol=0.0):
        nxt, _ = rm.step(rm.template)        # one more ordinary round puts them at their value
        rm = RoundMap(algorithm, problem, nxt, warmup=rm.warmup + 1, initial=rm.initial)
        S0 = rm.to_vector(nxt)
        h = max(1.0, float(np.abs(S0).max(initial=0.0)))
        F0 = rm(S0)
    info = rm.last_info
    if info is None:                         # rm(S0) above has run at least one round
        raise NotAffineError(f"{algorithm.name}: the round map recorded no round")
    M = np.zeros((n, n))
    for j in np.flatnonzero(~frozen):        # one round per free coordinate (construction)
        Sj = S0.copy()
        Sj[j] += h
        M[:, j] = (rm(Sj) - F0) / h
    c = F0 - M @ S0
    free = (~frozen).astype(np.float64)

    residuals: dict[str, float] = {}

    def check(name: str, S: np.ndarray, mapping: RoundMap = rm) -> None:
        with np.errstate(all="ignore"):
            out = mapping(S)
        if not np.all(np.isfinite(out)):
            residuals[name] = float("inf")
            raise NotAffineError(
                f"{algorithm.name} is not affine on this problem: check '{name}' gives non-finite "
                "values (the round is not defined on the whole state space, e.g. a negative "
                "second-moment estimate)")
        r = _rel_residual(out, M @ S + c, S, M, c)
        residuals[name] = r
        if not (r <= rtol):
            raise NotAffineError(
                f"{algorithm.name} is not affine on this problem: check '{name}' has relative "
                f"residual {r:.3e} > rtol={rtol:.1e} (|Phi(S) - (M S + c)|_inf = "
                f"{np.abs(out - M @ S - c).max():.3e})")

    check("random point", S0 + h * free * gen.standard_normal(n))
    check("small perturbation", S0 + _SMALL_SCALE * h * free * gen.standard_normal(n))
    S_fix = np.linalg.lstsq(np.eye(n) - M, c, rcond=None)[0]
    if np.all(np.isfinite(S_fix)):
        hf = _NEAR_FIXED * max(1.0, float(np.abs(S_fix).max(initial=0.0)))
        check("near fixed point", S_fix + hf * free * gen.standard_normal(n))
    nxt, _ = rm.step(rm.template)
    later = rm.with_template(nxt)
    check("round counter advanced", S0 + h * free * gen.standard_normal(n), later)

    before, after = counters_of(rm.template), counters_of(nxt)
    counter_step = {p: np.asarray(after[p]) - np.asarray(before[p]) for p in before}
    return AffineRoundMap(
        M=M, c=c, dim=n, layout=rm.layout, x_slice=rm.x_slice, base=S0, step=h,
        residual=max(residuals.values()), residuals=residuals, algorithm=algorithm.name,
        warmup=rm.warmup, counter_step=counter_step, info=info, round_map=rm,
        frozen=frozen, frozen_fields=tuple(p for p in rm.layout.paths if frozen[rm.layout.slices[p]].all()))


@dataclass(frozen=True)
class InvariantSubspace:
    """The M-invariant subspace V that excludes conserved directions (module docstring).

    Q : (n, k) orthonormal basis of V.
    W : (n, n - k) orthonormal basis of the conserved functionals (left null space of I - M).
    M_V : (k, k) restricted operator Q^T M Q.
    singular_values : singular values of I - M (descending).
    """

    Q: np.ndarray
    W: np.ndarray
    M_V: np.ndarray
    singular_values: np.ndarray

    @property
    def n_conserved(self) -> int:
        return int(self.W.shape[1])


def invariant_subspace(amap: AffineRoundMap, *, null_tol: float = 1e-9) -> InvariantSubspace:
    """V = {v : W^T v = 0}, W = left singular vectors of I - M with singular
    value <= ``null_tol`` * the largest (the conserved quantities)."""
    if not (np.isfinite(null_tol) and 0 < null_tol < 1):
        raise InvalidHyperparameterError(f"null_tol must lie in (0, 1), got {null_tol!r}")
    n = amap.dim
    A = np.eye(n) - amap.M
    U, s, _ = np.linalg.svd(A)
    smax = s[0] if s.size else 0.0
    null = s <= null_tol * smax if smax > 0 else np.ones_like(s, dtype=bool)
    Q, W = U[:, ~null], U[:, null]
    return InvariantSubspace(Q=Q, W=W, M_V=Q.T @ amap.M @ Q, singular_values=s)


@dataclass(frozen=True, eq=False, repr=False)
class AffineFixedPoint(SummaryDisplay):
    """Fixed point of S -> M S + c on the affine subspace reachable from an initial state.

    S : (n,) fixed state S~ (M S~ + c = S~).
    x : (d,) its server model.
    state : the algorithm state of S~.
    initial : (n,) the initial state S_init whose conserved quantities S~ shares.
    residual : ||M S~ + c - S~||_inf.
    spectral_rate : rho(M_V), exact asymptotic linear rate.
    contraction_factor : ||M_V||_2.
    subspace : InvariantSubspace.
    """

    S: np.ndarray
    x: np.ndarray
    state: Any
    initial: np.ndarray
    residual: float
    spectral_rate: float
    contraction_factor: float
    subspace: InvariantSubspace = field(repr=False)


def _initial_vector(amap: AffineRoundMap, initial: Any) -> np.ndarray:
    """S_init as a finite (n,) vector (InvalidProblemError otherwise: a NaN start
    would come back as a NaN fixed point)."""
    if initial is None:
        return amap.base.copy()
    import dataclasses
    if not (dataclasses.is_dataclass(initial) or hasattr(initial, "_fields")):
        S = np.asarray(initial, dtype=np.float64)
        if S.shape != (amap.dim,):
            raise InvalidProblemError(f"initial state vector must have shape ({amap.dim},), got {S.shape}")
    else:
        S = amap.to_vector(initial)
    if not np.all(np.isfinite(S)):
        bad = int(np.flatnonzero(~np.isfinite(S))[0])
        raise InvalidProblemError(
            f"initial state must be finite; entry {bad} is {S[bad]!r} (layout {amap.layout.describe()})")
    return S


def _rho(A: np.ndarray) -> float:
    return float(np.abs(np.linalg.eigvals(A)).max()) if A.size else 0.0


def fixed_point(amap: AffineRoundMap, *, initial: ArrayLike | None = None, null_tol: float = 1e-9) -> AffineFixedPoint:
    """Fixed point S~ = M S~ + c reachable from ``initial`` (default: ``amap.base``).

    Solves (I - M_V) z = Q^T (M S_init + c - S_init) and returns
    S~ = S_init + Q z (module docstring, "Invariant subspace").

    Raises
    ------
    InvalidHyperparameterError
        A conserved quantity drifts (w^T c != 0), or I - M_V is singular: no
        unique fixed point.
    """
    S_init = _initial_vector(amap, initial)
    sub = invariant_subspace(amap, null_tol=null_tol)
    M, c = amap.M, amap.c
    r = M @ S_init + c - S_init
    scale = max(1.0, float(np.abs(c).max(initial=0.0)), float(np.abs(S_init).max(initial=0.0)))
    if sub.n_conserved:
        drift = float(np.abs(sub.W.T @ c).max())
        if drift > 1e3 * null_tol * scale:
            raise InvalidHyperparameterError(
                f"{amap.algorithm}: a conserved quantity of the round map drifts by {drift:.3e} "
                "per round (w^T c != 0 for a left eigenvector w of eigenvalue 1): no fixed point")
    k = sub.Q.shape[1]
    A = np.eye(k) - sub.M_V
    cond = np.linalg.cond(A) if k else 1.0
    if not np.isfinite(cond) or cond > 1e14:
        raise InvalidHyperparameterError(
            f"{amap.algorithm}: I - M is singular on the reachable subspace (condition number "
            f"{cond:.3e}): the fixed point is not unique")
    z = np.linalg.solve(A, sub.Q.T @ r) if k else np.zeros(0)
    S = S_init + sub.Q @ z
    resid = float(np.abs(M @ S + c - S).max())
    return AffineFixedPoint(
        S=S, x=S[amap.x_slice].copy(), state=amap.to_state(S), initial=S_init, residual=resid,
        spectral_rate=_rho(sub.M_V), contraction_factor=float(np.linalg.norm(sub.M_V, 2)) if k else 0.0,
        subspace=sub)


def spectral_rate(amap: AffineRoundMap, *, null_tol: float = 1e-9) -> float:
    """rho(M_V): spectral radius of M on the subspace without conserved directions
    (for SCAFFOLD, the eigenvalue 1 of N c - sum c_i is excluded)."""
    return _rho(invariant_subspace(amap, null_tol=null_tol).M_V)


def contraction_factor(amap: AffineRoundMap, *, null_tol: float = 1e-9) -> float:
    """||M_V||_2 = max over v in V of ||M v|| / ||v|| (Euclidean operator norm on V)."""
    sub = invariant_subspace(amap, null_tol=null_tol)
    return float(np.linalg.norm(sub.M_V, 2)) if sub.M_V.size else 0.0


def orbit_rate(amap: AffineRoundMap, *, initial: ArrayLike | None = None, tol: float = 1e-9,
               null_tol: float = 1e-9) -> float:
    """Asymptotic rate of the orbit from ``initial`` (default ``amap.base``): the
    largest |lambda_k| of M_V over the eigenvectors the initial error excites.

    With M_V = V diag(lambda) V^{-1} and a = V^{-1} Q^T (S_init - S~), the error
    after t rounds is Q V diag(lambda^t) a, so the rate is
    max {|lambda_k| : |a_k| > tol ||a||_inf}.  For a generic start this is
    :func:`spectral_rate`; a start whose error avoids the slowest modes decays
    faster.  Needs M_V diagonalizable: when its eigenvector matrix has condition
    number above 1e10 the spectral rate is returned (an upper bound) and a
    warning is logged.  A start within 1e3 machine epsilons (relative) of the
fixed point returns 0."""
    fp = fixed_point(amap, initial=initial, null_tol=null_tol)
    sub = fp.subspace
    if sub.M_V.size == 0:
        return 0.0
    e0 = sub.Q.T @ (fp.initial - fp.S)
    if np.abs(e0).max() <= 1e3 * np.finfo(float).eps * max(1.0, float(np.abs(fp.S).max())):
        return 0.0                     # the start is the fixed point up to rounding
    lam, V = np.linalg.eig(sub.M_V)
    cond = np.linalg.cond(V)
    if not np.isfinite(cond) or cond > 1e10:
        logger.warning("orbit_rate: M_V is (nearly) defective (eigenvector condition %.2e); "
                       "returning the spectral rate", cond)
        return fp.spectral_rate
    a = np.linalg.solve(V, e0.astype(complex))
    excited = np.abs(a) > tol * np.abs(a).max()
    return float(np.abs(lam[excited]).max())
