"""The FedOpt operator T and its fixed points when T is not affine (docs/theory/fixed-points.md).

LocalAdaptivity, eq. 6 (restated in docs/theory/fixed-points.md): O_i(x) is the model after
tau_i ClientOpt steps from x with a restarted optimizer state, and

    T(x) = sum_i p_i O_i(x);

FedOpt with server GD of rate eta_s is the Mann iteration
x <- (1 - eta_s) x + eta_s T(x), and server optimizers change the iteration,
not the fixed points of T.  Here T is evaluated as *one round of the
algorithm with the server step replaced by plain averaging* (server rate 1,
full participation, exact gradients):

    T(x) = x + sum_i w_i Delta_i(x)              (correction "none"),
    T(x) = x + sum_i w_i Delta~_i(x)             ("local"),
    T(x) = x + (sum w_i M_i)^{-1} sum w_i Delta~_i  ("joint"),

so the fixed points of T are those of the algorithm with any server
optimizer; with correction "none" T is sum p_i O_i (LocalAdaptivity eq. 6).  This is
non-linear for logistic clients, adaptive client optimizers (AdaGrad, Adam,
Yogi) and l1 terms.

* :func:`operator_fixed_point`: root of T(x) - x by ``scipy.optimize.root``
  with ``method="hybr"`` (MINPACK's Powell hybrid method, forward-difference
  Jacobian), cross-checked by Anderson acceleration (memory 5,
  :func:`anderson_fixed_point`) of the damped (Mann) iteration
  x <- (1 - a) x + a T(x), a = 1/2 by default; a disagreement raises or is
  reported in the result (``strict_cross_check``); the Jacobian of T at the fixed
  point by central differences with step h_j = eps^(1/3) max(1, |x_j|)
  (truncation O(h^2) balanced against rounding eps/h); local contraction
  factor ||J||_2 and spectral radius rho(J).
* :func:`lipschitz_ratios`: ||O_i(x) - O_i(y)|| / ||x - y|| over sampled
  pairs (Assumption 1 of LocalAdaptivity), next to the SGD bound (1 - eta_i mu_i)^tau_i
  of :func:`sgd_contraction_bound`.
* :func:`minimizer_inconsistency`: ||x~(eta) - x*|| as a function of the
  client rate (LocalAdaptivity section 4: the non-vanishing bias of local adaptivity
  and its removal by local correction).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
import scipy.optimize

from .._validate import (choice, finite_array, flag, in_unit_interval, instance, integer, per_client, positive,
                         real_array)
from ..algorithms.base import Algorithm, resolve_per_client
from ..errors import (AssumptionError, DivergenceError, InvalidHyperparameterError, InvalidProblemError,
                      OutOfRangeError)
from ..problems.base import Federation
from . import _checks
from .fixed_points import FixedPoint
from .operator_newton import central_difference_jacobian, continuation_fixed_point, newton_krylov_fixed_point
from .round_maps import _deterministic_round, check_deterministic_setting, state_layout
from ..aliases import ClientSelection, Rate, Steps

__all__ = [
    "FedOptOperator", "OperatorFixedPoint", "LipschitzRatios", "Inconsistency",
    "fedopt_operator", "operator_fixed_point", "anderson_fixed_point", "operator_jacobian",
    "lipschitz_ratios", "sgd_contraction_bound", "minimizer_inconsistency",
]

logger = logging.getLogger(__name__)

# Anderson safeguard: an accelerated step longer than this many damped steps a ||f||
# (a contraction factor within 1e-8 of 1) is replaced by the damped step.
_ANDERSON_MAX_STEP_RATIO = 1e8

_FD_STEP = np.finfo(float).eps ** (1.0 / 3.0)


@dataclass(frozen=True, eq=False)
class FedOptOperator:
    """T(x): one averaging round of ``algorithm`` from server model x (module docstring).

    Call ``T(x)`` on a (d,) vector; ``T.client_maps(X)`` gives O_i for the rows
    of X (FedAvg and FedOpt only); ``T.evaluations`` counts rounds.
    """

    algorithm: Algorithm
    averaging: Algorithm
    problem: Federation
    template: Any
    counter: list = dataclasses.field(default_factory=lambda: [0])

    @property
    def dim(self) -> int:
        return self.problem.dim

    @property
    def evaluations(self) -> int:
        return self.counter[0]

    def __call__(self, x: Any) -> np.ndarray:
        x = real_array("x", x, InvalidProblemError).astype(np.float64, copy=False)
        if x.shape != (self.problem.dim,):
            raise InvalidProblemError(f"x must have shape ({self.problem.dim},), got {x.shape}")
        state = dataclasses.replace(self.template, x=x.copy())
        new, _ = _deterministic_round(self.averaging, self.problem, state)
        self.counter[0] += 1
        return np.asarray(new.x, dtype=np.float64)

    def residual(self, x: ArrayLike) -> np.ndarray:
        """T(x) - x."""
        Tx = self(x)
        return Tx - np.asarray(x, dtype=np.float64)

    def client_maps(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """O_i(X[r]) for the listed clients (all by default), vectorized -> (m, d).

        FedAvg: tau_i SGD steps of rate eta_i; FedOpt: tau_i steps of the client
        optimizer from a fresh ``init`` with rate scale s_i (LocalAdaptivity eq. 3).
        The uncorrected client models (Assumption 1 is about O_i)."""
        from ..algorithms.fedavg import FedAvg
        from ..algorithms.fedopt import FedOpt
        from ..algorithms.local import local_descent

        p = self.problem
        idx = p._clients(clients)
        X0 = p._points(X, idx.shape[0]).copy()
        steps = self.algorithm.nominal_steps(p)[idx]
        if isinstance(self.algorithm, FedOpt):
            scale = resolve_per_client("client_lr_scale", self.algorithm.client_lr_scale, p.n_clients)[idx]
            Y, _ = local_descent(p, X0, idx, steps, scale, None, optimizer=self.algorithm.client_optimizer)
        elif isinstance(self.algorithm, FedAvg):
            lr = resolve_per_client("lr", self.algorithm.lr, p.n_clients)[idx]
            Y, _ = local_descent(p, X0, idx, steps, lr, None)
        else:
            raise InvalidHyperparameterError(
                f"client maps O_i are available for FedAvg and FedOpt, got {self.algorithm.name}")
        return Y


def fedopt_operator(algorithm: Algorithm, problem: Federation, *, x0: ArrayLike | None = None) -> FedOptOperator:
    """The operator T of LocalAdaptivity eq. 6 for ``algorithm`` on ``problem`` (module docstring).

    The algorithm's state must be its server model (plus server-optimizer
    state without float fields after the switch to plain averaging); the
    federation must have an exact oracle.

    Raises
    ------
    InvalidProblemError
        Stochastic oracle (T is defined with exact gradients here; E[O_i] of a
        stochastic client is not computed).
    InvalidHyperparameterError
        Persisted client state, temporal-ensembling targets, or a state that
        carries more than the server model (use ``round_map``).
    """
    if not isinstance(algorithm, Algorithm):
        raise InvalidHyperparameterError(
            f"algorithm must be an fltheory Algorithm, got {type(algorithm).__name__}")
    if not isinstance(problem, Federation):
        raise InvalidProblemError(f"problem must be a Federation, got {type(problem).__name__}")
    check_deterministic_setting(problem, None)
    x0 = np.zeros(problem.dim) if x0 is None else _checks.server_model("x0", x0, problem.dim)
    avg = algorithm.averaging_version()
    template = avg.init(problem, x0, np.random.default_rng(0))
    layout = state_layout(template)
    if layout.paths != ("x",):
        raise InvalidHyperparameterError(
            f"{algorithm.name}'s state carries {list(layout.paths)}, not only the server model x: "
            "it is not an operator on x (use fltheory.theory.round_map on the full state)")
    return FedOptOperator(algorithm=algorithm, averaging=avg, problem=problem, template=template)


def _point(name: str, value: Any, T: Any) -> np.ndarray:
    """A finite 1-D point (of T's dimension when T is a FedOptOperator), as a float64 copy."""
    x = finite_array(name, value, ndim=1, error=InvalidProblemError).copy()
    if isinstance(T, FedOptOperator) and x.shape != (T.dim,):
        raise InvalidProblemError(f"{name} must have shape ({T.dim},), got {x.shape}")
    if x.size == 0:
        raise InvalidProblemError(f"{name} must not be empty")
    return x


def operator_jacobian(T: Callable[[np.ndarray], np.ndarray], x: ArrayLike, *,
                      step: float | None = None) -> np.ndarray:
    """Central-difference Jacobian of T at x: column j = (T(x + h_j e_j) - T(x - h_j e_j)) / (2 h_j),
    h_j = step * max(1, |x_j|), step = eps^(1/3) by default (2 d evaluations).

    Raises DivergenceError when a column is non-finite (never returns NaN)."""
    if not callable(T):
        raise InvalidHyperparameterError(f"T must be a FedOptOperator or a callable x -> T(x), got {T!r}")
    x = _point("x", x, T)
    s = _FD_STEP if step is None else positive("step", step)
    return central_difference_jacobian(T, x, s)


def anderson_fixed_point(T: Callable[[np.ndarray], np.ndarray], x0: ArrayLike, *, memory: int = 5,
                         damping: float = 0.5, tol: float = 1e-12, max_iter: int = 10000,
                         scale: float | None = None) -> tuple[np.ndarray, int]:
    """Anderson acceleration (type II) of the damped (Mann) iteration
    x <- (1 - a) x + a T(x), a = ``damping`` in (0, 1] (a = 1: plain x <- T(x)).

    The damped map G(x) = x + a f(x), f(x) = T(x) - x, has the fixed points of
    T.  With residuals f_k = f(x_k) and the last m differences
    dF = [f_{k-j+1} - f_{k-j}], dX likewise, gamma = argmin ||f_k - dF gamma||
    (least squares; the same for the residuals a f of G) and

        x_{k+1} = x_k + a f_k - (dX + a dF) gamma

    (Anderson 1965 with mixing parameter a; Walker & Ni 2011, eq. 2.1 applied
    to G).  Damping turns the 2-cycles of a plain iteration whose Jacobian has
    an eigenvalue near -1, or that jumps across a kink of T, into a contraction
    (for a = 1/2, eigenvalue lambda of J becomes (1 + lambda) / 2).
    Safeguard: an accelerated step longer than 1e8 damped steps a ||f_k||_inf
    (what a linear T with contraction factor 1 - 1e-8 would need) is replaced
    by the damped step and the memory cleared; at a kink of T nearly parallel
    residual differences otherwise extrapolate to ||x|| ~ 1e15, where
    T(x) - x rounds to 0 (a false fixed point).  Stops when
    ||f_k||_inf <= tol * scale, ``scale`` = max(1, ||x_k||_inf) by default;
    returns (x, iterations).  Pass a fixed ``scale`` when T moves points by a
    bounded amount (restarted AdaGrad: |T(x) - x| <= sum_i p_i eta_i tau_i):
    with the default, an iterate escaping to ||x|| ~ 1e15 meets the relative
    test without being near a fixed point.

    Raises InvalidHyperparameterError for a damping outside (0, 1] or memory < 1,
    DivergenceError on non-finite iterates or when it does not converge in
    ``max_iter`` steps.
    """
    if not callable(T):
        raise InvalidHyperparameterError(f"T must be a FedOptOperator or a callable x -> T(x), got {T!r}")
    a = in_unit_interval("damping", damping)
    memory = integer("memory", memory, minimum=1, maximum=10**4)
    tol = positive("tol", tol)
    max_iter = integer("max_iter", max_iter, minimum=1)
    if scale is not None:
        scale = positive("scale", scale)
    x = _point("x0", x0, T)
    f = np.asarray(T(x)) - x
    Xs, Fs = [x.copy()], [f.copy()]
    for k in range(1, max_iter + 1):
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(x))):
            raise DivergenceError(f"Anderson iteration produced non-finite values at step {k}")
        if np.abs(f).max() <= tol * (max(1.0, np.abs(x).max()) if scale is None else scale):
            return x, k - 1
        if len(Fs) > 1:
            dF = np.diff(np.array(Fs[-memory - 1:]), axis=0).T
            dX = np.diff(np.array(Xs[-memory - 1:]), axis=0).T
            gamma = np.linalg.lstsq(dF, f, rcond=None)[0]
            step = a * f - (dX + a * dF) @ gamma
            if not np.abs(step).max() <= _ANDERSON_MAX_STEP_RATIO * a * np.abs(f).max():
                # safeguard: an extrapolation far beyond the damped step (nearly parallel
                # residual differences at a kink of T) is dropped with the memory
                step = a * f
                Xs, Fs = [x.copy()], [f.copy()]
            x = x + step
        else:
            x = x + a * f
        f = np.asarray(T(x)) - x
        Xs.append(x.copy())
        Fs.append(f.copy())
        if len(Xs) > memory + 1:
            Xs.pop(0)
            Fs.pop(0)
    bound = f"{tol * scale:.3g}" if scale is not None else f"{tol:g} max(1, ||x||_inf)"
    raise DivergenceError(
        f"Anderson iteration (damping {a:g}) did not reach ||T(x) - x||_inf <= {bound} "
        f"in {max_iter} steps (last {np.abs(f).max():.3e})")


