"""Fixed points of non-linear round operators at scale: globalised Newton-Krylov and continuation.

For an operator T: R^d -> R^d (``theory.operators.fedopt_operator``: one
averaging round of FedOpt with adaptive clients, LocalAdaptivity eq. 6) the
fixed point solves F(x) = T(x) - x = 0.

:func:`newton_krylov_fixed_point` (Jacobian-free Newton-Krylov):

* Jacobian-vector products by forward differences of T,
  J_F(x) v ~ (F(x + h v) - F(x)) / h, h = sqrt(eps) max(1, ||x||_2) / ||v||_2
  (one evaluation of T per product; the truncation error is O(h ||F''||));
* the Newton step dx solves J_F dx = -F to the relative residual eta_k by
  restarted GMRES, eta_k = min(0.5, max(eta_min, 0.9 (||F_k|| / ||F_{k-1}||)^2))
  (Eisenstat and Walker's choice 2, so the steps become exact Newton steps near
  the root and the convergence superlinear);
* globalisation by backtracking: x + a dx with the largest a in {1, 1/2, ..., 2^-12}
  such that ||F(x + a dx)||_2 <= (1 - 1e-4 a) ||F(x)||_2 (Armijo on the merit
  ||F||_2); when none decreases ||F||, the damped fixed-point step
  x + a F(x) (the Mann iteration of FedOpt with server rate a, a = ``damping``)
  is tried instead; when that does not decrease ||F|| either, the solve fails;
* success when ||F(x)||_inf <= tol max(1, ||x||_inf), or when no step decreases
  ||F|| any more, ||F(x)||_inf <= 1e3 tol max(1, ||x||_inf) and ||F(x)||_inf is at
  the rounding floor of T: at most 100 max(eps max(1, ||x||_inf), the change of F under
  perturbations of x by 4 ulps per coordinate);
* iterates beyond ``max_norm`` are a divergence (there the relative test is vacuous).

Failure is reported, never returned as a result: :class:`NoFixedPointError` (a
DivergenceError) with the residual reached, the iterations and the reason (no
decrease, divergence, iteration or evaluation limit) and the last iterate ``x``.

:func:`continuation_fixed_point` follows the fixed point along a path of
operators T_{s_0}, ..., T_{s_m} (e.g. AdaGrad's initial accumulator decreasing
to its target value, where the restarted client maps become steep near the
points where a client's gradient coordinate vanishes): each solve starts at
the previous fixed point, and a failed step is halved in the parameter (up to
``max_halvings`` times) before the whole continuation fails.

:func:`diagnosed_fixed_point` runs the same solver and, when it fails on a
FedOpt operator, measures the discontinuity layers next to the last iterate
(:func:`discontinuity_layers`): client optimizers whose first step from a fresh
state is a sign step (AdaGrad with initial accumulator 0: u_1 = -lr g / (|g| + eps))
make T change by about 2 lr p_i across a layer of width eps / ||r|| around each
hyperplane {x: grad f_i(x)_j = 0} (r = row j of client i's Hessian), far below
the difference step of the Jacobian-vector products.  The failure is then a
:class:`DiscontinuityLayerError` naming the layers (client, coordinate, distance,
width, jump of T).  What is known about fixed points there (exact analysis of
d = 1, 2; the benchmark sizes undecided) is in docs/theory/fixed-points.md,
"Restarted AdaGrad with a zero accumulator".

The local rate of the fixed-point iteration, rho(J_T(x~)), is computed by
ARPACK on the Jacobian-vector products (largest modulus, residual tolerance
1e-8): ``spectral_rate`` with ``spectral_rate_error`` the Ritz residual (an
eigenvalue-error bound when J_T is normal).  The dense Jacobian (2 d
evaluations, central differences) and the contraction factor ||J_T||_2 are
filled only for d <= ``dense_jacobian_max`` (default 100).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla
from numpy.typing import ArrayLike

from .._validate import MAX_STEPS, finite_array, in_unit_interval, integer, positive, real_scalar
from ..errors import DivergenceError, InvalidHyperparameterError, InvalidProblemError
from ..problems.base import Federation
from .fixed_points import FixedPoint

__all__ = ["DiscontinuityLayerError", "LayerCrossing", "NoFixedPointError", "continuation_fixed_point",
           "diagnosed_fixed_point", "discontinuity_layers", "newton_krylov_fixed_point"]

logger = logging.getLogger(__name__)

_EPS = np.finfo(float).eps
_FD_STEP = float(np.sqrt(_EPS))
_ARMIJO = 1e-4
_MIN_STEP = 2.0 ** -12
_STALL = 1e3        # a residual that no step decreases is accepted below _STALL tol max(1, ||x||)
_MAX_HALVINGS = 60  # 2^-60 of a path step is below the resolution of any float parameter
_NEWTON_OPTIONS = frozenset({"tol", "max_newton", "damping", "eta_min", "gmres_restart", "dense_jacobian_max",
                             "max_evaluations", "max_norm"})


class NoFixedPointError(DivergenceError):
    """No fixed point reached by :func:`newton_krylov_fixed_point`.

    Attributes: ``x`` the last iterate (a copy), ``residual`` = ||T(x) - x||_inf there."""

    def __init__(self, message: str, *, x: np.ndarray | None = None, residual: float = float("nan")) -> None:
        super().__init__(message)
        self.x = None if x is None else np.array(x, dtype=np.float64)
        self.residual = float(residual)


@dataclass(frozen=True)
class LayerCrossing:
    """A discontinuity layer of a FedOpt operator next to a point x (:func:`discontinuity_layers`).

    ``client`` i and ``coordinate`` j of the hyperplane {y: grad f_i(y)_j = 0}; ``gradient``
    = grad f_i(x)_j; ``distance`` = |grad f_i(x)_j| / ||r|| with r = the gradient of
    y -> grad f_i(y)_j (row j of client i's Hessian), the distance of x to the hyperplane
    (exact for quadratic clients); ``width`` = eps / ||r||, the distance from the hyperplane
    at which a zero-accumulator AdaGrad first step g / (|g| + eps) is half a sign;
    ``jump`` = ||T(c + 100 width n) - T(c - 100 width n)||_inf, the change of T across the
    layer (c the foot of x on the hyperplane, n = r / ||r||; the first step of client i in
    coordinate j goes from +0.99 to -0.99 of a full sign step)."""

    client: int
    coordinate: int
    gradient: float
    distance: float
    width: float
    jump: float


class DiscontinuityLayerError(NoFixedPointError):
    """No fixed point reached, and the last iterate lies next to discontinuity layers of T.

    ``layers`` lists them (:class:`LayerCrossing`, nearest first); ``x`` and ``residual``
    as in :class:`NoFixedPointError`."""

    def __init__(self, message: str, *, layers: Sequence[LayerCrossing], x: np.ndarray | None = None,
                 residual: float = float("nan")) -> None:
        super().__init__(message, x=x, residual=residual)
        self.layers = list(layers)


def _check_positive(name: str, value: Any) -> float:
    """A finite real number > 0 (typed error naming ``name`` otherwise)."""
    return positive(name, value)


def _check_count(name: str, value: Any, minimum: int = 1) -> int:
    """An integer in [minimum, MAX_STEPS] (larger counts would not finish)."""
    return integer(name, value, minimum=minimum, maximum=MAX_STEPS)


def _check_newton_options(caller: str, newton: dict[str, Any]) -> None:
    """Typed error naming the options of ``caller`` that :func:`newton_krylov_fixed_point` does not take."""
    unknown = sorted(set(newton) - _NEWTON_OPTIONS)
    if unknown:
        raise InvalidHyperparameterError(
            f"{caller} got options {unknown} that newton_krylov_fixed_point does not take; "
            f"expected some of {sorted(_NEWTON_OPTIONS)}")


def _check_start(value: Any) -> np.ndarray:
    """x0 as a finite, non-empty float64 vector (a copy)."""
    x = finite_array("x0", value, ndim=1, error=InvalidHyperparameterError).copy()
    if x.size == 0:
        raise InvalidHyperparameterError("x0 must be a finite non-empty vector, got shape (0,)")
    return x


def central_difference_jacobian(T: Callable[[np.ndarray], np.ndarray], x: np.ndarray, step: float) -> np.ndarray:
    """Column j = (T(x + h_j e_j) - T(x - h_j e_j)) / (2 h_j), h_j = step max(1, |x_j|)
    (2 d evaluations; ``x`` a finite float64 vector, ``step`` > 0, checked by the callers:
    ``theory.operators.operator_jacobian`` is the public entry).

    Raises DivergenceError when a column is non-finite (never returns NaN)."""
    d = x.shape[0]
    J = np.empty((d, d))
    for j in range(d):
        hj = step * max(1.0, abs(x[j]))
        xp, xm = x.copy(), x.copy()
        xp[j] += hj
        xm[j] -= hj
        J[:, j] = (np.asarray(T(xp)) - np.asarray(T(xm))) / (2.0 * hj)
        if not np.all(np.isfinite(J[:, j])):
            raise DivergenceError(
                f"operator_jacobian: T is non-finite within {hj:.3g} of x along coordinate {j}")
    return J


class _Residual:
    """F(x) = T(x) - x with an evaluation counter and finiteness check."""

    def __init__(self, T: Callable[[np.ndarray], np.ndarray]) -> None:
        self.T = T
        self.evaluations = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.evaluations += 1
        with np.errstate(all="ignore"):
            out = np.asarray(self.T(x))
            if out.shape != x.shape or not (np.issubdtype(out.dtype, np.floating)
                                            or np.issubdtype(out.dtype, np.integer)):
                raise InvalidProblemError(
                    f"T must map a vector of shape {x.shape} to real numbers of the same shape, got "
                    f"dtype {out.dtype} and shape {out.shape}")
            f = out.astype(np.float64) - x
        return f

    def jvp(self, x: np.ndarray, fx: np.ndarray, v: np.ndarray) -> np.ndarray:
        nv = float(np.linalg.norm(v))
        if nv == 0.0:
            return np.zeros_like(v)
        h = _FD_STEP * max(1.0, float(np.linalg.norm(x))) / nv
        return (self(x + h * v) - fx) / h


def _rounding_floor(F: _Residual, x: np.ndarray, fx: np.ndarray) -> float:
    """100 max(eps max(1, ||x||_inf), ||F(x + u) - F(x)||_inf over 3 perturbations u of 4 ulps of max(1, |x_j|)).

    A residual that no step decreases is accepted only below this: the level at which F(x)
    is indistinguishable from rounding.  (A residual that is merely small is not enough:
    with sign-step clients F can be 1e-11 and flat to 1e-18 over an interval of non-fixed points.)"""
    rng = np.random.default_rng(0)
    ulps = 4.0 * np.spacing(np.maximum(np.abs(x), 1.0))
    noise = max(float(np.abs(F(x + ulps * rng.choice([-1.0, 1.0], size=x.shape)) - fx).max()) for _ in range(3))
    return 100.0 * max(noise, _EPS * max(1.0, float(np.abs(x).max())))


def _local_rate(F: _Residual, x: np.ndarray, fx: np.ndarray) -> tuple[float, float]:
    """(rho(J_T(x)), Ritz residual ||J u - lambda u|| / ||u||) with J_T v = J_F v + v applied by
    forward differences: ARPACK for d > 2; the d columns of J_T and a dense eigensolve for d <= 2
    or when ARPACK returns no eigenvalue at all (d more evaluations of T, never a NaN rate)."""
    d = x.shape[0]
    op = spla.LinearOperator((d, d), matvec=lambda v: F.jvp(x, fx, np.ravel(v)) + np.ravel(v),
                             dtype=np.float64)
    vals: np.ndarray | None = None
    if d > 2:
        v0 = np.random.default_rng(0).standard_normal(d)
        try:
            vals, vecs = spla.eigs(op, k=1, which="LM", v0=v0, tol=1e-8, ncv=min(d, 20), maxiter=50 * d)
        except spla.ArpackNoConvergence as exc:
            if len(exc.eigenvalues):
                vals, vecs = exc.eigenvalues, exc.eigenvectors
    if vals is None:
        J = np.column_stack([op.matvec(e) for e in np.eye(d)])
        all_vals, all_vecs = np.linalg.eig(J)
        k = int(np.argmax(np.abs(all_vals)))
        vals, vecs = all_vals[k:k + 1], all_vecs[:, k:k + 1]
    lam, u = vals[0], vecs[:, 0]
    Ju = op.matvec(u.real) + 1j * op.matvec(u.imag)
    return float(abs(lam)), float(np.linalg.norm(Ju - lam * u) / max(np.linalg.norm(u), 1e-300))


def newton_krylov_fixed_point(T: Callable[[np.ndarray], np.ndarray], x0: ArrayLike, *, tol: float = 1e-12,
                              max_newton: int = 60, damping: float = 0.5, eta_min: float = 1e-10,
                              gmres_restart: int = 60, dense_jacobian_max: int = 100,
                              max_evaluations: int | None = None, max_norm: float | None = None) -> FixedPoint:
    """Fixed point of T by globalised Jacobian-free Newton-Krylov (module docstring).

    Parameters
    ----------
    T : callable (d,) -> (d,)
    x0 : array (d,), the start.
    tol : float, success when ||T(x) - x||_inf <= tol max(1, ||x||_inf).
    max_newton : int, Newton iterations allowed.
    damping : float in (0, 1], rate of the fallback Mann step x + a F(x).
    eta_min : float, smallest relative residual asked of GMRES.
    gmres_restart : int, GMRES restart length (and inner iterations per restart).
    dense_jacobian_max : int, largest d for which the dense Jacobian is computed.
    max_evaluations : int, optional, evaluations of T allowed for the solve (the
        local rate and the dense Jacobian come after it); exceeding it is a failure.
    max_norm : float, optional, largest ||x||_inf of an iterate (default 1e6 max(1, ||x0||_inf)).
        Beyond it the iterates are taken to diverge: there T(x) - x can round to 0 (a
        bounded step added to a huge x), so the relative acceptance test would pass
        vacuously.  Found with sign-step clients, where Newton steps on a piecewise
        constant F ran to ||x|| = 3e19 and F(x) rounded to 0.

    Returns
    -------
    FixedPoint
        ``method`` "newton-krylov", ``evaluations`` the evaluations of T,
        ``spectral_rate`` rho(J_T(x~)) with ``spectral_rate_error``.

    Raises
    ------
    NoFixedPointError
        (a DivergenceError) no fixed point reached: the message gives the residual, the
        iterations and why; ``x`` is the last iterate.
    InvalidHyperparameterError
        Invalid options (named in the message: tolerances finite and > 0, counts integers
        up to ``MAX_STEPS``, ``damping`` in (0, 1]) or a start that is not a finite vector.
    InvalidProblemError
        T returns something other than real numbers of the shape of its argument.
    """
    if not callable(T):
        raise InvalidHyperparameterError(f"T must be a callable x -> T(x), got {T!r}")
    tol = _check_positive("tol", tol)
    max_newton = _check_count("max_newton", max_newton)
    eta_min = _check_positive("eta_min", eta_min)
    gmres_restart = _check_count("gmres_restart", gmres_restart)
    dense_jacobian_max = _check_count("dense_jacobian_max", dense_jacobian_max, 0)
    budget = None if max_evaluations is None else _check_count("max_evaluations", max_evaluations)
    a_fp = in_unit_interval("damping", damping)
    x = _check_start(x0)
    bound = 1e6 * max(1.0, float(np.abs(x).max())) if max_norm is None else _check_positive("max_norm", max_norm)
    d = x.shape[0]
    F = _Residual(T)
    fx = F(x)
    if not np.all(np.isfinite(fx)):
        raise DivergenceError("newton_krylov_fixed_point: T is non-finite at the start x0")
    norm = float(np.linalg.norm(fx))
    prev_norm = norm
    eta = 0.5
    history: list[str] = []

    def converged(x: np.ndarray, fx: np.ndarray) -> bool:
        return float(np.abs(fx).max()) <= tol * max(1.0, float(np.abs(x).max()))

    it = 0
    stalled = False
    while not converged(x, fx):
        if budget is not None and F.evaluations >= budget:
            raise NoFixedPointError(
                f"newton_krylov_fixed_point: evaluation budget {budget} spent after {it} Newton iterations: "
                f"||T(x) - x||_inf = {np.abs(fx).max():.3e} > {tol:.1e} max(1, ||x||_inf) "
                f"(last steps: {'; '.join(history[-3:])})", x=x, residual=float(np.abs(fx).max()))
        if it >= max_newton:
            raise NoFixedPointError(
                f"newton_krylov_fixed_point: no fixed point after {it} Newton iterations: "
                f"||T(x) - x||_inf = {np.abs(fx).max():.3e} > {tol:.1e} max(1, ||x||_inf) "
                f"({F.evaluations} evaluations of T; last steps: {'; '.join(history[-3:])})",
                x=x, residual=float(np.abs(fx).max()))
        it += 1
        if it > 1:
            eta = min(0.5, max(eta_min, 0.9 * (norm / prev_norm) ** 2))
        A = spla.LinearOperator((d, d), matvec=lambda v, xc=x, fc=fx: F.jvp(xc, fc, np.ravel(v)),
                                dtype=np.float64)
        dx, _ = spla.gmres(A, -fx, rtol=eta, atol=0.0, restart=min(d, gmres_restart), maxiter=3)
        step, how = 1.0, "newton"
        while True:
            xn = x + step * dx
            fn = F(xn)
            nn = float(np.linalg.norm(fn)) if np.all(np.isfinite(fn)) else np.inf
            if nn <= (1.0 - _ARMIJO * step) * norm:
                break
            step /= 2.0
            if step < _MIN_STEP:
                xn = x + a_fp * fx                      # fallback: a damped fixed-point step
                fn = F(xn)
                nn = float(np.linalg.norm(fn)) if np.all(np.isfinite(fn)) else np.inf
                how, step = "damped fixed-point step", a_fp
                if (not nn < norm and float(np.abs(fx).max()) <= _STALL * tol * max(1.0, float(np.abs(x).max()))
                        and float(np.abs(fx).max()) <= _rounding_floor(F, x, fx)):
                    stalled = True                      # at the rounding floor of T: accept x
                    xn, fn, nn = x, fx, norm
                    break
                if not nn < norm:
                    raise NoFixedPointError(
                        f"newton_krylov_fixed_point: no decrease of ||T(x) - x|| along the Newton "
                        f"direction (steps down to {_MIN_STEP:g}) nor by a damped fixed-point step after "
                        f"{it} iterations: ||T(x) - x||_inf = {np.abs(fx).max():.3e} "
                        f"({F.evaluations} evaluations of T)", x=x, residual=float(np.abs(fx).max()))
                break
        if stalled:
            break
        history.append(f"{how} {step:g}, ||F|| {nn:.2e}")
        if float(np.abs(xn).max()) > bound:
            raise NoFixedPointError(
                f"newton_krylov_fixed_point: the iterates diverge after {it} iterations: ||x||_inf = "
                f"{np.abs(xn).max():.3e} > max_norm {bound:.1e}, where the last point below it had "
                f"||T(x) - x||_inf = {np.abs(fx).max():.3e} ({F.evaluations} evaluations of T)",
                x=x, residual=float(np.abs(fx).max()))
        prev_norm, norm = norm, nn
        x, fx = xn, fn
    rate, rate_err = _local_rate(F, x, fx)
    J = None
    cf = None
    if d <= dense_jacobian_max:
        J = central_difference_jacobian(T, x, _EPS ** (1.0 / 3.0))
        cf = float(np.linalg.norm(J, 2))
        rate, rate_err = float(np.abs(np.linalg.eigvals(J)).max()), 0.0
    return FixedPoint(
        x=x, residual=float(np.abs(fx).max()), spectral_rate=rate, contraction_factor=cf, success=True,
        message=f"Newton-Krylov: {it} iterations, {F.evaluations} evaluations of T"
                + (" (stopped at the rounding floor of T, below 1e3 tol)" if stalled else ""),
        method="newton-krylov", jacobian=J, evaluations=F.evaluations,
        spectral_rate_error=rate_err)


def continuation_fixed_point(make_operator: Callable[[float], Callable[[np.ndarray], np.ndarray]],
                             path: Sequence[float], x0: ArrayLike, *, max_halvings: int = 6,
                             **newton: Any) -> tuple[FixedPoint, list[float]]:
    """Follow the fixed point of ``make_operator(s)`` along ``path`` (module docstring).

    ``newton`` options go to :func:`newton_krylov_fixed_point`, except
    ``max_evaluations``, which bounds the evaluations of T over the whole path.
    Returns (the fixed point of the last operator, the parameters actually solved,
    including inserted midpoints).  Raises DivergenceError naming the parameter at
    which the continuation stopped and the last solver message."""
    if not callable(make_operator):
        raise InvalidHyperparameterError(f"make_operator must be a callable s -> T_s, got {make_operator!r}")
    if isinstance(path, (str, bytes)) or not isinstance(path, (Sequence, np.ndarray)):
        raise InvalidHyperparameterError(f"path must be a sequence of numbers, got {path!r}")
    values = [real_scalar("path entry", v) for v in path]
    if not values:
        raise InvalidHyperparameterError(f"path must be a non-empty sequence of finite numbers, got {path!r}")
    max_halvings = integer("max_halvings", max_halvings, minimum=0, maximum=_MAX_HALVINGS)
    _check_newton_options("continuation_fixed_point", newton)
    total = newton.pop("max_evaluations", None)
    total = None if total is None else _check_count("max_evaluations", total)
    x = _check_start(x0)
    solved: list[float] = []
    fp: FixedPoint | None = None
    count = [0]
    prev: float | None = None
    queue = list(values)
    halvings = 0

    def counted(T: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
        def call(z: np.ndarray) -> np.ndarray:
            count[0] += 1
            return T(z)
        return call

    while queue:
        s = queue[0]
        left = None if total is None else total - count[0]
        try:
            if left is not None and left < 1:
                raise DivergenceError(f"evaluation budget {total} spent")
            fp = newton_krylov_fixed_point(counted(make_operator(s)), x, max_evaluations=left, **newton)
        except DivergenceError as exc:
            if prev is None or halvings >= max_halvings or s == prev or (left is not None and left < 1):
                raise DivergenceError(
                    f"continuation stopped at parameter {s!r} (last solved: {prev!r}): "
                    f"{' '.join(str(exc).split())}") from None
            queue.insert(0, 0.5 * (prev + s))
            halvings += 1
            continue
        x, prev = fp.x, s
        solved.append(s)
        queue.pop(0)
        halvings = 0
    assert fp is not None
    out = FixedPoint(**{**fp.__dict__, "evaluations": count[0],
                        "message": fp.message + f"; continuation over {len(solved)} parameters "
                                                f"({count[0]} evaluations of T in all)"})
    return out, solved


def _has_client_problem(T: Any) -> bool:
    """T is a FedOpt operator as :func:`discontinuity_layers` uses it: callable, ``T.problem`` a
    Federation (its client gradients) and ``T.dim`` its dimension.  Checked by interface, not by
    class: ``theory.operators`` imports this module, so importing its FedOptOperator here would
    make an import cycle (tests/test_layering.py)."""
    problem = getattr(T, "problem", None)
    return callable(T) and isinstance(problem, Federation) and getattr(T, "dim", None) == problem.dim


def discontinuity_layers(T: Any, x: ArrayLike, *, eps: float = 1e-8, radius: float | None = None,
                         max_layers: int = 8) -> list[LayerCrossing]:
    """The discontinuity layers of a FedOpt operator T nearest to x (those within ``radius``).

    A client optimizer whose first step from a fresh state is a sign step, such as
    AdaGrad with initial accumulator 0 (u_1 = -lr g / (|g| + eps), coordinate-wise),
    makes T change by about a full step across a layer of width eps / ||r|| around
    every hyperplane {y: grad f_i(y)_j = 0} (``LayerCrossing`` defines r, the distance,
    the width and the measured jump).  Candidates are the 4 ``max_layers`` pairs (i, j)
    with the smallest |grad f_i(x)_j|; rows r by central differences of the client
    gradients (exact up to rounding for quadratic clients); 2 evaluations of T per
    layer returned for the jump.

    Parameters
    ----------
    T : FedOptOperator (``theory.fedopt_operator``).
    x : array (d,).
    eps : float, the client optimizer's eps (sets the reported layer width).
    radius : float, optional, largest distance reported; default 10 ||T(x) - x||_inf
        (floored at 100 eps / ||r||).
    max_layers : int, most layers returned.

    Returns
    -------
    list of LayerCrossing, nearest first (empty when none is within ``radius``).
    """
    if not _has_client_problem(T):
        raise InvalidHyperparameterError(
            f"T must be a FedOptOperator (theory.fedopt_operator: callable, with .problem a Federation and "
            f".dim its dimension), got {type(T).__name__}")
    eps = _check_positive("eps", eps)
    max_layers = _check_count("max_layers", max_layers)
    x = finite_array("x", x, ndim=1, error=InvalidHyperparameterError)
    if x.shape != (T.dim,):
        raise InvalidHyperparameterError(f"x must be a finite vector of shape ({T.dim},), got shape {x.shape}")
    if radius is not None:
        radius = _check_positive("radius", radius)
    problem = T.problem
    n, d = problem.n_clients, problem.dim
    G = np.asarray(problem.client_grad(np.tile(x, (n, 1))), dtype=np.float64)
    m = min(4 * max_layers, n * d)
    flat = np.argpartition(np.abs(G).ravel(), m - 1)[:m]
    clients, coords = np.divmod(flat, d)
    h = 1e-4 * np.maximum(1.0, np.abs(x[coords]))
    E = np.zeros((m, d))
    E[np.arange(m), coords] = h
    R = (np.asarray(problem.client_grad(x + E, clients=clients))
         - np.asarray(problem.client_grad(x - E, clients=clients))) / (2.0 * h[:, None])
    norms = np.maximum(np.linalg.norm(R, axis=1), np.finfo(float).tiny)
    g = G[clients, coords]
    dist = np.abs(g) / norms
    width = eps / norms
    if radius is None:
        limit = np.maximum(10.0 * float(np.abs(np.asarray(T(x)) - x).max()), 100.0 * width)
    else:
        limit = np.full(m, radius)
    keep = [int(k) for k in np.argsort(dist, kind="stable") if dist[k] <= limit[k]][:max_layers]
    out = []
    for k in keep:
        nvec = R[k] / norms[k]
        foot = x - (g[k] / norms[k]) * nvec
        off = 100.0 * width[k] * nvec
        jump = float(np.abs(np.asarray(T(foot + off)) - np.asarray(T(foot - off))).max())
        out.append(LayerCrossing(client=int(clients[k]), coordinate=int(coords[k]), gradient=float(g[k]),
                                 distance=float(dist[k]), width=float(width[k]), jump=jump))
    return out


def diagnosed_fixed_point(T: Callable[[np.ndarray], np.ndarray], x0: ArrayLike, *, eps: float = 1e-8,
                          radius: float | None = None, max_layers: int = 8, **newton: Any) -> FixedPoint:
    """:func:`newton_krylov_fixed_point`, with the failure explained when T has sign-step layers.

    When the solve fails and T is a FedOpt operator (``theory.fedopt_operator``), the
    layers of :func:`discontinuity_layers` within ``radius`` of the last iterate are
    measured; if the jump of T across one of them is at least the residual reached, the
    failure is a :class:`DiscontinuityLayerError` listing every such layer (client,
    coordinate, gradient coordinate, distance, layer width, jump of T).  There T is steep
    on a scale (the layer width eps / ||r||, about 1e-8) below the step of the
    finite-difference Jacobian-vector products (sqrt(machine eps) max(1, ||x||_2)), so no
    Newton model of T holds; with eps -> 0 T is discontinuous there (docs: "Restarted
    AdaGrad with a zero accumulator").  ``newton`` options go to
    :func:`newton_krylov_fixed_point`.

    Raises
    ------
    DiscontinuityLayerError
        No fixed point reached, next to layers whose jump is at least the residual.
    NoFixedPointError
        No fixed point reached, for another reason (message of the solver).
    """
    eps = _check_positive("eps", eps)
    max_layers = _check_count("max_layers", max_layers)
    if radius is not None:
        radius = _check_positive("radius", radius)
    _check_newton_options("diagnosed_fixed_point", newton)
    try:
        return newton_krylov_fixed_point(T, x0, **newton)
    except NoFixedPointError as exc:
        if not _has_client_problem(T) or exc.x is None:
            raise
        layers = discontinuity_layers(T, exc.x, eps=eps, radius=radius, max_layers=max_layers)
        if not any(layer.jump >= exc.residual for layer in layers):
            raise
        step = _FD_STEP * max(1.0, float(np.linalg.norm(exc.x)))
        inside = [c for c in layers if c.distance <= 100.0 * c.width]
        described = "; ".join(
            f"client {c.client} coordinate {c.coordinate}: gradient {c.gradient:+.2e}, distance {c.distance:.2e}"
            f"{' (inside the layer)' if c.distance <= 100.0 * c.width else ''}, layer width {c.width:.1e}, "
            f"jump of T {c.jump:.2e}" for c in layers)
        raise DiscontinuityLayerError(
            f"{' '.join(str(exc).split())}. The last iterate lies inside {len(inside)} and within "
            f"{max(c.distance for c in layers):.1e} of {len(layers)} discontinuity layers of T (a client's first "
            f"step g / (|g| + eps) turns from -1 to +1 of a sign step across a layer of width eps / ||r||), "
            f"nearest first: {described}. The Jacobian-vector products by differences (step {step:.1e}) are "
            f"wider than these layers, so no Newton model of T holds there",
            layers=layers, x=exc.x, residual=exc.residual) from None
