"""Statements of SCAFFOLD arXiv v1 (seed 004) held to exact computations: the aggregate local update
equals FedAvg's when the controls average to c (sec. 4.1 (i), one local step), one client reduces
SCAFFOLD to local GD (sec. 5, N = 1), and client sampling is unbiased for the server model update
(sec. 6.1 (i), exact enumeration of the sampled subsets)."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.participation import Participants, Participation
from fltheory.problems.generators import random_quadratic


class _Subset(Participation):
    def __init__(self, clients):
        self.clients = np.asarray(sorted(clients), dtype=np.int64)

    def draw(self, rng, t, local_steps):
        return Participants(self.clients, np.asarray(local_steps, dtype=np.int64)[self.clients])


def _state_with_controls(fed, rng):
    alg = Scaffold(lr=0.05, local_steps=3)
    state = alg.init(fed, fed.optimum() + rng.standard_normal(fed.dim), rng)
    C = rng.standard_normal((fed.n_clients, fed.dim))
    return replace(state, c_clients=C, c=C.mean(axis=0))      # the invariant c = mean c_i


def test_one_local_step_aggregate_equals_fedavg_when_controls_average_to_c():
    # y_i = x - eta (g_i(x) - c_i + c); mean_i y_i = x - eta mean_i g_i(x) because mean_i c_i = c
    fed = random_quadratic(5, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=1, constants="clients")
    rng = np.random.default_rng(0)
    state = _state_with_controls(fed, rng)
    new, _ = Scaffold(lr=0.1, local_steps=1).round(state, fed, None, rng)
    fed_state = FedAvg(lr=0.1, local_steps=1).init(fed, state.x, rng)
    fa, _ = FedAvg(lr=0.1, local_steps=1).round(fed_state, fed, None, rng)
    np.testing.assert_allclose(new.x, fa.x, rtol=1e-13, atol=1e-14)


def test_with_one_client_scaffold_is_local_gradient_descent():
    # N = 1: c = c_1, the correction -c_1 + c vanishes and the K local steps are plain GD
    fed = random_quadratic(1, 3, L=2.0, mu=0.5, heterogeneity=0.0, seed=2, constants="clients")
    x0 = fed.optimum() + np.array([1.0, -1.0, 0.5])
    rng = np.random.default_rng(0)
    alg = Scaffold(lr=0.1, local_steps=4)
    state = alg.init(fed, x0, rng)
    x = x0.copy()
    for _ in range(5):
        state, _ = alg.round(state, fed, None, rng)
        for _ in range(4):
            x = x - 0.1 * (fed.H[0] @ x - fed.e[0])
        np.testing.assert_allclose(state.x, x, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("S", [1, 2, 3])
def test_sampling_is_unbiased_for_the_server_model(S):
    # E over uniform S-subsets of x + (eta_g/S) sum_{i in S} Delta_i = x + eta_g mean_i Delta_i (a client's
    # update does not depend on who else is sampled), i.e. the full-participation server model
    fed = random_quadratic(4, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=3, constants="clients")
    rng = np.random.default_rng(1)
    state = _state_with_controls(fed, rng)
    alg = Scaffold(lr=0.05, local_steps=3)
    full, _ = alg.round(state, fed, None, rng)
    xs = [alg.round(state, fed, _Subset(c), rng)[0].x for c in combinations(range(4), S)]
    np.testing.assert_allclose(np.mean(xs, axis=0), full.x, rtol=1e-12, atol=1e-14)
