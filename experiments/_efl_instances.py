"""Shared pieces of the EFL experiments (Ma et al., arXiv:2106.09433): the random quadratic instance, its
one-line description, and the ratio-to-verdict rule of their checks (``ratio_check``, shared with the other
experiments through ``_instances``).

Not an experiment (the leading underscore keeps it out of the reproduce registry).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._instances import random_quadratic_instance
from ._instances import ratio_check as ratio_check  # re-exported: the EFL experiments import it from here

PAPER = "EFL (Ma et al.)"


quadratic_instance = random_quadratic_instance
"""(seed, federation, x0) of one EFL experiment: :func:`random_quadratic_instance` (draw order on ``rng``: one
integer seed for ``random_quadratic`` with ``constants="clients"``, then the direction u of the start)."""


def instance_text(seed: int, N: int, d: int, E: int, *details: str) -> str:
    """"random_quadratic seed S, N = .., d = .., E = .." followed by ``details`` (comma-separated)."""
    return ", ".join([f"random_quadratic seed {seed}, N = {N}, d = {d}, E = {E}", *details])


def recorded_instance_text(results: dict[str, Any], E: int, *details: str) -> str:
    """:func:`instance_text` of an experiment's results (their ``"seed"``, ``"N"`` and ``"d"``), closed by
    "x0 recorded" (the start x0 is saved with the results)."""
    return instance_text(results["seed"], results["N"], results["d"], E, *details, "x0 recorded")


class TableSteps:
    """Step law with a fixed per-client table P(s_k = j), j = 0..E (independent clients, every round).

    ``pmf`` gives the exact law (for ``fltheory.theory.moments.exact_moments``); a draw makes one call
    ``rng.random(m)`` and inverts each selected client's CDF.
    """

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = np.asarray(probs, dtype=np.float64)
        self.cdf = np.cumsum(self.probs, axis=1)
        self.cdf[:, -1] = 1.0

    def pmf(self, t: int, E: int, client: int) -> np.ndarray:
        """P(s = j), j = 0..E, of ``client`` in round ``t`` (the same every round)."""
        return self.probs[client, : E + 1].copy()

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray, clients: np.ndarray) -> np.ndarray:
        u = np.asarray(rng.random(clients.shape[0]))
        return (u[:, None] >= self.cdf[clients]).sum(axis=1).astype(np.int64)


class RateSchedule:
    """lr_schedule(tau) = eta[tau] (the last entry repeated past the end)."""

    def __init__(self, eta: np.ndarray) -> None:
        self.eta = np.asarray(eta, dtype=np.float64)

    def __call__(self, tau: int) -> float:
        return float(self.eta[min(tau, self.eta.shape[0] - 1)])

    def __repr__(self) -> str:
        return f"RateSchedule({self.eta.shape[0]} rounds, eta_0 = {self.eta[0]:.6g})"


def quadratic_gap(H: np.ndarray, x_star: np.ndarray, mean: np.ndarray, second: np.ndarray) -> np.ndarray:
    """E[f(x_t)] - f* = 1/2 tr(H E[(x_t - x*)(x_t - x*)^T]) of f(x) = 1/2 (x - x*)^T H (x - x*) + f*,
    from the exact moments mean (T, d) = E[x_t] and second (T, d, d) = E[x_t x_t^T]."""
    dev = second - np.einsum("ti,j->tij", mean, x_star) - np.einsum("i,tj->tij", x_star, mean) \
        + np.outer(x_star, x_star)
    return 0.5 * np.einsum("ij,tji->t", H, dev)


def dist2_from_moments(x_star: np.ndarray, mean: np.ndarray, second: np.ndarray) -> np.ndarray:
    """E||x_t - x*||^2 = tr E[x x^T] - 2 x*^T E[x] + ||x*||^2 per round."""
    return np.einsum("tii->t", second) - 2 * mean @ x_star + float(x_star @ x_star)


def efl_step_weights(p: np.ndarray, E: int, weighting: str) -> np.ndarray:
    """w_k(s), s = 0..E: EFL's aggregation weight given s completed steps (0 at s = 0; sec. 4.2):
    E p^k / s (``"adaptive"``) or p^k (any other ``weighting``, plain)."""
    s = np.arange(E + 1)
    if weighting == "adaptive":
        return np.where(s[None, :] > 0, E * p[:, None] / np.maximum(s, 1)[None, :], 0.0)
    return np.where(s[None, :] > 0, p[:, None], 0.0)
