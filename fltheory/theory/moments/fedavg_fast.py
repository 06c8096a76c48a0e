"""Block-structured exact moments of FedAvg under sampling (closed forms in pi_i, pi_ij).

FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks
from Decentralized Data", Alg. 1; ``fltheory.algorithms.FedAvg``) on quadratic
clients f_i(y) = 1/2 y^T H_i y - e_i^T y with additive gradient noise of
covariance C_i and K_i local steps of rate eta_i: client i's pass from x is

    T_i = A_i x + b_i + n_i,   A_i = B_i^{K_i},  B_i = I - eta_i H_i,
    b_i = eta_i sum_{k<K_i} B_i^k e_i,
    n_i = -eta_i sum_{k<K_i} B_i^{K_i-1-k} eps_ik,  Cov n_i = V_i = eta_i^2 sum_k B_i^k C_i B_i^{kT},

and the server sets x' = (1 - eta_g) x + eta_g sum_{i in S} w_i T_i.
With fixed weights w_i given inclusion (w_i = 1/m when m clients are chosen
uniformly, aggregation weights under full participation) and
pi_i = P(i in S), pi_ij = P(i, j in S):

    E[x'] = (1 - eta_g) mu + eta_g sum_i pi_i w_i (A_i mu + b_i),
    E[x' x'^T] = (1 - eta_g)^2 Sigma + (1 - eta_g) eta_g sum_i pi_i w_i (Sigma A_i^T + mu b_i^T + transpose)
                 + eta_g^2 sum_{i,j} pi_ij w_i w_j (A_i Sigma A_j^T + A_i mu b_j^T + b_i mu^T A_j^T
                 + b_i b_j^T) + eta_g^2 sum_i pi_i w_i^2 V_i.

Which case is which:

* full participation (pi = 1, any aggregation weights): sums weighted by w_i,
  O(d^3) per round after an O(N d^3) set-up;
* uniform sampling of S of N (equal weights 1/S): pi_i = S/N,
  pi_ij = S(S-1)/(N(N-1)), so sum_ij pi_ij X_ij = pi_2 sum_ij X_ij + (pi_1 - pi_2) sum_i X_ii
  with sum_ij A_i Sigma A_j^T = (sum_i A_i) Sigma (sum_j A_j)^T: O(N d^3) per round (the
  per-client blocks A_i Sigma A_i^T, batched);
* Bernoulli(p) with one p for all clients and equal weights: conditional on
  m = |S| ~ Binomial(N, p) the set is uniform of size m (weights 1/m; m = 0 leaves x),
  a mixture over m of the previous case sharing the same per-round block sums.

Anything else (per-client step laws, schedules, unequal weights under
sampling, minibatch noise) goes through :func:`exact_moments`.  The tests hold
this path to the general engine to 1e-10.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ...algorithms import FedAvg
from ..._validate import _short, finite_array, per_client
from ...errors import InvalidHyperparameterError, InvalidProblemError
from ...participation import (
    Bernoulli,
    FullParticipation,
    Participation,
    UniformSampling,
)
from ...problems.quadratic import QuadraticFederation
from ._checks import finite_result, memory_guard, model_vector, participation_of, quadratic_problem, rounds_of
from .engine import ExactMoments, quadratic_errors
from .noise import additive_noise_of

__all__ = ["fedavg_client_maps", "fedavg_sampling_moments"]


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def fedavg_client_maps(problem: QuadraticFederation, lr: Any, local_steps: Any, cov: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, b, V): (N, d, d), (N, d), (N, d, d) of the module docstring, batched over clients.

    Parameters
    ----------
    problem : QuadraticFederation
    lr : float > 0 or (N,) array
        eta_i.
    local_steps : int >= 0 or (N,) int array
        K_i (at most MAX_STEPS; the pass is one batched step per local step).
    cov : (N, d, d) array or None
        C_i, symmetric positive semidefinite (e.g. ``AdditiveNoise.cov``); None: V = 0.

    Raises
    ------
    OutOfRangeError
        When A, b or V leave float64 range (a step size for which the local pass diverges, over
        many steps).
    """
    problem = quadratic_problem(problem)
    N, d = problem.n_clients, problem.dim
    eta_c = per_client("lr", lr, N)
    K_c = per_client("local_steps", local_steps, N, integer=True, minimum=0, strict=False)
    memory_guard(f"the client maps of {N} clients at d = {d}", 3.0 * N * d * (d + 1))
    if cov is not None:
        C = finite_array("cov", cov, error=InvalidProblemError)
        if C.shape != (N, d, d):
            raise InvalidProblemError(f"cov must be None or of shape ({N}, {d}, {d}) (one noise covariance per "
                                      f"client, e.g. AdditiveNoise(...).cov), got shape {C.shape}")
        if not np.allclose(C, np.swapaxes(C, 1, 2), rtol=1e-12, atol=1e-14):
            raise InvalidProblemError("cov must be symmetric (each (d, d) block)")
        cov = C
    A, b, V = _client_maps(problem, eta_c, K_c, cov)
    finite_result("fedavg_client_maps", {"A": A, "b": b, "V": V},
                  f"lr = {_short(lr)}, local_steps = {_short(local_steps)}")
    return A, b, V


