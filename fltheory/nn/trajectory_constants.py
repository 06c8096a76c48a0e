"""Constants of the convergence theorems measured at the points of a trajectory,
for any federation, from its public oracles only.

At each point x_t (rows of ``points``, e.g. ``History.x``) this module measures

=====================  ========================================================
``L``, ``client_L``    local smoothness ||hess F(x_t)||_2 and ||hess f_i(x_t)||_2
                       by power iteration on Hessian-vector products
                       (``client_hvp`` when the federation has it, else
                       ``client_hess`` times the vector); each estimate is
                       ||H v|| for a unit v, a lower bound of ||H||_2 that
                       increases with the iterations; its uncertainty is the
                       residual r = ||H v - theta v||, theta = v^T H v: some
                       eigenvalue lies in [theta - r, theta + r] (Krylov-
                       Weinstein), so r -> 0 certifies convergence to an
                       eigenvalue (power iteration from a random start
                       reaches the largest |eigenvalue| with probability 1)
``sigma2_clients``     sigma_i^2(x_t) = E||g_i - grad f_i(x_t)||^2 of the
                       configured stochastic oracle: 0 (exact oracle); the
                       configured value (Gaussian noise); for minibatches of
                       size b with ``per_sample_grads``, s_i^2 / b with
                       s_i^2 = (1/n_i) sum_j ||g_ij - grad f_i||^2 (exact);
                       otherwise the Monte-Carlo mean of ||g - grad f_i||^2
                       over K = ``noise_draws`` oracle calls (unbiased: the
                       mean grad f_i is known exactly) with standard error
                       sd / sqrt(K); +-2 SE covers the truth at the normal
                       95 % only for large K (||g - grad f||^2 is skewed:
                       measured 84-87 % at K = 40, 92-96 % at K = 400)
``sample_var``         s_i^2(x_t) (per-sample gradient variance, the sigma^2 of
                       batch size 1) whenever ``per_sample_grads`` exists
``zeta2``              sum_i p_i ||grad f_i(x_t) - grad F(x_t)||^2
``G2``, ``G2_max``     sum_i p_i ||grad f_i(x_t)||^2 and max_i ||grad f_i(x_t)||^2
``Q``, ``grad_norm2``  (1/N) sum_i ||grad f_i(x_t)||^2 and ||grad F(x_t)||^2, the
                       two sides of SCAFFOLD's (G, B) dissimilarity
                       (Karimireddy et al., SCAFFOLD, arXiv:1910.06378v1,
                       Assumption A1): (1/N) sum_i ||grad f_i||^2 <= G^2 + B^2 ||grad F||^2
=====================  ========================================================

The gradient quantities are exact at every point (uncertainty 0); over the
trajectory their maxima are lower estimates of the suprema a theorem assumes
over a region.  For SCAFFOLD, :meth:`TrajectoryConstants.scaffold_G2` gives
the smallest G^2 that makes the inequality hold at all measured points for a
given B^2.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .._validate import finite_array, integer, real_scalar
from ..errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ..problems.base import Federation

__all__ = ["TrajectoryConstants", "power_iteration", "trajectory_constants"]


@dataclass(frozen=True)
class TrajectoryConstants:
    """Per-point constants (T points, N clients); see the module docstring."""

    L: np.ndarray                 # (T,)
    L_residual: np.ndarray        # (T,)
    client_L: np.ndarray          # (T, N)
    client_L_residual: np.ndarray  # (T, N)
    sigma2_clients: np.ndarray    # (T, N)
    sigma2_se: np.ndarray         # (T, N) standard error (0 where exact)
    sigma2_method: str
    sample_var: np.ndarray | None  # (T, N) or None
    zeta2: np.ndarray             # (T,)
    G2: np.ndarray                # (T,)
    G2_max: np.ndarray            # (T,)
    Q: np.ndarray                 # (T,)
    grad_norm2: np.ndarray        # (T,)
    weights: np.ndarray           # (N,)

    @property
    def sigma2(self) -> np.ndarray:
        """max_i sigma_i^2(x_t) -> (T,) (the convention of ProblemConstants.sigma2)."""
        return self.sigma2_clients.max(axis=1)

    @property
    def sigma2_mean(self) -> np.ndarray:
        """sum_i p_i sigma_i^2(x_t) -> (T,)."""
        return self.sigma2_clients @ self.weights

    def scaffold_G2(self, B2: float) -> float:
        """Smallest G^2 with Q_t <= G^2 + B^2 ||grad F(x_t)||^2 at every measured point:
        max_t (Q_t - B^2 ||grad F(x_t)||^2) (clipped at 0)."""
        if not np.isfinite(B2) or B2 < 0:
            raise InvalidHyperparameterError(f"B2 must be a finite number >= 0, got {B2!r}")
        return float(max(0.0, np.max(self.Q - B2 * self.grad_norm2)))

    def summary(self) -> dict[str, float]:
        """Maxima over the trajectory (JSON-able)."""
        return {"L": float(self.L.max()), "L_residual": float(self.L_residual.max()),
                "client_L": float(self.client_L.max()), "sigma2": float(self.sigma2.max()),
                "zeta2": float(self.zeta2.max()), "G2": float(self.G2.max()),
                "G2_max": float(self.G2_max.max()), "min_grad_norm2": float(self.grad_norm2.min())}


def _client_hvp(fed: Federation, X: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
    hvp = getattr(fed, "client_hvp", None)
    if callable(hvp):
        return np.asarray(hvp(X, V, idx))
    return np.einsum("mij,mj->mi", fed.client_hess(X, idx), V)


def power_iteration(matvec: Any, v0: np.ndarray, iters: int, tol: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batched power iteration for symmetric operators: rows of v0 (m, d) are
    start vectors, ``matvec(V) -> (m, d)`` applies each row's operator.

    Returns (||H v|| (m,), residual ||H v - theta v|| (m,), v (m, d)) for the
    final unit v, theta = v^T H v.  Stops once every residual is at most
    ``tol`` ||H v|| (then an eigenvalue lies within tol ||H v|| of theta and
    ||H v|| is within about tol^2 ||H v|| / gap of it), or after ``iters``
    products; the residual returned is the honest uncertainty either way.

    Raises
    ------
    InvalidHyperparameterError
        ``matvec`` not callable, ``iters`` not an integer >= 0, ``tol`` not in [0, 1).
    InvalidProblemError
        ``v0`` not a finite real (m, d) array with nonzero rows, or ``matvec`` returning
        anything but a finite real (m, d) array.
    """
    if not callable(matvec):
        raise InvalidHyperparameterError(f"matvec must be a callable V (m, d) -> H V (m, d), got "
                                         f"{matvec!r:.80} ({type(matvec).__name__})")
    iters = integer("iters", iters)
    tol = real_scalar("tol", tol)
    if not 0 <= tol < 1:
        raise InvalidHyperparameterError(f"tol must lie in [0, 1), got {tol!r}")
    V0 = finite_array("v0", v0, ndim=2, error=InvalidProblemError)
    if V0.shape[0] == 0 or V0.shape[1] == 0:
        raise InvalidProblemError(f"v0 must be a non-empty (m, d) array of start vectors, got shape {V0.shape}")
    norm0 = np.linalg.norm(V0, axis=1)
    if not np.all(np.isfinite(norm0)) or np.any(norm0 == 0):
        raise InvalidProblemError("v0 must have nonzero rows whose norms are finite (each row is normalised to a "
                                  f"unit start vector), got row norms {norm0[:8]!r}")

    def apply(V: np.ndarray) -> np.ndarray:
        try:
            out = np.asarray(matvec(V))
        except FLTheoryError:
            raise
        except Exception as exc:
            raise InvalidHyperparameterError(f"matvec failed on an ({V.shape[0]}, {V.shape[1]}) array of unit "
                                             f"rows: {type(exc).__name__}: {exc}") from exc
        if out.shape != V.shape or not np.issubdtype(out.dtype, np.number) or np.iscomplexobj(out):
            raise InvalidProblemError(f"matvec must return a real array of shape {V.shape}, got "
                                      f"{out.dtype} {out.shape}")
        if not np.all(np.isfinite(out)):
            raise OutOfRangeError("matvec returned NaN or inf for unit vectors (the operator's norm is not "
                                  "representable in float64, or the operator is not finite)")
        return out.astype(np.float64, copy=False)

    v = V0 / norm0[:, None]
    Hv = apply(v)
    with np.errstate(over="ignore", invalid="ignore"):          # an overflowed norm is refused below
        for _ in range(iters):
            norm = np.linalg.norm(Hv, axis=1)
            theta = np.einsum("md,md->m", v, Hv)
            resid = np.linalg.norm(Hv - theta[:, None] * v, axis=1)
            if np.all(resid <= tol * norm):
                return _finite_iteration(norm, resid, v)
            if not np.all(np.isfinite(norm)):
                break
            v = np.where(norm[:, None] > 0, Hv / np.where(norm > 0, norm, 1.0)[:, None], v)
            Hv = apply(v)
        theta = np.einsum("md,md->m", v, Hv)
        return _finite_iteration(np.linalg.norm(Hv, axis=1), np.linalg.norm(Hv - theta[:, None] * v, axis=1), v)


