"""Exact affine round maps S -> M S + c, their fixed points and rates (docs/theory/fixed-points.md).

"General rule worth building on" (docs/theory/fixed-points.md): on quadratic clients
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
A field whose value after a round does not depend on the state (bit for bit
the same output at S0 and at two random points) is *frozen*: FedCurv's Fisher diagonals
on quadratic clients are diag(H_i) whatever the local models.  The map need
not be affine in such a field (FedCurv's penalty is bilinear in the Fisher
diagonals and the local models), but every state after one round has it at
its constant value, and on that set the map is affine in the free fields.
Recovery therefore keeps frozen fields at their constant (one more ordinary
round is run when the base state does not have it: ``warmup`` counts it),
sets the columns of M for frozen coordinates to zero (their rows are zero
and c holds the constant), and perturbs only free coordinates in the checks.
M S + c is exact for states whose frozen fields have their constant value.
Equality is exact, not up to a tolerance: a field that changes by 1e-10 (EFL's
v = u * w when a client curvature is 1e-10) is not frozen.  A frozen field
whose constant is computed through the state with rounding would be missed,
and the affinity checks then raise NotAffineError: a refusal, never a wrong map.

Invariant subspace
------------------
I - M can be singular for a structural reason: SCAFFOLD conserves
N c - sum_i c_i, FedDyn N h - sum_k grad_k, EFL without compression
x - x_client.  Each such functional w is a left eigenvector of M with
eigenvalue 1 (w^T M = w^T), so w^T S_{t+1} = w^T S_t + w^T c and (when
w^T c = 0) the orbit of an initial state S_init stays in the affine subspace

    S_init + V,   V = {v : w^T v = 0 for every conserved w},

which is M-invariant.  The conserved functionals are the ones the algorithm
*declares* (``Algorithm.linear_invariants``, each proved in its docstring;
:mod:`fltheory.theory.invariants`), verified against the recovered map
(W^T M = W^T to the recovery accuracy ``rtol``, else InvalidProblemError).
They are never inferred from the spectrum: on an ill-conditioned problem a
slowly contracting mode has an eigenvalue 1 - 1e-10 (or closer), which no
tolerance tells from an eigenvalue exactly 1.  Q is an orthonormal basis of
V and M_V = Q^T M Q the restricted operator (exact since M Q = Q M_V).  Then

* fixed point: S~ = S_init + Q z with (I - M_V) z = Q^T (S_1 - S_init),
  S_1 = M S_init + c; it depends on S_init only through the conserved
  quantities.  The server-model part is the same for every start that
  satisfies the algorithm's invariant (SCAFFOLD: c = mean c_i; FedDyn:
  h = (1/m) sum grad_k, both true at ``init``); a start that breaks it moves
  the server model too (the tests show it for SCAFFOLD);
* ``spectral_rate`` = rho(M_V): the exact asymptotic rate of
  ||S_t - S~|| (and of ||x_t - x~|| unless x does not see the slowest mode);
* ``contraction_factor`` = ||M_V||_2 = max_{v in V} ||M v|| / ||v||: one-round
  contraction of the error in the Euclidean norm on V.

Unclassified directions: an eigenvalue lambda of M_V with |lambda - 1| at the
rounding level of the computed spectrum (16 eps ||M_V||_F) is either a
conserved quantity the algorithm does not declare, a flat direction of the
problem (a singular Hessian) or a mode slower than double precision can
resolve.  The routines cannot tell which, so they raise
:class:`~fltheory.errors.UnclassifiedDirectionError` instead of returning a
rate or a fixed point.  Otherwise every eigenvalue is resolved and the answer
depends on no tolerance.  A fixed point reports ``condition`` = cond(I - M_V)
(its relative accuracy is about condition * 1e-16) and is refused
(InvalidHyperparameterError) when that exceeds ``max_condition``.

A drift w^T c != 0 (relative to the recovery accuracy) means no fixed point
(InvalidHyperparameterError).

Large states: :func:`affine_round_map` with ``matrix_free=True`` (automatic
above ``dense_max`` coordinates) returns a
:class:`~fltheory.theory.matrix_free.MatrixFreeAffineMap`, which never forms
M; every routine below accepts both.  When the choice was automatic and a
matrix-free routine refuses (accuracy readings beyond ``max_condition``, a Krylov
rate or solve that does not converge, an eigenvalue it cannot tell from 1), the
routine is answered on the dense map instead if the state has at most ``max_dim``
numbers, and the result says so (``theory._dense_fallback``); otherwise the refusal
names the condition reading and the sizes.

Closed forms (:mod:`fltheory.theory.closed_form_maps`).  Where the linear part is
a known formula in the clients' Hessians, M is written down instead of probed
(FedAvg: sum_i w_i (I - eta_i H_i)^{s_i}, formed by binary powering) or, on the
matrix-free route, applied to blocks of vectors by batched products (SCAFFOLD).
The formula is never trusted: the dense map passes the same four affinity checks
against the algorithm's own rounds as a probed one (else the map is probed), and
a matrix-free block product must agree with single rounds at two random vectors
to ``rtol`` (else rounds are used).  ``AffineRoundMap.route`` and
``MatrixFreeAffineMap.block_note`` record which route was taken.  A closed-form
FedAvg map is symmetric by construction (``FedAvg.linear_part_is_symmetric``),
and its spectrum is then computed once by a symmetric eigensolver and cached.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import scipy.linalg

from .._validate import finite_array
from ..algorithms.base import Algorithm, RoundInfo
from ..display import SummaryDisplay
from ..errors import (
    InvalidHyperparameterError,
    InvalidProblemError,
    NotAffineError,
)
from ..participation import Participation
from ..problems.base import Federation
from . import _checks
from .fixed_points import FixedPoint
from .matrix_free import matrix_free_affine_map
from .invariants import check_conserved, conserved_functionals
from .affine_support import (drift_scale, eigenvalue_resolution, frozen_coordinates, initial_vector,
                             refuse_unclassified)
from .closed_form_maps import closed_form_block, closed_form_linear_part
from ._dense_fallback import DenseFallback, with_dense_fallback
from .powered_krylov import powered_applies, powered_fixed_point, powered_rate
from .round_maps import RoundMap, StateLayout, counters_of, round_map

__all__ = [
    "AffineFixedPoint",
    "AffineRoundMap",
    "FixedPoint",
    "InvariantSubspace",
    "affine_round_map",
    "contraction_factor",
    "fixed_point",
    "invariant_subspace",
    "orbit_rate",
    "spectral_rate",
]

logger = logging.getLogger(__name__)

_SMALL_SCALE = 1e-3     # check 2: relative size of the small perturbation
_NEAR_FIXED = 1e-2      # check 3: relative size of the perturbation of the fixed point
#: Smallest state for which the dense route writes M down in closed form when it can (below,
#: probing costs fewer than this many rounds and the recovered map stays independent of the
#: Hessian hook); ``closed_form=True`` uses the closed form at every size.
CLOSED_FORM_MIN_DIM = 64
PROBED = "probed: one round per free coordinate"
#: Largest state probed densely when ``matrix_free`` is None and no closed form of M is known.
PROBE_MAX = 512


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
    route : str
        How M was obtained: probed by rounds, or a closed form (then verified by rounds).
    symmetric : bool
        M is symmetric by construction (closed-form FedAvg); the spectrum is then
        computed by a symmetric eigensolver.
    cache : dict
        Spectral data computed once per map.
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
    info: RoundInfo | None
    round_map: RoundMap = field(repr=False)
    frozen: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=bool))
    frozen_fields: tuple[str, ...] = ()
    rtol: float = 1e-9
    route: str = PROBED
    symmetric: bool = False
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __call__(self, S: Any) -> np.ndarray:
        """M S + c (S of shape (n,) or (k, n) rows)."""
        S = finite_array("S", S, error=InvalidProblemError)
        if S.ndim not in (1, 2) or S.shape[-1] != self.dim:
            raise InvalidProblemError(f"S must have shape ({self.dim},) or (k, {self.dim}), got {S.shape}")
        return S @ self.M.T + self.c

    @property
    def slices(self) -> dict[str, slice]:
        """Slice of every state field in S."""
        return self.layout.slices

    def block(self, rows: str, cols: str) -> np.ndarray:
        """The block of M mapping field ``cols`` to field ``rows``."""
        for name, field_name in (("rows", rows), ("cols", cols)):
            if not isinstance(field_name, str) or field_name not in self.layout.slices:
                raise InvalidHyperparameterError(
                    f"{name} must be a state field among {list(self.layout.paths)}, got {field_name!r:.80}")
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
                     max_dim: int = 4096, matrix_free: bool | None = None,
                     dense_max: int = 2048, closed_form: bool | None = None) -> Any:
    """Recover the affine round map S -> M S + c of ``algorithm`` on ``problem``.

    Dense (an :class:`AffineRoundMap` holding M) for states of at most
    ``dense_max`` numbers, matrix-free above (a
    :class:`~fltheory.theory.matrix_free.MatrixFreeAffineMap`, M applied by
    rounds); ``matrix_free`` True/False forces either.

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
        Dense route only: refuse states larger than this (recovery costs
        dim(S) + 7 rounds and dim(S)^2 floats); e.g. SCAFFOLD carries (N + 2) d numbers.
        Also the largest state for which an automatically chosen matrix-free map falls
        back to the dense route when a matrix-free routine refuses (module docstring,
        "Large states"; measured: SCAFFOLD at N = 200, d = 20, state 4,040, 100 s).
    matrix_free : bool, optional
        None (default): matrix-free when dim(S) > ``dense_max``, with the dense fallback;
        True: matrix-free without fallback.
    dense_max : int
        Largest state recovered densely when ``matrix_free`` is None; above
        ``PROBE_MAX`` numbers only when M is known in closed form (probing costs
        dim(S) + 7 rounds, the matrix-free route about 12 plus one per Krylov vector).
    closed_form : bool, optional
        Use the closed form of the linear part where one is known
        (:mod:`fltheory.theory.closed_form_maps`; verified against rounds either
        way).  None (default): on the dense route for states of at least
        ``CLOSED_FORM_MIN_DIM`` numbers, on the matrix-free route always; True: at
        every size; False: never (M probed, products by rounds).

    Returns
    -------
    AffineRoundMap or MatrixFreeAffineMap

    Raises
    ------
    NotAffineError
        When a check fails (names the algorithm, the check and the residual),
        when the algorithm draws random numbers, or under partial participation.
    InvalidProblemError
        Stochastic oracle; state larger than ``max_dim``.
    """
    rtol = _checks.tolerance("rtol", rtol)
    rng = _checks.optional_generator("rng", rng)
    max_dim = _checks.size_limit("max_dim", max_dim)
    dense_max = _checks.size_limit("dense_max", dense_max, minimum=0)
    matrix_free = _checks.optional_flag("matrix_free", matrix_free)
    closed_form = _checks.optional_flag("closed_form", closed_form)
    gen = rng if rng is not None else np.random.default_rng(0)
    rm = round_map(algorithm, problem, x0=x0, state=state, participation=participation)
    n = rm.dim
    closed = None
    if not matrix_free and closed_form is not False and (closed_form or n >= CLOSED_FORM_MIN_DIM) and (
            matrix_free is False or n <= dense_max):
        closed = closed_form_linear_part(algorithm, problem, rm.layout)
    if matrix_free or (matrix_free is None and (n > dense_max or (n > PROBE_MAX and closed is None))):
        amap = _matrix_free_map(algorithm, problem, rm.layout, closed_form is not False, x0=x0, rtol=rtol,
                                state=state, participation=participation, rng=gen)
        if matrix_free is None:               # automatic choice: a refusal falls back to dense (_dense_fallback)
            def recover() -> AffineRoundMap:
                dense: AffineRoundMap = affine_round_map(
                    algorithm, problem, x0=x0, rtol=rtol, state=state, participation=participation, rng=gen,
                    max_dim=max_dim, matrix_free=False, closed_form=closed_form)
                return dense
            amap = dataclasses.replace(amap, dense_fallback=DenseFallback(recover=recover, dim=n, max_dim=max_dim))
        return amap
    if closed is not None:
        try:
            return _verified_map(rm, closed[0], closed[1], rtol, gen, symmetric=True)
        except NotAffineError as exc:
            logger.warning("%s: the closed-form linear part failed a check against rounds (%s); "
                           "probing the map instead", algorithm.name, exc)
    if n > max_dim:
        raise InvalidProblemError(
            f"{algorithm.name}: the state has {n} numbers ({rm.layout.describe()}), more than "
            f"max_dim={max_dim}; recovering M needs {n + 7} rounds and {n * n} floats")
    S0 = rm.to_vector(rm.template)
    h = max(1.0, float(np.abs(S0).max(initial=0.0)))
    F0, frozen = frozen_coordinates(rm, S0, h, gen)
    if np.any(frozen) and not np.array_equal(S0[frozen], F0[frozen]):
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
    return _checked_map(rm, M, F0, S0, h, frozen, info, rtol, gen)


def _verified_map(rm: RoundMap, M: np.ndarray, route: str, rtol: float, gen: np.random.Generator,
                  symmetric: bool) -> AffineRoundMap:
    """A closed-form M (no frozen fields) with c = Phi(S0) - M S0, through the same checks."""
    S0 = rm.to_vector(rm.template)
    h = max(1.0, float(np.abs(S0).max(initial=0.0)))
    F0 = rm(S0)
    info = rm.last_info
    if info is None:
        raise NotAffineError(f"{rm.algorithm.name}: the round map recorded no round")
    frozen = np.zeros(rm.dim, dtype=bool)
    return _checked_map(rm, M, F0, S0, h, frozen, info, rtol, gen, route=f"{route}, checked against rounds",
                        symmetric=symmetric)


def _checked_map(rm: RoundMap, M: np.ndarray, F0: np.ndarray, S0: np.ndarray, h: float, frozen: np.ndarray,
                 info: RoundInfo, rtol: float, gen: np.random.Generator, route: str | None = None,
                 symmetric: bool = False) -> AffineRoundMap:
    """c = Phi(S0) - M S0 and the four affinity checks of the module docstring."""
    algorithm, n = rm.algorithm, rm.dim
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
    if symmetric:                            # I - M symmetric: a symmetric solve (lstsq below costs an SVD)
        try:
            S_fix = scipy.linalg.solve(np.eye(n) - M, c, assume_a="sym")
        except (np.linalg.LinAlgError, ValueError):
            S_fix = np.full(n, np.nan)
    else:
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
        frozen=frozen, frozen_fields=tuple(p for p in rm.layout.paths if frozen[rm.layout.slices[p]].all()),
        rtol=rtol, route=route if route is not None else PROBED, symmetric=symmetric)


def _matrix_free_map(algorithm: Algorithm, problem: Federation, layout: StateLayout, closed_form: bool,
                     **kwargs: Any) -> Any:
    """``matrix_free_affine_map``, with closed-form block products where known and verified
    (module docstring, "Closed forms"): each must agree with single rounds at two random vectors."""
    frozen_free = np.zeros(sum(int(np.prod(sh, dtype=np.int64)) for sh in layout.shapes), dtype=bool)
    block = closed_form_block(algorithm, problem, layout, frozen_free) if closed_form else None
    if block is None:
        return matrix_free_affine_map(algorithm, problem, **kwargs)
    amap = matrix_free_affine_map(algorithm, problem, block_size=1, **kwargs)
    block.frozen = amap.frozen
    gen = np.random.default_rng(2)
    probes = np.where(amap.frozen[:, None], 0.0, gen.standard_normal((amap.dim, 2)))
    single = amap.apply_linear(probes)           # one round per column (no block yet)
    with np.errstate(all="ignore"):
        got = block(probes)
    err = float(np.abs(got - single).max()) / (float(np.abs(single).max()) + np.finfo(float).tiny)
    if not err <= amap.rtol:
        logger.warning("%s: closed-form block products differ from rounds by %.2e (relative) > rtol=%.1e; "
                       "using rounds", algorithm.name, err, amap.rtol)
        return amap
    note = f"{block.copies} vectors per {block.description} (checked against single rounds to {err:.1e})"
    return dataclasses.replace(amap, block=block, block_note=note)


@dataclass(frozen=True, eq=False)
class InvariantSubspace:
    """The M-invariant subspace V orthogonal to the declared conserved functionals.

    Q : (n, k) orthonormal basis of V.
    W : (n, n - k) orthonormal basis of the span of the conserved functionals.
    M_V : (k, k) restricted operator Q^T M Q.
    names : names of the declared invariant families (``Algorithm.linear_invariants``).
    conservation_residual : largest relative residual of W^T M = W^T (0 when none declared).
    """

    Q: np.ndarray
    W: np.ndarray
    M_V: np.ndarray
    names: tuple[str, ...] = ()
    conservation_residual: float = 0.0

    @property
    def n_conserved(self) -> int:
        return int(self.W.shape[1])


def _check_affine_map(amap: Any) -> None:
    """``amap`` an AffineRoundMap or a MatrixFreeAffineMap (typed error otherwise)."""
    from .matrix_free import MatrixFreeAffineMap
    if not isinstance(amap, (AffineRoundMap, MatrixFreeAffineMap)):
        raise InvalidHyperparameterError(
            f"amap must be an AffineRoundMap or MatrixFreeAffineMap (from fltheory.theory.affine_round_map), "
            f"got {repr(amap)[:80]} ({type(amap).__name__})")


def _is_matrix_free(amap: Any) -> bool:
    from .matrix_free import MatrixFreeAffineMap
    return isinstance(amap, MatrixFreeAffineMap)


def _orthonormal_split(Wd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(orthonormal basis of range(Wd), orthonormal basis of its complement).

    The rank is that of the declared coefficient matrix (exact small numbers),
    cut at n eps times its largest singular value: it only removes declared
    functionals that repeat others."""
    n, K = Wd.shape
    if K == 0:
        return np.zeros((n, 0)), np.eye(n)
    U, s, _ = np.linalg.svd(Wd, full_matrices=True)
    r = int(np.count_nonzero(s > s[0] * max(n, K) * np.finfo(float).eps))
    return U[:, :r], U[:, r:]


