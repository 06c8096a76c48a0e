"""Random problem families with controlled constants (docs/theory/problems.md).

* :func:`random_quadratic`: quadratic clients whose smoothness and strong
  convexity are hit exactly (globally or per client) and whose optima are
  spread by an exact ``heterogeneity``;
* :func:`random_least_squares`: least-squares clients with row data (so the
  minibatch oracle and the empirical Fisher are available);
* :func:`lognormal_sizes`: client sizes floor(LogNormal(m, s)) + minimum;
* re-exported: :func:`~fltheory.problems.synthetic.synthetic_fedprox` and the
  partitions :func:`~fltheory.problems.partitions.dirichlet_partition`,
  :func:`~fltheory.problems.partitions.m_class_partition`.

Every function takes ``seed``: an int or a ``numpy.random.Generator``.
"""

from __future__ import annotations


import copy
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from .._validate import choice, finite_array, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ._chunking import client_slices
from ._seeding import MAX_SIZE, as_generator, count
from ..aliases import Seed
from .base import normalize_weights
from .partitions import dirichlet_partition, m_class_partition
from .quadratic import QuadraticFederation
from .synthetic import SyntheticData, synthetic_fedprox

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["random_quadratic", "random_least_squares", "lognormal_sizes", "synthetic_fedprox",
           "SyntheticData", "dirichlet_partition", "m_class_partition"]


def _orthogonal(rng: np.random.Generator, n: int, d: int, scratch: np.ndarray | None = None) -> np.ndarray:
    """n Haar-random orthogonal d x d matrices (QR of Gaussians, signs fixed).  ``scratch``: an
    (n, d, d) float64 array that receives the Gaussians (the same numbers as a new array)."""
    G = rng.standard_normal((n, d, d)) if scratch is None else rng.standard_normal(out=scratch)
    Q, R = np.linalg.qr(G)
    del G
    signs = np.sign(np.einsum("nii->ni", R))
    del R
    Q *= signs[:, None, :]                      # in place: the bits of Q * signs, one (n, d, d) array less
    return Q


#: Bytes of client matrices handled at a time while generating: random_quadratic then
#: peaks at its final Hessians plus a few such chunks (not 4 full copies).
_CHUNK_BYTES = 1 << 18


def _chunks(n: int, d: int) -> list[slice]:
    """Slices of clients holding about _CHUNK_BYTES of d x d matrices each (:func:`client_slices`)."""
    return client_slices(n, 8 * d * d, _CHUNK_BYTES)


def _client_hessians(rng: np.random.Generator, n: int, d: int, L: float, mu: float,
                     out: np.ndarray | None = None) -> np.ndarray:
    """H_i = Q_i diag(s_i) Q_i^T for n clients: Q_i Haar orthogonal (the Gaussians of all Q_i
    drawn first, in client order), then the spectra s_i (:func:`_spectra`).

    Built chunk by chunk: the Gaussians are drawn once to move ``rng`` past them (a
    Generator fills an array in order, so chunks of draws are the same numbers as one
    draw), the spectra are drawn, and a copy of the generator taken before the Gaussians
    draws them again chunk by chunk for the QR factorisations.  Every matrix is computed
    by the same operations as from the whole stack, so the result is the same to the bit,
    while memory peaks at the result plus one chunk.  ``out``: an (n, d, d) float64 array
    that receives the result."""
    start, spectra = _client_draws(rng, n, d, L, mu)
    return _build_client_hessians(start, spectra, out)


def _client_draws(rng: np.random.Generator, n: int, d: int, L: float, mu: float
                  ) -> tuple[np.random.Generator, np.ndarray]:
    """(a copy of ``rng`` before the Gaussians of the Q_i, the spectra s_i): moves ``rng`` past
    the draws of :func:`_client_hessians` (the Gaussians chunk by chunk, then the spectra)."""
    start = copy.deepcopy(rng)
    for c in _chunks(n, d):
        rng.standard_normal((c.stop - c.start, d, d))
    return start, _spectra(rng, n, d, L, mu)