OperatorFixedPoint = FixedPoint
"""Earlier name of the operator result: the unified :class:`~fltheory.theory.fixed_points.FixedPoint`
(``spectral_radius`` and ``spectral_norm`` remain as property aliases)."""


#: The methods of scipy.optimize.root.
_ROOT_METHODS = ("hybr", "lm", "broyden1", "broyden2", "anderson", "linearmixing", "diagbroyden",
                 "excitingmixing", "krylov", "df-sane")

#: The globalised Newton-Krylov solvers of :mod:`fltheory.theory.operator_newton`.
_NEWTON_METHODS = ("newton-krylov", "continuation")

#: Every ``method`` of :func:`operator_fixed_point`.
OPERATOR_METHODS = _ROOT_METHODS + _NEWTON_METHODS

#: Default path of client-rate multipliers of ``method="continuation"`` (ends at the operator itself).
CONTINUATION_PATH = (0.125, 0.25, 0.5, 1.0)

#: Largest dimension at which the Newton methods' result gets the dense central-difference
#: Jacobian (2 d evaluations of T); above it the local rate comes from ARPACK on
#: Jacobian-vector products (``newton_krylov_fixed_point``).
NEWTON_DENSE_JACOBIAN_MAX = 100


def _client_rate_path(T: Any, path: Any) -> tuple[list[float], Callable[[float], FedOptOperator]]:
    """(checked multipliers, s -> the operator of the same algorithm with its client rate times s).

    FedOpt: ``client_lr_scale`` times s; FedAvg: ``lr`` times s.  s = 1 gives T itself."""
    from ..algorithms.fedavg import FedAvg
    from ..algorithms.fedopt import FedOpt

    if not isinstance(T, FedOptOperator) or not isinstance(T.algorithm, (FedOpt, FedAvg)):
        raise InvalidHyperparameterError(
            "method='continuation' follows the fixed point in the client rate and needs T from "
            "fedopt_operator(FedOpt(...) or FedAvg(...), problem), got "
            f"{type(T).__name__ if not isinstance(T, FedOptOperator) else T.algorithm.name}")
    if path is None:
        path = CONTINUATION_PATH
    if isinstance(path, (str, bytes)) or not isinstance(path, (Sequence, np.ndarray)):
        raise InvalidHyperparameterError(
            f"continuation_path must be a sequence of client-rate multipliers in (0, 1] ending at 1, got {path!r}")
    values = [in_unit_interval("continuation_path entry", v) for v in path]
    if not values or values[-1] != 1.0 or any(b <= a for a, b in itertools.pairwise(values)):
        raise InvalidHyperparameterError(
            f"continuation_path must increase strictly and end at 1 (the operator itself), got {list(path)!r}")
    alg, problem, x_start = T.algorithm, T.problem, np.asarray(T.template.x)

    def make(s: float) -> FedOptOperator:
        if s == 1.0:
            return T
        if isinstance(alg, FedOpt):
            scale = resolve_per_client("client_lr_scale", alg.client_lr_scale, problem.n_clients)
            scaled: Algorithm = dataclasses.replace(alg, client_lr_scale=s * scale)
        else:
            scaled = dataclasses.replace(alg, lr=s * resolve_per_client("lr", alg.lr, problem.n_clients))
        return fedopt_operator(scaled, problem, x0=x_start)

    return values, make