def invariant_subspace(amap: AffineRoundMap) -> InvariantSubspace:
    """V = {v : w^T v = 0 for the declared conserved w} and M_V = Q^T M Q (module docstring).

    Raises
    ------
    InvalidProblemError
        A declared functional is not conserved by the recovered map.
    """
    _check_affine_map(amap)
    if _is_matrix_free(amap):
        raise InvalidProblemError(
            "invariant_subspace forms Q and M_V densely; a matrix-free map has "
            "`amap.projector` instead")
    rm = amap.round_map
    funcs = conserved_functionals(rm.algorithm, rm.problem, amap.layout, amap.frozen)
    M = amap.M
    scale = max(1.0, float(np.abs(M).sum(axis=1).max(initial=0.0)))
    # probes = the identity, so M V = M (no n^3 product)
    resid = check_conserved(funcs, lambda V: M, np.eye(amap.dim), rtol=amap.rtol, scale=scale,
                            algorithm=amap.algorithm) if funcs.count else 0.0
    W, Q = _orthonormal_split(funcs.W.toarray())
    M_V = M.copy() if W.shape[1] == 0 else Q.T @ M @ Q      # Q = I when nothing is conserved
    return InvariantSubspace(Q=Q, W=W, M_V=M_V, names=funcs.names, conservation_residual=resid)


