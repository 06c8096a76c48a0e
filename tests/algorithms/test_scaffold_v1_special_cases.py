"""SCAFFOLD-v1's special cases held to independent loops: with S = 1, K = 1, eta_g = 1 it is SAGA
(Section 5; SAGA written from Defazio et al. 2014 in fltheory.algorithms.reference.saga), and with the
correction removed (c_i = c = 0 in every round, Section 3) it is FedAvg, iterate for iterate, also with
client sampling and gradient noise."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, Scaffold
from fltheory.algorithms.reference.saga import saga_iterates
from fltheory.participation import UniformSampling
from fltheory.problems.generators import random_quadratic


def _scaffold_path(alg, fed, state, rounds, participation, rng):
    xs, chosen = [state.x.copy()], []
    for _ in range(rounds):
        state, info = alg.round(state, fed, participation, rng)
        xs.append(state.x.copy())
        chosen.extend(int(i) for i in info.clients)
    return np.array(xs), chosen


@pytest.mark.parametrize("option", ["I", "II"])
@pytest.mark.parametrize("start", ["zero-table", "gradients-at-x0"])
def test_one_client_one_step_unit_global_rate_is_saga(option, start):
    fed = random_quadratic(20, 4, L=3.0, mu=0.5, heterogeneity=2.0, seed=4, constants="clients")
    x0 = fed.optimum() + np.array([1.0, -2.0, 0.5, 3.0])
    lr = 0.1
    alg = Scaffold(lr=lr, local_steps=1, server_lr=1.0, option=option)
    rng = np.random.default_rng(5)
    state = alg.init(fed, x0, rng)
    table0 = np.zeros((fed.n_clients, fed.dim))
    if start == "gradients-at-x0":                       # SAGA's initialisation phi_i = x0
        table0 = fed.client_grad(np.broadcast_to(x0, (fed.n_clients, fed.dim)))
        state = replace(state, c_clients=table0.copy(), c=table0.mean(axis=0))
    xs, chosen = _scaffold_path(alg, fed, state, 200, UniformSampling(1), rng)
    assert len(chosen) == 200 and len(set(chosen)) > 10   # one client per round, many different ones
    saga = saga_iterates(fed, x0, lr, chosen, table0=table0 if start == "zero-table" else None)
    # option II forms the control as c_j - c + (x - y)/eta, equal to g_j(x) up to rounding
    np.testing.assert_allclose(xs, saga, rtol=1e-14, atol=1e-14)
    # SAGA converges linearly to x*: 200 single-client steps shrink the error by more than 100
    assert np.linalg.norm(xs[-1] - fed.optimum()) < 1e-2 * np.linalg.norm(x0 - fed.optimum())


def test_saga_equivalence_needs_c_to_be_the_mean_of_the_client_controls():
    # the derivation in fltheory.algorithms.reference.saga uses the invariant c = (1/N) sum_i c_i; a start that
    # breaks it (table at x0, c = 0) leaves SAGA's path: the first step differs from SAGA's by lr * (mean - c)
    fed = random_quadratic(8, 3, L=2.0, mu=0.5, heterogeneity=2.0, seed=2, constants="clients")
    x0 = fed.optimum() + np.array([1.0, -1.0, 2.0])
    lr = 0.1
    alg = Scaffold(lr=lr, local_steps=1, server_lr=1.0, option="I")
    rng = np.random.default_rng(3)
    table0 = fed.client_grad(np.broadcast_to(x0, (fed.n_clients, fed.dim)))
    state = replace(alg.init(fed, x0, rng), c_clients=table0.copy(), c=np.zeros(fed.dim))
    xs, chosen = _scaffold_path(alg, fed, state, 1, UniformSampling(1), rng)
    saga = saga_iterates(fed, x0, lr, chosen)
    np.testing.assert_allclose(xs[1] - saga[1], lr * table0.mean(axis=0), rtol=1e-12, atol=1e-15)
    assert np.linalg.norm(table0.mean(axis=0)) > 0.1


def test_saga_loop_by_hand_on_two_scalar_clients():
    # f_1 = x^2/2 - x (grad x - 1), f_2 = x^2 (grad 2x); table at x0 = 1: (0, 2), mean 1
    from fltheory.problems import QuadraticFederation
    fed = QuadraticFederation(np.array([[[1.0]], [[2.0]]]), np.array([[1.0], [0.0]]))
    xs = saga_iterates(fed, [1.0], 0.25, [1, 0])
    # step 1 (j = 2): g = 2, x = 1 - 0.25 (2 - 2 + 1) = 0.75, table (0, 2)
    # step 2 (j = 1): g = -0.25, x = 0.75 - 0.25 (-0.25 - 0 + 1) = 0.5625
    np.testing.assert_allclose(xs[:, 0], [1.0, 0.75, 0.5625], rtol=1e-15)


@pytest.mark.parametrize("participation", [None, UniformSampling(3)])
def test_zero_controls_every_round_is_fedavg(participation):
    fed = random_quadratic(6, 3, L=2.0, mu=0.5, heterogeneity=3.0, seed=6, constants="clients")
    noisy = fed.with_gradient_noise(0.5)
    x0 = np.array([2.0, -1.0, 1.0])
    kw = dict(lr=0.1, local_steps=4, server_lr=0.7)
    scaffold, fedavg = Scaffold(option="II", **kw), FedAvg(aggregation="uniform", **kw)
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    s, f = scaffold.init(noisy, x0, r1), fedavg.init(noisy, x0, r2)
    zero_c = np.zeros(noisy.dim)
    zero_ci = np.zeros((noisy.n_clients, noisy.dim))
    for _ in range(15):
        s = replace(s, c=zero_c, c_clients=zero_ci)      # the correction removed: c_i = c = 0
        s, _ = scaffold.round(s, noisy, participation, r1)
        f, _ = fedavg.round(f, noisy, participation, r2)
        np.testing.assert_allclose(s.x, f.x, rtol=1e-14, atol=1e-15)
    # and the correction matters: kept controls move SCAFFOLD off FedAvg's path
    s2 = scaffold.init(noisy, x0, np.random.default_rng(9))
    for _ in range(3):
        s2, _ = scaffold.round(s2, noisy, participation, np.random.default_rng(1))
    assert not np.allclose(s2.x, f.x)