def _newton_solve(T: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, method: str, tol: float,
                  damping: float, path: Any) -> tuple[FixedPoint, int]:
    """The Newton-Krylov (or continuation) fixed point without its dense Jacobian, and the
    evaluations of operators other than T (the continuation's intermediate operators)."""
    if method == "newton-krylov":
        return newton_krylov_fixed_point(T, x0, tol=tol, damping=damping, dense_jacobian_max=0), 0
    values, make = _client_rate_path(T, path)
    made: list[FedOptOperator] = []

    def tracked(s: float) -> FedOptOperator:
        op = make(s)
        if op is not T:
            made.append(op)
        return op

    fp, solved = continuation_fixed_point(tracked, values, x0, tol=tol, damping=damping, dense_jacobian_max=0)
    return (dataclasses.replace(fp, method="continuation",
                                message=fp.message + f"; client-rate multipliers {solved}"),
            sum(op.evaluations for op in made))


def operator_fixed_point(T: FedOptOperator | Callable[[np.ndarray], np.ndarray], x0: ArrayLike | None = None, *,
                         method: str = "hybr", tol: float = 1e-12, cross_check: bool = True,
                         damping: float = 0.5, strict_cross_check: bool = True,
                         cross_check_max_iter: int = 10000, jacobian_step: float | None = None,
                         continuation_path: Sequence[float] | None = None) -> FixedPoint:
    """Fixed point of T by ``method``, cross-checked by :func:`anderson_fixed_point`.

    Methods (``OPERATOR_METHODS``):

    * the methods of ``scipy.optimize.root`` applied to T(x) - x (default ``"hybr"``,
      Powell's hybrid method with a forward-difference Jacobian: d + 1 evaluations of T
      per Jacobian);
    * ``"newton-krylov"``: globalised Jacobian-free Newton-Krylov
      (:func:`~fltheory.theory.operator_newton.newton_krylov_fixed_point`, damping
      ``damping`` for its fallback fixed-point step), for large d;
    * ``"continuation"``: the same solver along the operators of the same algorithm with
      its client rate multiplied by each entry of ``continuation_path`` (default
      ``CONTINUATION_PATH`` = 1/8, 1/4, 1/2, 1; strictly increasing in (0, 1], ending at 1,
      i.e. at T), each solve started at the previous fixed point, failed steps halved
      (:func:`~fltheory.theory.operator_newton.continuation_fixed_point`).  Needs T from
      ``fedopt_operator`` of FedOpt (``client_lr_scale`` is scaled) or FedAvg (``lr``).

    An unknown ``method`` raises InvalidHyperparameterError listing the valid names.
    The Jacobian of T at the fixed point (central differences, :func:`operator_jacobian`)
    is computed for every root method and, for the Newton methods, when
    d <= ``NEWTON_DENSE_JACOBIAN_MAX``; otherwise ``jacobian`` and ``contraction_factor``
    are None and ``spectral_rate`` is the ARPACK estimate of the Newton solver (with
    ``spectral_rate_error``).

    The cross-check runs Anderson acceleration of the damped (Mann) iteration
    x <- (1 - a) x + a T(x), a = ``damping`` (default 1/2; 1 is the plain
    iteration, which can cycle or stall for restarted AdaGrad clients, whose T
    is nearly non-smooth where a gradient coordinate vanishes, although
    T(x) = x has a root), from ``x0``, for at most ``cross_check_max_iter``
    steps, stopping at ||T(x) - x||_inf <= tol max(1, ||x~||_inf) (x~ the root).
    It *disagrees* when Anderson does not converge or its fixed point differs
    from the root by more than 1e3 tol max(1, ||x~||_inf) / sigma_min(I - J)
    (two solutions of T(x) = x to accuracy tol can differ by that much; more
    means two fixed points or a non-smooth T; without the dense J, |1 - rho(J)|
    stands in for sigma_min(I - J): for a normal J with rho(J) < 1 it is a lower
    bound (|1 - lambda| >= 1 - |lambda|), equal when the eigenvalue of largest
    modulus is real and positive, so the test is at most looser; for a non-normal J
    sigma_min(I - J) can be far smaller, and the test stricter than intended).  A disagreement raises
    DivergenceError naming both (default), or with ``strict_cross_check=False``
    is logged as a warning and returned in ``cross_check_agrees`` (False) and
    ``cross_check_message``; the root is then kept (it meets its residual test).

    Raises
    ------
    DivergenceError
        The solver fails, T is non-finite at its result, or the residual
        exceeds ``1e3 tol`` max(1, ||x||_inf); a non-finite Jacobian; a
        cross-check disagreement when ``strict_cross_check``.
    InvalidHyperparameterError
        An unknown ``method``; ``damping`` outside (0, 1]; a bad ``continuation_path``
        or ``method="continuation"`` on an operator that is not FedOpt's or FedAvg's.
    """
    if not callable(T):
        raise InvalidHyperparameterError(f"T must be a FedOptOperator or a callable x -> T(x), got {T!r}")
    choice("method", method, OPERATOR_METHODS)
    a = in_unit_interval("damping", damping)
    tol = positive("tol", tol)
    cross_check = flag("cross_check", cross_check)
    strict_cross_check = flag("strict_cross_check", strict_cross_check)
    cross_check_max_iter = integer("cross_check_max_iter", cross_check_max_iter, minimum=1)
    if jacobian_step is not None:
        jacobian_step = positive("jacobian_step", jacobian_step)
    if method == "continuation":
        _client_rate_path(T, continuation_path)          # checked before any evaluation of T
    elif continuation_path is not None:
        raise InvalidHyperparameterError(
            f"continuation_path is used by method='continuation' only, got method={method!r}")
    if x0 is None:
        if not isinstance(T, FedOptOperator):
            raise InvalidProblemError("x0 is needed when T is a plain callable (its dimension is not known)")
        x0 = np.zeros(T.dim)
    else:
        x0 = _point("x0", x0, T)
    d = x0.shape[0]
    fun = lambda x: np.asarray(T(x)) - x
    newton: FixedPoint | None = None
    other_evaluations = 0
    if method in _NEWTON_METHODS:
        newton, other_evaluations = _newton_solve(T, x0, method, tol, a, continuation_path)
        x, message = newton.x, newton.message
    else:
        sol = scipy.optimize.root(fun, x0, method=method, tol=tol)
        x, message = np.asarray(sol.x, dtype=np.float64), str(sol.message)
    finite = bool(np.all(np.isfinite(x)))
    res = float(np.abs(fun(x)).max()) if finite else float("inf")
    scale = max(1.0, float(np.abs(x).max())) if finite else float("inf")
    if not (finite and np.isfinite(res)) or res > 1e3 * tol * scale:
        what = "non-finite" if not (finite and np.isfinite(res)) else f"{res:.3e}"
        solver = f"scipy.optimize.root(method={method!r})" if newton is None else f"method={method!r}"
        raise DivergenceError(f"{solver} did not find a fixed point: ||T(x) - x||_inf = {what} ({message})")
    J = None
    if newton is None or d <= NEWTON_DENSE_JACOBIAN_MAX:
        J = operator_jacobian(T, x, step=jacobian_step)           # DivergenceError if non-finite
    if J is not None:
        rate, rate_error, cf = float(np.abs(np.linalg.eigvals(J)).max()), None, float(np.linalg.norm(J, 2))
    else:
        assert newton is not None
        rate, rate_error, cf = newton.spectral_rate, newton.spectral_rate_error, None
    other, gap, agrees, why = None, None, None, ""
    if cross_check:
        try:
            other, _ = anderson_fixed_point(T, x0, damping=a, tol=tol, scale=scale,
                                            max_iter=cross_check_max_iter)
        except DivergenceError as exc:
            why = f"Anderson (damping {a:g}) found no fixed point: {' '.join(str(exc).split())}"
        else:
            gap = float(np.abs(other - x).max())
            # both solve T(x) = x to ~tol; they agree to tol / sigma_min(I - J)
            smin = (float(np.linalg.svd(np.eye(d) - J, compute_uv=False)[-1]) if J is not None
                    else abs(1.0 - rate))
            allowed = 1e3 * tol * scale / max(smin, 1e-8)
            if gap > allowed:
                why = (f"{method} and Anderson (damping {a:g}) differ by {gap:.3e} > {allowed:.3e} "
                       f"(several fixed points, or a non-smooth T): {method} {np.array2string(x, precision=6)}, "
                       f"Anderson {np.array2string(other, precision=6)}")
        agrees = not why
        if why:
            if strict_cross_check:
                raise DivergenceError(f"fixed point cross-check failed: {why}")
            logger.warning("operator_fixed_point: cross-check disagrees: %s", why)
    evals = T.evaluations + other_evaluations if isinstance(T, FedOptOperator) else -1
    return FixedPoint(
        x=x, residual=res, spectral_rate=rate,
        contraction_factor=cf, success=agrees is not False,
        message=message + (f"; cross-check disagrees: {why}" if why else ""),
        method=method, jacobian=J, evaluations=evals, cross_check=other, cross_check_gap=gap,
        cross_check_agrees=agrees, cross_check_message=why, spectral_rate_error=rate_error)


