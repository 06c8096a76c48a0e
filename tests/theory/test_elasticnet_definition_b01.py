"""FedElasticNet Definition B.0.1 (App. B.1, eqs. 14-17): the smoothness inequalities the proof of
Theorem 3.1 uses, held on random convex clients (quadratic and logistic) with Hypothesis, beta the largest
client smoothness constant the federation reports:

(14) ||grad L_k(x) - grad L_k(y)|| <= beta ||x - y||;
(15) -<grad L_k(x), z - y> <= -L_k(z) + L_k(y) + (beta/2) ||z - x||^2 (convex and beta-smooth);
(16) (1/(2 beta m)) sum_k ||grad L_k(x) - grad L_k(x*)||^2 <= R(x) - R(x*), R the uniform average;
(17) ||sum_j v_j||^2 <= n sum_j ||v_j||^2.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import LogisticFederation
from fltheory.problems.generators import random_quadratic


def _federation(kind: str, seed: int, d: int):
    if kind == "quadratic":
        return random_quadratic(4, d, L=3.0, mu=0.1, heterogeneity=2.0, seed=seed, constants="clients")
    rng = np.random.default_rng(seed)
    feats = [rng.standard_normal((10, d)) * 1.5 for _ in range(4)]
    labels = [np.where(rng.uniform(size=10) < 0.5, 1.0, -1.0) for _ in range(4)]
    return LogisticFederation(feats, labels, reg=0.05)


def _uniform_minimiser(fed, x):
    """argmin of R = (1/m) sum_k L_k by Newton's method (exact in one step for quadratics)."""
    ids = np.arange(fed.n_clients)
    for _ in range(50):
        X = np.broadcast_to(x, (fed.n_clients, fed.dim))
        step = np.linalg.solve(fed.client_hess(X, ids).sum(axis=0), fed.client_grad(X, ids).sum(axis=0))
        x = x - step
        if np.linalg.norm(step) < 1e-14 * (1 + np.linalg.norm(x)):
            break
    return x


@given(st.sampled_from(["quadratic", "logistic"]), st.integers(0, 2**31 - 1), st.integers(2, 4))
def test_definition_b01_inequalities(kind, seed, d):
    fed = _federation(kind, seed, d)
    m, ids = fed.n_clients, np.arange(fed.n_clients)
    beta = float(np.max(fed.client_L))
    rng = np.random.default_rng(seed + 1)
    x, y, z = (rng.standard_normal((m, d)) * 2 for _ in range(3))
    gx, gy = fed.client_grad(x, ids), fed.client_grad(y, ids)
    tol = 1e-10
    # (14)
    assert np.all(np.linalg.norm(gx - gy, axis=1) <= beta * np.linalg.norm(x - y, axis=1) * (1 + tol))
    # (15), for each client at its own triple (x_k, y_k, z_k)
    lhs = -np.sum(gx * (z - y), axis=1)
    rhs = -fed.client_loss(z, ids) + fed.client_loss(y, ids) + beta / 2 * np.sum((z - x) ** 2, axis=1)
    assert np.all(lhs <= rhs + tol * (1 + np.abs(rhs)))
    # (16) at a point x0 against x* of the uniform average
    x_star = _uniform_minimiser(fed, np.zeros(d))
    X0, Xs = np.broadcast_to(x[0], (m, d)), np.broadcast_to(x_star, (m, d))
    gap = np.mean(fed.client_loss(X0, ids)) - np.mean(fed.client_loss(Xs, ids))
    lhs16 = np.sum((fed.client_grad(X0, ids) - fed.client_grad(Xs, ids)) ** 2) / (2 * beta * m)
    assert lhs16 <= gap * (1 + tol) + 1e-12
    # (17)
    v = rng.standard_normal((m, d)) * rng.uniform(0, 5, (m, 1))
    assert np.sum(v.sum(axis=0) ** 2) <= m * np.sum(v ** 2) * (1 + tol)


def test_definition_b01_equality_cases():
    # (17) is an equality for equal vectors; (16) for one client with L(x) = beta ||x||^2 / 2
    v = np.tile([1.0, -2.0], (5, 1))
    assert np.sum(v.sum(axis=0) ** 2) == 5 * np.sum(v ** 2)
    from fltheory.problems import QuadraticFederation
    beta = 3.0
    fed = QuadraticFederation(np.array([beta * np.eye(2)]), np.zeros((1, 2)))
    x = np.array([[1.0, 2.0]])
    gap = fed.client_loss(x)[0] - fed.client_loss(np.zeros((1, 2)))[0]
    assert np.sum(fed.client_grad(x) ** 2) / (2 * beta) == gap
