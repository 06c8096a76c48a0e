"""Tight Lipschitz constant of tau GD steps, max(|1 - eta mu|, |1 - eta L|)^tau, for every eta."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory.bounds import gd_contraction_factor, gd_rate_threshold, gd_step_factor
from fltheory.theory.bounds.local_adaptivity import sgd_operator_constants
from fltheory.theory.operators import fedopt_operator

MU, L = 0.5, 4.0
ETAS = np.array([0.05, 0.2, 0.25, 0.3, 0.4, 4 / 9, 0.45, 0.49])   # 1/L = 0.25, 2/(L+mu) = 4/9, 2/L = 0.5


@pytest.mark.parametrize("tau", [1, 2, 5])
def test_attained_by_the_diagonal_quadratic_for_every_step_below_two_over_L(tau):
    # O(x) = x* + (I - eta H)^tau (x - x*) with H = diag(mu, L): the ratio along the eigenvector of
    # the extreme factor is exactly max(|1 - eta mu|, |1 - eta L|)^tau, and no pair exceeds it.
    from fltheory import optim
    from fltheory.algorithms.fedopt import FedOpt
    H = np.diag([MU, L])[None]
    fed = QuadraticFederation(H, np.array([[1.0, -2.0]]))
    bound = gd_contraction_factor(ETAS, tau, MU, L)
    for eta, b in zip(ETAS, bound, strict=True):
        T = fedopt_operator(FedOpt(client_optimizer=optim.sgd(float(eta)), server_optimizer=optim.sgd(1.0),
                                   local_steps=tau), fed)
        worst_axis = 0 if abs(1 - eta * MU) >= abs(1 - eta * L) else 1
        x = np.array([0.3, -0.7])
        y = x.copy()
        y[worst_axis] += 1.0
        maps = T.client_maps(np.stack([x, y]), [0, 0])
        assert np.linalg.norm(maps[0] - maps[1]) == pytest.approx(b, rel=1e-12)
        assert b < 1


def test_equals_the_classical_factor_up_to_two_over_L_plus_mu_and_exceeds_it_beyond():
    knee, edge = gd_rate_threshold(MU, L)
    assert knee[0] == pytest.approx(2 / (L + MU)) and edge[0] == pytest.approx(2 / L)
    q = gd_step_factor(ETAS, MU, L)
    classical = 1 - ETAS * MU
    below = ETAS <= knee[0] + 1e-15
    np.testing.assert_allclose(q[below], classical[below], rtol=0, atol=1e-15)
    assert np.all(q[~below] > classical[~below])
    np.testing.assert_allclose(q[~below], ETAS[~below] * L - 1, rtol=1e-14)
    assert gd_step_factor(2 / L, MU, L)[0] == pytest.approx(1.0)       # the edge: no contraction
    assert gd_step_factor(2.2 / L, MU, L)[0] > 1


def test_bounds_gd_on_a_non_quadratic_strongly_convex_function():
    # f(x) = mu/2 ||x||^2 + a sum_j log cosh(x_j): Hessian diag(mu + a sech^2 x_j) in [mu, mu + a]
    a = L - MU
    rng = np.random.default_rng(3)

    def gd(x, eta, tau):
        for _ in range(tau):
            x = x - eta * (MU * x + a * np.tanh(x))
        return x

    for eta in ETAS:
        for tau in (1, 3):
            X, Y = rng.standard_normal((2, 200, 4)) * 2.0
            r = np.linalg.norm(gd(X, eta, tau) - gd(Y, eta, tau), axis=1) / np.linalg.norm(X - Y, axis=1)
            assert r.max() <= gd_contraction_factor(eta, tau, MU, L)[0] * (1 + 1e-12)


def test_sgd_operator_constants_paper_form_accepts_steps_beyond_one_over_L():
    eta, tau = 0.45, 3                                  # eta L = 1.8: beyond 2/(L + mu), below 2
    rho, _, (a_rate, _) = sgd_operator_constants(eta, tau, MU, L, 0.0, form="paper")
    assert a_rate.held and rho[0] == pytest.approx((eta * L - 1) ** tau)
    rho_sq, _, _ = sgd_operator_constants(eta, tau, MU, L, 0.0, form="squared")
    assert rho_sq[0] == pytest.approx(rho[0] ** 2)
    _, _, (bad, _) = sgd_operator_constants(0.6, tau, MU, L, 0.0, form="paper")
    assert not bad.held and "2/L" in bad.name


@pytest.mark.parametrize("kwargs", [dict(lr=0.0), dict(lr=-1.0), dict(mu=0.0), dict(mu=5.0),
                                    dict(local_steps=0), dict(local_steps=1.5), dict(lr=np.nan)])
def test_bad_input_raises_a_typed_error_naming_the_argument(kwargs):
    args = dict(lr=0.1, local_steps=2, mu=MU, L=L) | kwargs
    with pytest.raises(InvalidHyperparameterError):
        gd_contraction_factor(**args)
