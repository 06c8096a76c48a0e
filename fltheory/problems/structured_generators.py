"""Random structured quadratic federations with exact L, mu and heterogeneity.

:func:`random_structured_quadratic` builds H_i = diag(D_i) + U_i U_i^T (rank 0:
diagonal) whose averaged Hessian Hbar = sum_i p_i H_i has extreme eigenvalues
exactly mu and L (up to float64 rounding) and whose client optima are spread
by an exact heterogeneity, the structured counterpart of
:func:`~fltheory.problems.random_quadratic`.
"""

from __future__ import annotations

import copy

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array
from ..aliases import Seed
from ..errors import InvalidHyperparameterError
from ._chunking import client_slices
from ._seeding import as_generator, count
from ._structured_linalg import matvec, woodbury_solve
from .base import normalize_weights
from .generators import overflow_guard, require_finite, spectrum_arguments
from .structured import StructuredQuadraticFederation

__all__ = ["random_structured_quadratic"]


def _gram(Z: np.ndarray) -> np.ndarray:
    """The smaller of the Gram matrices Z^T Z (R x R) and Z Z^T (d x d) of a (d, R) array."""
    return Z.T @ Z if Z.shape[1] <= Z.shape[0] else Z @ Z.T


def _inverse_top_eigenvalue(G: np.ndarray) -> float:
    """1 / lambda_max of the symmetric part 0.5 (G + G^T) of a square array, which is
    overwritten: its lower triangle (the only part ``eigvalsh`` reads) receives
    0.5 (G_ij + G_ji), computed in blocks of rows (each block reads columns not yet
    written), so no second n x n array is held besides ``eigvalsh``'s own copy."""
    n = G.shape[0]
    per = max(1, _CHUNK_BYTES // max(8 * n, 1))
    for a in range(0, n, per):
        b = min(a + per, n)
        T = G[a:b, :b] + G[:b, a:b].T
        T *= 0.5
        G[a:b, :b] = T
    return 1.0 / float(np.linalg.eigvalsh(G)[-1])


def _client_low_rank_scales(G: np.ndarray, D: np.ndarray, L: float) -> np.ndarray:
    """gamma_i = 1 / lambda_max(G_i^T diag(1/(L - D_i)) G_i) for every client (r x r
    eigenproblems): lambda_max(diag(D_i) + gamma_i G_i G_i^T) = L (see :func:`_factors`)."""
    K = np.matmul(np.swapaxes(G, 1, 2), G / (L - D)[:, :, None])
    return 1.0 / np.linalg.eigvalsh(0.5 * (K + np.swapaxes(K, 1, 2)))[:, -1]


#: Bytes of factors drawn and transformed at a time: the generator then peaks at about
#: its final arrays plus a few such chunks.
_CHUNK_BYTES = 1 << 18


def _factors(rng: np.random.Generator, p: np.ndarray, D: np.ndarray, s: np.ndarray | None, zero: np.ndarray,
             r: int, L: float) -> np.ndarray:
    """The stored factors V_i = sqrt(gamma) G_i^T -> (N, r, d), G_i (d, r) with N(0, 1)
    entries (all clients' drawn in one go from ``rng``, in client order) and row
    ``zero[i]`` of G_i set to 0.

    Global constants (``s`` given, every entry below L): gamma = 1 / lambda_max(W^T
    diag(1/(L - s)) W) with W = [sqrt(p_1) G_1, ..., sqrt(p_N) G_N] (d x N r), so that
    lambda_max(diag(s) + gamma W W^T) = L.  Why: for lambda > max s, Sylvester's law of
    inertia applied to diag(s) + gamma W W^T - lambda I gives #{eigenvalues > lambda} =
    #{eigenvalues of gamma K(lambda) > 1} with K(lambda) = W^T (lambda - s)^{-1} W; at
    lambda = L exactly one eigenvalue of gamma K equals 1 and none exceeds it.  lambda_max(K)
    comes from the smaller Gram matrix of Z = (L - s)^{-1/2} W (:func:`_gram`).  Client
    constants (``s`` None): gamma_i from :func:`_client_low_rank_scales` with D_i.

    Built chunk by chunk with the same operations on every entry as on whole arrays (so
    the same bits): for global constants, Z = W / sqrt(L - s) is assembled from the
    draws, gamma taken from it, and the Gaussians drawn again from a copy of the
    generator to form V (each number is used as drawn), so memory holds Z or V, never
    G, W, Z and V together."""
    N, d = D.shape
    chunks = client_slices(N, 8 * d * max(r, 1), _CHUNK_BYTES)     # (d, max(r, 1)) factors per client
    if s is not None:
        start = copy.deepcopy(rng)
        Z = np.empty((d, N, r))
        root = np.sqrt(p)
        for c in chunks:
            G = rng.standard_normal((c.stop - c.start, d, r))
            G[np.arange(G.shape[0]), zero[c], :] = 0.0
            np.multiply(np.swapaxes(G, 0, 1), root[None, c, None], out=Z[:, c, :])     # W = G sqrt(p)
        Z /= np.sqrt(L - s)[:, None, None]
        gram = _gram(Z.reshape(d, N * r))
        del Z
        scale = np.sqrt(_inverse_top_eigenvalue(gram))            # sqrt(gamma)
        del gram
        V = np.empty((N, r, d))
        for c in chunks:
            G = start.standard_normal((c.stop - c.start, d, r))
            G[np.arange(G.shape[0]), zero[c], :] = 0.0
            G *= scale
            V[c] = np.swapaxes(G, 1, 2)
        return V
    V = np.empty((N, r, d))
    for c in chunks:
        G = rng.standard_normal((c.stop - c.start, d, r))
        G[np.arange(G.shape[0]), zero[c], :] = 0.0
        G *= np.sqrt(_client_low_rank_scales(G, D[c], L))[:, None, None]
        V[c] = np.swapaxes(G, 1, 2)
    return V


@overflow_guard("random_structured_quadratic", "L", "mu", "heterogeneity", "optimum")
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
    :func:`_factors`, so lambda_max(Hbar) = L; e_k0 is an eigenvector of Hbar
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
        D = rng.uniform(0.5, 1.5, size=(N, d))           # B, then D = s B / (p @ B) in place
        column = p @ D
        D *= s
        D /= column
        zero = np.full(N, order[0])
        V = _factors(rng, p, D, s, zero, r, L) if r else np.zeros((N, 0, d))
    else:
        orders = rng.permuted(np.broadcast_to(np.arange(d), (N, d)), axis=1)
        rows = np.arange(N)
        D = rng.uniform(mu, L, size=(N, d))
        D[rows, orders[:, 0]] = mu
        if r == 0 and d > 1:
            D[rows, orders[:, 1]] = L
        zero = orders[:, 0].copy()
        del orders
        V = _factors(rng, p, D, None, zero, r, L) if r else np.zeros((N, 0, d))
    if optimum is None:
        x_star = rng.standard_normal(d) / np.sqrt(d)
    else:
        x_star = finite_array("optimum", optimum, ndim=1, error=InvalidHyperparameterError)
        if x_star.shape != (d,):
            raise InvalidHyperparameterError(f"optimum must have shape ({d},), got {x_star.shape}")
    X_opt, c = _client_optima(rng, p, D, V, x_star, h)
    e = X_opt                                                    # H_i x_i*, written over x_i* (see there)
    require_finite(e=e, offsets=c)
    return StructuredQuadraticFederation._adopt(D, e, V, n_samples=n_samples, weights=weights, offsets=c)


def _client_optima(rng: np.random.Generator, p: np.ndarray, D: np.ndarray, V: np.ndarray, x_star: np.ndarray,
                   h: float) -> tuple[np.ndarray, np.ndarray]:
    """(E, c): the linear terms e_i = H_i x_i* (rows of E) and offsets c_i = 1/2 e_i^T x_i* of the
    client optima x_i* = x* + u_i, u_i = h (g_i - H_i^{-1} s) / spread with g_i ~ N(0, I) (all
    clients' drawn at once from ``rng``), s = sum_i p_i H_i g_i and spread =
    sqrt(sum_i p_i ||g_i - H_i^{-1} s||^2) (h = 0: u_i = 0).

    Memory holds one (N, d) array besides D and V: s is formed from the Gaussians drawn again,
    chunk by chunk, from a copy of the generator (H_i g_i of every client in one (N, d) array,
    freed before the Gaussians are drawn from ``rng``); the solves run chunk by chunk in
    place, and e_i overwrites x_i* once c_i is taken.  Every row is computed by the same
    operations as from the whole arrays (matvec and woodbury_solve are row by row), so the
    bits are those of the whole-array expressions."""
    N, d = D.shape
    chunks = client_slices(N, 8 * d * (V.shape[1] + 1), _CHUNK_BYTES)
    start = copy.deepcopy(rng)
    HG = np.empty((N, d))
    for k in chunks:
        HG[k] = matvec(D[k], V[k], start.standard_normal((k.stop - k.start, d)))
    shift = p @ HG                                               # sum_i p_i H_i g_i
    del HG
    U = rng.standard_normal((N, d))
    for k in chunks:
        U[k] -= woodbury_solve(D[k], V[k], np.broadcast_to(shift, (k.stop - k.start, d)))     # B is only read
    spread = np.sqrt(p @ np.einsum("ij,ij->i", U, U))
    if h > 0:
        U *= h / spread
    else:
        U[...] = 0.0
    X_opt = U                                                    # x* + u_i, in place
    X_opt += x_star
    c = np.empty(N)
    for k in chunks:
        e = matvec(D[k], V[k], X_opt[k])
        c[k] = np.einsum("ni,ni->n", e, X_opt[k])
        X_opt[k] = e
    c *= 0.5
    return X_opt, c
