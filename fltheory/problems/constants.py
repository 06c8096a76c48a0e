"""Problem constants used by the bounds (docs/theory/problems.md and 4).

:func:`problem_constants` returns a :class:`ProblemConstants` whose fields are

=================  ===========================================================
``L``, ``mu``      smoothness / strong convexity of F (``fed.L``, ``fed.mu``);
                   quadratic: extreme eigenvalues of sum p_i H_i; logistic:
                   c lambda_max(sum p_i A_i^T A_i / n_i) + reg and reg
``client_L/mu``    per-client arrays (``fed.client_L``, ``fed.client_mu``)
``mu_local``       lambda_min(hess F(x*)) (= mu for quadratics)
``zeta2``          sum_i p_i ||grad f_i(x*)||^2
``D_k``, ``D``     D_k = f_k(x*) - f_k(x_k*) (plain objectives), D = sum p_k D_k
``delta``          max_i ||H_i - sum_j p_j H_j||_2 (logistic: Hessians at x*)
``sigma2``         max_i sigma_i^2, sigma_i^2 = E||g_i - grad f_i||^2 of the
                   configured oracle (``sigma2_clients``): 0 for the exact
                   oracle, the configured value for Gaussian noise (exact);
                   for minibatches the max over the evaluation points of the
                   exact variance at each point (an estimate of the sup)
``G2``             max over ||x - center|| <= radius of sum_i p_i ||grad f_i(x)||^2
``G2_max``         max over the same ball of max_i ||grad f_i(x)||^2
``scaffold_B2``,   SCAFFOLD's (G, B) bounded gradient dissimilarity
``scaffold_G2``    (1/N) sum_i ||grad f_i(x)||^2 <= G^2 + B^2 ||grad F(x)||^2
=================  ===========================================================

Exactness is recorded per field in ``exact`` and explained in ``notes``.
For quadratics G2 and G2_max are exact (trust-region maxima, see
``_trust_region``) and the (G, B) pair holds on all of R^d: with
u = grad F(x), x = x* + Hbar^{-1} u and (1/N) sum ||grad f_i||^2 =
u^T K u + 2 c^T u + z with K = (1/N) sum Hbar^{-1} H_i^2 Hbar^{-1},
c = (1/N) sum Hbar^{-1} H_i grad f_i(x*), z = (1/N) sum ||grad f_i(x*)||^2.
Any B^2 > lambda_max(K) is admissible and the smallest G^2 is
z + c^T (B^2 I - K)^{-1} c.  Rule: B^2 = 2 lambda_max(K) unless
``scaffold_B2`` is given.  For other federations B^2 and the local G^2 come from the same formula with
the Hessians at x* (the affine model of the gradients at x*), and G^2 is
raised to max_{x in P} Q(x) - B^2 ||grad F(x)||^2 (Q the left side) on the
evaluation points P.

Evaluation points P (estimates only): x*, ``center``, the rows of
``points``, center +- r v_k for the eigenvectors v_k of hess F(x*) (all when
d <= 32, else the 16 largest and 16 smallest), and with ``rng`` ``n_sphere``
uniform points on the sphere of radius r around center; r = ``radius``, or
max(1, ||x*||) when no radius is given (then G2 is not computed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, generator, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ._trust_region import max_convex_quadratic_on_ball

if TYPE_CHECKING:
    from .base import Federation

__all__ = ["ProblemConstants", "problem_constants", "CurvatureBounds"]


@dataclass(frozen=True)
class CurvatureBounds:
    """Analytic curvature constants a federation states about itself
    (the hook ``Federation.curvature_bounds``).

    L, mu : smoothness and strong convexity of F over R^d.
    client_L, client_mu : (N,) the same per client.
    exact : True when L and client_L are attained (not only upper bounds).
    note : how they are computed (shown in ``ProblemConstants.notes["L"]``).
    """

    L: float
    mu: float
    client_L: np.ndarray
    client_mu: np.ndarray
    exact: bool
    note: str


@dataclass(frozen=True)
class ProblemConstants:
    """Constants of a federation; see the module docstring for each formula."""

    L: float
    mu: float
    client_L: np.ndarray
    client_mu: np.ndarray
    mu_local: float
    x_star: np.ndarray
    F_star: float
    zeta2: float
    D_k: np.ndarray
    D: float
    delta: float
    sigma2: float
    sigma2_clients: np.ndarray
    G2: float | None
    G2_max: float | None
    radius: float | None
    center: np.ndarray
    scaffold_B2: float
    scaffold_G2: float
    exact: Mapping[str, bool] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def kappa(self) -> float:
        """L / mu (inf when mu = 0)."""
        return self.L / self.mu if self.mu > 0 else float("inf")

    def summary(self) -> str:
        """A compact multi-line description; estimated values are marked '~'."""
        def fmt(name: str, v: Any) -> str:
            mark = "" if self.exact.get(name, True) else "~"
            return f"{name}={mark}{v:.4g}" if v is not None else f"{name}=n/a"
        lines = [
            "  ".join([fmt("L", self.L), fmt("mu", self.mu), fmt("mu_local", self.mu_local),
                       f"L_i in [{self.client_L.min():.4g}, {self.client_L.max():.4g}]"]),
            "  ".join([fmt("zeta2", self.zeta2), fmt("D", self.D), fmt("delta", self.delta),
                       fmt("sigma2", self.sigma2)]),
            "  ".join([fmt("G2", self.G2), fmt("G2_max", self.G2_max),
                       f"radius={self.radius if self.radius is not None else 'n/a'}",
                       fmt("scaffold_B2", self.scaffold_B2), fmt("scaffold_G2", self.scaffold_G2)]),
        ]
        return "\n".join(lines)


_N_DIRECTIONS = 16   # eigenvector directions taken from each end of the spectrum


#: Relative size of a negative D_k taken for round-off (D_k >= 0 holds exactly
#: because x_k* minimises f_k); larger negative values raise OutOfRangeError.
_GAP_ROUNDOFF = 1e-12


def _clamped_gaps(f_at_star: np.ndarray, f_at_own: np.ndarray) -> np.ndarray:
    """D_k = f_k(x*) - f_k(x_k*) with round-off below zero clamped to 0.

    D_k >= 0 exactly, so a computed D_k in [-tol_k, 0) with
    tol_k = _GAP_ROUNDOFF * max(1, |f_k(x*)|, |f_k(x_k*)|) is cancellation error
    and becomes 0 (the bounds refuse D < 0).  A D_k below -tol_k means x_k* is
    not a minimiser of f_k to working accuracy: OutOfRangeError.
    """
    gaps = f_at_star - f_at_own
    tol = _GAP_ROUNDOFF * np.maximum(1.0, np.maximum(np.abs(f_at_star), np.abs(f_at_own)))
    if np.any(gaps < -tol):
        k = int(np.argmin(gaps + tol))
        raise OutOfRangeError(
            f"D_k = f_k(x*) - f_k(x_k*) = {gaps[k]:.3e} < 0 for client {k}: the client optimum is "
            f"not accurate enough to compute D_k (round-off allowance {tol[k]:.1e})")
    return np.maximum(gaps, 0.0)


def _evaluation_points(x_star: np.ndarray, center: np.ndarray, r: float, Hbar: np.ndarray,
                       points: np.ndarray | None, rng: np.random.Generator | None,
                       n_sphere: int) -> np.ndarray:
    d = x_star.shape[0]
    _, V = np.linalg.eigh(Hbar)
    if d > 2 * _N_DIRECTIONS:
        V = np.concatenate([V[:, :_N_DIRECTIONS], V[:, -_N_DIRECTIONS:]], axis=1)
    P = [x_star[None], center[None], center + r * V.T, center - r * V.T]
    if points is not None:
        P.append(points)
    if rng is not None and n_sphere > 0:
        Z = rng.standard_normal((n_sphere, d))
        P.append(center + r * Z / np.linalg.norm(Z, axis=1, keepdims=True))
    return np.concatenate(P)


def _sq_norms_at(fed: Federation, x: np.ndarray) -> tuple[np.ndarray, float]:
    G = fed.client_grad(x)
    gF = fed.weights @ G
    return np.einsum("ij,ij->i", G, G), float(gF @ gF)


def _quadratic_G2(fed: Federation, H: np.ndarray, center: np.ndarray, r: float) -> tuple[float, float]:
    """Exact G2 and G2_max over the ball for clients with constant Hessians H (N, d, d):
    grad f_i(center + u) = grad f_i(center) + H_i u."""
    g = fed.client_grad(center)                                  # grad f_i(center)
    H2 = np.matmul(H, H)
    M = np.einsum("i,ijk->jk", fed.weights, H2)
    lin = np.einsum("i,ijk,ik->j", fed.weights, H, g)
    q0 = float(fed.weights @ np.einsum("ij,ij->i", g, g))
    G2 = max_convex_quadratic_on_ball(M, lin, q0, r)
    Hg = np.einsum("ijk,ik->ij", H, g)
    per = [max_convex_quadratic_on_ball(H2[i], Hg[i], float(g[i] @ g[i]), r)   # constants: not a hot path
           for i in range(fed.n_clients)]
    return G2, float(max(per))


def _affine_scaffold(Hs: np.ndarray, Hbar: np.ndarray, gstar: np.ndarray, B2: float | None
                     ) -> tuple[float, float]:
    """(B^2, G^2) of the rule in the module docstring for gradients affine in x
    with client Hessians Hs and global Hessian Hbar."""
    N, d = gstar.shape
    Hinv = np.linalg.inv(Hbar)
    T = np.matmul(Hs, Hinv)                                      # H_i Hbar^{-1}
    Tf = T.reshape(-1, d)
    K = (Tf.T @ Tf) / N
    K = 0.5 * (K + K.T)
    c = np.einsum("ikj,ik->j", T, gstar) / N
    z = float(np.einsum("ij,ij->", gstar, gstar)) / N
    lam_max = float(np.linalg.eigvalsh(K)[-1])
    if B2 is None:
        B2 = 2.0 * lam_max
    elif B2 <= lam_max:
        raise InvalidHyperparameterError(
            f"scaffold_B2 must exceed lambda_max(K) = {lam_max:.6g} for a finite G^2, got {B2!r}")
    G2 = z + float(c @ np.linalg.solve(B2 * np.eye(d) - K, c))
    return float(B2), G2


def problem_constants(fed: Federation, *, radius: float | None = None, center: ArrayLike | None = None,
                      points: ArrayLike | None = None, rng: np.random.Generator | None = None,
                      n_sphere: int = 64, scaffold_B2: float | None = None) -> ProblemConstants:
    """Compute the :class:`ProblemConstants` of ``fed`` (formulas in the module docstring).

    Parameters
    ----------
    radius : float, optional
        Radius of the ball for G2 / G2_max (not computed without it).
    center : array (d,), optional
        Ball centre (default x*).
    points : array (k, d), optional
        Extra evaluation points for the estimated constants.
    rng : numpy.random.Generator, optional
        Adds ``n_sphere`` random sphere points to the evaluation set.
    scaffold_B2 : float, optional
        B^2 of the (G, B) pair; default by the rule in the module docstring.
    """
    if not all(hasattr(fed, a) for a in ("optimum", "client_grad", "client_loss", "n_clients", "dim")):
        raise InvalidProblemError(f"fed must be a Federation, got {type(fed).__name__}")
    x_star = fed.optimum()
    d, N = fed.dim, fed.n_clients
    p = fed.weights
    is_quad = fed.has_constant_hessians     # every f_i quadratic: Hessians are global
    exact: dict[str, bool] = {}
    notes: dict[str, str] = {}
    if radius is not None:
        radius = positive("radius", radius, allow_zero=True)
    c0 = x_star if center is None else finite_array("center", center, ndim=1,
                                                    error=InvalidHyperparameterError)
    if c0.shape != (d,):
        raise InvalidHyperparameterError(f"center must have shape ({d},), got {c0.shape}")
    if points is not None:
        points = finite_array("points", points, ndim=2, error=InvalidHyperparameterError)
        if points.shape[1] != d:
            raise InvalidHyperparameterError(f"points must have shape (k, {d}), got {points.shape}")
    if scaffold_B2 is not None:
        scaffold_B2 = positive("scaffold_B2", scaffold_B2)
    if rng is not None:
        rng = generator("rng", rng)

    # smoothness and convexity
    Hs = fed.client_hess(x_star)
    Hbar = np.einsum("i,ijk->jk", p, Hs)
    lam_bar = np.linalg.eigvalsh(Hbar)
    mu_local = float(lam_bar[0])
    bounds = fed.curvature_bounds()
    if bounds is not None:
        L, mu = float(bounds.L), float(bounds.mu)
        client_L, client_mu = np.asarray(bounds.client_L, float), np.asarray(bounds.client_mu, float)
        exact["L"] = exact["client_L"] = bool(bounds.exact)
        notes["L"] = bounds.note
    else:
        lam = np.linalg.eigvalsh(Hs)
        L, mu = float(lam_bar[-1]), mu_local
        client_L, client_mu = lam[:, -1], lam[:, 0]
        for k in ("L", "mu", "client_L", "client_mu"):
            exact[k] = False
        notes["L"] = notes["mu"] = "no analytic constants: eigenvalues of the Hessians at x* (local estimate)"

    # heterogeneity at the optimum
    gstar = fed.client_grad(x_star)
    zeta2 = float(p @ np.einsum("ij,ij->i", gstar, gstar))
    X_i = fed.client_optima()
    D_k = _clamped_gaps(fed.client_loss(x_star), fed.client_loss(X_i, np.arange(N)))
    D = float(p @ D_k)
    delta = float(np.abs(np.linalg.eigvalsh(Hs - Hbar)).max())
    notes["delta"] = "Hessians are constant" if is_quad else "Hessians evaluated at x*"
    notes["D_k"] = ("f_k(x*) - f_k(x_k*), plain client objectives; round-off below 0 "
                    f"(at most {_GAP_ROUNDOFF:g} x max(1, |f_k|)) clamped to 0")

    # evaluation points for the estimated constants
    r_eval = radius if radius is not None else max(1.0, float(np.linalg.norm(x_star)))
    P = _evaluation_points(x_star, c0, r_eval, Hbar, points, rng, n_sphere)

    # oracle variance
    if fed.batch_size is not None:
        if not hasattr(fed, "minibatch_variance"):
            raise InvalidProblemError(
                f"{type(fed).__name__} has a minibatch oracle but no minibatch_variance(X); "
                "sigma^2 cannot be computed")
        var = np.stack([fed.minibatch_variance(x) for x in P])    # loop over points, not clients
        sigma2_clients = var.max(axis=0)
        exact["sigma2"] = False
        notes["sigma2"] = f"minibatch: max of the exact variance over {P.shape[0]} evaluation points"
    elif fed.noise_sigma2 is not None:
        sigma2_clients = fed.noise_sigma2
        exact["sigma2"] = True
        notes["sigma2"] = "Gaussian noise oracle: configured value"
    else:
        sigma2_clients = np.zeros(N)
        exact["sigma2"] = True
        notes["sigma2"] = "exact oracle"
    sigma2 = float(sigma2_clients.max())

    # bounded gradients over a ball
    G2 = G2_max = None
    if radius is not None:
        if is_quad:
            G2, G2_max = _quadratic_G2(fed, Hs, c0, radius)
            exact["G2"] = exact["G2_max"] = True
            notes["G2"] = "trust-region maximum over the ball (exact)"
        else:
            inside = np.linalg.norm(P - c0, axis=1) <= radius * (1 + 1e-12)
            sq = [(_sq_norms_at(fed, x)[0]) for x in P[inside]]
            G2 = float(max(p @ s for s in sq))
            G2_max = float(max(s.max() for s in sq))
            exact["G2"] = exact["G2_max"] = False
            notes["G2"] = f"max over {int(inside.sum())} points in the ball (a lower estimate of the sup)"

    if G2 is not None and G2_max is not None and not (np.isfinite(G2) and np.isfinite(G2_max)):
        raise OutOfRangeError(f"radius={radius!r}: the squared gradient norms over the ball overflow float64 "
                              f"(G2 = {G2!r}); give a smaller radius")

    # SCAFFOLD (G, B)
    B2, G2s = _affine_scaffold(Hs, Hbar, gstar, scaffold_B2)
    if is_quad:
        exact["scaffold_G2"] = True
        notes["scaffold_G2"] = "holds on all of R^d; B^2 rule: 2 lambda_max(K) unless given"
    else:
        vals = [_sq_norms_at(fed, x) for x in P]          # loop over points, not clients
        Q = np.array([s.sum() / N for s, _ in vals])
        gF2 = np.array([g for _, g in vals])
        G2s = max(G2s, float(np.max(Q - B2 * gF2)))
        exact["scaffold_G2"] = False
        notes["scaffold_G2"] = (f"B^2 from the Hessians at x*, G^2 the max of the local affine value "
                                f"and {P.shape[0]} evaluation points")
    exact["scaffold_B2"] = exact["scaffold_G2"]

    return ProblemConstants(
        L=L, mu=mu, client_L=client_L, client_mu=client_mu, mu_local=mu_local,
        x_star=x_star, F_star=fed.loss(x_star), zeta2=zeta2, D_k=D_k, D=D, delta=delta,
        sigma2=sigma2, sigma2_clients=np.asarray(sigma2_clients, float).copy(),
        G2=G2, G2_max=G2_max, radius=radius, center=c0.copy(),
        scaffold_B2=float(B2), scaffold_G2=float(G2s),
        exact=MappingProxyType(exact), notes=MappingProxyType(notes))