def _build_client_hessians(start: np.random.Generator, spectra: np.ndarray, out: np.ndarray | None = None
                           ) -> np.ndarray:
    """The Hessians of :func:`_client_hessians` from :func:`_client_draws`'s generator copy and
    spectra, chunk by chunk (each chunk's Gaussians drawn into its slot of the result)."""
    n, d = spectra.shape
    H = np.empty((n, d, d)) if out is None else out
    for c in _chunks(n, d):
        Q = _orthogonal(start, c.stop - c.start, d, scratch=H[c])
        np.matmul(Q * spectra[c, None, :], np.swapaxes(Q, 1, 2), out=H[c])
        del Q                                    # not held while the next chunk's QR runs
    return H


def _spectra(rng: np.random.Generator, n: int, d: int, L: float, mu: float) -> np.ndarray:
    """n ascending spectra with first entry mu, last entry L, the rest U[mu, L]."""
    inner = rng.uniform(mu, L, size=(n, max(d - 2, 0)))
    if d == 1:
        return np.full((n, 1), L)
    return np.sort(np.concatenate([np.full((n, 1), mu), inner, np.full((n, 1), L)], axis=1), axis=1)


def _psd_power(S: np.ndarray, power: float) -> np.ndarray:
    lam, V = np.linalg.eigh(S)
    with np.errstate(invalid="ignore", divide="ignore"):   # rounding below 0: caught by _reliably_spd
        return (V * lam ** power) @ V.T


def _target_spectrum(rng: np.random.Generator, d: int, L: float, mu: float) -> np.ndarray:
    """The spectrum s of the global target S = Q_s diag(s) Q_s^T: the Gaussians of Q_s are
    drawn (to move ``rng`` past them; :func:`_target` draws them again from a copy of the
    generator taken before), then s (:func:`_spectra`)."""
    rng.standard_normal((1, d, d))
    return _spectra(rng, 1, d, L, mu)[0]


def _target(rng: np.random.Generator, d: int, s: np.ndarray) -> np.ndarray:
    """S = 0.5 (T + T^T), T = Q_s diag(s) Q_s^T, Q_s Haar orthogonal from ``rng``."""
    Qs = _orthogonal(rng, 1, d)[0]
    S = (Qs * s) @ Qs.T
    del Qs
    return 0.5 * (S + S.T)


def _congruence(p: np.ndarray, H: np.ndarray, root: np.ndarray) -> np.ndarray:
    """M = Hbar^{-1/2} S^{1/2} with Hbar = sum_i p_i H_i and ``root`` = S^{1/2} (so that
    sum_i p_i M^T H_i M = S); Hbar is released once its eigenvectors are known."""
    Hbar = np.einsum("i,ijk->jk", p, H)
    lam, V = np.linalg.eigh(Hbar)
    del Hbar
    with np.errstate(invalid="ignore", divide="ignore"):   # rounding below 0: caught by _reliably_spd
        A = (V * lam ** -0.5) @ V.T
    del V
    return A @ root


#: Largest condition number L/mu random_quadratic accepts: beyond it float64
#: cannot place the smallest eigenvalue to within 1% (measured: 1e-3 relative at
#: 1e13..1e14, 10% at 1e15).
MAX_CONDITION = 1e14


def overflow_guard(function: str, *scales: str) -> Callable[[F], F]:
    """Decorator of a generator: its arithmetic runs without numpy's floating-point
    warnings, and a generated problem that overflows float64 (arguments of extreme scale,
    each finite on its own) raises OutOfRangeError naming the generator and ``scales``
    (the names of the arguments that set the problem's scale) instead of an error about
    an internal array (H, e, b, ...) or NaN."""
    def wrap(build: F) -> F:
        @functools.wraps(build)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                try:
                    return build(*args, **kwargs)
                except _Overflow as exc:
                    given = ", ".join(f"{k} = {kwargs[k]!r}" for k in scales if k in kwargs)
                    raise OutOfRangeError(
                        f"{function}({given}): the generated problem overflows float64 ({exc}); "
                        f"use smaller scales") from None
        return guarded  # type: ignore[return-value]
    return wrap