@dataclass(frozen=True)
class LipschitzRatios:
    """Empirical Lipschitz ratios of the client maps (Assumption 1 of LocalAdaptivity).

    ratios : (n_pairs, N) ||O_i(x) - O_i(y)|| / ||x - y|| (unsquared).
    squared : (n_pairs, N) ratios ** 2 (the squared-norm form of A1).
    max_ratio : (N,) largest ratio per client.
    operator_ratios : (n_pairs,) ||T(x) - T(y)|| / ||x - y||.
    """

    ratios: np.ndarray
    squared: np.ndarray
    max_ratio: np.ndarray
    operator_ratios: np.ndarray


def lipschitz_ratios(T: FedOptOperator, rng: np.random.Generator, *, n_pairs: int = 20,
                     center: ArrayLike | None = None, radius: float = 1.0) -> LipschitzRatios:
    """Ratios over ``n_pairs`` pairs x, y = center + radius * N(0, I) (each client
    sees the same pairs; clients are processed together).  ``center`` defaults
    to x* of the federation when available, else 0."""
    instance("T", T, FedOptOperator, "a FedOptOperator (from fedopt_operator)", InvalidHyperparameterError)
    if not isinstance(rng, np.random.Generator):
        raise InvalidHyperparameterError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    n_pairs = integer("n_pairs", n_pairs, minimum=1, maximum=10**5)
    radius = positive("radius", radius)
    p = T.problem
    N, d = p.n_clients, p.dim
    if center is None:
        try:
            center = p.optimum()
        except (InvalidProblemError, NotImplementedError):
            center = np.zeros(d)
    center = _point("center", center, T)
    ratios = np.empty((n_pairs, N))
    op = np.empty(n_pairs)
    for k in range(n_pairs):
        x = center + radius * rng.standard_normal(d)
        y = center + radius * rng.standard_normal(d)
        Ox = T.client_maps(np.broadcast_to(x, (N, d)))
        Oy = T.client_maps(np.broadcast_to(y, (N, d)))
        dist = float(np.linalg.norm(x - y))
        ratios[k] = np.linalg.norm(Ox - Oy, axis=1) / dist
        op[k] = float(np.linalg.norm(T(x) - T(y))) / dist
    if not (np.all(np.isfinite(ratios)) and np.all(np.isfinite(op))):
        raise OutOfRangeError(f"lipschitz_ratios: the client maps are not finite at points of radius {radius!r} "
                              "around the centre (float64 overflow); use a smaller radius")
    return LipschitzRatios(ratios=ratios, squared=ratios ** 2, max_ratio=ratios.max(axis=0),
                           operator_ratios=op)


