"""Closed-form FedOpt fixed points held to readable per-client loops."""

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.testing import build_quadratic
from fltheory.theory import (client_contraction_matrices, fedavg_first_order_bias,
                             fedopt_quadratic_fixed_point, fedopt_quadratic_round_map,
                             fedopt_small_rate_limit, fedprox_exact_fixed_point, mann_rate)

from ._loops import fedopt_round, fedprox_exact_round


@pytest.fixture
def fed():
    return build_quadratic(4, 3, L=4.0, mu=0.5, heterogeneity=3.0, n_samples=[5, 1, 20, 7], seed=3)


def _diag_P(fed, seed=0):
    rng = np.random.default_rng(seed)
    return 0.5 + rng.random((fed.n_clients, fed.dim))


def _full(Pd):
    return np.einsum("ni,ij->nij", Pd, np.eye(Pd.shape[1]))


@pytest.mark.parametrize("correction", ["none", "local", "joint"])
def test_fixed_point_is_fixed_by_the_readable_round(fed, correction):
    lr = np.array([0.05, 0.1, 0.02, 0.08])
    tau = np.array([3, 1, 7, 4])
    Pd = _diag_P(fed)
    fp = fedopt_quadratic_fixed_point(fed, lr, tau, Pd, correction=correction)
    x1 = fedopt_round(fed, fp.x, lr, tau, _full(Pd), server_lr=0.7, correction=correction)
    np.testing.assert_allclose(x1, fp.x, rtol=0, atol=1e-12)
    assert fp.bias > 1e-3           # heterogeneous rates/preconditioners: a real bias


@pytest.mark.parametrize("correction", ["none", "local", "joint"])
def test_round_map_matches_readable_round_at_random_points(fed, correction):
    lr, tau = 0.07, np.array([2, 5, 1, 3])
    Pd = _diag_P(fed, 1)
    A, b = fedopt_quadratic_round_map(fed, lr, tau, Pd, server_lr=0.6, correction=correction)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = 5 * rng.standard_normal(fed.dim)
        np.testing.assert_allclose(A @ x + b,
                                   fedopt_round(fed, x, lr, tau, _full(Pd), server_lr=0.6,
                                                correction=correction), atol=1e-12)


def test_diagonal_and_full_preconditioners_agree(fed):
    Pd = _diag_P(fed, 2)
    a = fedopt_quadratic_fixed_point(fed, 0.1, 3, Pd).x
    b = fedopt_quadratic_fixed_point(fed, 0.1, 3, _full(Pd)).x
    np.testing.assert_allclose(a, b, atol=1e-13)


def test_long_iteration_converges_to_closed_form_at_mann_rate(fed):
    lr, tau, eta_s = 0.1, np.array([2, 4, 1, 3]), 0.8
    fp = fedopt_quadratic_fixed_point(fed, lr, tau)
    P = _full(np.ones((fed.n_clients, fed.dim)))
    x = np.full(fed.dim, 10.0)
    errs = []
    for _ in range(400):
        x = fedopt_round(fed, x, lr, tau, P, server_lr=eta_s)
        errs.append(np.linalg.norm(x - fp.x))
    assert errs[-1] < 1e-10
    rate = mann_rate(fp, eta_s)
    # the observed per-round contraction approaches the spectral radius
    observed = (errs[150] / errs[100]) ** (1 / 50)
    assert abs(observed - rate) < 1e-3 * max(rate, 1e-3) + 1e-6


def test_same_rates_identity_preconditioner_one_step_is_unbiased(fed):
    # tau = 1 for everybody: B_i = eta H_i, x~ = (sum p H)^{-1} sum p e = x*
    fp = fedopt_quadratic_fixed_point(fed, 0.1, 1)
    np.testing.assert_allclose(fp.x, fed.optimum(), atol=1e-12)


def test_small_rate_limit_eq8(fed):
    c = np.array([1.0, 2.0, 0.5, 1.5])
    tau = np.array([2, 3, 1, 4])
    Pd = _diag_P(fed, 3)
    lim = fedopt_small_rate_limit(fed, c, tau, Pd)
    errs = []
    for h in (1e-3, 5e-4):
        x = fedopt_quadratic_fixed_point(fed, c * h, tau, Pd).x
        errs.append(np.linalg.norm(x - lim))
    # O(h) convergence to the eq. 8 limit: halving h halves the error
    assert 1.8 < errs[0] / errs[1] < 2.2
    assert np.linalg.norm(lim - fed.optimum()) > 1e-2   # non-vanishing bias


