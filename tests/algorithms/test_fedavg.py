"""FedAvg (seed 002 Alg. 1): vectorized == reference loop, one local step == GD on F,
the closed-form fixed point on quadratics, empty rounds, bad hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import root

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import Bernoulli, IncompleteSteps, UniformSampling, UniformSteps

from ._problems import generated_quadratic, sized_logistic
from ._blocked import one_batch_and_blocked, three_rounds

quadratic = generated_quadratic
logistic = sized_logistic


SETTINGS = [
    ("quad", lambda: quadratic(1), None, "weights"),
    ("quad-noise-sampled-incomplete", lambda: quadratic(2).with_gradient_noise(0.5),
     IncompleteSteps(UniformSampling(3), UniformSteps()), "uniform"),
    ("quad-bernoulli-samples", lambda: quadratic(3, n_samples=[3, 5, 7, 2, 9]), Bernoulli(0.5), "samples"),
    ("logistic-minibatch-sampled", lambda: logistic(4).with_minibatch(3),
     IncompleteSteps(UniformSampling(2), UniformSteps()), "samples"),
    ("logistic", lambda: logistic(5), None, "weights"),
]


@pytest.mark.parametrize("name,make,part,agg", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_vectorized_equals_reference(name, make, part, agg):
    fed = make()
    alg = FedAvg(lr=np.linspace(0.05, 0.12, fed.n_clients), local_steps=np.arange(fed.n_clients) % 3 + 1,
                 server_lr=0.8, aggregation=agg)
    x0 = np.linspace(-0.5, 0.5, fed.dim)
    hist = run(alg, fed, 7, participation=part, seed=13, x0=x0)
    ref = reference_run(alg, fed, 7, participation=part, seed=13, x0=x0)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)
    assert np.linalg.norm(hist.x[-1] - hist.x[0]) > 1e-3


@pytest.mark.parametrize("make", [lambda: quadratic(6), lambda: logistic(6)])
def test_one_local_step_is_gradient_descent_on_F(make):
    fed = make()
    eta, eta_g = 0.1, 0.7
    hist = run(FedAvg(lr=eta, local_steps=1, server_lr=eta_g), fed, 5, seed=0, x0=np.ones(fed.dim))
    x = np.ones(fed.dim)
    for t in range(5):
        x = x - eta_g * eta * fed.grad(x)
        np.testing.assert_allclose(hist.x[t + 1], x, rtol=0, atol=1e-13)


def test_fixed_point_closed_form_on_quadratics():
    """x~ = (sum p B_i)^-1 sum p B_i x_i*, B_i = I - (I - eta_i H_i)^tau_i (THEORY.md sec. 3),
    and its first-order expansion x* + eta (K-1)/2 (sum p H)^-1 sum p H grad f_i(x*)."""
    fed = quadratic(7, N=4, d=3, het=2.0)
    eta, K = 0.01, 4
    alg = FedAvg(lr=eta, local_steps=K)

    def T(x):
        return alg.round(alg.init(fed, x, None), fed, None, np.random.default_rng(0))[0].x

    x_fp = root(lambda x: T(x) - x, fed.optimum(), method="hybr", tol=1e-15).x
    eye = np.eye(3)
    B = np.array([eye - np.linalg.matrix_power(eye - eta * H, K) for H in fed.H])
    p = fed.weights
    closed = np.linalg.solve(np.einsum("i,ijk->jk", p, B), np.einsum("i,ijk,ik->j", p, B, fed.client_optima()))
    np.testing.assert_allclose(x_fp, closed, rtol=0, atol=1e-12)
    x_star = fed.optimum()
    grads = fed.client_grad(np.broadcast_to(x_star, (4, 3)))
    first = x_star + eta * (K - 1) / 2 * np.linalg.solve(
        np.einsum("i,ijk->jk", p, fed.H), np.einsum("i,ijk,ik->j", p, fed.H, grads))
    bias = np.linalg.norm(closed - x_star)
    assert bias > 1e-4
    assert np.linalg.norm(closed - first) < 0.05 * bias        # the O(eta^2) remainder is small


def test_empty_rounds_keep_the_model():
    fed = quadratic(8)
    part = Bernoulli(0.05)
    hist = run(FedAvg(lr=0.1, local_steps=2), fed, 30, participation=part, seed=1)
    empty = [t for t, c in enumerate(hist.clients) if c.size == 0]
    assert empty, "expected empty rounds with p = 0.05"
    for t in empty:
        np.testing.assert_array_equal(hist.x[t + 1], hist.x[t])
    ref = reference_run(FedAvg(lr=0.1, local_steps=2), fed, 30, participation=part, seed=1)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kw,match", [
    (dict(lr=-0.1), "lr"), (dict(lr=0.0), "lr"), (dict(lr=[0.1, -0.1]), "lr"),
    (dict(local_steps=0), "local_steps"), (dict(local_steps=2.5), "local_steps"),
    (dict(server_lr=0.0), "server_lr"), (dict(server_lr=float("inf")), "server_lr"),
    (dict(aggregation="mean"), "aggregation"),
])
def test_bad_hyperparameters(kw, match):
    with pytest.raises(InvalidHyperparameterError, match=match):
        FedAvg(**kw)


def test_samples_aggregation_needs_sample_counts():
    with pytest.raises(InvalidHyperparameterError, match="n_samples"):
        run(FedAvg(aggregation="samples"), quadratic(0), 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_rounds_equal_one_batch_rounds_bit_for_bit(monkeypatch, threads):
    """y - x is formed in the blocks of the local loop on its threads: the models and the
    communication must be the bits of the one-batch round (23 clients, blocks of about 4 rows)."""
    from fltheory.problems.generators import random_quadratic

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=14)
    alg = FedAvg(lr=np.linspace(0.03, 0.08, 23), local_steps=1 + np.arange(23) % 4, server_lr=0.8)

    def rounds():
        return three_rounds(alg, fed, None, 15, lambda state, info: (state.x.tobytes(), info.communication))

    one, many = one_batch_and_blocked(monkeypatch, fed, threads, rounds)
    assert one == many