class _Overflow(Exception):
    """Raised inside a generator when a generated array is not finite (see overflow_guard)."""


def require_finite(**arrays: np.ndarray) -> None:
    """_Overflow naming the first of ``arrays`` with a non-finite entry."""
    for name, a in arrays.items():
        if not np.isfinite(a).all():
            raise _Overflow(f"{name} has non-finite entries")


def spectrum_arguments(L: Any, mu: Any, heterogeneity: Any, constants: Any) -> tuple[float, float, float, str]:
    """Checked (L, mu, heterogeneity, constants) of the random quadratic generators.

    0 < mu <= L with L/mu at most :data:`MAX_CONDITION`, heterogeneity >= 0, constants
    "global" or "clients"; typed errors naming the value otherwise.
    """
    L = positive("L", L)
    mu = positive("mu", mu)
    h = positive("heterogeneity", heterogeneity, allow_zero=True)
    constants = choice("constants", constants, ("global", "clients"))
    if mu > L:
        raise InvalidHyperparameterError(f"need L >= mu, got L = {L!r} < mu = {mu!r}")
    if L / mu > MAX_CONDITION:
        raise OutOfRangeError(
            f"condition number L/mu = {L / mu:.3g} (L = {L!r}, mu = {mu!r}) exceeds {MAX_CONDITION:.0e}: "
            f"float64 rounding of about 1e-16 L would move mu by more than 1% of itself")
    return L, mu, h, constants

#: Largest total number of design-matrix entries sum(rows) * dim random_least_squares
#: draws (8e8 bytes in float64); larger requests are refused before allocating.
MAX_LEAST_SQUARES_ENTRIES = 10**8


def _reliably_spd(H: np.ndarray, L: float) -> bool:
    """Every H_i finite with smallest eigenvalue well above float64 rounding of L
    (checked chunk by chunk: no copy of H)."""
    for c in _chunks(H.shape[0], H.shape[1]):
        if not np.all(np.isfinite(H[c])) or not np.min(np.linalg.eigvalsh(H[c])) > _SPD_MARGIN * L:
            return False
    return True


#: Smallest client eigenvalue, relative to L, that the congruence construction may
#: produce before random_quadratic switches to the balanced split.
_SPD_MARGIN = 1e-12


def _balanced_split(p: np.ndarray, H: np.ndarray, Qs: np.ndarray, s_target: np.ndarray) -> None:
    """Client Hessians H_i = S^{1/2} (I + B_i) S^{1/2} with sum_i p_i B_i = 0 and
    ||B_i||_2 <= 1/2, so sum_i p_i H_i = S exactly in exact arithmetic and every
    H_i has its eigenvalues in [mu/2, 3L/2]: SPD at any condition number.
    S^{1/2} = Q_s diag(sqrt(s)) Q_s^T comes from the drawn spectrum, not from an
    eigendecomposition.  The directions of B_i are the drawn client Hessians H0,
    which ``H`` holds on entry; H is overwritten by the result, chunk by chunk
    (G_i = H0_i / ||H0_i||_2, B_i = (1/2) (G_i - sum_j p_j G_j) / max_j ||.||_2, then
    0.5 (K + K^T) with K = S^{1/2} (I + B_i) S^{1/2}, each by the operations of the
    whole-stack expressions)."""
    N, d, _ = H.shape
    chunks = _chunks(N, d)
    for c in chunks:
        H[c] /= np.linalg.norm(H[c], ord=2, axis=(1, 2))[:, None, None]
    mean = np.einsum("i,ijk->jk", p, H)
    scale = 0.0
    for c in chunks:
        H[c] -= mean
        scale = max(scale, float(np.max(np.linalg.norm(H[c], ord=2, axis=(1, 2)))))
    root = (Qs * np.sqrt(s_target)) @ Qs.T
    eye = np.eye(d)
    for c in chunks:
        B = H[c]
        if scale > 0:
            B *= 0.5
            B /= scale
        K = np.matmul(np.matmul(root, eye + B), root)
        K += np.swapaxes(K, 1, 2)                 # K + K^T, then the halving: 0.5 (K + K^T)
        np.multiply(K, 0.5, out=B)


