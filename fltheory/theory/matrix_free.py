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

Block products.  When the federation offers ``Federation.lifted`` (quadratic
clients) and the algorithm keeps the copies apart (checked against single
rounds, :mod:`fltheory.theory.block_products`), one round of the lifted
federation applies M to ``block_size`` vectors (default 8 when the model
dimension is at least 50), reading every client's data once per local step for
all of them; otherwise M is applied one vector per round.  Below d = 50 the
elementwise passes of a round over the whole state outweigh the Hessian
products, and a block round costs about as much per vector as single rounds.

Invariant subspace.  The declared conserved functionals W (n, K)
(``Algorithm.linear_invariants`` via :mod:`fltheory.theory.invariants`) give
the orthogonal projector onto V = {v : W^T v = 0},

    P v = v - W (W^T W)^{-1} W^T v

(the Gram matrix W^T W is sparse and factorised once; declared functionals
that are linearly dependent make it singular and raise InvalidProblemError).
V is M-invariant, so P M P has the spectrum of M_V plus K zeros.

Krylov methods (:mod:`fltheory.theory.krylov`): a block Krylov space of P M P
with Rayleigh-Ritz, symmetric (Lanczos-type, with Kato-Temple error bounds
that are quadratic in the residual) when the algorithm declares its linear
part symmetric (``Algorithm.linear_part_is_symmetric``: FedAvg, FedProx;
checked here as |u^T M v - v^T M u| <= rtol (||u|| ||M v|| + ||v|| ||M u||)),
general (Arnoldi-type) otherwise.

* :func:`spectral_rate` / :func:`rate_estimate`: rho(M_V) from a Krylov space
  started at random vectors, grown until the error estimate of the rate is at
  most ``RATE_RTOL`` = 1e-12 relative (symmetric: Kato-Temple with an estimated
  gap; general: the Ritz residual, a bound for a normal M_V).  The estimate and
  its error are cached on the map; an eigenvalue within max(error, 16 eps) of 1
  is unclassified (UnclassifiedDirectionError), as on the dense route.
* :func:`fixed_point`: S~ = S_init + z with P (I - M) z = P r,
  r = Phi(S_init) - S_init, by a Galerkin solve on a Krylov space whose first
  vector is r (conjugate gradients when M_V is symmetric: I - M_V is then
  symmetric positive definite whenever the rate is below 1), refined with the
  residual of an actual round; the residual reported is ||Phi(S~) - S~||_inf.
  Its accuracy is read from the same Krylov run without forming M (condition: a lower
  bound on cond_2(I - M_V) from the projected matrix; error: an estimate, see
  ``theory._fixed_point_accuracy``) and refused above ``max_condition`` as on the dense route.
  With block products the same space also gives the rate (its other start
  columns are random).
* :func:`orbit_rate`: the initial error e0 = P (S_init - S~) lies in the block
  Krylov space the fixed point was solved on (for the default start, the space of
  the rate estimate: no further round), so its coefficients on that space's Ritz
  vectors tell which modes it excites; the largest converged Ritz value whose share
  of e0 certainly exceeds ``tol`` is the orbit's rate
  (:func:`~fltheory.theory.krylov.ritz_orbit_rate`).  When the space cannot decide,
  Arnoldi (no restarts, full reorthogonalisation) on M_V started at e0, one round
  per step: the Krylov space of e0 holds only the eigenvectors e0 excites.
* :func:`contraction_factor` (||M_V||_2): equal to the spectral rate when M_V is
  symmetric; otherwise it needs products with M^T, which a round does not give,
  and raises InvalidProblemError.