AffineFixedPoint = FixedPoint     # earlier name of the affine result (same type)


def _rho(A: np.ndarray) -> float:
    return float(np.abs(np.linalg.eigvals(A)).max()) if A.size else 0.0


def _subspace(amap: AffineRoundMap) -> InvariantSubspace:
    """:func:`invariant_subspace`, computed once per map."""
    if "subspace" not in amap.cache:
        amap.cache["subspace"] = invariant_subspace(amap)
    sub: InvariantSubspace = amap.cache["subspace"]
    return sub


def _spectrum(amap: AffineRoundMap, sub: InvariantSubspace) -> np.ndarray:
    """Eigenvalues of M_V, computed once per map: real and ascending by a symmetric
    eigensolver when M is symmetric by construction (``amap.symmetric``), else complex."""
    if "spectrum" not in amap.cache:
        if not sub.M_V.size:
            lam = np.zeros(0, dtype=float if amap.symmetric else complex)
        elif amap.symmetric:
            lam = scipy.linalg.eigvalsh(0.5 * (sub.M_V + sub.M_V.T), check_finite=False)
        else:
            lam = np.linalg.eigvals(sub.M_V)
        amap.cache["spectrum"] = lam
    spectrum: np.ndarray = amap.cache["spectrum"]
    return spectrum


