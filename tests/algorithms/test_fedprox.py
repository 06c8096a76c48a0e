"""FedProx / FedProx-TE: vectorized rounds == per-client reference loop, reductions,
the exact-prox fixed point on quadratics, bad hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedprox import FedProx, FedProxTE
from fltheory.algorithms.reference import reference_run
from fltheory.algorithms.run import run
from fltheory.algorithms.targets import TemporalEnsemble
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems.generators import random_quadratic

from ._problems import generated_quadratic, sampled_incomplete, sized_logistic

SampledIncomplete = sampled_incomplete
quadratic = generated_quadratic
logistic = sized_logistic


CASES = [
    ("quad-exact-oracle", lambda: quadratic(1), None),
    ("quad-noise-sampled", lambda: quadratic(2).with_gradient_noise(0.3), SampledIncomplete(3)),
    ("logistic-sampled", lambda: logistic(3), SampledIncomplete(2)),
    ("logistic-minibatch", lambda: logistic(4).with_minibatch(3), SampledIncomplete(3)),
]


@pytest.mark.parametrize("name,make,part", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("variant", ["gd", "te", "exact", "exact-te"])
def test_vectorized_equals_reference(name, make, part, variant):
    fed = make()
    lr = np.linspace(0.05, 0.12, fed.n_clients)
    steps = np.arange(fed.n_clients) % 3 + 2
    kw = dict(lr=lr, local_steps=steps, mu=0.7, server_lr=0.9)
    if variant.startswith("exact"):
        kw["solver"] = "exact"
    if variant.endswith("te"):
        kw["target"] = TemporalEnsemble(beta=0.6)
    alg = FedProx(**kw)
    x0 = np.linspace(-0.3, 0.4, fed.dim)
    hist = run(alg, fed, 6, participation=part, seed=11, x0=x0)
    ref = reference_run(alg, fed, 6, participation=part, seed=11, x0=x0)
    np.testing.assert_allclose(hist.x, ref, rtol=0, atol=1e-12)
    assert np.linalg.norm(hist.x[-1] - hist.x[0]) > 1e-3   # the runs actually moved


@pytest.mark.parametrize("part", [None, SampledIncomplete(3)])
def test_mu_zero_is_fedavg(part):
    fed = quadratic(5).with_gradient_noise(0.2)
    a = run(FedProx(lr=0.1, local_steps=4, mu=0.0, server_lr=0.8), fed, 5, participation=part, seed=3)
    b = run(FedAvg(lr=0.1, local_steps=4, server_lr=0.8), fed, 5, participation=part, seed=3)
    np.testing.assert_array_equal(a.x, b.x)


@pytest.mark.parametrize("solver", ["gd", "exact"])
def test_te_beta_zero_is_base(solver):
    fed = quadratic(6)
    part = SampledIncomplete(3)
    base = run(FedProx(lr=0.1, local_steps=3, mu=0.5, solver=solver), fed, 6, participation=part, seed=2)
    te = run(FedProxTE(beta=0.0, lr=0.1, local_steps=3, mu=0.5, solver=solver), fed, 6,
             participation=part, seed=2)
    np.testing.assert_array_equal(base.x, te.x)


def test_te_target_is_bias_corrected_average_of_global_models():
    """Seed 002 Alg. 2 by hand: after rounds 1..t, T = sum_s (1-b) b^(t-s) G_s / (1 - b^t)."""
    fed = quadratic(7)
    beta = 0.5
    alg = FedProxTE(beta=beta, lr=0.1, local_steps=2, mu=1.0)
    hist = run(alg, fed, 4, seed=0, x0=np.ones(fed.dim))
    G = hist.x[1:]                       # G_1..G_4 (G_0 is not ensembled)
    t = G.shape[0]
    coeff = (1 - beta) * beta ** (t - 1 - np.arange(t))
    expected = coeff @ G / (1 - beta ** t)
    np.testing.assert_allclose(alg.centre(hist.state), expected, rtol=1e-13, atol=1e-15)


def test_exact_fixed_point_closed_form():
    """Long run of exact FedProx == (sum p (H+mu I)^-1 H)^-1 sum p (H+mu I)^-1 e (THEORY.md sec. 3)."""
    fed = random_quadratic(4, 3, L=3.0, mu=0.5, heterogeneity=2.0, seed=9)
    mu = 0.8
    eye = np.eye(fed.dim)
    Rinv = np.linalg.inv(fed.H + mu * eye)
    A = np.einsum("i,ijk,ikl->jl", fed.weights, Rinv, fed.H)
    c = np.einsum("i,ijk,ik->j", fed.weights, Rinv, fed.e)
    x_tilde = np.linalg.solve(A, c)
    hist = run(FedProx(mu=mu, solver="exact"), fed, 400, seed=0)
    np.testing.assert_allclose(hist.x[-1], x_tilde, rtol=0, atol=1e-10)
    assert np.linalg.norm(x_tilde - fed.optimum()) > 1e-2     # the fixed point is biased


def test_exact_solver_is_the_prox_minimiser_on_logistic():
    """One exact round from x: the solver's y_i satisfy grad f_i(y) + mu (y - x) = 0 and the
    server model is their uniform mean."""
    fed = logistic(8)
    mu = 0.4
    x0 = np.array([0.2, -0.1, 0.3])
    hist = run(FedProx(mu=mu, solver="exact", aggregation="uniform"), fed, 1, seed=0, x0=x0)
    from fltheory.algorithms.local import LocalObjective, exact_local_solve
    N = fed.n_clients
    X0 = np.broadcast_to(x0, (N, 3))
    Y = exact_local_solve(fed, np.arange(N), LocalObjective.proximal(mu, X0), X0)
    res = fed.client_grad(Y) + mu * (Y - x0)
    assert np.abs(res).max() < 1e-10
    np.testing.assert_allclose(hist.x[1], Y.mean(axis=0), rtol=0, atol=1e-12)


@given(mu=st.floats(-5, -1e-6) | st.just(float("nan")))
def test_negative_mu_rejected(mu):
    with pytest.raises(InvalidHyperparameterError, match="mu"):
        FedProx(mu=mu)


@pytest.mark.parametrize("kw,match", [
    (dict(lr=-0.1), "lr"), (dict(lr=0.0), "lr"), (dict(local_steps=0), "local_steps"),
    (dict(local_steps=1.5), "local_steps"), (dict(solver="newton"), "solver"),
    (dict(aggregation="mean"), "aggregation"), (dict(server_lr=0.0), "server_lr"),
    (dict(target=0.5), "TemporalEnsemble"), (dict(target=TemporalEnsemble(beta=0.2, of="local")), "of="),
])
def test_bad_hyperparameters(kw, match):
    with pytest.raises(InvalidHyperparameterError, match=match):
        FedProx(**kw)


@pytest.mark.parametrize("beta", [-0.1, 1.0, 1.5, float("nan")])
def test_bad_beta(beta):
    with pytest.raises(InvalidHyperparameterError, match="beta"):
        TemporalEnsemble(beta=beta)


def test_per_client_lr_length_checked():
    fed = quadratic(0)
    with pytest.raises(InvalidHyperparameterError, match="clients"):
        run(FedProx(lr=[0.1, 0.2]), fed, 1)


def test_gd_round_is_the_closed_form_of_gradient_descent_on_the_prox_objective():
    """K gradient steps on h_i(y) = f_i(y) + (mu/2)||y - x||^2 from y = x, f_i quadratic:
    y_K = z_i + (I - eta (H_i + mu I))^K (x - z_i) with z_i = (H_i + mu I)^-1 (e_i + mu x),
    the minimiser of h_i (penalty centred at the received model, sign +mu (y - x))."""
    fed = quadratic(12, N=3, d=3)
    eta, mu, K, eta_g = 0.07, 0.9, 5, 0.8
    x0 = np.array([0.4, -1.0, 0.25])
    hist = run(FedProx(lr=eta, local_steps=K, mu=mu, server_lr=eta_g), fed, 1, seed=0, x0=x0)
    eye = np.eye(3)
    Y = []
    for H, e in zip(fed.H, fed.e):
        R = H + mu * eye
        z = np.linalg.solve(R, e + mu * x0)
        Y.append(z + np.linalg.matrix_power(eye - eta * R, K) @ (x0 - z))
    expected = x0 + eta_g * fed.weights @ (np.array(Y) - x0)
    np.testing.assert_allclose(hist.x[1], expected, rtol=0, atol=1e-14)


def test_te_exact_round_centres_the_prox_at_the_target():
    """FedProx-TE, exact solver: after rounds 1..3 the next round solves
    (H_i + mu I) y_i = e_i + mu T with T the Alg. 2 target of G_1..G_3 (not x_3)."""
    fed = quadratic(13, N=3, d=3)
    beta, mu = 0.6, 1.5
    alg = FedProxTE(beta=beta, mu=mu, solver="exact")
    hist = run(alg, fed, 4, seed=0, x0=np.array([2.0, -1.0, 0.5]))
    G = hist.x[1:4]
    coeff = (1 - beta) * beta ** (2 - np.arange(3))
    T = coeff @ G / (1 - beta ** 3)
    assert np.linalg.norm(T - hist.x[3]) > 1e-3          # the target differs from the last model
    eye = np.eye(3)
    Y = np.array([np.linalg.solve(H + mu * eye, e + mu * T) for H, e in zip(fed.H, fed.e)])
    np.testing.assert_allclose(hist.x[4], fed.weights @ Y, rtol=0, atol=1e-13)
