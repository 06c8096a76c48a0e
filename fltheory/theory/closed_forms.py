"""Closed-form fixed points and rates of FedOpt-type algorithms on quadratic clients.

Clients are f_i(x) = 1/2 x^T H_i x - e_i^T x (docs/theory/problems.md).  A client
running ``tau_i`` steps of preconditioned gradient descent
y <- y - eta_i P_i (H_i y - e_i) from y = x (fixed preconditioner P_i,
restarted every round) ends at

    O_i(x) = (I - B_i) x + B_i x_i*,   B_i = I - (I - eta_i P_i H_i)^{tau_i}

(LocalAdaptivity, Theorem 2, as restated in docs/theory/fixed-points.md [derived]).  The server
operator T(x) = sum_i p_i O_i(x) is affine; FedOpt with server GD of rate
eta_s is the Mann iteration x <- (1 - eta_s) x + eta_s T(x).

Local correction (docs/theory/index.md#algorithms, "Local correction" [derived]): with a
fixed preconditioner the running sum over the tau_i steps, scaled by the client's rate
relative to the others, is G_i = s_i tau_i P_i with s_i = eta_i / max_j eta_j (``FedOpt``'s
G_i = s_i sum_k m_k for a client optimizer of rate max_j eta_j and ``client_lr_scale`` s_i);
the client sends Delta~_i = G_i^{-1} Delta_i and M_i = G_i^{-1}.  Since
Delta_i = O_i(x) - x = -B_i (x - x_i*),

* local correction only, server g = -sum p_i Delta~_i:
  x+ = x - eta_s sum_i p_i M_i B_i (x - x_i*);
* joint correction, server g = -(sum p_i M_i)^{-1} sum p_i Delta~_i:
  x+ = x - eta_s (sum p_i M_i)^{-1} sum_i p_i M_i B_i (x - x_i*).

Both have the fixed point (derived here, checked by iterating the map in
tests/theory/test_closed_forms.py)

    x~_corr = (sum_i p_i M_i B_i)^{-1} sum_i p_i M_i B_i x_i*,

and since M_i B_i = (max_j eta_j) H_i + O(eta_i^2) for every client it tends to
x* = (sum p_i H_i)^{-1} sum p_i e_i at rate O(h) as eta_i = c_i h -> 0, whatever the
clients' rates, steps and preconditioners (LocalAdaptivity section 5: the correction
removes the non-vanishing bias "by dividing the client learning rate").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import choice, instance, per_client, positive, real_array
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ..problems.quadratic import QuadraticFederation
from ..aliases import Rate, Steps
from .fixed_points import FixedPoint

__all__ = [
    "QuadraticFixedPoint",
    "client_contraction_matrices",
    "fedopt_quadratic_round_map",
    "fedopt_quadratic_fixed_point",
    "fedopt_small_rate_limit",
    "fedavg_first_order_bias",
    "fedprox_exact_fixed_point",
    "mann_rate",
]


QuadraticFixedPoint = FixedPoint
"""Earlier name of the closed-form result: the unified :class:`~fltheory.theory.fixed_points.FixedPoint`
(``spectral_radius`` and ``contraction_norm`` remain as property aliases)."""


def _diagonal_preconditioners(fed: QuadraticFederation, preconditioners: Any) -> np.ndarray | None:
    """P as (N, d) when it is None or diagonal, else None."""
    N, d = fed.n_clients, fed.dim
    if preconditioners is None:
        return np.ones((N, d))
    P = real_array("preconditioners", preconditioners, InvalidHyperparameterError).astype(np.float64)
    if P.shape in ((d,), (N, d)):
        if not np.all(np.isfinite(P)) or np.any(P <= 0):
            raise InvalidHyperparameterError(
                f"diagonal preconditioners must be finite and positive, got min {np.min(P)!r}")
        return np.broadcast_to(P, (N, d)).copy()
    return None


def _preconditioners(fed: QuadraticFederation, preconditioners: Any) -> np.ndarray:
    """Return P as (N, d, d)."""
    N, d = fed.n_clients, fed.dim
    diag = _diagonal_preconditioners(fed, preconditioners)
    if diag is not None:
        return np.einsum("ni,ij->nij", diag, np.eye(d))
    P = real_array("preconditioners", preconditioners, InvalidHyperparameterError).astype(np.float64)
    if not np.all(np.isfinite(P)):
        raise InvalidHyperparameterError("preconditioners contain non-finite values")
    if P.shape == (d, d):
        P = np.broadcast_to(P, (N, d, d))
    if P.shape != (N, d, d):
        raise InvalidHyperparameterError(
            f"preconditioners must have shape (d,), ({N}, {d}), ({d}, {d}) or ({N}, {d}, {d}), got {P.shape}")
    if np.linalg.matrix_rank(P).min() < d:
        raise InvalidHyperparameterError("full preconditioners must be invertible")
    return P.copy()


def client_contraction_matrices(fed: QuadraticFederation, lr: Rate, local_steps: Steps,
                                preconditioners: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """B_i = I - (I - eta_i P_i H_i)^{tau_i} and the spectral radii rho(I - eta_i P_i H_i).

    Parameters
    ----------
    fed : QuadraticFederation
    lr : float or array (N,)
        Client rates eta_i > 0.
    local_steps : int or array (N,)
        tau_i >= 1.
    preconditioners : None, (d,), (N, d) diagonal, (d, d) or (N, d, d) full
        Fixed preconditioners P_i (identity when None).

    Returns
    -------
    B : ndarray (N, d, d)
    radii : ndarray (N,)

    Notes
    -----
    Powers by batched binary exponentiation (per-client exponents).  Radii:
    for diagonal P_i > 0, P_i H_i is similar to D H_i D with D = P_i^{1/2}, so
    the radius is max |1 - eta lam| over the (symmetric) eigenvalues lam of
    D H_i D; for full P_i, eigenvalues of I - eta P_i H_i.
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    if not isinstance(fed, QuadraticFederation):
        raise InvalidProblemError(f"closed forms need a QuadraticFederation, got {type(fed).__name__}")
    N, d = fed.n_clients, fed.dim
    eta = np.broadcast_to(np.asarray(per_client("lr", lr, N), dtype=np.float64), (N,))
    tau = np.broadcast_to(np.asarray(per_client("local_steps", local_steps, N, integer=True,
                                                minimum=1, strict=False)), (N,))
    diag = _diagonal_preconditioners(fed, preconditioners)
    if diag is not None:
        S = np.eye(d) - eta[:, None, None] * diag[:, :, None] * fed.H
        sq = np.sqrt(diag)
        lam = np.linalg.eigvalsh(sq[:, :, None] * fed.H * sq[:, None, :])
        radii = np.abs(1.0 - eta[:, None] * lam).max(axis=1)
    else:
        S = np.eye(d) - eta[:, None, None] * np.matmul(_preconditioners(fed, preconditioners), fed.H)
        radii = np.abs(np.linalg.eigvals(S)).max(axis=1)
    # matrix powers with per-client exponents, vectorised by binary exponentiation
    power = np.broadcast_to(np.eye(d), (N, d, d)).copy()
    base, k = S.copy(), tau.astype(np.int64).copy()
    with np.errstate(over="ignore", invalid="ignore"):      # overflow is reported below
        while np.any(k > 0):
            odd = (k & 1).astype(bool)
            power[odd] = np.matmul(power[odd], base[odd])
            k >>= 1
            base = np.matmul(base, base)
    if not (np.all(np.isfinite(power)) and np.all(np.isfinite(radii))):
        i = int(np.flatnonzero(~np.isfinite(power).all(axis=(1, 2)) | ~np.isfinite(radii))[0])
        raise OutOfRangeError(
            f"(I - eta_i P_i H_i)^tau_i overflows float64 for client {i} (lr={float(eta[i])!r}, "
            f"local_steps={int(tau[i])}, spectral radius {radii[i]:.3e}): the local iteration expands "
            "beyond 1e308 over the local steps")
    return np.eye(d) - power, radii


