"""Exact distributions of a round's participation draw (never sampled).

A participation model of :mod:`fltheory.participation` draws, each round t,
the participants and the local steps each completes.  This module lists the
*support* of that draw with its exact probabilities, and the first- and
second-order inclusion probabilities

    pi_i = P(i in S_t),    pi_ij = P(i in S_t and j in S_t).

Which case is computed how:

* closed forms (no enumeration):
  - :class:`~fltheory.participation.FullParticipation`: pi_i = pi_ij = 1;
  - :class:`~fltheory.participation.UniformSampling` (S of n available):
    pi_i = S/n, pi_ij = S(S-1)/(n(n-1)) for i != j;
  - :class:`~fltheory.participation.Bernoulli` (p): pi_i = p_i, pi_ij = p_i p_j;
* enumeration of the support (every outcome with its probability):
  - uniform sampling: the C(n, S) subsets, each 1/C(n, S);
  - Bernoulli: the 2^n subsets, prod_{i in S} p_i prod_{i not in S} (1 - p_i);
  - :class:`~fltheory.participation.IncompleteSteps`: the base outcomes times
    the product over selected clients of each client's step law
    (any distribution with a method ``pmf(t, E, client) -> (E+1,)``,
    :class:`FullSteps` and :class:`FixedSteps` point masses,
    :class:`UniformSteps` uniform on {0..E_k}, :class:`BinomialSteps`
    Binomial(E_k, prob), :class:`TimeVarying` the law of round t), then the
    inactive switch s_k = 0 with probability y_k;
  - :class:`~fltheory.participation.Schedule`: the base model restricted to the
    clients present in round t.
  A custom step callable has no known law and is refused
  (InvalidHyperparameterError), as is a support larger than ``max_outcomes``.

Outcomes with equal (clients, steps) are merged.  Probabilities sum to 1 up to
rounding (checked).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validate import integer
from ...errors import InvalidHyperparameterError
from ...participation import (
    Bernoulli,
    BinomialSteps,
    FixedSteps,
    FullParticipation,
    FullSteps,
    IncompleteSteps,
    Participation,
    Schedule,
    TimeVarying,
    UniformSampling,
    UniformSteps,
)
from ._checks import memory_guard, participation_of, step_counts

__all__ = ["MAX_OUTCOMES", "Outcome", "inclusion_probabilities", "participation_support"]

MAX_OUTCOMES = 20_000


@dataclass(frozen=True)
class Outcome:
    """One participation outcome: probability, sorted clients (m,), completed steps (m,)."""

    prob: float
    clients: np.ndarray
    steps: np.ndarray

    @property
    def key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(int(c) for c in self.clients), tuple(int(s) for s in self.steps)


def _check_size(count: float, what: str, max_outcomes: int) -> None:
    if count > max_outcomes:
        raise InvalidHyperparameterError(
            f"exact moments: the participation support of {what} has {count:.0f} outcomes, more than "
            f"max_outcomes = {max_outcomes}; use fewer clients or steps (or a closed-form path)")


def _step_law(dist: Any, t: int, E: int, client: int) -> np.ndarray:
    """pmf over {0..E} of one selected client's completed steps."""
    if isinstance(dist, TimeVarying):
        return _step_law(dist.schedule(t), t, E, client)
    if callable(getattr(dist, "pmf", None)):
        q = np.asarray(dist.pmf(t, E, client), dtype=np.float64)
        if q.shape != (E + 1,) or np.any(q < 0) or np.any(q > 1) or abs(float(q.sum()) - 1.0) > 1e-12:
            raise InvalidHyperparameterError(
                f"{type(dist).__name__}.pmf(t={t}, E={E}, client={client}) must be {E + 1} probabilities "
                f"in [0, 1] summing to 1, got {q!r}")
        return q
    pmf = np.zeros(E + 1)
    if isinstance(dist, FullSteps):
        pmf[E] = 1.0
    elif isinstance(dist, UniformSteps):
        pmf[:] = 1.0 / (E + 1)
    elif isinstance(dist, BinomialSteps):
        k = np.arange(E + 1)
        if E <= 1000:        # exact binomial coefficients (beyond, C(E, j) leaves float64 range)
            pmf[:] = [math.comb(E, int(j)) for j in k] * dist.prob ** k * (1 - dist.prob) ** (E - k)
        else:
            from scipy.stats import binom
            pmf[:] = binom.pmf(k, E, dist.prob)
    elif isinstance(dist, FixedSteps):
        if client >= dist.steps.shape[0] or dist.steps[client] > E:
            raise InvalidHyperparameterError(
                f"FixedSteps: client {client} has no admissible fixed step count (E = {E})")
        pmf[int(dist.steps[client])] = 1.0
    else:
        raise InvalidHyperparameterError(
            f"exact moments need a step distribution with a known law (FullSteps, UniformSteps, "
            f"BinomialSteps, FixedSteps, TimeVarying of these); got {dist!r}")
    return pmf