def _finite_iteration(norm: np.ndarray, resid: np.ndarray, v: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The result of :func:`power_iteration`, refused when a norm overflowed float64."""
    if not (np.all(np.isfinite(norm)) and np.all(np.isfinite(resid))):
        raise OutOfRangeError("power iteration: ||H v|| overflows float64 (an operator norm above about 1e308); "
                              "expected an operator whose norm is representable")
    return norm, resid, v


def _sigma2(fed: Federation, P: np.ndarray, G: np.ndarray, rng: np.random.Generator, noise_draws: int
            ) -> tuple[np.ndarray, np.ndarray, str, np.ndarray | None]:
    """(sigma2 (T, N), standard errors (T, N), method, per-sample variance or None)."""
    T, N = G.shape[:2]
    idx = np.arange(N)
    sample_var = None
    per_sample = getattr(fed, "per_sample_grads", None)
    counts = getattr(fed, "n_samples", None)
    if callable(per_sample) and counts is not None:
        n = np.asarray(counts, dtype=np.float64)
        sample_var = np.empty((T, N))
        for t in range(T):                       # one batched call over all clients per point
            S = np.asarray(per_sample(np.broadcast_to(P[t], (N, fed.dim)), idx))
            mean = S.sum(axis=1) / n[:, None]
            real = (np.arange(S.shape[1])[None, :] < n[:, None])[:, :, None]
            D = (S - mean[:, None, :]) * real
            sample_var[t] = np.einsum("mjd,mjd->m", D, D) / n
    zeros = np.zeros((T, N))
    if not fed.is_stochastic:
        return zeros, zeros.copy(), "exact oracle", sample_var
    if fed.noise_sigma2 is not None:
        noise = np.broadcast_to(fed.noise_sigma2, (T, N)).copy()
        return noise, zeros, "configured Gaussian noise", sample_var
    if fed.batch_size is not None and sample_var is not None:
        method = "per-sample gradients (exact minibatch variance)"
        return sample_var / fed.batch_size, zeros, method, sample_var
    if noise_draws < 2:
        raise InvalidHyperparameterError(
            f"noise_draws must be >= 2 for a Monte-Carlo variance, got {noise_draws}")
    est, se = np.empty((T, N)), np.empty((T, N))
    rows = np.tile(idx, noise_draws)
    for t in range(T):
        g = np.asarray(fed.stochastic_grad(np.broadcast_to(P[t], (rows.shape[0], fed.dim)), rows, rng))
        dev = g.reshape(noise_draws, N, -1) - G[t][None]
        sq = np.einsum("kid,kid->ki", dev, dev)
        est[t] = sq.mean(axis=0)
        se[t] = sq.std(axis=0, ddof=1) / np.sqrt(noise_draws)
    return est, se, f"Monte Carlo over {noise_draws} oracle draws", sample_var


def trajectory_constants(fed: Federation, points: Any, rng: np.random.Generator, *, power_iters: int = 300,
                         tol: float = 1e-7, noise_draws: int = 400) -> TrajectoryConstants:
    """Measure the constants of the module docstring at every row of ``points`` (T, d).

    Parameters
    ----------
    fed : Federation
        Any federation; uses ``client_grad``, ``client_hvp`` (or
        ``client_hess``), ``per_sample_grads`` and ``stochastic_grad`` where
        available.
    points : array (T, d) or (d,)
        The points, e.g. ``History.x`` or a subsample of its rows.
    rng : numpy.random.Generator
        Start vectors of the power iterations, and the oracle draws of the
        Monte-Carlo variance.
    power_iters, tol : int, float
        At most ``power_iters`` Hessian-vector products per point; stop
        earlier once every residual is at most ``tol`` times its estimate
        (:func:`power_iteration`).
    noise_draws : int
        Oracle calls per client and point for the Monte-Carlo variance.
    """
    if not isinstance(fed, Federation):
        raise InvalidProblemError(f"fed must be a Federation (e.g. a NeuralFederation or a problem of "
                                  f"fltheory.problems), got {fed!r:.80} ({type(fed).__name__})")
    if not isinstance(rng, np.random.Generator):
        raise InvalidHyperparameterError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if isinstance(power_iters, bool) or not isinstance(power_iters, (int, np.integer)) or power_iters < 1:
        raise InvalidHyperparameterError(f"power_iters must be an integer >= 1, got {power_iters!r}")
    if not (isinstance(tol, (int, float)) and 0 <= tol < 1):
        raise InvalidHyperparameterError(f"tol must lie in [0, 1), got {tol!r}")
    P = finite_array("points", points, error=InvalidProblemError)
    P = P[None] if P.ndim == 1 else P
    if P.ndim != 2 or P.shape[1] != fed.dim:
        raise InvalidProblemError(f"points must have shape (T, {fed.dim}), got {P.shape}")
    with np.errstate(over="ignore", invalid="ignore"):      # an overflow is reported below, as a typed error
        measured = _measure(fed, P, rng, int(power_iters), float(tol), int(noise_draws))
    overflowed = [f.name for f in fields(measured) if isinstance(getattr(measured, f.name), np.ndarray)
                  and not np.all(np.isfinite(getattr(measured, f.name)))]
    if overflowed:
        raise OutOfRangeError(f"points: the constants {overflowed} overflow float64 at these points (largest |x| = "
                              f"{float(np.max(np.abs(P))):.3e}); expected points where the gradients' squared norms "
                              f"are representable (below about 1e308)")
    return measured


def _measure(fed: Federation, P: np.ndarray, rng: np.random.Generator, power_iters: int, tol: float,
             noise_draws: int) -> TrajectoryConstants:
    """The constants of :func:`trajectory_constants` at the checked points ``P`` (T, d)."""
    T, N, d = P.shape[0], fed.n_clients, fed.dim
    p = fed.weights
    idx = np.arange(N)

    # gradients: one batched call over clients per point
    G = np.stack([np.asarray(fed.client_grad(np.broadcast_to(x, (N, d)), idx)) for x in P])   # (T, N, d)
    gF = np.einsum("i,tid->td", p, G)
    sq = np.einsum("tid,tid->ti", G, G)
    dev = G - gF[:, None, :]
    zeta2 = np.einsum("i,ti->t", p, np.einsum("tid,tid->ti", dev, dev))

    # smoothness: rows [F at every point (N rows each, weighted), client i at every point]
    rows_x = np.repeat(P, N, axis=0)                     # (T N, d), point-major
    rows_c = np.tile(idx, T)

    def matvec(V: np.ndarray) -> np.ndarray:
        vF, vC = V[:T], V[T:]
        both = _client_hvp(fed, np.concatenate([rows_x, rows_x]),
                           np.concatenate([np.repeat(vF, N, axis=0), vC]), np.concatenate([rows_c, rows_c]))
        HF = np.einsum("i,tid->td", p, both[:T * N].reshape(T, N, d))
        return np.concatenate([HF, both[T * N:]])

    est, resid, _ = power_iteration(matvec, rng.standard_normal((T + T * N, d)), power_iters, tol)
    s2, se, method, sample_var = _sigma2(fed, P, G, rng, noise_draws)
    return TrajectoryConstants(
        L=est[:T], L_residual=resid[:T], client_L=est[T:].reshape(T, N),
        client_L_residual=resid[T:].reshape(T, N), sigma2_clients=s2, sigma2_se=se, sigma2_method=method,
        sample_var=sample_var, zeta2=zeta2, G2=sq @ p, G2_max=sq.max(axis=1), Q=sq.mean(axis=1),
        grad_norm2=np.einsum("td,td->t", gF, gF), weights=p.copy())