def sgd_contraction_bound(problem: Federation, lr: Rate, local_steps: Steps) -> np.ndarray:
    """Assumption 1 for local GD (LocalAdaptivity; docs/theory/fixed-points.md): (1 - eta_i mu_i)^{tau_i} per client.

    For mu_i-strongly convex, L_i-smooth f_i and eta_i <= 1/L_i, one gradient
    step is a contraction with factor max(|1 - eta mu|, |1 - eta L|) =
    1 - eta_i mu_i, hence the *unsquared* form used here:

        ||O_i(x) - O_i(y)|| <= (1 - eta_i mu_i)^{tau_i} ||x - y||.

    docs/theory/index.md states A1 in squared form, ||O_i(x) - O_i(y)||^2 <= rho_i ||x - y||^2
    with rho_i = (1 - eta_i mu_i)^{tau_i}; it follows from the unsquared form
    (squared ratio <= rho_i^2 <= rho_i) and is weaker.

    Raises AssumptionError when eta_i > 1/L_i for some client (the bound's
    hypothesis fails)."""
    instance("problem", problem, Federation, "a Federation")
    N = problem.n_clients
    eta = np.broadcast_to(np.asarray(per_client("lr", lr, N), dtype=np.float64), (N,))
    tau = np.broadcast_to(np.asarray(per_client("local_steps", local_steps, N, integer=True,
                                                minimum=1, strict=False)), (N,))
    mu = getattr(problem, "client_mu", None)
    L = getattr(problem, "client_L", None)
    if mu is None or L is None:
        raise InvalidProblemError(f"{type(problem).__name__} exposes no client_mu / client_L")
    mu, L = np.asarray(mu, dtype=np.float64), np.asarray(L, dtype=np.float64)
    bad = np.flatnonzero(eta * L > 1.0 + 1e-12)
    if bad.size:
        i = int(bad[0])
        raise AssumptionError(
            f"the SGD contraction bound needs eta_i <= 1/L_i; client {i} has eta = {eta[i]:.4g}, "
            f"1/L = {1.0 / L[i]:.4g}")
    return (1.0 - eta * mu) ** tau