def _checked_spectrum(amap: AffineRoundMap, sub: InvariantSubspace) -> np.ndarray:
    lam = _spectrum(amap, sub)
    refuse_unclassified(lam, eigenvalue_resolution(sub.M_V), amap.algorithm, sub.names)
    return lam


def _norm2(amap: AffineRoundMap, sub: InvariantSubspace) -> float:
    """||M_V||_2 (the largest |eigenvalue| when M_V is symmetric)."""
    if not sub.M_V.size:
        return 0.0
    if amap.symmetric:
        return float(np.abs(_spectrum(amap, sub)).max())
    return float(np.linalg.norm(sub.M_V, 2))


def fixed_point(amap: Any, *, initial: Any = None, max_condition: float = 1e13) -> FixedPoint:
    """Fixed point S~ = M S~ + c reachable from ``initial`` (default: ``amap.base``).

    Solves (I - M_V) z = Q^T (M S_init + c - S_init) and returns
    S~ = S_init + Q z (module docstring, "Invariant subspace").  A
    :class:`~fltheory.theory.matrix_free.MatrixFreeAffineMap` is solved by
    a Krylov method instead (``theory.matrix_free.fixed_point``; with closed-form
    products, on a Krylov space of M^j: ``theory.powered_krylov``).

    Parameters
    ----------
    amap : AffineRoundMap or MatrixFreeAffineMap
    initial : state or (n,) vector, optional
    max_condition : float
        Refuse when cond(I - M_V) exceeds this (the fixed point would carry a
        relative error of about max_condition * 1e-16).

    Returns
    -------
    FixedPoint
        ``S``, ``state``, ``initial``, ``subspace`` and ``condition`` filled.

    Raises
    ------
    InvalidHyperparameterError
        A conserved quantity drifts (w^T c != 0): no fixed point; or
        cond(I - M_V) > ``max_condition``.
    UnclassifiedDirectionError
        M_V has an eigenvalue 1 to the resolution of its spectrum (module docstring).
    """
    _check_affine_map(amap)
    max_condition = _checks.condition_limit("max_condition", max_condition)
    if _is_matrix_free(amap):
        from . import matrix_free
        matrix_free.refuse_drift(amap, initial_vector(amap, initial))     # no fixed point on either route

        def krylov() -> FixedPoint:
            if powered_applies(amap):
                return powered_fixed_point(amap, initial=initial, max_condition=max_condition)
            return matrix_free.fixed_point(amap, initial=initial, max_condition=max_condition)

        def dense(dmap: AffineRoundMap, note: str) -> FixedPoint:
            fp = fixed_point(dmap, initial=initial, max_condition=max_condition)
            return dataclasses.replace(fp, message=f"{note}; {fp.message}")

        return with_dense_fallback(amap, "fixed point", krylov, dense)
    S_init = initial_vector(amap, initial)
    sub = _subspace(amap)
    M, c = amap.M, amap.c
    r = M @ S_init + c - S_init
    if sub.n_conserved:
        drift = float(np.abs(sub.W.T @ c).max())
        if drift > amap.rtol * drift_scale(c, S_init):
            raise InvalidHyperparameterError(
                f"{amap.algorithm}: a conserved quantity of the round map drifts by {drift:.3e} "
                "per round (w^T c != 0 for a declared conserved w): no fixed point")
    lam = _checked_spectrum(amap, sub)
    k = sub.Q.shape[1]
    A = np.eye(k) - sub.M_V
    if amap.symmetric and k:                 # I - M_V symmetric: its singular values are |1 - lambda|
        gaps = np.abs(1.0 - lam)
        cond = float(gaps.max() / gaps.min()) if gaps.min() > 0 else float("inf")
    else:
        cond = float(np.linalg.cond(A)) if k else 1.0
    if not np.isfinite(cond) or cond > max_condition:
        raise InvalidHyperparameterError(
            f"{amap.algorithm}: I - M has condition number {cond:.3e} > max_condition="
            f"{max_condition:.1e} on the reachable subspace (dense route: state of {amap.dim} numbers, "
            f"invariant subspace of dimension {k}): the fixed point would carry a relative "
            f"error of about {cond * np.finfo(float).eps:.1e}")
    S, resid, steps = _refined_solution(amap, sub, A, S_init, r)
    return FixedPoint(
        x=S[amap.x_slice].copy(), residual=resid,
        spectral_rate=float(np.abs(lam).max()) if lam.size else 0.0,
        contraction_factor=_norm2(amap, sub), success=True,
        message=f"dense solve on the {k}-dimensional invariant subspace "
                f"({sub.n_conserved} declared conserved functionals), {steps} refinement "
                f"step(s) with the round map's own residual; M {amap.route}",
        method="dense affine", condition=cond, S=S, state=amap.to_state(S), initial=S_init,
        subspace=sub)


