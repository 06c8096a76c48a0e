"""Problem constants of diagonal quadratic federations at any size (no d x d matrix).

For H_i = diag(D_i) every formula of :func:`~fltheory.problems.problem_constants`
(its module docstring) becomes coordinate-wise, exact and O(N d):

* delta = max_i ||H_i - Hbar||_2 = max_{i,k} |D_ik - Dbar_k|;
* G2 = max over ||s|| <= radius of sum_i p_i ||g_i + D_i * s||^2 (g_i = grad f_i(center)),
  a trust-region problem with diagonal M = sum_i p_i D_i^2; G2_max the largest of the
  per-client maxima (the same with M = D_i^2);
* SCAFFOLD's (G, B): T_i = H_i Hbar^{-1} = diag(t_i), t_ik = D_ik / Dbar_k, so
  K = (1/N) sum_i T_i^2 is diagonal, c = (1/N) sum_i t_i * grad f_i(x*), and
  G^2 = z + sum_k c_k^2 / (B^2 - K_k) with B^2 = 2 max_k K_k unless given.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError
from ._trust_region import max_diagonal_quadratic_on_ball
from .constants import ProblemConstants, _clamped_gaps

if TYPE_CHECKING:
    from .structured import StructuredQuadraticFederation

__all__ = ["diagonal_constants"]


def _ball_max(lam: np.ndarray, g: np.ndarray, q0: float, r: float) -> float:
    order = np.argsort(lam, kind="stable")
    return max_diagonal_quadratic_on_ball(lam[order], g[order], q0, r)


def diagonal_constants(fed: StructuredQuadraticFederation, *, radius: float | None = None,
                       center: ArrayLike | None = None, scaffold_B2: float | None = None) -> ProblemConstants:
    """:class:`~fltheory.problems.ProblemConstants` of a rank-0 (diagonal) structured
    federation, every field exact (module docstring).  ``radius``, ``center`` and
    ``scaffold_B2`` as in :func:`~fltheory.problems.problem_constants`."""
    if fed.rank != 0:
        raise InvalidProblemError(f"diagonal_constants needs diagonal Hessians (rank 0), got rank {fed.rank}")
    if fed.batch_size is not None:
        raise InvalidProblemError("a structured federation has no minibatch oracle")
    d, N, p = fed.dim, fed.n_clients, fed.weights
    D = fed.diag
    x_star = fed.optimum()
    if radius is not None:
        radius = positive("radius", radius, allow_zero=True)
    c0 = x_star if center is None else finite_array("center", center, ndim=1, error=InvalidHyperparameterError)
    if c0.shape != (d,):
        raise InvalidHyperparameterError(f"center must have shape ({d},), got {c0.shape}")
    if scaffold_B2 is not None:
        scaffold_B2 = positive("scaffold_B2", scaffold_B2)
    bounds = fed.curvature_bounds()
    exact: dict[str, bool] = {"L": bounds.exact, "client_L": bounds.exact, "sigma2": True,
                              "scaffold_G2": True, "scaffold_B2": True}
    notes: dict[str, str] = {"L": bounds.note, "delta": "Hessians are constant",
                             "D_k": "f_k(x*) - f_k(x_k*), plain client objectives (diagonal Hessians)"}
    gstar = fed.client_grad(x_star)
    zeta2 = float(p @ np.einsum("ij,ij->i", gstar, gstar))
    D_k = _clamped_gaps(fed.client_loss(x_star), fed.client_loss(fed.client_optima(), np.arange(N)))
    Dbar = p @ D
    delta = float(np.abs(D - Dbar).max())
    if fed.noise_sigma2 is not None:
        sigma2_clients = fed.noise_sigma2
        notes["sigma2"] = "Gaussian noise oracle: configured value"
    else:
        sigma2_clients = np.zeros(N)
        notes["sigma2"] = "exact oracle"
    G2 = G2_max = None
    if radius is not None:
        g = fed.client_grad(c0)
        G2 = _ball_max(p @ (D * D), p @ (D * g), float(p @ np.einsum("ij,ij->i", g, g)), radius)
        G2_max = max(_ball_max(D[i] * D[i], D[i] * g[i], float(g[i] @ g[i]), radius)   # constants: not a hot path
                     for i in range(N))
        notes["G2"] = "trust-region maximum over the ball (exact)"
        exact["G2"] = exact["G2_max"] = True
    t = D / Dbar
    K = np.einsum("ik,ik->k", t, t) / N
    c = np.einsum("ik,ik->k", t, gstar) / N
    z = float(np.einsum("ij,ij->", gstar, gstar)) / N
    lam_max = float(K.max())
    if scaffold_B2 is None:
        B2 = 2.0 * lam_max
    elif scaffold_B2 <= lam_max:
        raise InvalidHyperparameterError(
            f"scaffold_B2 must exceed lambda_max(K) = {lam_max:.6g} for a finite G^2, got {scaffold_B2!r}")
    else:
        B2 = scaffold_B2
    G2s = z + float(np.sum(c * c / (B2 - K)))
    notes["scaffold_G2"] = "holds on all of R^d; B^2 rule: 2 lambda_max(K) unless given"
    return ProblemConstants(
        L=bounds.L, mu=bounds.mu, client_L=bounds.client_L, client_mu=bounds.client_mu, mu_local=bounds.mu,
        x_star=x_star, F_star=fed.loss(x_star), zeta2=zeta2, D_k=D_k, D=float(p @ D_k), delta=delta,
        sigma2=float(sigma2_clients.max()), sigma2_clients=np.asarray(sigma2_clients, float).copy(),
        G2=G2, G2_max=G2_max, radius=radius, center=c0.copy(), scaffold_B2=float(B2), scaffold_G2=float(G2s),
        exact=MappingProxyType(exact), notes=MappingProxyType(notes))
