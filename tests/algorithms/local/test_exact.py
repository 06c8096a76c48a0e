"""Exact local solves (algorithms.local.exact) against closed forms and optimality conditions."""

from __future__ import annotations

import numpy as np

from fltheory.algorithms.local import LocalObjective, exact_local_solve

from .builders import composed, logistic, quadratic


def test_exact_solve_quadratic_closed_form_and_logistic_stationarity():
    fed = quadratic(5)
    m, d = fed.n_clients, fed.dim
    obj = composed(m, d, seed=6)
    Y = exact_local_solve(fed, np.arange(m), obj, np.zeros((m, d)))
    for r in range(m):
        A = fed.H[r] + np.diag(obj.D[r])
        np.testing.assert_allclose(Y[r], np.linalg.solve(A, fed.e[r] + obj.b[r]), rtol=1e-12, atol=1e-13)
    lg = logistic(7)
    obj = composed(lg.n_clients, lg.dim, seed=8)
    Y = exact_local_solve(lg, np.arange(lg.n_clients), obj, np.zeros((lg.n_clients, lg.dim)))
    assert np.abs(lg.client_grad(Y) + obj.grad(Y)).max() < 1e-13


def test_exact_solve_with_l1_satisfies_kkt():
    fed = quadratic(9)
    m, d = fed.n_clients, fed.dim
    Z = np.random.default_rng(1).standard_normal((m, d))
    obj = LocalObjective.proximal(0.5, Z) + LocalObjective.l1_term(0.3, Z)
    Y = exact_local_solve(fed, np.arange(m), obj, Z.copy())
    G = fed.client_grad(Y) + obj.smooth_grad(Y)
    on = np.abs(Y - Z) > 1e-9
    np.testing.assert_allclose(G[on], -0.3 * np.sign(Y - Z)[on], atol=1e-8)
    assert np.all(np.abs(G[~on]) <= 0.3 + 1e-8)
