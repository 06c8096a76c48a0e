"""Constants measured along trajectories, held to the analytic constants of
quadratic and logistic federations (``fed.constants()``), to exact Hessians
of a network, and (for the stochastic estimators) to their known expectations
with coverage of the stated standard errors."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, run
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from fltheory.nn import NeuralFederation, Sequential, SoftmaxCrossEntropy, Tanh
from fltheory.nn.layers import Dense
from fltheory.nn.trajectory_constants import power_iteration, trajectory_constants
from fltheory.problems import LogisticFederation, random_least_squares, random_quadratic


def quadratic():
    return random_quadratic(4, 6, L=10.0, mu=0.5, heterogeneity=1.0, seed=3)


def test_quadratic_smoothness_dissimilarity_and_bounded_gradients_match_the_analytic_constants():
    fed = quadratic()
    rng = np.random.default_rng(0)
    c = fed.constants(radius=2.0)
    x_star = fed.optimum()
    hist = run(FedAvg(lr=0.05, local_steps=3), fed, 20, x0=x_star + rng.standard_normal(6), seed=0)
    P = np.concatenate([x_star[None], hist.x])
    tc = trajectory_constants(fed, P, rng)
    np.testing.assert_allclose(tc.L, c.L, rtol=1e-8)                 # constant Hessian: ||H||_2 = L
    np.testing.assert_allclose(tc.client_L, np.broadcast_to(c.client_L, tc.client_L.shape), rtol=1e-8)
    assert tc.L_residual.max() <= 1e-3 * c.L
    assert tc.zeta2[0] == pytest.approx(c.zeta2, rel=1e-12)           # at x*, grad F = 0
    np.testing.assert_allclose(tc.G2[0], c.zeta2, rtol=1e-12)
    inside = np.linalg.norm(P - x_star, axis=1) <= 2.0
    assert inside.sum() >= 2
    assert tc.G2[inside].max() <= c.G2 * (1 + 1e-12)                  # exact sup over the ball
    assert tc.G2_max[inside].max() <= c.G2_max * (1 + 1e-12)
    # SCAFFOLD (G, B): the analytic pair holds on all of R^d, so on the trajectory too
    assert tc.scaffold_G2(c.scaffold_B2) <= c.scaffold_G2 * (1 + 1e-10)
    # zeta^2 is the weighted spread of the client gradients around grad F, point by point
    G = fed.client_grad(np.broadcast_to(P[5], (4, 6)))
    gF = fed.weights @ G
    assert tc.zeta2[5] == pytest.approx(fed.weights @ ((G - gF) ** 2).sum(axis=1), rel=1e-12)
    assert tc.grad_norm2[5] == pytest.approx(gF @ gF, rel=1e-12)
    assert tc.Q[5] == pytest.approx(((G ** 2).sum(axis=1)).mean(), rel=1e-12)
    assert tc.sigma2_method == "exact oracle" and np.all(tc.sigma2 == 0)


def test_logistic_smoothness_is_below_the_analytic_bound_and_attains_it_at_zero():
    rng = np.random.default_rng(1)
    feats = [rng.standard_normal((n, 5)) for n in (30, 40, 25)]
    labels = [2.0 * rng.integers(0, 2, f.shape[0]) - 1 for f in feats]
    fed = LogisticFederation(feats, labels, reg=0.1)
    c = fed.constants()
    P = np.concatenate([np.zeros((1, 5)), rng.standard_normal((4, 5))])
    tc = trajectory_constants(fed, P, rng, power_iters=5000, tol=1e-9)
    assert tc.L_residual.max() <= 1e-9 * tc.L.max()
    assert tc.L[0] == pytest.approx(c.L, rel=1e-8)                   # the sup is attained at x = 0
    assert np.all(tc.L <= c.L * (1 + 1e-10))
    exact = np.linalg.eigvalsh(fed.hess(P[3]))
    assert tc.L[3] == pytest.approx(np.abs(exact).max(), rel=1e-8)
    # per-sample variance against the library's exact minibatch variance
    mb = fed.with_minibatch(4)
    tm = trajectory_constants(mb, P, rng)
    assert tm.sigma2_method.startswith("per-sample")
    for t in range(P.shape[0]):
        np.testing.assert_allclose(tm.sigma2_clients[t], mb.minibatch_variance(np.broadcast_to(P[t], (3, 5))),
                                   rtol=1e-12)
    np.testing.assert_allclose(tm.sample_var, 4 * tm.sigma2_clients, rtol=1e-14)
    at_star = trajectory_constants(mb, fed.optimum(), rng)
    assert at_star.sigma2[0] <= mb.constants().sigma2 * (1 + 1e-12)


def test_monte_carlo_variance_is_unbiased_and_its_standard_error_covers_the_truth():
    """A least-squares federation with a minibatch oracle has no
    per_sample_grads: the Monte-Carlo path runs; its expectation is the exact
    minibatch variance (minibatch_variance).  400 independent estimates: the
    mean lies within 4 standard errors of the truth; the +-1 and +-2 SE
    intervals cover the truth at close to the normal 68 % / 95 % with K = 400
    draws, and undercover with K = 40 (||g - grad f||^2 is skewed: the CLT
    interval needs many draws; measured 84-87 %)."""
    base = random_least_squares(2, 3, rows=[12, 9], seed=5, heterogeneity=1.0, noise=0.5)
    fed = base.with_minibatch(2)
    x = np.array([0.3, -0.2, 0.5])
    truth = fed.minibatch_variance(np.broadcast_to(x, (2, 3)))
    coverage = {}
    for K in (40, 400):
        rng = np.random.default_rng(7)
        est, se = [], []
        for _ in range(400):
            tc = trajectory_constants(fed, x, rng, noise_draws=K, power_iters=2)
            est.append(tc.sigma2_clients[0])
            se.append(tc.sigma2_se[0])
        e, s = np.array(est), np.array(se)
        assert tc.sigma2_method.startswith("Monte Carlo")
        spread = e.std(axis=0, ddof=1) / np.sqrt(e.shape[0])
        assert np.all(np.abs(e.mean(axis=0) - truth) <= 4 * spread)          # unbiased
        coverage[K] = (np.mean(np.abs(e - truth) <= s, axis=0), np.mean(np.abs(e - truth) <= 2 * s, axis=0))
        if K == 400:     # the stated standard error matches the observed spread of the estimates
            np.testing.assert_allclose(s.mean(axis=0), e.std(axis=0, ddof=1), rtol=0.15)
    one, two = coverage[400]
    assert np.all((one >= 0.6) & (one <= 0.76)) and np.all((two >= 0.9) & (two <= 0.99))
    assert np.all(coverage[40][1] < 0.9)


def test_gaussian_noise_oracle_reports_the_configured_value():
    fed = quadratic().with_gradient_noise([0.1, 0.2, 0.3, 0.4])
    tc = trajectory_constants(fed, np.zeros((2, 6)), np.random.default_rng(0))
    np.testing.assert_array_equal(tc.sigma2_clients, [[0.1, 0.2, 0.3, 0.4]] * 2)
    assert np.all(tc.sigma2_se == 0) and tc.sigma2_method == "configured Gaussian noise"
    assert tc.sigma2_mean[0] == pytest.approx(fed.weights @ [0.1, 0.2, 0.3, 0.4])


def test_network_smoothness_equals_the_largest_absolute_hessian_eigenvalue():
    rng = np.random.default_rng(2)
    net = Sequential([Dense(4, init="glorot"), Tanh(), Dense(3, init="glorot")], (3,))
    fed = NeuralFederation(net, SoftmaxCrossEntropy(), [rng.standard_normal((6, 3)) for _ in range(3)],
                           [rng.integers(0, 3, 6) for _ in range(3)], reg=0.01)
    P = np.stack([fed.init_params(rng) for _ in range(3)])
    tc = trajectory_constants(fed, P, rng, power_iters=5000, tol=1e-9)
    assert tc.L_residual.max() <= 1e-9 * tc.L.max()
    for t in range(3):
        Hs = fed.client_hess(np.broadcast_to(P[t], (3, fed.dim)))
        client = np.abs(np.linalg.eigvalsh(Hs)).max(axis=1)
        glob = np.abs(np.linalg.eigvalsh(np.einsum("i,ijk->jk", fed.weights, Hs))).max()
        np.testing.assert_allclose(tc.client_L[t], client, rtol=1e-6)
        assert tc.L[t] == pytest.approx(glob, rel=1e-6)
        assert np.all(tc.L[t] <= glob * (1 + 1e-12))                  # ||Hv|| never exceeds ||H||
    # per-sample variance of the data term, against a direct computation
    S = fed.per_sample_grads(np.broadcast_to(P[0], (3, fed.dim)))
    direct = ((S - S.mean(axis=1, keepdims=True)) ** 2).sum(axis=(1, 2)) / 6
    np.testing.assert_allclose(tc.sample_var[0], direct, rtol=1e-12)


def test_power_iteration_residual_brackets_an_eigenvalue():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((3, 8, 8))
    A = A + np.swapaxes(A, 1, 2)
    est, resid, v = power_iteration(lambda V: np.einsum("mij,mj->mi", A, V), rng.standard_normal((3, 8)),
                                    5, 0.0)
    eig = np.linalg.eigvalsh(A)
    theta = np.einsum("mi,mij,mj->m", v, A, v)
    for m in range(3):
        assert np.min(np.abs(eig[m] - theta[m])) <= resid[m] * (1 + 1e-12)
        assert est[m] <= np.abs(eig[m]).max() * (1 + 1e-12)


def test_bad_arguments_raise():
    fed = quadratic()
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidProblemError, match="points"):
        trajectory_constants(fed, np.zeros((2, 5)), rng)
    with pytest.raises(InvalidHyperparameterError, match="rng"):
        trajectory_constants(fed, np.zeros(6), 0)
    with pytest.raises(InvalidHyperparameterError, match="power_iters"):
        trajectory_constants(fed, np.zeros(6), rng, power_iters=0)
    with pytest.raises(InvalidHyperparameterError, match="noise_draws"):
        trajectory_constants(random_least_squares(2, 3, rows=[5, 5], seed=0).with_minibatch(2), np.zeros(3),
                             rng, noise_draws=1)
    with pytest.raises(InvalidHyperparameterError, match="B2"):
        trajectory_constants(fed, np.zeros(6), rng).scaffold_G2(-1.0)


def test_points_where_the_squared_gradient_norms_overflow_give_a_typed_error():
    """At |x| = 1e300 the gradients are finite but their squared norms are not: refused, not inf."""
    fed = quadratic()
    rng = np.random.default_rng(0)
    with pytest.raises(OutOfRangeError, match=r"points: .*G2.*1\.000e\+300"):
        trajectory_constants(fed, np.full(6, 1e300), rng)
    at_large = trajectory_constants(fed, np.full(6, 1e100), rng)       # still representable: a finite answer
    assert np.all(np.isfinite(at_large.G2)) and at_large.G2[0] > 1e199


def test_power_iteration_checks_its_arguments():
    double = lambda V: 2.0 * V          # the operator 2 I
    est, resid, _ = power_iteration(double, np.ones((3, 2)), 0, 0.0)
    np.testing.assert_allclose(est, 2.0)
    np.testing.assert_allclose(resid, 0.0, atol=1e-15)
    with pytest.raises(InvalidHyperparameterError, match="matvec"):
        power_iteration(5, np.ones((3, 2)), 3, 0.0)
    with pytest.raises(InvalidHyperparameterError, match="iters"):
        power_iteration(double, np.ones((3, 2)), 1.5, 0.0)
    with pytest.raises(InvalidHyperparameterError, match="tol"):
        power_iteration(double, np.ones((3, 2)), 3, 1.0)
    with pytest.raises(InvalidProblemError, match="v0"):
        power_iteration(double, np.zeros((3, 2)), 3, 0.0)            # a zero start vector has no direction
    with pytest.raises(InvalidProblemError, match="v0"):
        power_iteration(double, np.ones(2), 3, 0.0)
    with pytest.raises(InvalidProblemError, match="matvec must return"):
        power_iteration(lambda V: V[:1], np.ones((3, 2)), 3, 0.0)
    with pytest.raises(OutOfRangeError, match="matvec returned NaN or inf"):
        power_iteration(lambda V: 1e308 * 10 * V, np.ones((3, 2)), 3, 0.0)
    with pytest.raises(OutOfRangeError, match="overflows float64"):     # finite entries 1e308, norm 2e308
        power_iteration(lambda V: np.full_like(V, 1e308), np.ones((1, 4)), 1, 0.0)