def _refined_solution(amap: AffineRoundMap, sub: InvariantSubspace, A: np.ndarray, S_init: np.ndarray,
                      r: np.ndarray, max_steps: int = 3) -> tuple[np.ndarray, float, int]:
    """S~ = S_init + Q z, (I - M_V) z = Q^T r, then iterative refinement with the
    residual of the round map itself, Phi(S) - S (not M S + c - S): the recovered
    M carries finite-difference rounding that the solve amplifies by
    cond(I - M_V); each step S <- S + Q (I - M_V)^{-1} Q^T (Phi(S) - S) removes
    that part, down to the rounding of one round times cond(I - M_V).  Keeps the
    iterate with the smallest round residual; returns (S, ||Phi(S) - S||_inf, steps)."""
    k = sub.Q.shape[1]
    if k == 0:
        S = S_init.copy()
        return S, float(np.abs(amap.round_map(S) - S).max(initial=0.0)), 0
    lu = scipy.linalg.lu_factor(A)
    S = S_init + sub.Q @ scipy.linalg.lu_solve(lu, sub.Q.T @ r)
    with np.errstate(all="ignore"):
        res = amap.round_map(S) - S
    best, best_norm, steps = S, float(np.abs(res).max()), 0
    for _ in range(max_steps):
        S = best + sub.Q @ scipy.linalg.lu_solve(lu, sub.Q.T @ res)
        with np.errstate(all="ignore"):
            new_res = amap.round_map(S) - S
        norm = float(np.abs(new_res).max())
        if not norm < best_norm:
            break
        best, best_norm, res, steps = S, norm, new_res, steps + 1
    return best, best_norm, steps