@overflow_guard("random_quadratic", "L", "mu", "heterogeneity", "optimum")
def random_quadratic(n_clients: int, dim: int, *, L: float, mu: float, heterogeneity: float,
                     seed: Seed, weights: ArrayLike | None = None, n_samples: ArrayLike | None = None,
                     constants: str = "global", optimum: ArrayLike | None = None) -> QuadraticFederation:
    """Random quadratic federation f_i(x) = 1/2 (x - x_i*)^T H_i (x - x_i*) (min f_i = 0).

    Parameters
    ----------
    n_clients, dim : int
        N >= 1 clients in dimension d >= 1.
    L, mu : float
        L >= mu > 0.  With ``constants="global"`` (default) the *global*
        Hessian sum_i p_i H_i has extreme eigenvalues exactly mu and L up to
        floating-point rounding of about 1e-15 L (so mu is hit to relative
        1e-15 L/mu: 1e-12 relative for L/mu <= 1e3, measured 8e-12 at 1e4);
        each H_i is SPD but its own extremes are not controlled.  With ``constants="clients"`` every
        H_i = Q_i diag(lambda_i) Q_i^T has extremes exactly mu and L (Q_i Haar
        orthogonal, inner eigenvalues U[mu, L]); the global extremes then lie in
        [mu, L].  ``dim = 1`` needs L = mu.
    heterogeneity : float
        h >= 0.  The client optima are x_i* = x* + u_i with sum_i p_i H_i u_i = 0
        (so x* is exactly the global optimum) and
        sqrt(sum_i p_i ||x_i* - x*||^2) = h exactly.  h = 0 gives identical
        client optima; h > 0 needs N >= 2.
    seed : int or numpy.random.Generator
    weights, n_samples : optional
        Client weights as in :class:`QuadraticFederation` (default uniform).
    constants : {"global", "clients"}
    optimum : array (d,), optional
        x*; default a draw from N(0, I/d).

    Notes
    -----
    Construction of the "global" family: draw H_i as in "clients", form
    Hbar = sum p_i H_i and a target S = Q diag(mu, U[mu, L]..., L) Q^T, and
    replace H_i by M^T H_i M with M = Hbar^{-1/2} S^{1/2}, so that
    sum p_i M^T H_i M = S (a congruence keeps every H_i SPD).  The offsets
    c_i = 1/2 e_i^T x_i* make min f_i = 0, so D_i = f_i(x*) = 1/2 u_i^T H_i u_i.

    At large L/mu the congruence can leave a client Hessian with eigenvalues
    near mu^2/L, below float64 rounding (singular or indefinite).  When a client's
    smallest eigenvalue falls below 1e-12 L the "global" family is built instead
    as H_i = S^{1/2} (I + B_i) S^{1/2} with sum_i p_i B_i = 0 and ||B_i|| <= 1/2
    (so every H_i lies between S/2 and 3S/2), which is SPD at every condition
    number.  The global mu is then hit to about 1e-16 L/mu relative (measured
    2e-3 at L/mu = 1e13).  L/mu above :data:`MAX_CONDITION` = 1e14 raises
    :class:`~fltheory.errors.OutOfRangeError`.
    """
    N = count("n_clients", n_clients)
    d = count("dim", dim)
    L, mu, h, constants = spectrum_arguments(L, mu, heterogeneity, constants)
    if d == 1 and L != mu:
        raise InvalidHyperparameterError(
            f"in dimension 1 the extreme eigenvalues coincide: need L == mu, got L = {L!r}, mu = {mu!r}")
    if N == 1 and h > 0:
        raise InvalidHyperparameterError(
            f"a single client has x_1* = x*: heterogeneity must be 0, got {h!r}")
    rng = as_generator(seed)
    p, _ = normalize_weights(N, n_samples, weights)
    before = copy.deepcopy(rng)                  # to redraw H0 if the balanced split is needed
    start, spectra = _client_draws(rng, N, d, L, mu)
    if constants == "global":
        # the target's draws follow the clients'; S^{1/2} (the same in both passes) is formed
        # before the client Hessians exist, so that its temporaries do not add to them
        target = copy.deepcopy(rng)              # to redraw Q_s for the balanced split (not held meanwhile)
        s_target = _target_spectrum(rng, d, L, mu)
        try:
            root: np.ndarray | None = _psd_power(_target(copy.deepcopy(target), d, s_target), 0.5)
        except np.linalg.LinAlgError:                     # eigh of a matrix spoilt by rounding
            root = None
    H = _build_client_hessians(start, spectra)
    del spectra
    require_finite(H=H)
    if constants == "global":
        try:
            if root is None:
                raise np.linalg.LinAlgError("S^{1/2}")
            for _ in range(2):       # second pass removes the rounding of the first
                M = _congruence(p, H, root)
                for c in _chunks(N, d):                  # M^T H_i M for every client, in place
                    K = np.matmul(np.matmul(M.T, H[c]), M)
                    K += np.swapaxes(K, 1, 2)
                    np.multiply(K, 0.5, out=H[c])
                    del K
                del M
            del root
            spd = _reliably_spd(H, L)
        except np.linalg.LinAlgError:                     # eigh of a matrix spoilt by rounding
            spd = False
        if not spd:
            _client_hessians(before, N, d, L, mu, out=H)     # H0 again (the same draws), in place
            _balanced_split(p, H, _orthogonal(target, 1, d)[0], s_target)
    if optimum is None:
        x_star = rng.standard_normal(d) / np.sqrt(d)
    else:
        x_star = finite_array("optimum", optimum, ndim=1, error=InvalidHyperparameterError)
        if x_star.shape != (d,):
            raise InvalidHyperparameterError(f"optimum must have shape ({d},), got {x_star.shape}")
    U = rng.standard_normal((N, d))
    s = np.einsum("i,ijk,ik->j", p, H, U)
    for c in _chunks(N, d):
        U[c] -= np.linalg.solve(H[c], np.broadcast_to(s, (c.stop - c.start, d))[:, :, None])[:, :, 0]
    spread = np.sqrt(p @ np.einsum("ij,ij->i", U, U))
    del p                                        # the federation computes its own weights
    if h > 0:
        U *= h / spread
    else:
        U[...] = 0.0
    X_opt = U                                    # x* + u_i, in place (the bits of x_star + U)
    X_opt += x_star
    e = np.einsum("nij,nj->ni", H, X_opt)
    c = 0.5 * np.einsum("ni,ni->n", e, X_opt)
    del U, X_opt                                 # (N, d) each: not held while the federation checks H
    require_finite(H=H, e=e, offsets=c)
    return QuadraticFederation._adopt(H, e, n_samples=n_samples, weights=weights, offsets=c)