@dataclass(frozen=True)
class Inconsistency:
    """Minimizer inconsistency ||x~(eta) - x*|| over client rates, one entry per rate.

    rates : (k,) the rates h passed to ``make_algorithm``, in the order given.
    converged : (k,) bool, True where the root solver found x~(h) (residual
        ||T(x) - x||_inf <= 1e3 tol max(1, ||x||_inf), see :func:`operator_fixed_point`).
    messages : (k,) str, the solver's message per rate (scipy's message on
        success; on failure the DivergenceError text, which names the residual).
    distances : (k,) ``numpy.ma.MaskedArray`` of ||x~(h) - x*||, *masked* where
        ``converged`` is False.  Masked entries print as ``--``, are skipped by
        ``min``/``mean``/matplotlib and come out as ``None`` from ``tolist()``;
        their hidden data is 0.0 and means nothing: ``np.asarray(distances)``
        drops the mask, so select with ``converged`` (or ``distances.compressed()``).
    fixed_points : (k, d) ``numpy.ma.MaskedArray`` of x~(h), rows masked where
        ``converged`` is False (hidden data 0.0, as above).
    evaluations : (k,) int, rounds (evaluations of T) spent on each rate.
    optimum : (d,) x*.
    """

    rates: np.ndarray
    converged: np.ndarray
    messages: tuple[str, ...]
    distances: np.ma.MaskedArray
    fixed_points: np.ma.MaskedArray
    evaluations: np.ndarray
    optimum: np.ndarray

    @property
    def failed_rates(self) -> np.ndarray:
        """The rates without a fixed point found."""
        return self.rates[~self.converged]