def _selections(part: Participation, t: int, E: np.ndarray, candidates: np.ndarray,
                max_outcomes: int) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """(prob, clients, steps) of the models that only select clients (or wrap others)."""
    c = np.asarray(candidates, dtype=np.int64)
    if isinstance(part, Schedule):
        own = part.available(t, E.shape[0])
        return _selections(part.base, t, E, np.intersect1d(c, own).astype(np.int64), max_outcomes)
    if isinstance(part, FullParticipation):
        return [(1.0, c.copy(), E[c].copy())]
    if isinstance(part, UniformSampling):
        if part.S > c.shape[0]:
            raise InvalidHyperparameterError(
                f"UniformSampling: round {t} has {c.shape[0]} available clients, fewer than S = {part.S}")
        n_sub = math.comb(c.shape[0], part.S)
        _check_size(n_sub, f"UniformSampling(S={part.S}) of {c.shape[0]}", max_outcomes)
        return [(1.0 / n_sub, np.array(sub, dtype=np.int64), E[list(sub)].copy())
                for sub in itertools.combinations(c.tolist(), part.S)]
    if isinstance(part, Bernoulli):
        p = part.inclusion_probabilities(E.shape[0])
        _check_size(2.0 ** c.shape[0], f"Bernoulli over {c.shape[0]} clients", max_outcomes)
        out = []
        for mask in itertools.product((False, True), repeat=c.shape[0]):
            sel = c[np.array(mask, dtype=bool)] if c.size else c
            prob = float(np.prod(np.where(mask, p[c], 1 - p[c]))) if c.size else 1.0
            if prob > 0:
                out.append((prob, sel.astype(np.int64), E[sel].copy()))
        return out
    if isinstance(part, IncompleteSteps):
        return _incomplete(part, t, E, c, max_outcomes)
    raise InvalidHyperparameterError(
        f"exact moments: no exact law is known for participation {type(part).__name__}; supported: "
        "FullParticipation, UniformSampling, Bernoulli, IncompleteSteps, Schedule")


def _incomplete(part: IncompleteSteps, t: int, E: np.ndarray, candidates: np.ndarray,
                max_outcomes: int) -> list[tuple[float, np.ndarray, np.ndarray]]:
    y_all = part.inactive_prob
    out: list[tuple[float, np.ndarray, np.ndarray]] = []
    for prob, clients, E_sel in _selections(part.base, t, E, candidates, max_outcomes):
        laws = []
        for c, e in zip(clients.tolist(), E_sel.tolist()):
            pmf = _step_law(part.distribution, t, int(e), int(c))
            y = float(y_all if y_all.ndim == 0 else y_all[c])
            if y > 0:
                pmf = (1 - y) * pmf
                pmf[0] += y
            laws.append(pmf)
        sizes = [int(np.count_nonzero(q)) for q in laws]
        _check_size(len(out) + float(np.prod(sizes, dtype=np.float64)), "IncompleteSteps", max_outcomes)
        supports = [np.flatnonzero(q) for q in laws]
        for steps in itertools.product(*supports):
            pr = prob * float(np.prod([laws[k][s] for k, s in enumerate(steps)])) if steps else prob
            out.append((pr, clients.copy(), np.array(steps, dtype=np.int64)))
    return out


