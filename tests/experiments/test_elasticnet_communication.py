"""experiments/elasticnet_communication.py: what the experiment reads off FedElasticNet
with FedDyn (seed 003 Alg. 3) -- gamma_t = mean_k theta_k^t and the mean sign vectors
(1/m) sum_k sign(theta_k^t - theta^{t-1}) -- held to an independent computation:
each client's local problem

    theta_k^t = argmin f_k(theta) - <g_k, theta> + lambda_2/2 ||theta - x||^2 + lambda_1 ||theta - x||_1

solved with cvxpy from the raw quadratic data, with the Alg. 3 updates
g_k <- g_k - lambda_2 Delta_k - lambda_1 sign(Delta_k),
h <- h - (lambda_2/m) sum Delta_k - (lambda_1/m) sum sign(Delta_k),
x <- mean theta_k - h / lambda_2 written out here (full participation, eps = 0).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from experiments import elasticnet_communication as exp
from fltheory.problems.generators import random_quadratic

TOL = 1e-6          # cvxpy (CLARABEL) accuracy on these small problems


def _local(H: np.ndarray, e: np.ndarray, g: np.ndarray, x: np.ndarray, lam1: float, lam2: float) -> np.ndarray:
    th = cp.Variable(x.shape[0])
    Lc = np.linalg.cholesky(H)
    obj = 0.5 * cp.sum_squares(Lc.T @ th) - e @ th - g @ th + lam2 / 2 * cp.sum_squares(th - x) \
        + lam1 * cp.norm1(th - x)
    cp.Problem(cp.Minimize(obj)).solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12,
                                       tol_feas=1e-12)
    return np.asarray(th.value)


def test_gamma_and_signs_match_independent_alg3():
    m, d, lam1, lam2, T = 3, 4, 0.3, 2.0, 3
    fed = random_quadratic(m, d, L=1.0, mu=0.2, heterogeneity=1.0, seed=5, constants="clients")
    x0 = fed.optimum() + np.array([1.0, -0.5, 0.25, 0.0])
    tr = exp._bound_run(fed, x0, lam1, lam2, T)
    x, h, g = x0.copy(), np.zeros(d), np.zeros((m, d))
    zeros = 0
    for t in range(T):
        theta = np.array([_local(fed.H[k], fed.e[k], g[k], x, lam1, lam2) for k in range(m)])
        delta = theta - x
        sign = np.where(np.abs(delta) > TOL, np.sign(delta), 0.0)
        np.testing.assert_allclose(tr["gammas"][t + 1], theta.mean(axis=0), atol=10 * TOL)
        np.testing.assert_allclose(tr["signs"][t], sign.mean(axis=0), atol=1e-12)
        g = g - lam2 * delta - lam1 * sign
        h = h - (lam2 / m) * delta.sum(axis=0) - (lam1 / m) * sign.sum(axis=0)
        x = theta.mean(axis=0) - h / lam2
        zeros += int(np.sum(sign == 0))
    assert zeros > 0, "instance should exercise the sign(0) = 0 case (some Delta_k(j) exactly 0)"
    assert tr["signs"].shape == (T, d) and tr["gammas"].shape == (T + 1, d)


@pytest.mark.xfail(strict=True, reason=(
    "finding (FULL config, seed 0: m = 20, d = 60, 100 rounds, lambda_2 = 1, eps = 1e-3, lr 0.1, 10 steps): "
    "SCAFFOLD + elastic net (seed 003 Alg. 2, subgradient local steps with lambda_1 sign(y - x)) transmits "
    "MORE non-zeros with the l1 term than without: about 0.56 of the uplink entries for every lambda_1 in "
    "[0.001, 0.3] vs 0.46 at lambda_1 = 0; likely cause: the sign term keeps coordinates oscillating around x "
    "by about lr * lambda_1 per step, while without it the converged updates fall below eps"))
def test_full_scaffold_elastic_net_l1_reduces_nonzeros():
    from fltheory.reproduce import experiment_rng

    cfg = dict(exp.FULL, lambda1=[0.0, 0.01])
    _, fed, x0 = exp._instance(cfg, experiment_rng(0, exp.NAME))
    nz = exp._communication(fed, x0, cfg, bases=("scaffold",))["scaffold"]["nonzero_fraction"]
    assert nz[1] <= nz[0], f"non-zero fraction {nz[1]} at lambda_1 = {cfg['lambda1'][1]} > {nz[0]} at 0"


def test_C0_is_taken_at_zero_gradient_states():
    """Alg. 3 starts with grad L_k(theta_k^0) = 0 and h^0 = 0, so C_0 = (1/m) sum_k ||grad L_k(theta*)||
    (squared when corrected), independent of x0; grad L_k(theta*) = H_k theta* - e_k written out here."""
    m, d = 3, 4
    fed = random_quadratic(m, d, L=1.0, mu=0.2, heterogeneity=1.0, seed=5, constants="clients")
    x_star = fed.optimum()
    g = np.array([fed.H[k] @ x_star - fed.e[k] for k in range(m)])
    norms = np.sqrt(np.sum(g ** 2, axis=1))
    assert np.all(norms > 0.01), "instance needs heterogeneous clients"
    cfg = dict(exp.QUICK, bound_rounds=1, bound_lambda1=[0.0])
    for shift in (np.zeros(d), np.array([3.0, -1.0, 0.5, 2.0])):
        out = exp._bound_check(fed, x_star + shift, cfg)
        np.testing.assert_allclose(out["C0"]["as_printed"], norms.mean(), rtol=1e-12)
        np.testing.assert_allclose(out["C0"]["corrected"], np.mean(norms ** 2), rtol=1e-12)