def minimizer_inconsistency(make_algorithm: Callable[[float], Algorithm], problem: Federation,
                            rates: Sequence[float], *, x0: ArrayLike | None = None, tol: float = 1e-12,
                            warm_start: bool = True) -> Inconsistency:
    """||x~(h) - x*|| for each rate h, x~(h) the fixed point of the operator of
    ``make_algorithm(h)`` (LocalAdaptivity section 4; docs/theory/fixed-points.md, "non-vanishing
    bias").

    Rates are processed from the largest down.  The first root solve starts at
    ``x0`` (default x*); with ``warm_start`` (default) every later one starts at
    the root of the previous *converged* rate, otherwise each starts at ``x0``.
    A rate whose root solve fails (DivergenceError from
    :func:`operator_fixed_point`: the solver stopped, its residual is too large,
    or T produced non-finite values) does not stop the sweep: it is recorded
    with ``converged[k] = False``, the solver's message, and masked entries in
    ``distances`` / ``fixed_points`` (:class:`Inconsistency`).  Invalid
    hyperparameters from ``make_algorithm`` still raise.
    """
    if not callable(make_algorithm):
        raise InvalidHyperparameterError(
            f"make_algorithm must be a callable rate -> Algorithm, got {make_algorithm!r}")
    instance("problem", problem, Federation, "a Federation")
    r = real_array("rates", rates, InvalidHyperparameterError).astype(np.float64)
    if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise InvalidHyperparameterError(f"rates must be a non-empty 1-D array of positive numbers, got {rates!r}")
    tol = _checks.tolerance("tol", tol)
    warm_start = flag("warm_start", warm_start)
    xstar = problem.optimum()
    first = xstar if x0 is None else _checks.server_model("x0", x0, problem.dim)
    fps = np.zeros((r.size, problem.dim))
    ok = np.zeros(r.size, dtype=bool)
    evals = np.zeros(r.size, dtype=np.int64)
    messages = [""] * r.size
    start = first
    for k in np.argsort(-r, kind="stable"):       # one fixed point per rate (a short sweep)
        T = fedopt_operator(make_algorithm(float(r[k])), problem)
        try:
            fp = operator_fixed_point(T, start, tol=tol, cross_check=False)
        except DivergenceError as exc:
            messages[k] = " ".join(str(exc).split())
            evals[k] = T.evaluations
            logger.info("minimizer_inconsistency: no fixed point at rate %.4g: %s", r[k], messages[k])
            continue
        fps[k], ok[k], evals[k], messages[k] = fp.x, True, T.evaluations, fp.message
        if warm_start:
            start = fp.x
    mask = ~ok
    dist = np.where(ok, np.linalg.norm(fps - xstar, axis=1), 0.0)
    return Inconsistency(
        rates=r, converged=ok, messages=tuple(messages),
        distances=np.ma.MaskedArray(dist, mask=mask),
        fixed_points=np.ma.MaskedArray(fps, mask=np.repeat(mask[:, None], problem.dim, axis=1)),
        evaluations=evals, optimum=xstar)