def spectral_rate(amap: Any) -> float:
    """rho(M_V): spectral radius of M on the subspace without the declared conserved
    directions (for SCAFFOLD, the eigenvalue 1 of N c - sum c_i is excluded).  Dense
    maps: an eigensolver on M_V (symmetric when ``amap.symmetric``); matrix-free maps:
    ``theory.matrix_free.spectral_rate``, or ``theory.powered_krylov.powered_rate``
    when the products are closed-form.

    Raises UnclassifiedDirectionError when M_V has an eigenvalue 1 to the
    resolution of its spectrum (module docstring)."""
    _check_affine_map(amap)
    if _is_matrix_free(amap):
        from . import matrix_free

        def krylov() -> float:
            return powered_rate(amap).rate if powered_applies(amap) else matrix_free.spectral_rate(amap)

        return with_dense_fallback(amap, "spectral rate", krylov, lambda dmap, note: spectral_rate(dmap))
    sub = _subspace(amap)
    lam = _checked_spectrum(amap, sub)
    return float(np.abs(lam).max()) if lam.size else 0.0


def contraction_factor(amap: Any) -> float:
    """||M_V||_2 = max over v in V of ||M v|| / ||v|| (Euclidean operator norm on V).
    Matrix-free maps: ``theory.matrix_free.contraction_factor`` (symmetric M only); a refusal
    on the automatic route is answered on the dense map (``theory._dense_fallback``)."""
    _check_affine_map(amap)
    if _is_matrix_free(amap):
        from . import matrix_free
        return with_dense_fallback(amap, "contraction factor", lambda: matrix_free.contraction_factor(amap),
                                   lambda dmap, note: contraction_factor(dmap))
    return _norm2(amap, _subspace(amap))