@pytest.mark.parametrize("correction", ["local", "joint"])
def test_corrected_closed_form_is_fedopts_map_with_per_client_rates(fed, correction):
    """Per-client rates eta_i = 0.1 s_i: the closed form is the exactly recovered round map of
    FedOpt(sgd(0.1), client_lr_scale=s), which divides each change by s_i tau_i (before, the
    closed form left s_i out: its corrected fixed point was 0.157 away from FedOpt's on a
    3-client problem, and its small-rate limit was not x*)."""
    from fltheory import optim
    from fltheory.algorithms import FedOpt
    from fltheory.theory import affine_round_map, fixed_point
    s, tau = np.array([0.5, 1.0, 0.25, 0.8]), np.array([3, 1, 2, 4])
    alg = FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(0.6), local_steps=tau,
                 client_lr_scale=s, correction=correction)
    am = affine_round_map(alg, fed)
    A, b = fedopt_quadratic_round_map(fed, 0.1 * s, tau, server_lr=0.6, correction=correction)
    d = fed.dim
    np.testing.assert_allclose(am.M[:d, :d], A, rtol=0, atol=1e-13)
    np.testing.assert_allclose(am.c[:d], b, rtol=0, atol=1e-13)
    fp = fedopt_quadratic_fixed_point(fed, 0.1 * s, tau, correction=correction)
    np.testing.assert_allclose(fp.x, fixed_point(am).x[:d], rtol=0, atol=1e-12)
    assert fp.bias > 1e-3                             # a bias at this rate, vanishing as eta -> 0:
    np.testing.assert_allclose(fedopt_small_rate_limit(fed, s, tau, correction=correction), fed.optimum(),
                               rtol=0, atol=1e-12)
    b1 = fedopt_quadratic_fixed_point(fed, 1e-3 * s, tau, correction=correction).bias
    b2 = fedopt_quadratic_fixed_point(fed, 5e-4 * s, tau, correction=correction).bias
    assert 1.8 < b1 / b2 < 2.2


def test_local_correction_removes_bias_at_rate_eta(fed):
    tau = np.array([2, 3, 1, 4])
    Pd = _diag_P(fed, 4)
    lim = fedopt_small_rate_limit(fed, 1.0, tau, Pd, correction="joint")
    np.testing.assert_allclose(lim, fed.optimum(), atol=1e-12)
    b1 = fedopt_quadratic_fixed_point(fed, 1e-3, tau, Pd, correction="joint").bias
    b2 = fedopt_quadratic_fixed_point(fed, 5e-4, tau, Pd, correction="joint").bias
    assert 1.8 < b1 / b2 < 2.2


def test_fedavg_first_order_bias_is_second_order_accurate(fed):
    K = 5
    errs = []
    for eta in (2e-3, 1e-3):
        exact = fedopt_quadratic_fixed_point(fed, eta, K).x
        errs.append(np.linalg.norm(exact - fedavg_first_order_bias(fed, eta, K)))
    assert 3.6 < errs[0] / errs[1] < 4.4
    # and the first-order term itself is not negligible
    assert np.linalg.norm(fedavg_first_order_bias(fed, 2e-3, K) - fed.optimum()) > 10 * errs[0]


def test_fedprox_exact_fixed_point(fed):
    x = fedprox_exact_fixed_point(fed, 0.7)
    np.testing.assert_allclose(fedprox_exact_round(fed, x, 0.7), x, atol=1e-12)


def test_non_contracting_rates_are_reported_not_hidden(fed):
    lr = 1.0                          # eta L = 4 > 2: local GD diverges
    fp = fedopt_quadratic_fixed_point(fed, lr, 3)
    assert np.max(fp.client_spectral_radii) > 1
    assert not fp.contractive
    P = _full(np.ones((fed.n_clients, fed.dim)))
    np.testing.assert_allclose(fedopt_round(fed, fp.x, lr, 3, P), fp.x,
                               atol=1e-9 * max(1.0, np.abs(fp.x).max()))


def test_contraction_matrices_match_power(fed):
    B, radii = client_contraction_matrices(fed, 0.1, [1, 2, 5, 8])
    for i, t in enumerate([1, 2, 5, 8]):
        S = np.eye(fed.dim) - 0.1 * fed.H[i]
        np.testing.assert_allclose(B[i], np.eye(fed.dim) - np.linalg.matrix_power(S, t), atol=1e-14)
        assert abs(radii[i] - np.abs(np.linalg.eigvalsh(S)).max()) < 1e-12


@pytest.mark.parametrize("kwargs,err", [
    (dict(lr=-0.1, local_steps=2), InvalidHyperparameterError),
    (dict(lr=0.1, local_steps=0), InvalidHyperparameterError),
    (dict(lr=0.1, local_steps=2.5), InvalidHyperparameterError),
    (dict(lr=[0.1, 0.2], local_steps=2), InvalidHyperparameterError),
    (dict(lr=0.1, local_steps=2, preconditioners=np.ones((2, 2))), InvalidHyperparameterError),
    (dict(lr=0.1, local_steps=2, preconditioners=-np.ones((4, 3))), InvalidHyperparameterError),
])
def test_bad_inputs_raise_typed_errors(fed, kwargs, err):
    with pytest.raises(err):
        fedopt_quadratic_fixed_point(fed, **kwargs)


def test_needs_a_quadratic_federation():
    with pytest.raises(InvalidProblemError):
        fedopt_quadratic_fixed_point(object(), 0.1, 2)
