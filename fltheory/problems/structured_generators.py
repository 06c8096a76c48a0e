"""Random structured quadratic federations with exact L, mu and heterogeneity.

:func:`random_structured_quadratic` builds H_i = diag(D_i) + U_i U_i^T (rank 0:
diagonal) whose averaged Hessian Hbar = sum_i p_i H_i has extreme eigenvalues
exactly mu and L (up to float64 rounding) and whose client optima are spread
by an exact heterogeneity, the structured counterpart of
:func:`~fltheory.problems.random_quadratic`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array
from ..aliases import Seed
from ..errors import InvalidHyperparameterError
from ._seeding import as_generator, count
from ._structured_linalg import matvec, woodbury_solve
from .base import normalize_weights
from .generators import spectrum_arguments
from .structured import StructuredQuadraticFederation

__all__ = ["random_structured_quadratic"]


def _low_rank_scale(W: np.ndarray, s: np.ndarray, L: float) -> float:
    """gamma = 1 / lambda_max(W^T diag(1/(L - s)) W) for W (d, R), s < L.

    For lambda > max s, Sylvester's inertia formula for diag(s) + gamma W W^T - lambda I
    gives #{eig > lambda} = #{eig(gamma K(lambda)) > 1} with K(lambda) = W^T (lambda - s)^{-1} W;
    at lambda = L and gamma = 1/lambda_max(K(L)) exactly one eigenvalue of gamma K equals 1
    and none exceeds it, so lambda_max(diag(s) + gamma W W^T) = L.  lambda_max(K) is taken
    from the smaller of the Gram matrices Z^T Z (R x R) and Z Z^T (d x d), Z = (L - s)^{-1/2} W."""
    Z = W / np.sqrt(L - s)[:, None]
    G = Z.T @ Z if Z.shape[1] <= Z.shape[0] else Z @ Z.T
    return 1.0 / float(np.linalg.eigvalsh(0.5 * (G + G.T))[-1])


def _client_low_rank_scales(G: np.ndarray, D: np.ndarray, L: float) -> np.ndarray:
    """gamma_i = 1 / lambda_max(G_i^T diag(1/(L - D_i)) G_i) for every client (r x r
    eigenproblems): lambda_max(diag(D_i) + gamma_i G_i G_i^T) = L (see :func:`_low_rank_scale`)."""
    K = np.matmul(np.swapaxes(G, 1, 2), G / (L - D)[:, :, None])
    return 1.0 / np.linalg.eigvalsh(0.5 * (K + np.swapaxes(K, 1, 2)))[:, -1]


def random_structured_quadratic(n_clients: int, dim: int, *, rank: int, L: float, mu: float,
                                heterogeneity: float, seed: Seed, weights: ArrayLike | None = None,
                                n_samples: ArrayLike | None = None, constants: str = "global",
                                optimum: ArrayLike | None = None) -> StructuredQuadraticFederation:
    """Random federation f_i(x) = 1/2 (x - x_i*)^T H_i (x - x_i*), H_i = diag(D_i) + U_i U_i^T.

    Parameters
    ----------
    n_clients, dim : int
        N >= 1 clients in dimension d >= 1.
    rank : int
        r >= 0 columns of every U_i (0: diagonal Hessians); r > 0 needs d >= 2 and L > mu.
    L, mu : float
        L >= mu > 0.  With ``constants="global"`` (default) the extreme eigenvalues of
        Hbar = sum_i p_i H_i, hit up to float64 rounding (relative 1e-15 L / mu); each
        H_i is positive definite, its own extremes are not controlled (they are the
        exact attributes ``client_L``, ``client_mu``).  With ``constants="clients"``
        every H_i has extreme eigenvalues exactly mu and L; the global ones then lie
        in [mu, L].
    heterogeneity : float
        h >= 0: x_i* = x* + u_i with sum_i p_i H_i u_i = 0 (x* is exactly the global
        optimum) and sqrt(sum_i p_i ||u_i||^2) = h exactly; h > 0 needs N >= 2.
    seed : int or numpy.random.Generator
    weights, n_samples : optional
        Client weights as in :class:`~fltheory.problems.StructuredQuadraticFederation`.
    constants : {"global", "clients"}
    optimum : array (d,), optional
        x*; default a draw from N(0, I/d).

    Notes
    -----
    A target diagonal s has s_k0 = mu at a random coordinate k0 and the other entries
    U[mu, L) (rank 0: one of them set to L).  Client diagonals D_ik = s_k B_ik /
    sum_j p_j B_jk with B_ik ~ U[1/2, 3/2], so sum_i p_i D_i = s.  Factors G_i have
    N(0, 1) entries and a zero row k0, and U_i = sqrt(gamma) G_i with gamma from
    :func:`_low_rank_scale`, so lambda_max(Hbar) = L; e_k0 is an eigenvector of Hbar
    with eigenvalue mu and Hbar >= diag(s) >= mu I, so lambda_min(Hbar) = mu.
    The scale costs one eigenproblem of size min(N r, d).  ``constants="clients"``
    applies the same construction to every client separately (its own coordinate
    k0_i, diagonal D_i with entries U[mu, L) and D_i,k0_i = mu, and gamma_i from an
    r x r eigenproblem), so lambda_min(H_i) = mu and lambda_max(H_i) = L.
    """
    N = count("n_clients", n_clients)
    d = count("dim", dim)
    r = count("rank", rank, minimum=0)
    L, mu, h, constants = spectrum_arguments(L, mu, heterogeneity, constants)
    if r > 0 and (d < 2 or L == mu):
        raise InvalidHyperparameterError(
            f"rank = {r} > 0 needs dim >= 2 and L > mu (the low-rank part lifts lambda_max above the "
            f"diagonal), got dim = {d}, L = {L!r}, mu = {mu!r}")
    if r > d:
        raise InvalidHyperparameterError(f"rank must be <= dim = {d}, got {r}")
    if d == 1 and L != mu:
        raise InvalidHyperparameterError(
            f"in dimension 1 the extreme eigenvalues coincide: need L == mu, got L = {L!r}, mu = {mu!r}")
    if N == 1 and h > 0:
        raise InvalidHyperparameterError(f"a single client has x_1* = x*: heterogeneity must be 0, got {h!r}")
    rng = as_generator(seed)
    p, _ = normalize_weights(N, n_samples, weights)
    if constants == "global":
        order = rng.permutation(d)
        s = rng.uniform(mu, L, size=d)
        s[order[0]] = mu
        if r == 0 and d > 1:
            s[order[1]] = L
        B = rng.uniform(0.5, 1.5, size=(N, d))
        D = s * B / (p @ B)
        G = rng.standard_normal((N, d, r))
        G[:, order[0], :] = 0.0
        if r:
            W = np.swapaxes(G * np.sqrt(p)[:, None, None], 0, 1).reshape(d, N * r)
            G *= np.sqrt(_low_rank_scale(W, s, L))
    else:
        orders = rng.permuted(np.broadcast_to(np.arange(d), (N, d)), axis=1)
        rows = np.arange(N)
        D = rng.uniform(mu, L, size=(N, d))
        D[rows, orders[:, 0]] = mu
        if r == 0 and d > 1:
            D[rows, orders[:, 1]] = L
        G = rng.standard_normal((N, d, r))
        G[rows, orders[:, 0], :] = 0.0
        if r:
            G *= np.sqrt(_client_low_rank_scales(G, D, L))[:, None, None]
    V = np.ascontiguousarray(np.swapaxes(G, 1, 2))
    if optimum is None:
        x_star = rng.standard_normal(d) / np.sqrt(d)
    else:
        x_star = finite_array("optimum", optimum, ndim=1, error=InvalidHyperparameterError)
        if x_star.shape != (d,):
            raise InvalidHyperparameterError(f"optimum must have shape ({d},), got {x_star.shape}")
    U = rng.standard_normal((N, d))
    shift = p @ matvec(D, V, U)                                  # sum_i p_i H_i u_i
    U -= woodbury_solve(D, V, np.broadcast_to(shift, (N, d)).copy())
    spread = np.sqrt(p @ np.einsum("ij,ij->i", U, U))
    U = U * (h / spread) if h > 0 else np.zeros_like(U)
    X_opt = x_star + U
    e = matvec(D, V, X_opt)
    c = 0.5 * np.einsum("ni,ni->n", e, X_opt)
    return StructuredQuadraticFederation(D, e, G, n_samples=n_samples, weights=weights, offsets=c)
