"""Exact moments of server-averaging rounds with independent per-client step laws or uniform sampling.

Covers FedAvg (McMahan et al., Alg. 1) and EFL with lambda = 0 and no
compression (Ma et al., "Elastic Federated Learning", Alg. 1 / eq. 6) on
quadratic clients f_k(y) = 1/2 y^T H_k y - e_k^T y with additive noise of
covariance C_k, at the scale the general engine cannot enumerate (the
(E+1)^N step patterns).  Round t with local rate eta_t: client k completes
s_k steps from x and reports

    T_k(s) = A_k(s) x + b_k(s) + n_k(s),  A_k(s) = B^s,  B = I - eta_t H_k,
    b_k(s) = eta_t sum_{j<s} B^j e_k,  Cov n_k(s) = V_k(s) = eta_t^2 sum_{j<s} B^j C_k B^{jT},

and the server sets x' = x + g sum_k Z_k with Z_k = w_k(s_k) (T_k(s_k) - x)
(g the server rate, w_k(s) the client's weight given s steps; 0 for a client
that is not selected).

* independent step laws (``step_pmf`` (N, E+1), the clients' s_k independent;
  EFL's incomplete and inactive clients, FedAvg under IncompleteSteps of full
  participation): with Dbar_k = E[w (A - I)], dbar_k = E[w b],
      E[x'] = L mu + l,   L = I + g sum_k Dbar_k,  l = g sum_k dbar_k,
      E[x' x'^T] = L Sigma L^T + L mu l^T + l mu^T L^T + l l^T
                   + g^2 sum_k (E[w^2 ((A-I) Sigma (A-I)^T + (A-I) mu b^T + b mu^T (A-I)^T + b b^T + V)]
                                - (Dbar_k Sigma Dbar_k^T + Dbar_k mu dbar_k^T + dbar_k mu^T Dbar_k^T
                                   + dbar_k dbar_k^T)),
  since given x the Z_k are independent (the variance of a sum of independent
  terms is the sum of their variances);
* uniform sampling of S of N (every selected client E_k steps, weight w_k):
  the inclusion probabilities pi_1 = S/N, pi_2 = S(S-1)/(N(N-1)) give
      E[sum Z sum Z^T | x] = pi_2 (sum_k D_k)(sum_k D_k)^T + (pi_1 - pi_2) sum_k D_k D_k^T + pi_1 sum_k w_k^2 V_k,
  D_k = w_k ((A_k - I) x + b_k), then the expectation over x as above.

Per round O(N (E+1) d^3) (per-client blocks batched); the rate may change
every round (the decreasing step size of EFL's Theorem 1).  The tests hold
this path to :func:`exact_moments` (which reads the maps off the real round).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..._validate import _short, finite_array, instance, integer, real_scalar
from ...errors import InvalidHyperparameterError, InvalidProblemError
from ...problems.quadratic import QuadraticFederation
from ._checks import count, finite_result, memory_guard, model_vector, quadratic_problem, rounds_of
from .engine import ExactMoments, quadratic_errors
from .noise import AdditiveNoise

__all__ = ["averaging_moments"]


def _client_maps(problem: QuadraticFederation, eta: np.floating, E: int, cov: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A - I, b, V) for s = 0..E: (N, E+1, d, d), (N, E+1, d), (N, E+1, d, d)."""
    N, d = problem.n_clients, problem.dim
    I = np.eye(d)
    B = I - eta * problem.H
    A = np.empty((N, E + 1, d, d))
    b = np.zeros((N, E + 1, d))
    V = np.zeros((N, E + 1, d, d))
    A[:, 0] = I
    for s in range(1, E + 1):
        A[:, s] = B @ A[:, s - 1]
        b[:, s] = np.einsum("nij,nj->ni", B, b[:, s - 1]) + eta * problem.e
        V[:, s] = B @ V[:, s - 1] @ np.swapaxes(B, 1, 2) + eta ** 2 * cov
    return A - I, b, V


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def averaging_moments(problem: QuadraticFederation, rounds: int, *, lr: Any, local_steps: int,
                      weights: Any, step_pmf: Any = None, sampled: int | None = None,
                      server_lr: float = 1.0, noise: AdditiveNoise | None = None, x0: Any = None
                      ) -> ExactMoments:
    """Exact moments of the averaging rounds of the module docstring.

    Parameters
    ----------
    lr : float or (R,) array
        eta_t of each round (a constant, or one per round).
    local_steps : int
        E (the most steps a client completes).
    weights : (N,) or (N, E+1)
        w_k (fixed) or w_k(s) (a weight per completed step count).
    step_pmf : (N, E+1), optional
        Independent per-client laws of s_k (rows sum to 1).  Exclusive with ``sampled``.
    sampled : int, optional
        S: uniform sampling of S of N clients, each completing E steps.
    server_lr : float
        g.
    noise : AdditiveNoise or None
    """
    t0 = time.perf_counter()
    problem = quadratic_problem(problem)
    N, d = problem.n_clients, problem.dim
    R = rounds_of(rounds, d)
    E = count("local_steps", local_steps, minimum=1,
              why="each round builds the maps of every completed step count 0..E for every client")
    memory_guard(f"the per-step client maps of {N} clients, local_steps = {E}, d = {d}", 3.0 * N * (E + 1) * d * d)
    lr_arr = finite_array("lr", lr, error=InvalidHyperparameterError)
    if lr_arr.ndim > 1 or (lr_arr.ndim == 1 and lr_arr.shape[0] < R):
        raise InvalidHyperparameterError(
            f"lr must be a scalar or an array of at least rounds = {R} rates, got shape {lr_arr.shape}")
    eta = np.broadcast_to(lr_arr, (R,)) if lr_arr.ndim == 0 else lr_arr
    if np.any(eta[:R] <= 0):
        raise InvalidHyperparameterError(f"lr must be > 0 for each of the {R} rounds, got {_short(lr)}")
    W = finite_array("weights", weights, error=InvalidHyperparameterError)
    W = np.repeat(W[:, None], E + 1, axis=1) if W.ndim == 1 else W
    if W.shape != (N, E + 1):
        raise InvalidHyperparameterError(f"weights must have shape ({N},) or ({N}, {E + 1}), got {W.shape}")
    if (step_pmf is None) == (sampled is None):
        raise InvalidHyperparameterError("give exactly one of step_pmf (independent laws) and sampled (S of N)")
    if step_pmf is not None:
        q = finite_array("step_pmf", step_pmf, error=InvalidHyperparameterError)
        if q.shape != (N, E + 1) or np.any(q < 0) or np.any(q > 1) or np.any(np.abs(q.sum(axis=1) - 1) > 1e-12):
            raise InvalidHyperparameterError(
                f"step_pmf must be ({N}, {E + 1}) probability rows in [0, 1], got {_short(step_pmf)}")
    else:
        sampled = integer("sampled", sampled, minimum=1, maximum=N)
    g = real_scalar("server_lr", server_lr)
    if noise is not None:
        instance("noise", noise, AdditiveNoise, "an AdditiveNoise or None", error=InvalidHyperparameterError)
        if noise.cov.shape != (N, d, d):
            raise InvalidProblemError(f"noise is for covariances of shape {noise.cov.shape}, the problem needs "
                                      f"({N}, {d}, {d})")
    mu = model_vector("x0", x0, d)
    cov = np.zeros((N, d, d)) if noise is None else noise.cov
    Sig = np.outer(mu, mu)
    means, seconds = [mu.copy()], [Sig.copy()]
    for t in range(R):
        Am, b, V = _client_maps(problem, eta[t], E, cov)     # Am = A - I (numpy scalar: overflow gives inf)
        AmMu = np.einsum("nsij,j->nsi", Am, mu)
        if step_pmf is not None:
            pw, pw2 = q * W, q * W * W                                # (N, E+1)
            Dbar = np.einsum("ns,nsij->nij", pw, Am)
            dbar = np.einsum("ns,nsi->ni", pw, b)
            cross = np.einsum("ns,nsi,nsj->ij", pw2, AmMu, b, optimize=True)
            total = np.einsum("ns,nsij,jk,nslk->il", pw2, Am, Sig, Am, optimize=True) + cross + cross.T \
                + np.einsum("ns,nsi,nsj->ij", pw2, b, b, optimize=True) + np.einsum("ns,nsij->ij", pw2, V)
            DbarMu = np.einsum("nij,j->ni", Dbar, mu)
            mcross = DbarMu.T @ dbar
            mean_part = np.einsum("nij,jk,nlk->il", Dbar, Sig, Dbar, optimize=True) + mcross + mcross.T + dbar.T @ dbar
            var_sum = total - mean_part
            Lm = np.eye(d) + g * Dbar.sum(axis=0)
            lv = g * dbar.sum(axis=0)
        else:
            S = int(sampled)                                          # type: ignore[arg-type]
            p1 = S / N
            p2 = S * (S - 1) / (N * (N - 1)) if N > 1 else 0.0
            w = W[:, E]
            Ak, bk, Vk = Am[:, E] * w[:, None, None], b[:, E] * w[:, None], V[:, E] * (w * w)[:, None, None]
            Akmu = np.einsum("nij,j->ni", Ak, mu)
            Asum, bsum = Ak.sum(axis=0), bk.sum(axis=0)
            c_all = np.outer(Asum @ mu, bsum)
            sum_all = Asum @ Sig @ Asum.T + c_all + c_all.T + np.outer(bsum, bsum)
            c_diag = Akmu.T @ bk
            diag = np.einsum("nij,jk,nlk->il", Ak, Sig, Ak, optimize=True) + c_diag + c_diag.T + bk.T @ bk
            Lm = np.eye(d) + g * p1 * Asum
            lv = g * p1 * bsum
            # E[(sum Z)(sum Z)^T] minus the part already in (L - I, l) outer products
            var_sum = p2 * sum_all + (p1 - p2) * diag + p1 * Vk.sum(axis=0) - p1 * p1 * sum_all
        Lmu = Lm @ mu
        new_S = Lm @ Sig @ Lm.T + np.outer(Lmu, lv) + np.outer(lv, Lmu) + np.outer(lv, lv) + g * g * var_sum
        mu, Sig = Lmu + lv, 0.5 * (new_S + new_S.T)
        means.append(mu.copy())
        seconds.append(Sig.copy())
    mean, second_arr = np.array(means), np.array(seconds)
    finite_result("averaging_moments", {"E[x_t]": mean, "E[x_t x_t^T]": second_arr},
                  f"lr = {_short(lr)}, server_lr = {g!r}")
    x_star = problem.optimum()
    dist2, gap = quadratic_errors(mean, second_arr, x_star, problem.hess())
    info = {"method": "independent per-client laws" if step_pmf is not None else "uniform sampling (pi_1, pi_2)",
            "seconds": time.perf_counter() - t0, "state_dim": d}
    return ExactMoments(mean=mean, dist2=np.maximum(dist2, 0.0), loss_gap=np.maximum(gap, 0.0),
                        second=second_arr, x_star=x_star, state_mean=mu, state_second=Sig,
                        components=np.ones(R + 1, dtype=np.int64),
                        clip=float(max(0.0, -dist2.min(), -gap.min())), info=info)
