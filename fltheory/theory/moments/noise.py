"""Gradient-noise models with exactly known conditional covariance.

Every stochastic oracle call of client i at a point y returns
g = grad f_i(y) + eps with E[eps | past] = 0 and a conditional covariance
that the exact-moment recursion needs in expectation:

* :class:`AdditiveNoise`: Cov(eps) = Sigma_i, a constant per client given as
  a scalar sigma^2 (Sigma_i = sigma^2 / d I, so E||eps||^2 = sigma^2, the
  convention of ``Federation.with_gradient_noise``), a per-client (N,) array
  of sigma_i^2 (same convention), a per-client diagonal (N, d) or full
  (N, d, d) covariance.  Non-symmetric or non-PSD input is refused.
* :class:`MinibatchNoise`: least-squares clients f_i(y) = 1/(2 n_i) sum_r
  (a_r^T y - b_r)^2 (+ ridge), oracle the mean of b per-sample gradients
  g_r(y) = a_r (a_r^T y - b_r) (+ ridge y).  With ``u_r = g_r - mean_r g_r =
  D_r [y; 1]``, ``D_r = [a_r a_r^T - mean(a a^T), -(a_r b_r - mean(a b))]``,
  ``Cov(eps | y) = kappa (1/n_i) sum_r D_r [y; 1] [y; 1]^T D_r^T``,
  kappa = 1/b for draws with replacement (the federation's own oracle,
  ``with_minibatch``) and kappa = (n_i - b) / (b (n_i - 1)) without
  replacement (b of the n_i rows).  Its expectation is linear in
  ``E[[y; 1] [y; 1]^T]``, which the recursion supplies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validate import finite_array, instance
from ...errors import InvalidHyperparameterError, InvalidProblemError
from ...problems.base import Federation
from ._checks import count, memory_guard

__all__ = ["AdditiveNoise", "MinibatchNoise", "NoiseModel", "noise_of"]


class AdditiveNoise:
    """Additive noise of constant per-client covariance (module docstring).

    Parameters
    ----------
    cov : float, (N,), (N, d) or (N, d, d)
        sigma^2 (isotropic, total variance), per-client sigma_i^2 (isotropic),
        per-client diagonal variances, or per-client full covariances.
    n_clients, dim : int
    """

    def __init__(self, cov: Any, n_clients: int, dim: int) -> None:
        N = count("n_clients", n_clients, minimum=1, why="the covariance holds one (d, d) block per client")
        d = count("dim", dim, minimum=1, why="the covariance holds one (d, d) block per client")
        memory_guard(f"the noise covariances of {N} clients at d = {d} (and their square roots)", 3.0 * N * d * d)
        a = finite_array("cov (the noise covariance)", cov, error=InvalidProblemError)
        if a.ndim == 0 or a.shape == (N,):
            s = np.broadcast_to(a, (N,))
            if np.any(s < 0):
                raise InvalidProblemError(f"cov: noise variances sigma_i^2 must be >= 0, got {cov!r}")
            full = (s / d)[:, None, None] * np.eye(d)
        elif a.shape == (N, d):
            if np.any(a < 0):
                raise InvalidProblemError(
                    f"cov: diagonal noise variances must be >= 0, got minimum {a.min()!r} in {cov!r}")
            full = a[:, :, None] * np.eye(d)
        elif a.shape == (N, d, d):
            if not np.allclose(a, np.swapaxes(a, 1, 2), rtol=1e-12, atol=1e-14):
                raise InvalidProblemError("cov: noise covariance must be symmetric (each (d, d) block)")
            lam = np.linalg.eigvalsh(a)
            tol = 1e-12 * max(1.0, float(np.abs(lam).max()))
            if np.any(lam < -tol):
                i, j = np.unravel_index(int(np.argmin(lam)), lam.shape)
                raise InvalidProblemError(
                    f"cov: noise covariance of client {int(i)} is not positive semidefinite: eigenvalue "
                    f"{lam[i, j]!r} < 0")
            full = a.copy()
        else:
            raise InvalidProblemError(
                f"cov (noise covariance) must be a scalar or of shape ({N},), ({N}, {d}) or ({N}, {d}, {d}); "
                f"got shape {a.shape}")
        self.cov = full
        lam, vec = np.linalg.eigh(full)
        self._root = vec * np.sqrt(np.maximum(lam, 0.0))[:, None, :]

    def expected_cov(self, client: int, W: np.ndarray) -> np.ndarray:
        """``E[Cov(eps | y)]`` of one call by ``client``; ``W = E[[y; 1] [y; 1]^T]`` is unused."""
        return self.cov[client]

    def sample(self, rng: np.random.Generator, clients: np.ndarray, Y: np.ndarray,
               problem: Federation) -> np.ndarray:
        """One draw of eps for each row (for Monte Carlo cross-checks)."""
        return np.einsum("mij,mj->mi", self._root[clients], rng.standard_normal(Y.shape))


@dataclass(frozen=True)
class MinibatchNoise:
    """Minibatch noise of least-squares clients (module docstring).

    batch_size : int b >= 1;  replace : True (with replacement, the federation's
    oracle) or False (b of the n_i rows without replacement, b <= n_i).
    """

    batch_size: int
    replace: bool
    D: tuple[np.ndarray, ...]       # per client (n_i, d, d + 1)

    @classmethod
    def of(cls, problem: Federation, batch_size: int, *, replace: bool = True) -> MinibatchNoise:
        A = getattr(problem, "_A", None)
        if A is None:
            raise InvalidProblemError(
                "minibatch noise needs a least-squares QuadraticFederation (from_least_squares)")
        b = int(batch_size)
        if b < 1:
            raise InvalidProblemError(f"batch_size must be >= 1, got {batch_size!r}")
        rows, bvec = problem._rows, problem._b  # type: ignore[attr-defined]
        blocks = []
        for i in range(problem.n_clients):
            n = int(rows[i])
            if not replace and b > n:
                raise InvalidProblemError(
                    f"batch_size {b} exceeds client {i}'s {n} rows (sampling without replacement)")
            a, y = A[i, :n], bvec[i, :n]
            G = np.concatenate([np.einsum("ri,rj->rij", a, a), -(a * y[:, None])[:, :, None]], axis=2)
            blocks.append(G - G.mean(axis=0))
        return cls(b, bool(replace), tuple(blocks))

    def kappa(self, client: int) -> float:
        n = self.D[client].shape[0]
        if self.replace:
            return 1.0 / self.batch_size
        return 0.0 if n == 1 else (n - self.batch_size) / (self.batch_size * (n - 1))

    def expected_cov(self, client: int, W: np.ndarray) -> np.ndarray:
        """``kappa (1/n_i) sum_r D_r W D_r^T`` with ``W = E[[y; 1] [y; 1]^T]``."""
        Dr = self.D[client]
        return self.kappa(client) * np.einsum("rij,jk,rlk->il", Dr, W, Dr, optimize=True) / Dr.shape[0]

    def sample(self, rng: np.random.Generator, clients: np.ndarray, Y: np.ndarray,
               problem: Federation) -> np.ndarray:
        """eps = (minibatch gradient) - (full gradient) for each row."""
        out = np.empty_like(Y)
        for r, (c, y) in enumerate(zip(clients.tolist(), Y)):
            Dr = self.D[c]
            n = Dr.shape[0]
            pick = rng.integers(0, n, self.batch_size) if self.replace \
                else rng.choice(n, self.batch_size, replace=False)
            out[r] = Dr[pick].mean(axis=0) @ np.append(y, 1.0)
        return out


NoiseModel = AdditiveNoise | MinibatchNoise


def noise_of(problem: Federation, noise: Any = None) -> NoiseModel | None:
    """The noise model: ``noise`` if given (a model, or a covariance for
    :class:`AdditiveNoise`), else the federation's configured oracle
    (``with_gradient_noise``: isotropic; ``with_minibatch``: with replacement),
    else None (exact gradients)."""
    instance("problem", problem, Federation, "a Federation (e.g. a QuadraticFederation)")
    if isinstance(noise, (AdditiveNoise, MinibatchNoise)):
        return noise
    if noise is not None:
        try:
            return AdditiveNoise(noise, problem.n_clients, problem.dim)
        except InvalidProblemError as exc:
            raise InvalidProblemError(f"noise (a model, or a covariance for AdditiveNoise): {exc}") from None
    if problem.batch_size is not None:
        return MinibatchNoise.of(problem, problem.batch_size, replace=True)
    s = problem.noise_sigma2
    if s is not None:
        return AdditiveNoise(s, problem.n_clients, problem.dim)
    return None


def additive_noise_of(problem: Federation, noise: Any, refusal: str) -> AdditiveNoise | None:
    """:func:`noise_of` for the closed-form paths, which need per-client covariances: the additive model or
    None; any other model (minibatch sampling) raises ``InvalidHyperparameterError(refusal)``."""
    model = noise_of(problem, noise)
    if model is not None and not isinstance(model, AdditiveNoise):
        raise InvalidHyperparameterError(refusal)
    return model