def _client_maps(problem: QuadraticFederation, lr: Any, local_steps: Any, cov: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fedavg_client_maps` on checked arguments."""
    N, d = problem.n_clients, problem.dim
    eta = np.broadcast_to(np.asarray(lr, dtype=np.float64), (N,))
    K = np.broadcast_to(np.asarray(local_steps, dtype=np.int64), (N,))
    B = np.eye(d) - eta[:, None, None] * problem.H
    A = np.broadcast_to(np.eye(d), (N, d, d)).copy()
    b = np.zeros((N, d))
    V = np.zeros((N, d, d))
    for k in range(int(K.max())):
        on = (K > k)[:, None]
        # after step k+1: A <- B A, b <- B b + eta e, V <- B V B^T + eta^2 C (rows still stepping)
        A = np.where(on[:, :, None], B @ A, A)
        b = np.where(on, np.einsum("nij,nj->ni", B, b) + eta[:, None] * problem.e, b)
        if cov is not None:
            V = np.where(on[:, :, None], B @ V @ np.swapaxes(B, 1, 2) + eta[:, None, None] ** 2 * cov, V)
    return A, b, V


def _sizes(participation: Participation | None, N: int) -> list[tuple[float, int]]:
    """(probability, m) of the number of participants."""
    if participation is None or type(participation) is FullParticipation:
        return [(1.0, N)]
    if type(participation) is UniformSampling:
        if participation.S > N:
            raise InvalidHyperparameterError(f"UniformSampling: S = {participation.S} exceeds N = {N}")
        return [(1.0, participation.S)]
    if type(participation) is Bernoulli:
        p = participation.inclusion_probabilities(N)
        if np.ptp(p) != 0:
            raise InvalidHyperparameterError(
                "fedavg_sampling_moments: Bernoulli needs one probability for all clients; use exact_moments")
        q = float(p[0])
        return [(math.comb(N, m) * q ** m * (1 - q) ** (N - m), m) for m in range(N + 1)]
    raise InvalidHyperparameterError(
        f"fedavg_sampling_moments handles full, uniform and equal-probability Bernoulli participation, got "
        f"{participation!r}; use exact_moments")


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def fedavg_sampling_moments(algorithm: FedAvg, problem: QuadraticFederation, rounds: int, *,
                            participation: Participation | None = None, noise: Any = None,
                            x0: Any = None) -> ExactMoments:
    """Exact moments of FedAvg by the closed forms of the module docstring.

    Returns an :class:`ExactMoments` whose ``state_mean``/``state_second`` are those of x.
    """
    t0 = time.perf_counter()
    if not isinstance(algorithm, FedAvg):
        raise InvalidHyperparameterError(f"algorithm must be a FedAvg (the closed form of fedavg_sampling_moments), "
                                         f"got {_short(algorithm)} ({type(algorithm).__name__})")
    problem = quadratic_problem(problem)
    N, d = problem.n_clients, problem.dim
    R = rounds_of(rounds, d)
    participation_of(participation)
    model = additive_noise_of(problem, noise, "fedavg_sampling_moments handles additive noise; use exact_moments")
    x0v = model_vector("x0", x0, d)
    full = participation is None or type(participation) is FullParticipation
    if full:
        from ...algorithms.base import aggregation_weights
        w_full = aggregation_weights(problem, np.arange(N), algorithm.aggregation)
    elif algorithm.aggregation != "uniform" and not (algorithm.aggregation == "weights"
                                                     and np.ptp(problem.weights) == 0):
        raise InvalidHyperparameterError(
            "under sampling the closed form needs equal weights given inclusion (aggregation='uniform' or "
            "equal client weights); use exact_moments")
    A, b, V = _client_maps(problem, algorithm.lr, algorithm.local_steps, None if model is None else model.cov)
    g = float(algorithm.server_lr)
    mu = x0v
    Sig = np.outer(mu, mu)
    means, seconds = [mu.copy()], [Sig.copy()]
    sizes = None if full else _sizes(participation, N)
    if full:
        Uw = np.einsum("i,ijk->jk", w_full, A)
        uw = w_full @ b
        Vw = np.einsum("i,ijk->jk", w_full ** 2, V)
    else:
        U, u, Vsum = A.sum(axis=0), b.sum(axis=0), V.sum(axis=0)
    for _ in range(R):
        if full:
            Um = Uw @ mu
            agg1 = Um + uw
            agg2 = Uw @ Sig @ Uw.T + np.outer(Um, uw) + np.outer(uw, Um) + np.outer(uw, uw) + Vw
            cross = Sig @ Uw.T + np.outer(mu, uw)
            new_mu = (1 - g) * mu + g * agg1
            new_S = (1 - g) ** 2 * Sig + (1 - g) * g * (cross + cross.T) + g ** 2 * agg2
        else:
            Am = np.einsum("nij,j->ni", A, mu)                              # (N, d)
            Um = Am.sum(axis=0)
            S2 = U @ Sig @ U.T + np.outer(Um, u) + np.outer(u, Um) + np.outer(u, u)
            S1 = np.einsum("nij,jk,nlk->il", A, Sig, A, optimize=True) + np.einsum("ni,nj->ij", Am, b)
            S1 = S1 + np.einsum("ni,nj->ij", b, Am) + b.T @ b
            cross_sum = Sig @ U.T + np.outer(mu, u)
            new_mu = np.zeros(d)
            new_S = np.zeros((d, d))
            assert sizes is not None
            for prob, m in sizes:
                if m == 0:
                    new_mu += prob * mu
                    new_S += prob * Sig
                    continue
                p1 = m / N
                p2 = m * (m - 1) / (N * (N - 1)) if N > 1 else 0.0
                w = 1.0 / m
                agg1 = p1 * w * (Um + u)
                agg2 = w * w * (p2 * S2 + (p1 - p2) * S1 + p1 * Vsum)
                cross = p1 * w * cross_sum
                new_mu += prob * ((1 - g) * mu + g * agg1)
                new_S += prob * ((1 - g) ** 2 * Sig + (1 - g) * g * (cross + cross.T) + g ** 2 * agg2)
        mu, Sig = new_mu, 0.5 * (new_S + new_S.T)
        means.append(mu.copy())
        seconds.append(Sig.copy())
    mean, second = np.array(means), np.array(seconds)
    finite_result("fedavg_sampling_moments", {"E[x_t]": mean, "E[x_t x_t^T]": second})
    x_star = problem.optimum()
    dist2, gap = quadratic_errors(mean, second, x_star, problem.hess())
    clip = float(max(0.0, -dist2.min(), -gap.min()))
    info = {"method": "closed form in inclusion probabilities (per-client blocks batched)",
            "noise": "none" if model is None else "AdditiveNoise",
            "participation": "full" if full else repr(participation),
            "seconds": time.perf_counter() - t0, "state_dim": d}
    return ExactMoments(mean=mean, dist2=np.maximum(dist2, 0.0), loss_gap=np.maximum(gap, 0.0),
                        second=second, x_star=x_star, state_mean=mu, state_second=Sig,
                        components=np.ones(len(means), dtype=np.int64), clip=clip, info=info)