def orbit_rate(amap: Any, *, initial: Any = None, tol: float = 1e-9) -> float:
    """Asymptotic rate of the orbit from ``initial`` (default ``amap.base``): the
    largest |lambda_k| of M_V over the eigenvectors the initial error excites.

    With M_V = V diag(lambda) V^{-1} and a = V^{-1} Q^T (S_init - S~), the error
    after t rounds is Q V diag(lambda^t) a, so the rate is
    max {|lambda_k| : |a_k| > tol ||a||_inf}.  For a generic start this is
    :func:`spectral_rate`; a start whose error avoids the slowest modes decays
    faster.  Needs M_V diagonalizable: when its eigenvector matrix has condition
    number above 1e10 the spectral rate is returned (an upper bound) and a
    warning is logged.  A start within 1e3 machine epsilons (relative) of the
    fixed point returns 0.  Matrix-free maps: ``theory.matrix_free.orbit_rate``."""
    _check_affine_map(amap)
    tol = _checks.tolerance("tol", tol, below_one=True)
    if _is_matrix_free(amap):
        from . import matrix_free
        matrix_free.refuse_drift(amap, initial_vector(amap, initial))
        return with_dense_fallback(amap, "orbit rate", lambda: matrix_free.orbit_rate(amap, initial=initial, tol=tol),
                                   lambda dmap, note: orbit_rate(dmap, initial=initial, tol=tol))
    fp = fixed_point(amap, initial=initial)
    sub = fp.subspace
    assert isinstance(sub, InvariantSubspace) and fp.initial is not None and fp.S is not None
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