@overflow_guard("random_least_squares", "heterogeneity", "noise", "ridge")
def random_least_squares(n_clients: int, dim: int, *, rows: ArrayLike, seed: Seed,
                         heterogeneity: float = 0.0, noise: float = 0.0, ridge: float = 0.0,
                         weights: ArrayLike | None = None) -> QuadraticFederation:
    """Least-squares clients f_i(x) = 1/(2 n_i) ||A_i x - b_i||^2 + (ridge/2)||x||^2.

    Rows a_ij ~ N(0, I_d), b_i = A_i w_i + noise * eps_i (eps_i ~ N(0, I)),
    with client targets w_i = w0 + heterogeneity * v_i, w0 ~ N(0, I/d) and v_i
    uniform on the unit sphere, so ||w_i - w0|| = heterogeneity exactly (the
    client minimisers x_i* equal w_i when noise = 0 and ridge = 0).

    Parameters
    ----------
    rows : int or array (N,)
        Row counts n_i >= 1 (n_i >= d needed when ridge = 0).
    weights : optional
        Explicit weights; default p_i = n_i / n.
    """
    N = count("n_clients", n_clients)
    d = count("dim", dim)
    h = positive("heterogeneity", heterogeneity, allow_zero=True)
    noise = positive("noise", noise, allow_zero=True)
    ridge = positive("ridge", ridge, allow_zero=True)
    n = np.asarray(rows)
    if n.ndim == 0:
        n = np.full(N, n)
    if n.shape != (N,) or not np.issubdtype(n.dtype, np.number) or np.any(n != np.round(n)) \
            or np.any(n < 1):
        raise InvalidHyperparameterError(
            f"rows must be a positive integer or {N} positive integers, got {rows!r}")
    if np.any(n > MAX_SIZE) or float(np.sum(n, dtype=np.float64)) * d > MAX_LEAST_SQUARES_ENTRIES:
        raise InvalidHyperparameterError(
            f"rows must be at most {MAX_SIZE} per client and sum(rows) * dim at most "
            f"{MAX_LEAST_SQUARES_ENTRIES:.0e} (the design matrices are stored), got rows={rows!r}, dim={d}")
    n = n.astype(np.int64)
    if ridge == 0 and np.any(n < d):
        i = int(np.argmax(n < d))
        raise InvalidHyperparameterError(
            f"with ridge = 0 every client needs rows >= dim = {d} for an SPD Hessian, got rows[{i}] = {n[i]}")
    rng = as_generator(seed)
    w0 = rng.standard_normal(d) / np.sqrt(d)
    V = rng.standard_normal((N, d))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    W = w0 + h * V
    # rows drawn client after client straight into the zero-padded storage of the federation
    # (the draws of a list of (n_i, d) arrays, without the list): construction only, not a hot path
    A = np.zeros((N, int(n.max()), d))
    for i, k in enumerate(n):
        rng.standard_normal(out=A[i, :k])
    b = np.zeros(A.shape[:2])
    for i, (k, w) in enumerate(zip(n, W)):
        b[i, :k] = A[i, :k] @ w + noise * rng.standard_normal(int(k))
    require_finite(b=b)
    try:
        return QuadraticFederation._from_padded(A, b, n, ridge, weights)
    except InvalidProblemError as exc:
        if "non-finite" not in str(exc):
            raise
        raise _Overflow(str(exc)) from None


