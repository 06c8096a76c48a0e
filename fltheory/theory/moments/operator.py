"""The expected one-round moment map of a time-invariant algorithm, iterated without the round.

When neither the participation law nor the algorithm's round depends on the round number
(SCAFFOLD, FedAvg, FedProx, FedDyn, ... with a constant rate; full, uniform or Bernoulli
participation), the conditional maps (M_xi, c_xi, G_xi) of every outcome xi are recovered once
from the real round (:func:`.conditional.conditional_round_map`), checked once more one round
later (time invariance), and the exact recursion of :mod:`.engine`

    mu' = sum_xi p_xi (M_xi mu + c_xi),
    Sigma' = sum_xi p_xi (M_xi Sigma M_xi^T + M_xi mu c_xi^T + c_xi mu^T M_xi^T + c_xi c_xi^T
                          + sum_j G_xi,j C_j G_xi,j^T)

is then iterated with matrix products only (additive noise: the last term is a constant per
outcome).  :meth:`MomentOperator.stationary` iterates to the stationary first and second
moments (the limit of the recursion when the expected map is a contraction on the moments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...algorithms.base import Algorithm
from ...errors import (
    DivergenceError,
    InvalidHyperparameterError,
    NotAffineError,
)
from ...participation import (Bernoulli, BinomialSteps, FixedSteps, FullParticipation, FullSteps,
                              IncompleteSteps, Participation, Schedule, TimeVarying, UniformSampling,
                              UniformSteps)
from ...problems.base import Federation
from ..round_maps import StateLayout, state_layout, state_to_vector
from ..._validate import finite_array, positive
from ._checks import (
    algorithm_of,
    constant_hessian_problem,
    count,
    finite_result,
    model_vector,
    participation_of,
    rounds_of,
    tolerance,
)
from .conditional import ConditionalMap, recover_round_map
from .engine import (
    _discrete,
    _frozen_mask,
    _noise_second,
    _revalidated,
    refuse_non_affine,
)
from .noise import additive_noise_of
from .support import MAX_OUTCOMES, support_of

__all__ = ["MomentOperator", "moment_operator"]


def _changing_law(part: Participation | None) -> str | None:
    """Why the law of ``part``'s draws may change with the round t (None when it cannot): the
    operator recovers the round's conditional maps once, so a law that changes later (a
    departure at round 3, say) would silently be applied with its round-0 outcomes."""
    while part is not None:
        if isinstance(part, (FullParticipation, UniformSampling, Bernoulli)):
            return None
        if isinstance(part, Schedule):
            late = sorted([(t, "departs", c) for c, t in part.departures.items() if t > 0]
                          + [(t, "arrives", c) for c, t in part.arrivals.items() if t > 0])
            if late:
                t, what, c = late[0]
                return f"under its Schedule client {c} {what} at round {t}"
            part = part.base
        elif isinstance(part, IncompleteSteps):
            law = part.distribution
            if isinstance(law, TimeVarying):
                return "its steps follow a TimeVarying law"
            if not isinstance(law, (FullSteps, UniformSteps, BinomialSteps, FixedSteps)):
                return f"its step law {type(law).__name__} may depend on t (its pmf takes the round)"
            part = part.base
        else:
            return f"{type(part).__name__} has no law known to be the same every round"
    return None


@dataclass(frozen=True)
class MomentOperator:
    """Outcomes (probabilities and conditional maps) of a time-invariant round.

    probs : (K,);  maps : K conditional maps;  noise_terms : (K, n, n) sum_j G_j C_j G_j^T;
    layout : the state layout;  S0 : (n,) initial state;  x_star, Hbar : optimum and global Hessian.
    """

    probs: np.ndarray
    maps: tuple[ConditionalMap, ...]
    noise_terms: np.ndarray
    layout: StateLayout
    S0: np.ndarray
    x_star: np.ndarray
    Hbar: np.ndarray

    def step(self, mu: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One exact round of the moment recursion (module docstring)."""
        p, M, c = self.probs, self._M, self._c
        Mm = M @ mu                                                    # (K, n)
        new_mu = p @ (Mm + c)
        pc = p[:, None] * c
        cross = Mm.T @ pc
        new_S = np.einsum("k,kij,jl,kml->im", p, M, second, M, optimize=True) + cross + cross.T \
            + c.T @ pc + self._Q
        return new_mu, 0.5 * (new_S + new_S.T)

    @property
    def _M(self) -> np.ndarray:
        return np.stack([cm.M for cm in self.maps])

    @property
    def _c(self) -> np.ndarray:
        return np.stack([cm.c for cm in self.maps])

    @property
    def _Q(self) -> np.ndarray:
        return np.einsum("k,kij->ij", self.probs, self.noise_terms)

    def gap_and_dist(self, mu: np.ndarray, second: np.ndarray) -> tuple[float, float]:
        """(E[F(x)] - F*, E||x - x*||^2) of the server block."""
        xs = self.layout.x_slice
        m, S = mu[xs], second[xs, xs]
        dev = S - np.outer(m, self.x_star) - np.outer(self.x_star, m) + np.outer(self.x_star, self.x_star)
        return float(0.5 * np.sum(self.Hbar * dev)), float(np.trace(dev))

    @np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
    def iterate(self, rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """(E[F(x_t)] - F*, E||x_t - x*||^2) for t = 0..rounds from the initial state
        (OutOfRangeError when they leave float64 range)."""
        rounds = rounds_of(rounds, 1)
        mu, second = self.S0.copy(), np.outer(self.S0, self.S0)
        gaps, dists = [], []
        for t in range(rounds + 1):
            g, dd = self.gap_and_dist(mu, second)
            gaps.append(g)
            dists.append(dd)
            if t < rounds:
                mu, second = self.step(mu, second)
        out = np.array(gaps), np.array(dists)
        finite_result("MomentOperator.iterate", {"E[F(x_t)] - F*": out[0], "E||x_t - x*||^2": out[1]})
        return out

    @np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
    def running_mean(self, readout: np.ndarray, rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact E[g_T] and E[g_T g_T^T], T = 1..rounds, of the running mean g_T = (1/T) sum_{t<T} L S_t
        of a linear readout L (k, n) of the state (e.g. FedElasticNet's gamma_t = x_t + h_t / lambda_2).

        The sum A_t = sum_{s<t} L S_s is carried with the state: A' = A + L S, so with
        X = E[S A^T], Y = E[A A^T]:  X' = sum_xi p (M (X + Sigma L^T) + c (a + L mu)^T),
        Y' = Y + X^T L^T + L X + L Sigma L^T (the round's noise is independent of A' and S)."""
        L = finite_array("readout", readout, error=InvalidHyperparameterError)
        n = self.S0.shape[0]
        if L.ndim != 2 or L.shape[1] != n:
            raise InvalidHyperparameterError(f"readout must have shape (k, {n}), got {L.shape}")
        R = rounds_of(rounds, L.shape[0])
        p, M, c = self.probs, self._M, self._c
        Mbar, cbar = np.einsum("k,kij->ij", p, M), p @ c
        mu, second = self.S0.copy(), np.outer(self.S0, self.S0)
        a, X, Y = np.zeros(L.shape[0]), np.zeros((n, L.shape[0])), np.zeros((L.shape[0], L.shape[0]))
        means, seconds = [], []
        for T in range(1, R + 1):
            Lmu = L @ mu
            X_new = Mbar @ (X + second @ L.T) + np.outer(cbar, a + Lmu)
            Y = Y + X.T @ L.T + L @ X + L @ second @ L.T
            a = a + Lmu
            X = X_new
            mu, second = self.step(mu, second)
            means.append(a / T)
            seconds.append(0.5 * (Y + Y.T) / T ** 2)
        result = np.array(means), np.array(seconds)
        finite_result("MomentOperator.running_mean", {"E[g_T]": result[0], "E[g_T g_T^T]": result[1]})
        return result

    def stationary(self, *, rtol: float = 1e-12, atol: float = 0.0, max_rounds: int = 200_000
                   ) -> tuple[float, float, int]:
        """(E[F] - F*, E||x - x*||^2, rounds) at the stationary law: the recursion iterated until
        both change by at most ``rtol`` |value| + ``atol`` in 10 consecutive rounds (DivergenceError
        when the moments do not settle within ``max_rounds``)."""
        rtol = positive("rtol", rtol, allow_zero=True)
        atol = positive("atol", atol, allow_zero=True)
        max_rounds = count("max_rounds", max_rounds, minimum=1, why="every round is one exact moment update")
        mu, second = self.S0.copy(), np.outer(self.S0, self.S0)
        prev = self.gap_and_dist(mu, second)
        calm = 0
        for t in range(1, max_rounds + 1):
            mu, second = self.step(mu, second)
            cur = self.gap_and_dist(mu, second)
            if not np.all(np.isfinite(cur)):
                raise DivergenceError(f"moment recursion diverged at round {t}")
            same = all(abs(a - b) <= rtol * abs(a) + atol for a, b in zip(cur, prev))
            calm = calm + 1 if same else 0
            if calm >= 10:
                return cur[0], cur[1], t
            prev = cur
        raise DivergenceError(f"moments not stationary to rtol {rtol:g} after {max_rounds} rounds: {prev}")


def moment_operator(algorithm: Algorithm, problem: Federation, *,
                    participation: Participation | None = None, noise: Any = None, x0: Any = None,
                    rtol: float = 1e-8) -> MomentOperator:
    """Recover the :class:`MomentOperator` (module docstring).

    Refused (typed errors): a participation law that may change with the round (:func:`_changing_law`:
    a schedule with a departure or arrival after round 0, a ``TimeVarying`` step law, a step law of
    unknown form; the law's supports at rounds 0 and 1 are compared as well), state-dependent
    (minibatch) noise, a round that changes its frozen or discrete state (mixtures: use
    :func:`exact_moments`), and a conditional map that differs one round later (NotAffineError).
    """
    algorithm_of(algorithm)
    constant_hessian_problem(problem)
    participation_of(participation)
    rtol = tolerance("rtol", rtol)
    refuse_non_affine(algorithm)
    model = additive_noise_of(problem, noise, "moment_operator handles additive noise only; use exact_moments")
    d = problem.dim
    x0v = model_vector("x0", x0, d)
    exact = problem.exact()
    state0 = algorithm.init(exact, x0v, np.random.default_rng(0))
    layout = state_layout(state0)
    frozen = _frozen_mask(algorithm, exact, state0, layout, np.random.default_rng(1))
    E = algorithm.nominal_steps(exact)
    why = _changing_law(participation)
    out0 = support_of(participation, 0, E, MAX_OUTCOMES)
    out1 = support_of(participation, 1, E, MAX_OUTCOMES)
    if why is None and [(o.key, o.prob) for o in out0] != [(o.key, o.prob) for o in out1]:
        why = "its outcomes at rounds 0 and 1 differ"
    if why is not None:
        raise InvalidHyperparameterError(
            f"moment_operator needs a participation law that does not change with t: {why}; exact_moments "
            "follows the law round by round")
    S0 = state_to_vector(state0, layout)
    rng = np.random.default_rng(2)
    maps, noise_terms = [], []
    for o in out0:
        cm = recover_round_map(algorithm, exact, state0, layout, o.clients, o.steps, frozen, rtol, rng)
        nxt = cm.next_state
        if _discrete_without_counters(nxt) != _discrete_without_counters(state0) \
                or state_to_vector(nxt, layout)[frozen].tobytes() != S0[frozen].tobytes():
            raise NotAffineError(
                f"{algorithm.name}: the round changes discrete or frozen state (outcome {o.key}); the law is a "
                "mixture: use exact_moments")
        again = _revalidated(cm, algorithm, exact, nxt, layout, o, frozen, d, rtol, rng)
        if again is None:
            raise NotAffineError(f"{algorithm.name}: the conditional map of outcome {o.key} changes between "
                                 "rounds 0 and 1 (time-dependent round): use exact_moments")
        maps.append(cm)
        noise_terms.append(_noise_second(cm, model, S0, np.outer(S0, S0), d))
    return MomentOperator(probs=np.array([o.prob for o in out0]), maps=tuple(maps),
                          noise_terms=np.array(noise_terms), layout=layout, S0=S0,
                          x_star=problem.optimum(), Hbar=problem.hess(problem.optimum()))


def _discrete_without_counters(state: Any) -> Any:
    """The discrete part of a state with integer scalars (round counters) blanked."""
    def strip(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(strip(u) for u in v)
        return None if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
    return strip(_discrete(state))