Affinity is verified matrix-free (:func:`matrix_free_affine_map`): additivity
M(u + v) = M u + M v, homogeneity at a small scale, the same map after the
round counters advance, and a perturbation of the computed fixed point
(checked in :func:`fixed_point`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

import scipy.sparse as sp

from .._validate import _short, integer
from ..algorithms.base import Algorithm, RoundInfo
from ..errors import InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ..participation import Participation
from ..problems.base import Federation
from . import _checks
from .affine_support import drift_scale, frozen_coordinates, initial_vector, refuse_unclassified
from .block_products import BlockProduct, block_product
from .fixed_points import FixedPoint
from ._fixed_point_accuracy import refuse_inaccurate, solve_accuracy
from ._krylov_refinement import krylov_correction
from .krylov import DominantEigenvalues, KrylovResult, block_krylov, projected_singular_values, ritz_orbit_rate
from .invariants import ConservedFunctionals, check_conserved, conserved_functionals
from .round_maps import RoundMap, StateLayout, counters_of, round_map

__all__ = [
    "MatrixFreeAffineMap",
    "Projector",
    "contraction_factor",
    "fixed_point",
    "matrix_free_affine_map",
    "orbit_rate",
    "rate_estimate",
    "spectral_rate",
]

_SMALL_SCALE = 1e-3
BLOCK_SIZE = 8        # vectors per block round (default)
BLOCK_MIN_DIM = 50    # below this model dimension a block round costs about as much per vector as
                      # single rounds (elementwise passes over the state dominate the Hessian
                      # products; measured SCAFFOLD N = 2000, d = 20: 1.1x per vector; d = 100: 0.44x)
_NEAR_FIXED = 1e-2
#: Corrections on a fresh Krylov space of the residual after the Galerkin ones (``_krylov_refinement``).
RESTARTED_REFINEMENTS = 2
#: Residual (in eps ||S||_inf) below which no such correction is tried: the rounding level of a round.
_ROUNDING_RESIDUAL = 4.0


class Projector:
    """P = I - W (W^T W)^{-1} W^T, the orthogonal projector onto V = ker W^T.

    ``funcs``: the declared conserved functionals (``ConservedFunctionals``, W a sparse
    (n, K) matrix of finite real coefficients); ``algorithm``: the algorithm's name (for
    messages).  InvalidProblemError for anything else, or dependent functionals."""

    def __init__(self, funcs: ConservedFunctionals, algorithm: str) -> None:
        _check_functionals(funcs)
        if not isinstance(algorithm, str):
            raise InvalidHyperparameterError(
                f"algorithm must be the algorithm's name (a str), got {_short(algorithm)} "
                f"({type(algorithm).__name__})")
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


def _check_functionals(funcs: Any) -> None:
    """``funcs`` a ConservedFunctionals whose W is a sparse 2-D matrix of finite real numbers."""
    if not isinstance(funcs, ConservedFunctionals):
        raise InvalidProblemError(
            f"funcs must be a ConservedFunctionals (from fltheory.theory.invariants.conserved_functionals), "
            f"got {_short(funcs)} ({type(funcs).__name__})")
    W = funcs.W
    if not sp.issparse(W) or W.ndim != 2:
        raise InvalidProblemError(f"funcs.W must be a 2-D scipy.sparse matrix (n, K), got {_short(W)}")
    if not (np.issubdtype(W.dtype, np.floating) or np.issubdtype(W.dtype, np.integer)) \
            or not np.all(np.isfinite(W.data)):
        raise InvalidProblemError(
            f"funcs.W must hold finite real coefficients, got dtype {W.dtype} "
            f"{'with non-finite entries' if W.dtype.kind in 'fc' else ''}".rstrip())
    if len(funcs.names) and not all(isinstance(name, str) for name in funcs.names):
        raise InvalidProblemError(f"funcs.names must be strings, got {_short(funcs.names)}")


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
    symmetric : bool, M declared symmetric by the algorithm and checked
    block : BlockProduct or None, M applied to several vectors per round
    block_note : str, why block products are (not) used
    dense_fallback : DenseFallback or None, set when ``affine_round_map`` chose this route
        automatically: the routines of ``theory.affine`` then solve a refused problem on the
        dense map instead (``theory._dense_fallback``)
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
    symmetric: bool = False
    block: BlockProduct | None = field(default=None, repr=False)
    block_note: str = ""
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    dense_fallback: Any = field(default=None, repr=False, compare=False)

    @property
    def block_size(self) -> int:
        """Vectors per round of :meth:`apply_linear` (1 without block products)."""
        return 1 if self.block is None else self.block.copies

    @property
    def rounds(self) -> int:
        """Rounds evaluated so far: single rounds plus block rounds (each counts once)."""
        return self.round_map.evaluations + (0 if self.block is None else self.block.rounds)

    def apply_linear(self, V: np.ndarray) -> np.ndarray:
        """M V for V of shape (n,) or (n, p): one round per ``block_size`` columns."""
        V = np.asarray(V, dtype=np.float64)
        if V.ndim == 1:
            return self._apply_one(V)
        if self.block is None or V.shape[1] == 1:
            return np.column_stack([self._apply_one(V[:, j]) for j in range(V.shape[1])])
        b = self.block.copies
        return np.column_stack([self.block(V[:, j:j + b]) for j in range(0, V.shape[1], b)])

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


#: Most vectors one block round may carry (each copy of the state is held in memory at once).
MAX_BLOCK_SIZE = 256


def matrix_free_affine_map(algorithm: Algorithm, problem: Federation, *, x0: Any = None,
                           rtol: float = 1e-9, state: Any = None,
                           participation: Participation | None = None,
                           rng: np.random.Generator | None = None,
                           block_size: int | None = None) -> MatrixFreeAffineMap:
    """The affine round map of ``algorithm`` on ``problem`` as an operator (module docstring).

    Same arguments and errors as ``theory.affine.affine_round_map`` (without
    ``max_dim``): NotAffineError when a check fails; InvalidProblemError when the
    algorithm declares a symmetric linear part that is not.  ``block_size``: vectors
    per round when the federation offers block products (1 disables them); None
    (default) uses ``BLOCK_SIZE`` when the model dimension is at least
    ``BLOCK_MIN_DIM`` and single rounds below (module docstring).
    Costs about 12 rounds (2 more with block products)."""
    rtol = _checks.tolerance("rtol", rtol)
    rng = _checks.optional_generator("rng", rng)
    if block_size is not None and (isinstance(block_size, (bool, np.bool_))
                                   or not isinstance(block_size, (int, np.integer))
                                   or not 1 <= block_size <= MAX_BLOCK_SIZE):
        raise InvalidHyperparameterError(
            f"block_size must be None or an integer in [1, {MAX_BLOCK_SIZE}] (vectors per round), "
            f"got {_short(block_size)}")
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
    symmetric = bool(algorithm.linear_part_is_symmetric(problem))
    if symmetric:
        asym = abs(float(u @ Mv) - float(v @ Mu)) / (
            float(np.linalg.norm(u) * np.linalg.norm(Mv) + np.linalg.norm(v) * np.linalg.norm(Mu))
            + np.finfo(float).tiny)
        residuals["symmetry"] = asym
        if not asym <= rtol:
            raise InvalidProblemError(
                f"{algorithm.name} declares a symmetric linear part (Algorithm.linear_part_is_symmetric) "
                f"but |u^T M v - v^T M u| is {asym:.3e} relative > rtol={rtol:.1e}")
    c = F0 - amap.apply_linear(S0)
    before, after = counters_of(rm.template), counters_of(nxt)
    counter_step = {p: np.asarray(after[p]) - np.asarray(before[p]) for p in before}
    if block_size is None:
        block_size = BLOCK_SIZE if problem.dim >= BLOCK_MIN_DIM else 1
    block, note = block_product(algorithm, problem, rm, S0, h, frozen, int(block_size),
                                np.column_stack([u, v]), np.column_stack([Mu, Mv]), rtol)
    if block is None and block_size == 1 and problem.dim < BLOCK_MIN_DIM:
        note = f"single rounds (model dimension {problem.dim} < {BLOCK_MIN_DIM})"
    return MatrixFreeAffineMap(
        dim=n, layout=rm.layout, x_slice=rm.x_slice, base=S0, F0=F0, c=c, step=h,
        residual=max(residuals.values()), residuals=residuals, algorithm=algorithm.name,
        warmup=rm.warmup, counter_step=counter_step, info=info, round_map=rm, frozen=frozen,
        frozen_fields=tuple(p for p in rm.layout.paths if frozen[rm.layout.slices[p]].all()),
        rtol=rtol, projector=proj, symmetric=symmetric, block=block, block_note=note)


RATE_RTOL = 1e-12       # relative error estimate at which the spectral rate is accepted
SOLVE_RTOL = 1e-13      # relative residual of the Krylov fixed-point solve
MAX_KRYLOV_BYTES = 1 << 30   # memory of the stored Krylov basis and its products


#: Largest Arnoldi dimension :func:`orbit_rate` accepts (its basis is dense, n x (krylov_dim + 1)).
MAX_ORBIT_KRYLOV_DIM = 10_000

#: Most refinement steps :func:`fixed_point` accepts as ``maxiter`` (at most 3 are used).
MAX_REFINEMENT = 10**6


def _check_map(amap: Any) -> MatrixFreeAffineMap:
    """``amap`` a MatrixFreeAffineMap (typed error otherwise: the entry check of every routine)."""
    if not isinstance(amap, MatrixFreeAffineMap):
        raise InvalidHyperparameterError(
            f"amap must be a MatrixFreeAffineMap (from fltheory.theory.matrix_free_affine_map or "
            f"affine_round_map(..., matrix_free=True)), got {_short(amap)} ({type(amap).__name__})")
    return amap


def _max_vectors(amap: MatrixFreeAffineMap) -> int:
    """Largest Krylov dimension: the subspace dimension, 1000 columns, or the memory cap."""
    free = amap.dim - amap.projector.count - int(np.count_nonzero(amap.frozen))
    return int(max(8, min(free, 1000, MAX_KRYLOV_BYTES // (16 * amap.dim))))


def _start_block(amap: MatrixFreeAffineMap, columns: int, seed: int) -> np.ndarray:
    gen = np.random.default_rng(seed)
    return np.where(amap.frozen[:, None], 0.0, gen.standard_normal((amap.dim, columns)))


def _check_dominant(amap: MatrixFreeAffineMap, eig: DominantEigenvalues) -> None:
    """UnclassifiedDirectionError for a leading Ritz value within its error (at least 16 eps) of 1."""
    for value in eig.values:
        resolution = max(eig.error, 16.0 * np.finfo(float).eps * max(1.0, abs(value)))
        refuse_unclassified(np.array([value]), resolution, amap.algorithm, amap.projector.names)


def rate_tolerance(amap: MatrixFreeAffineMap, rate: float) -> float:
    """Accepted error of the spectral rate: RATE_RTOL relative, but not below 100 times the
    rounding level of one product (the 'additivity' residual measured at construction,
    at least 16 eps), which no Krylov space can beat."""
    noise = max(amap.residuals.get("additivity", 0.0), 16.0 * np.finfo(float).eps)
    return max(RATE_RTOL * rate, 100.0 * noise * max(1.0, rate))


def _store(amap: MatrixFreeAffineMap, eig: DominantEigenvalues, blocks: int, invariant: bool
           ) -> DominantEigenvalues:
    """Check and cache a rate.  An invariant Krylov space (it cannot grow) is accepted with
    the rounding-level error it reports, up to 1e-8 relative."""
    _check_dominant(amap, eig)
    accepted = max(rate_tolerance(amap, eig.rate), 1e-8 * max(eig.rate, 1.0) if invariant else 0.0)
    if eig.error > accepted:
        raise InvalidProblemError(
            f"{amap.algorithm}: the spectral rate did not converge: {eig.rate:.15g} with error estimate "
            f"{eig.error:.2e} after a Krylov space of {eig.dimension} vectors ({blocks} block products); "
            "use the dense route (matrix_free=False)")
    amap.cache["dominant"] = eig
    return eig


def _krylov_run(amap: MatrixFreeAffineMap, S_init: np.ndarray, want_eig: bool, solve_tol: float) -> Any:
    """One block Krylov space started at [r, random columns], r = P (Phi(S_init) - S_init):
    the Galerkin fixed point and (``want_eig``) the rate from the same space.  At least two
    start columns (single products cost one round per column either way)."""
    r = amap.projector(amap(S_init) - S_init)
    start = _start_block(amap, max(2, amap.block_size), 0)
    return block_krylov(amap.apply_linear, amap.projector, start, symmetric=amap.symmetric, rhs=r,
                        want_eig=want_eig, eig_tol=lambda rate: rate_tolerance(amap, rate),
                        solve_tol=solve_tol, max_vectors=_max_vectors(amap))


def rate_estimate(amap: MatrixFreeAffineMap) -> DominantEigenvalues:
    """rho(M_V) with its error estimate (module docstring; computed once per map and cached,
    together with the fixed point reachable from ``amap.base``, from the same space).

    Raises
    ------
    InvalidProblemError
        The state is too small for a Krylov method, or the estimate does not reach
        its tolerance (:func:`rate_tolerance`) within the largest Krylov space
        (``MAX_KRYLOV_BYTES``).
    UnclassifiedDirectionError
        A leading eigenvalue cannot be told from 1.
    """
    _check_map(amap)
    if "dominant" in amap.cache:
        return amap.cache["dominant"]
    n = amap.dim
    if n <= 8 + amap.projector.count:
        raise InvalidProblemError(
            f"{amap.algorithm}: the state has only {n} numbers; use the dense route (matrix_free=False)")
    res = _krylov_run(amap, np.array(amap.base), True, SOLVE_RTOL)
    assert res.eig is not None
    amap.cache["base_run"] = res
    return _store(amap, res.eig, res.blocks, res.invariant)


def spectral_rate(amap: MatrixFreeAffineMap) -> float:
    """rho(M_V) by a Krylov method (module docstring; :func:`rate_estimate` gives its error)."""
    _check_map(amap)
    return float(rate_estimate(amap).rate)


def contraction_factor(amap: MatrixFreeAffineMap) -> float:
    """||M_V||_2: the spectral rate when M_V is symmetric (declared and checked); otherwise
    it needs M^T, which a round does not give: raises InvalidProblemError."""
    if _check_map(amap).symmetric:
        return spectral_rate(amap)
    raise InvalidProblemError(
        f"{amap.algorithm}: the contraction factor ||M_V||_2 needs products with M^T, which the "
        "matrix-free map does not provide; use the dense route (affine_round_map(..., matrix_free=False))")


def fixed_point(amap: MatrixFreeAffineMap, *, initial: Any = None, max_condition: float = 1e13,
                gmres_rtol: float = 1e-13, maxiter: int = 50) -> FixedPoint:
    """S~ = S_init + z with P (I - M) z = P (Phi(S_init) - S_init) by a Krylov Galerkin solve
    (module docstring).

    Accuracy (``theory._fixed_point_accuracy``): ``condition`` is sigma_max / sigma_min of the
    Krylov space's projected matrix Hbar, a LOWER bound on cond_2(I - M_V)
    (``condition_kind`` "lower bound"; equal to the dense route's value once the space holds
    the extreme singular vectors), and ``error_estimate`` an ESTIMATE of the relative error
    ||S~ - S*||_2 / ||S~||_2 from the residual of an actual round and a reading of
    ||(I - M_V)^{-1}||_2 (for a symmetric M_V from the rate's error bound).  As on the dense
    route, a fixed point whose readings exceed ``max_condition`` (condition above it, or an
    estimated error above max_condition * eps) is refused with InvalidHyperparameterError
    rather than returned.
    ``gmres_rtol`` is the relative residual the Krylov solve must reach (or, when products
    carry more rounding than that allows, noise * cond(Hbar), the level a backward-stable
    solve reaches: the accuracy readings then decide);
    ``maxiter`` bounds the refinement steps with the residual of actual rounds
    (at most 3 are used; an integer in [0, ``MAX_REFINEMENT``]).

    Raises
    ------
    InvalidHyperparameterError
        A conserved quantity drifts (no fixed point); the accuracy readings exceed
        ``max_condition`` (the fixed point cannot be trusted); or an argument is not of its
        kind: ``amap`` not a MatrixFreeAffineMap, ``max_condition`` not a finite
        number > 1, ``gmres_rtol`` not in (0, 1), ``maxiter`` not an integer in range
        (``initial`` not a finite state: InvalidProblemError).
    InvalidProblemError
        The spectral rate is >= 1 (the solution would not be the limit of the
        rounds, and need not be unique), or the Krylov solve does not reach
        ``gmres_rtol``, or the fixed point fails the affinity check near it.
    UnclassifiedDirectionError
        As :func:`spectral_rate`.
    """
    _check_map(amap)
    _checks.condition_limit("max_condition", max_condition)
    gmres_rtol = _checks.tolerance("gmres_rtol", gmres_rtol, below_one=True)
    maxiter = integer("maxiter", maxiter, minimum=0, maximum=MAX_REFINEMENT)
    S_init = initial_vector(amap, initial)
    refuse_drift(amap, S_init)
    cached = amap.cache.get("base_run")
    if initial is None and cached is not None and cached.solve_residual <= gmres_rtol:
        res = cached
    else:
        res = _krylov_run(amap, S_init, "dominant" not in amap.cache, gmres_rtol)
        if res.eig is not None:
            _store(amap, res.eig, res.blocks, res.invariant)
    return _fixed_point_from(amap, S_init, res, gmres_rtol, maxiter, max_condition)


def refuse_drift(amap: MatrixFreeAffineMap, S_init: np.ndarray) -> None:
    """InvalidHyperparameterError when a declared conserved quantity drifts (w^T c != 0)."""
    P = amap.projector
    if P.count:
        drift = float(np.abs(P.coefficients(amap.c)).max())
        wmax = float(np.abs(P.W.data).max()) if P.W.nnz else 1.0
        if drift > amap.rtol * wmax * drift_scale(amap.c, S_init):
            raise InvalidHyperparameterError(
                f"{amap.algorithm}: a conserved quantity of the round map drifts by {drift:.3e} per "
                "round (w^T c != 0 for a declared conserved w): no fixed point")


def refined_fixed_point(amap: MatrixFreeAffineMap, res: KrylovResult, S: np.ndarray,
                        rhs: Callable[[np.ndarray], np.ndarray], steps_max: int
                        ) -> tuple[np.ndarray, float, int, np.ndarray]:
    """(S, ||Phi(S) - S||_inf, refinement steps, Phi(S) - S) from a Krylov solution S: up to ``steps_max`` Galerkin
    corrections on the same space with the residual r = Phi(S) - S of an actual round (right-hand side
    ``rhs(r)``), kept while they lower it; then up to ``RESTARTED_REFINEMENTS`` corrections solved on a
    fresh Krylov space of r (:mod:`fltheory.theory._krylov_refinement`; at most ``steps_max``, skipped once
    ||r||_inf is within ``_ROUNDING_RESIDUAL`` eps of ||S||_inf), kept likewise; then the affinity check near
    the fixed point (the map's prediction at S and at a perturbed point against actual rounds,
    NotAffineError above ``rtol``)."""
    P = amap.projector
    out = amap.round_map(S)
    resid = float(np.abs(out - S).max())
    steps = 0
    for _ in range(steps_max):
        z, _ = res.space.galerkin(rhs(out - S), P, amap.symmetric)
        S2 = S + P(z)
        out2 = amap.round_map(S2)
        r2 = float(np.abs(out2 - S2).max())
        if not r2 < resid:
            break
        S, out, resid, steps = S2, out2, r2, steps + 1
    for _ in range(min(RESTARTED_REFINEMENTS, steps_max)):   # on a fresh Krylov space of the residual
        if resid <= _ROUNDING_RESIDUAL * np.finfo(float).eps * max(1.0, float(np.abs(S).max())):
            break
        zr = krylov_correction(amap, P(out - S))
        if zr is None:
            break
        S2 = S + zr
        out2 = amap.round_map(S2)
        r2 = float(np.abs(out2 - S2).max())
        if not r2 < resid:
            break
        S, out, resid, steps = S2, out2, r2, steps + 1
    near = _relative(out, amap(S), out, amap.F0)
    if not near <= amap.rtol:
        raise NotAffineError(
            f"{amap.algorithm} is not affine on this problem: matrix-free check 'near fixed point' has "
            f"relative residual {near:.3e} > rtol={amap.rtol:.1e}")
    hf = _NEAR_FIXED * max(1.0, float(np.abs(S).max()))
    pert = S + hf * np.where(amap.frozen, 0.0, np.random.default_rng(1).standard_normal(amap.dim))
    near2 = _relative(amap.round_map(pert), amap(pert), out, amap.F0)
    if not near2 <= amap.rtol:
        raise NotAffineError(
            f"{amap.algorithm} is not affine on this problem: matrix-free check 'near fixed point' has "
            f"relative residual {near2:.3e} > rtol={amap.rtol:.1e}")
    return S, resid, steps, out - S


def solve_rounding_level(amap: MatrixFreeAffineMap, res: KrylovResult) -> float:
    """The relative residual a Krylov solve can reach when every product carries a relative
    rounding ``noise`` (the map's 'additivity' residual, at least eps): a backward-stable
    solve leaves noise ||I - M_V|| ||z|| / ||P r|| <= noise cond_2(I - M_V), read here as
    noise sigma_max(Hbar) / sigma_min(Hbar) (a lower bound on the condition number,
    :func:`fltheory.theory.krylov.projected_singular_values`).  Only computed when the solve
    stopped above its tolerance (ill-conditioned maps)."""
    noise = max(amap.residuals.get("additivity", 0.0), float(np.finfo(float).eps))
    if res.dimension == 0:
        return noise
    sigma_max, sigma_min = projected_singular_values(res)
    return noise * sigma_max / sigma_min if sigma_min > 0.0 else float("inf")


def _fixed_point_from(amap: MatrixFreeAffineMap, S_init: np.ndarray, res: KrylovResult, gmres_rtol: float,
                      maxiter: int, max_condition: float = 1e13) -> FixedPoint:
    """The fixed point from the Galerkin solution of a Krylov run started at S_init (checked
    arguments), refined with actual rounds and checked for affinity near it."""
    P = amap.projector
    eig = rate_estimate(amap)
    rate = float(eig.rate)
    if rate >= 1.0:
        raise InvalidProblemError(
            f"{amap.algorithm}: the round map does not contract on the invariant subspace (spectral "
            f"rate {rate:.12g} >= 1); the matrix-free fixed point needs a contraction to certify a "
            "unique solution: use the dense route (matrix_free=False)")
    reachable = max(gmres_rtol, solve_rounding_level(amap, res))
    if res.z is None and res.solve_residual <= reachable:
        # the space became invariant before the solve met gmres_rtol: its Galerkin solution
        z, solve_residual = res.space.galerkin(amap(S_init) - S_init, P, amap.symmetric)
        res = dataclasses.replace(res, z=z, solve_residual=solve_residual)
    if not res.solve_residual <= reachable or res.z is None:
        raise InvalidProblemError(
            f"{amap.algorithm}: the Krylov solve did not reach relative residual {reachable:.1e} for the "
            f"fixed point (got {res.solve_residual:.2e} with {res.dimension} vectors; spectral rate "
            f"{rate:.12g}); use the dense route (matrix_free=False)")
    S, resid, steps, r = refined_fixed_point(amap, res, S_init + P(res.z), lambda v: v, min(3, maxiter))
    acc = solve_accuracy(amap, res, S, r, rate, float(eig.error), lambda v: v, powered=False)
    refuse_inaccurate(amap, acc, max_condition)
    kind = "conjugate-gradient (symmetric M)" if amap.symmetric else "Galerkin (full orthogonalisation)"
    cf = rate if amap.symmetric else None
    return FixedPoint(
        x=S[amap.x_slice].copy(), residual=resid, spectral_rate=rate, contraction_factor=cf,
        success=True,
        message=f"matrix-free: {kind} solve on a block Krylov space of {res.dimension} vectors "
                f"({amap.block_size} per round; {amap.block_note or 'single rounds'}) on the subspace "
                f"without {P.count} declared conserved functionals, {steps} refinement step(s); "
                f"spectral rate {rate:.15g} +- {eig.error:.1e}"
                + ("" if amap.symmetric else "; contraction_factor not computed (needs M^T)")
                + f"; {acc.note}",
        method="matrix-free affine", condition=acc.condition, S=S, state=amap.to_state(S), initial=S_init,
        subspace=P, spectral_rate_error=float(eig.error), condition_kind=acc.condition_kind,
        error_estimate=acc.error, error_estimate_kind=acc.error_kind)


def orbit_rate(amap: MatrixFreeAffineMap, *, initial: Any = None, tol: float = 1e-9,
               krylov_dim: int = 80, converged: float = 1e-8) -> float:
    """Asymptotic rate of the orbit from ``initial``: the largest |lambda_k| of M_V over the
    eigenvectors the initial error e0 = P (S_init - S~) excites (share of e0 above ``tol``,
    relative), as on the dense route.

    First from the block Krylov space the fixed point is solved on (block products when the
    map has them; no extra round for ``initial=None``, whose space the rate estimate already
    built): e0 lies in that space, and its coefficients on the Ritz vectors decide which
    modes it excites (:func:`fltheory.theory.krylov.ritz_orbit_rate`).  When that cannot
    decide (a Ritz pair not converged to ``converged`` relative to ||M_V||, or a coefficient
    within its estimated error of the threshold), Arnoldi on M_V started at e0 itself, one
    round per step, up to ``krylov_dim`` steps (module docstring): the Krylov space of e0 holds
    only the eigenvectors e0 excites.

    ``tol`` and ``converged`` lie in (0, 1); ``krylov_dim`` is an integer in
    [1, ``MAX_ORBIT_KRYLOV_DIM``] (capped further by the state dimension and by
    ``MAX_KRYLOV_BYTES`` of basis memory).  How the rate was found is recorded in
    ``amap.cache["orbit_method"]`` (``"fixed-point space"`` or ``"arnoldi"``).

    Raises InvalidProblemError when the excited dominant Ritz value has not converged
    within ``krylov_dim`` Arnoldi steps, InvalidHyperparameterError for an argument of the
    wrong kind (named in the message); otherwise as :func:`fixed_point`."""
    _check_map(amap)
    tol = _checks.tolerance("tol", tol, below_one=True)
    converged = _checks.tolerance("converged", converged, below_one=True)
    krylov_dim = integer("krylov_dim", krylov_dim, minimum=1, maximum=MAX_ORBIT_KRYLOV_DIM)
    if 8 * amap.dim * (min(krylov_dim, amap.dim) + 1) > MAX_KRYLOV_BYTES:
        raise InvalidHyperparameterError(
            f"krylov_dim={krylov_dim} needs an Arnoldi basis of {amap.dim} x {min(krylov_dim, amap.dim) + 1} "
            f"numbers, more than MAX_KRYLOV_BYTES={MAX_KRYLOV_BYTES} bytes; use a smaller krylov_dim")
    S_init = initial_vector(amap, initial)
    refuse_drift(amap, S_init)
    if amap.dim <= 8 + amap.projector.count:
        rate_estimate(amap)                      # the typed refusal of a state too small
    if initial is None:
        rate_estimate(amap)                      # cached; its space is that of amap.base
    cached = amap.cache.get("base_run")
    if initial is None and cached is not None and cached.solve_residual <= SOLVE_RTOL:
        res = cached
    else:                    # one space for the solve and the orbit (its Ritz pairs grown as for the rate)
        res = _krylov_run(amap, S_init, True, SOLVE_RTOL)
        eig = res.eig
        assert eig is not None
        if "dominant" not in amap.cache and eig.error <= max(
                rate_tolerance(amap, eig.rate), 1e-8 * max(eig.rate, 1.0) if res.invariant else 0.0):
            _store(amap, eig, res.blocks, res.invariant)   # else rate_estimate builds its own space
    fp = _fixed_point_from(amap, S_init, res, SOLVE_RTOL, 50)
    assert fp.S is not None
    P = amap.projector
    e0 = P(S_init - fp.S)
    if float(np.abs(e0).max(initial=0.0)) <= 1e3 * np.finfo(float).eps * max(1.0, float(np.abs(fp.S).max())):
        return 0.0
    rate = ritz_orbit_rate(res.space, e0, symmetric=amap.symmetric, tol=tol, converged=converged)
    if rate is not None:
        amap.cache["orbit_method"] = "fixed-point space"
        return rate
    amap.cache["orbit_method"] = "arnoldi"
    return _arnoldi_orbit_rate(amap, e0, tol, krylov_dim, converged)


def _arnoldi_orbit_rate(amap: MatrixFreeAffineMap, e0: np.ndarray, tol: float, krylov_dim: int,
                        converged: float) -> float:
    """Arnoldi (no restarts, full reorthogonalisation) on M_V from e0, one round per step:
    the largest |theta| over converged Ritz pairs whose share of e0 exceeds ``tol``."""
    P = amap.projector
    norm0 = float(np.linalg.norm(e0))
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