def lognormal_sizes(n_clients: int, *, mean: float = 4.0, sigma: float = 2.0, minimum: int = 50,
                    seed: Seed) -> np.ndarray:
    """Client sizes n_k = floor(LogNormal(mean, sigma)) + minimum -> (N,) int64
    (FedProx's synthetic data use mean 4, sigma 2, minimum 50)."""
    N = count("n_clients", n_clients)
    sigma = positive("sigma", sigma, allow_zero=True)
    mean = float(finite_array("mean", mean, ndim=0, error=InvalidHyperparameterError))
    minimum = count("minimum", minimum, minimum=0)
    rng = as_generator(seed)
    with np.errstate(over="ignore"):
        draws = np.floor(rng.lognormal(mean, sigma, N))
    if not np.all(draws <= _MAX_CLIENT_SIZE):
        raise OutOfRangeError(
            f"lognormal_sizes: a drawn size {float(np.max(draws)):.3g} exceeds {_MAX_CLIENT_SIZE:.0e} "
            f"(mean = {mean!r}, sigma = {sigma!r} are log-scale parameters: e^mean is the median size)")
    return draws.astype(np.int64) + minimum


#: Largest client size lognormal_sizes returns (a larger draw is a typed error).
_MAX_CLIENT_SIZE = 1e9