def fedopt_quadratic_round_map(fed: QuadraticFederation, lr: Rate, local_steps: Steps,
                               preconditioners: ArrayLike | None = None, *, server_lr: float = 1.0,
                               correction: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """The exact FedOpt round map x -> A x + b on quadratic clients (full participation).

    * ``correction="none"``: x+ = x + eta_s sum p_i Delta_i,
      A = I - eta_s sum p_i B_i, b = eta_s sum p_i B_i x_i*.
    * ``"local"``: x+ = x + eta_s sum p_i M_i Delta_i, M_i = (s_i tau_i P_i)^{-1}.
    * ``"joint"``: x+ = x + eta_s (sum p_i M_i)^{-1} sum p_i M_i Delta_i.

    s_i = eta_i / max_j eta_j: the map of ``FedOpt`` whose client optimizer has rate
    max_j eta_j and ``client_lr_scale`` s_i, which divides each change by the client's own
    rate (LocalAdaptivity section 5: the correction removes the non-vanishing bias "by
    dividing the client learning rate"); with one rate for every client, s_i = 1.

    (LocalAdaptivity eq. 6 with docs/theory/index.md#algorithms local/global correction [derived].)
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    A, b, _ = _round_map(fed, lr, local_steps, preconditioners, server_lr, correction)
    return A, b


def _round_map(fed: QuadraticFederation, lr: Any, local_steps: Any, preconditioners: Any,
               server_lr: float, correction: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    correction = choice("correction", correction, ("none", "local", "joint"))
    eta_s = positive("server_lr", server_lr)
    B, radii = client_contraction_matrices(fed, lr, local_steps, preconditioners)
    N, d = fed.n_clients, fed.dim
    p = fed.weights
    xs = fed.client_optima()
    if correction == "none":
        W = B
    else:
        eta = np.broadcast_to(np.asarray(lr, dtype=np.float64), (N,))   # checked by the call above
        tau = np.broadcast_to(np.asarray(local_steps, dtype=np.float64), (N,)) * (eta / eta.max())
        diag = _diagonal_preconditioners(fed, preconditioners)
        if diag is not None:
            M = np.einsum("ni,ij->nij", 1.0 / (tau[:, None] * diag), np.eye(d))
            W = B / (tau[:, None] * diag)[:, :, None]
        else:
            M = np.linalg.inv(tau[:, None, None] * _preconditioners(fed, preconditioners))
            W = np.matmul(M, B)
    K = np.einsum("i,ijk->jk", p, W)
    c = np.einsum("i,ijk,ik->j", p, W, xs)
    if correction == "joint":
        Mbar = np.einsum("i,ijk->jk", p, M)
        K = np.linalg.solve(Mbar, K)
        c = np.linalg.solve(Mbar, c)
    return np.eye(d) - eta_s * K, eta_s * c, radii


def fedopt_quadratic_fixed_point(fed: QuadraticFederation, lr: Any, local_steps: Any,
                                 preconditioners: Any = None, *,
                                 correction: str = "none") -> FixedPoint:
    """Fixed point of FedOpt with fixed client preconditioners on quadratic clients.

    LocalAdaptivity Theorem 2 (docs/theory/fixed-points.md [derived])::

        B_i = I - (I - eta_i P_i H_i)^{tau_i}
        x~  = (sum_i p_i B_i)^{-1} sum_i p_i B_i x_i*

    With ``correction="local"`` or ``"joint"`` (M_i = (s_i tau_i P_i)^{-1}, s_i = eta_i / max_j eta_j,
    see :func:`fedopt_quadratic_round_map`; the fixed point does not depend on that scale)::

        x~  = (sum_i p_i M_i B_i)^{-1} sum_i p_i M_i B_i x_i*

    The fixed point does not depend on the server rate.  Rates that make
    rho(I - eta_i P_i H_i) >= 1 still give a fixed point when the matrix to be
    inverted is non-singular; ``client_spectral_radii`` and ``contractive``
    report that the iteration will not reach it.

    Raises
    ------
    InvalidHyperparameterError
        When sum p_i B_i (or sum p_i M_i B_i) is singular: no unique fixed point.
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    A, b, radii = _round_map(fed, lr, local_steps, preconditioners, 1.0, correction)
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        raise OutOfRangeError(
            f"the FedOpt round map overflows float64 at lr={lr!r}, local_steps={local_steps!r} "
            "(the local iteration expands faster than 1e308 over the local steps)")
    K = np.eye(fed.dim) - A
    cond = np.linalg.cond(K)
    if not np.isfinite(cond) or cond > 1e14:  # beyond ~1e14 the solve has no correct digit
        raise InvalidHyperparameterError(
            f"sum_i p_i B_i is singular (condition number {cond:.3e}) for lr={lr!r}, "
            f"local_steps={local_steps!r}: the FedOpt map has no unique fixed point")
    x = np.linalg.solve(K, b)
    xstar = fed.optimum()
    rho = float(np.abs(np.linalg.eigvals(A)).max())
    return FixedPoint(
        x=x, residual=float(np.abs(A @ x + b - x).max()), spectral_rate=rho,
        contraction_factor=float(np.linalg.norm(A, 2)), success=True,
        message=f"closed form (LocalAdaptivity Theorem 2), correction={correction!r}", method="closed form",
        condition=float(cond), optimum=xstar, bias=float(np.linalg.norm(x - xstar)), operator=A,
        offset=b, contractive=rho < 1, client_spectral_radii=radii)


def mann_rate(fp: FixedPoint, server_lr: float) -> float:
    """Exact asymptotic rate of x <- (1 - eta_s) x + eta_s T(x): the spectral
    radius of (1 - eta_s) I + eta_s A (docs/theory/fixed-points.md)."""
    instance("fp", fp, QuadraticFixedPoint, "a QuadraticFixedPoint (from fedopt_quadratic_fixed_point)")
    eta_s = positive("server_lr", server_lr)
    if fp.operator is None:
        raise InvalidHyperparameterError(
            f"mann_rate needs the linear part of the round map (a closed-form fixed point); "
            f"got a FixedPoint from method {fp.method!r}")
    d = fp.operator.shape[0]
    return float(np.abs(np.linalg.eigvals((1 - eta_s) * np.eye(d) + eta_s * fp.operator)).max())


def fedopt_small_rate_limit(fed: QuadraticFederation, rate_ratios: Any, local_steps: Steps,
                            preconditioners: ArrayLike | None = None, *,
                            correction: str = "none") -> np.ndarray:
    """Limit of the fixed point as eta_i = c_i h, h -> 0 (LocalAdaptivity eq. 8)::

        x~ -> (sum_i p_i c_i tau_i P_i H_i)^{-1} sum_i p_i c_i tau_i P_i e_i

    It equals x* only when c_i tau_i P_i is the same for every client.  With
    local/joint correction, which divides client i's change by s_i tau_i P_i (s_i proportional
    to c_i), M_i B_i = h c_max H_i + O(h^2) for every client, so the limit is x* whatever the
    rates, steps and preconditioners (LocalAdaptivity section 5).
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    correction = choice("correction", correction, ("none", "local", "joint"))
    N = fed.n_clients
    c = np.broadcast_to(np.asarray(per_client("rate_ratios", rate_ratios, N), dtype=np.float64), (N,))
    tau = np.broadcast_to(np.asarray(per_client("local_steps", local_steps, N, integer=True,
                                                minimum=1, strict=False), dtype=np.float64), (N,))
    if correction == "none":
        W = (c * tau)[:, None, None] * _preconditioners(fed, preconditioners)
    else:
        W = np.broadcast_to(np.eye(fed.dim), (N, fed.dim, fed.dim))
    p = fed.weights
    K = np.einsum("i,ijk,ikl->jl", p, W, fed.H)
    rhs = np.einsum("i,ijk,ik->j", p, W, fed.e)
    cond = float(np.linalg.cond(K)) if np.all(np.isfinite(K)) else float("inf")
    if not cond <= 1e14:         # beyond ~1e14 the solve has no correct digit
        raise OutOfRangeError(
            f"sum_i p_i c_i tau_i P_i H_i has condition number {cond:.3e} > 1e14 for "
            f"rate_ratios={rate_ratios!r}, local_steps={local_steps!r}: the limit cannot be computed in float64")
    return np.linalg.solve(K, rhs)


def fedavg_first_order_bias(fed: QuadraticFederation, lr: float, local_steps: int) -> np.ndarray:
    """First-order expansion of the FedAvg fixed point (equal eta, K; docs/theory/fixed-points.md)::

        x~ = x* + (eta (K - 1) / 2) (sum p_i H_i)^{-1} sum p_i H_i grad f_i(x*) + O(eta^2)

    Returns the first-order approximation of x~ (not the exact fixed point).
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    eta = positive("lr", lr)
    K = per_client("local_steps", local_steps, None, integer=True, minimum=1, strict=False)
    if not isinstance(K, int):
        raise InvalidHyperparameterError(f"local_steps must be one integer here, got {local_steps!r}")
    xstar = fed.optimum()
    g = fed.client_grad(xstar)                                        # (N, d)
    v = np.einsum("i,ijk,ik->j", fed.weights, fed.H, g)
    return xstar + 0.5 * eta * (K - 1) * np.linalg.solve(fed.hess(), v)


def fedprox_exact_fixed_point(fed: QuadraticFederation, mu_prox: float) -> np.ndarray:
    """Fixed point of FedProx with exact local proximal solves (penalty mu_p/2 ||y - x||^2)::

        x~ = (sum p_i (H_i + mu_p I)^{-1} H_i)^{-1} sum p_i (H_i + mu_p I)^{-1} e_i

    (docs/theory/fixed-points.md; local solution y_i = (H_i + mu_p I)^{-1}(e_i + mu_p x).)
    """
    instance("fed", fed, QuadraticFederation, "a QuadraticFederation (closed forms need constant Hessians)")
    mu = positive("mu_prox", mu_prox)
    d = fed.dim
    R = np.linalg.inv(fed.H + mu * np.eye(d))                          # (N, d, d)
    p = fed.weights
    K = np.einsum("i,ijk,ikl->jl", p, R, fed.H)
    rhs = np.einsum("i,ijk,ik->j", p, R, fed.e)
    return np.linalg.solve(K, rhs)
