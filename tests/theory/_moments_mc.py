"""Vectorized Monte Carlo of stochastic runs for the exact-moment tests (not library code).

Every replica's round is the conditional affine map of its participation outcome (read off the
algorithm's real round by ``conditional_round_map``, whose affinity is checked there) applied
to the replica's own state with *sampled* gradient noise: additive noise from its covariance
root, minibatch noise by drawing row indices (with or without replacement) at the replica's
own query points.  Outcomes are sampled from the enumerated support (the support itself is
held to the real participation draws in test_moments_support.py).  So this checks the moment
algebra -- expectations over outcomes, the martingale noise terms, state-dependent minibatch
covariances, the mixture over frozen/discrete state -- with many replicas at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fltheory.theory.moments import AdditiveNoise, MinibatchNoise, participation_support
from fltheory.theory.moments.conditional import conditional_round_map
from fltheory.theory.moments.engine import _discrete, _frozen_mask, _revalidated
from fltheory.theory.round_maps import state_layout, state_to_vector


def _sample_noise(noise: Any, rng: np.random.Generator, client: int, Y: np.ndarray) -> np.ndarray:
    """(G, d) noise of G replicas calling client ``client`` at points Y (G, d)."""
    G, d = Y.shape
    if isinstance(noise, AdditiveNoise):
        return rng.standard_normal((G, d)) @ noise._root[client].T
    assert isinstance(noise, MinibatchNoise)
    Dr = noise.D[client]
    n = Dr.shape[0]
    if noise.replace:
        pick = rng.integers(0, n, (G, noise.batch_size))
    else:
        pick = np.argsort(rng.random((G, n)), axis=1)[:, :noise.batch_size]
    Dm = Dr[pick].mean(axis=1)                                       # (G, d, d + 1)
    return np.einsum("gij,gj->gi", Dm, np.hstack([Y, np.ones((G, 1))]))


def monte_carlo(algorithm: Any, problem: Any, rounds: int, *, participation: Any, noise: Any,
                x0: np.ndarray, replicas: int, seed: int, center: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, se) of [x_t (d entries), ||x_t - x*||^2, ||x_t - center_t||^2] per round t = 0..R
    -> (R+1, d+2) each.  With ``center`` the exact E[x_t], the last entry estimates tr Cov(x_t)
    with a standard error proportional to the variance itself (sharp for the noise terms)."""
    rng = np.random.default_rng(seed)
    exact = problem.exact()
    d = problem.dim
    state0 = algorithm.init(exact, np.asarray(x0, dtype=np.float64), np.random.default_rng(0))
    layout = state_layout(state0)
    frozen = _frozen_mask(algorithm, exact, state0, layout, np.random.default_rng(1))
    S = np.tile(state_to_vector(state0, layout), (replicas, 1))
    templates = {0: state0}
    keys_of = {(_discrete(state0), S[0][frozen].tobytes()): 0}
    comp = np.zeros(replicas, dtype=np.int64)
    E = algorithm.nominal_steps(exact)
    xs, x_star = layout.x_slice, problem.optimum()
    stats = [_stats(S[:, xs], x_star, center[0])]
    cache: dict[Any, Any] = {}
    for t in range(rounds):
        support = participation_support(participation, t, E)
        probs = np.array([o.prob for o in support])
        pick = rng.choice(len(support), size=replicas, p=probs / probs.sum())
        S_new = np.empty_like(S)
        comp_new = np.empty_like(comp)
        for k in np.unique(comp):
            for o_idx in np.unique(pick[comp == k]):
                rows = np.flatnonzero((comp == k) & (pick == o_idx))
                o = support[o_idx]
                template = templates[int(k)]
                ck = (state_to_vector(template, layout)[frozen].tobytes(), o.key)
                cm = None if ck not in cache else _revalidated(cache[ck], algorithm, exact, template, layout,
                                                               o, frozen, d, 1e-8, rng)
                if cm is None:
                    cm = conditional_round_map(algorithm, exact, template, layout, o.clients, o.steps, frozen)
                cache[ck] = cm
                J = cm.row_clients.shape[0]
                Sg = S[rows]
                eps = np.zeros((rows.shape[0], J * d))
                if noise is not None:
                    for j in range(J):
                        Y = Sg @ cm.P[j * d:(j + 1) * d].T + cm.q[j * d:(j + 1) * d] \
                            + eps @ cm.R[j * d:(j + 1) * d].T
                        eps[:, j * d:(j + 1) * d] = _sample_noise(noise, rng, int(cm.row_clients[j]), Y)
                S_new[rows] = Sg @ cm.M.T + cm.c + eps @ cm.G.T
                nxt = cm.next_state
                key = (_discrete(nxt), state_to_vector(nxt, layout)[frozen].tobytes())
                if key not in keys_of:
                    keys_of[key] = len(keys_of)
                    templates[keys_of[key]] = nxt
                comp_new[rows] = keys_of[key]
        S, comp = S_new, comp_new
        stats.append(_stats(S[:, xs], x_star, center[t + 1]))
    mean = np.array([s[0] for s in stats])
    se = np.array([s[1] for s in stats])
    return mean, se


def _stats(X: np.ndarray, x_star: np.ndarray, center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dist2 = np.sum((X - x_star) ** 2, axis=1)
    spread = np.sum((X - center) ** 2, axis=1)
    V = np.hstack([X, dist2[:, None], spread[:, None]])
    return V.mean(axis=0), V.std(axis=0, ddof=1) / np.sqrt(X.shape[0])