def participation_support(participation: Participation | None, t: int, local_steps: Any, *,
                          max_outcomes: int = MAX_OUTCOMES) -> list[Outcome]:
    """Every outcome of round t's draw with its exact probability (module docstring).

    Parameters
    ----------
    participation : Participation or None (full participation)
    t : int >= 0
        Round index (schedules and time-varying step laws depend on it).
    local_steps : (N,) int array
        Nominal local steps E_i (an integer dtype, entries in [0, MAX_STEPS], N >= 1).
    max_outcomes : int >= 1
        Largest support enumerated.

    Returns
    -------
    list of Outcome
        Distinct (clients, steps) with probabilities summing to 1.
    """
    part = participation_of(participation)
    t = integer("t", t, minimum=0, maximum=None)
    E = step_counts("local_steps", local_steps, minimum=0)
    if E.shape[0] == 0:
        raise InvalidHyperparameterError("local_steps must have one entry per client (at least one), got an "
                                         "empty array")
    max_outcomes = integer("max_outcomes", max_outcomes, minimum=1, maximum=None)
    return support_of(part, t, E, max_outcomes)


def support_of(participation: Participation | None, t: int, E: np.ndarray, max_outcomes: int) -> list[Outcome]:
    """:func:`participation_support` on checked arguments (the engines call it every round)."""
    part = FullParticipation() if participation is None else participation
    raw = _selections(part, t, E, part.available(t, E.shape[0]), max_outcomes)
    merged: dict[Any, list[Any]] = {}
    for prob, c, s in raw:
        key = (tuple(c.tolist()), tuple(s.tolist()))
        if key in merged:
            merged[key][0] += prob
        else:
            merged[key] = [prob, c, s]
    total = sum(v[0] for v in merged.values())
    if abs(total - 1.0) > 1e-9:
        raise InvalidHyperparameterError(
            f"exact moments: outcome probabilities of {part!r} sum to {total!r}, not 1")
    return [Outcome(float(p), c, s) for p, c, s in merged.values() if p > 0]


def inclusion_probabilities(participation: Participation | None, n_clients: int, *, t: int = 0,
                            local_steps: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(pi, Pi): pi_i = P(i takes part), Pi_ij = P(i and j take part) in round t.

    Closed forms for full participation, uniform sampling and Bernoulli
    (without a schedule); any other model by enumeration of its support.
    "Takes part" means listed as a participant (an inactive client with
    s_i = 0 counts).

    Parameters
    ----------
    participation : Participation or None (full participation)
    n_clients : int >= 1
        N (Pi is (N, N): refused beyond the memory limit of the moments package).
    t : int >= 0
        Round index (schedules, time-varying step laws).
    local_steps : (N,) int array or None
        Nominal local steps (1 each when None); only the enumerated models use them.
    """
    part = FullParticipation() if participation is None else participation_of(participation)
    assert part is not None
    N = integer("n_clients", n_clients, minimum=1, maximum=None)
    memory_guard(f"the pairwise inclusion probabilities of n_clients = {N} clients (an ({N}, {N}) matrix)",
                 float(N) * N)
    t = integer("t", t, minimum=0, maximum=None)
    E = np.ones(N, dtype=np.int64) if local_steps is None else step_counts("local_steps", local_steps, length=N)
    if type(part) is FullParticipation:
        return np.ones(N), np.ones((N, N))
    if type(part) is UniformSampling:
        if part.S > N:
            raise InvalidHyperparameterError(f"UniformSampling: S = {part.S} exceeds n_clients = {N}")
        pi = np.full(N, part.S / N)
        pair = part.S * (part.S - 1) / (N * (N - 1)) if N > 1 else 0.0
        Pi = np.full((N, N), pair)
        np.fill_diagonal(Pi, pi)
        return pi, Pi
    if type(part) is Bernoulli:
        p = part.inclusion_probabilities(N)
        Pi = np.outer(p, p)
        np.fill_diagonal(Pi, p)
        return p.copy(), Pi
    pi, Pi = np.zeros(N), np.zeros((N, N))
    for o in support_of(part, t, E, MAX_OUTCOMES):
        ind = np.zeros(N)
        ind[o.clients] = 1.0
        pi += o.prob * ind
        Pi += o.prob * np.outer(ind, ind)
    return pi, Pi
