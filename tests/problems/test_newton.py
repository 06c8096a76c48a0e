"""Logistic optima: Newton to ||grad|| <= 1e-10, agreement with cvxpy, and the
no-minimiser (separable) case."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.errors import InvalidProblemError
from fltheory.problems import LogisticFederation

from .problem_refs import make_logistic


@given(st.integers(0, 2**31 - 1), st.sampled_from([None, 3]), st.sampled_from([0.05, 1.0]))
def test_newton_reaches_the_tolerance(seed, n_classes, reg):
    fed = make_logistic(seed, 3, 3, 8, n_classes=n_classes, reg=reg, weights=True)
    tol = 1e-10 * max(float(np.linalg.norm(a, axis=1).max()) for a in fed.features)
    assert np.linalg.norm(fed.grad(fed.optimum())) <= tol
    G = fed.client_grad(fed.client_optima())
    assert np.all(np.linalg.norm(G, axis=1) <= tol)


def _cvxpy_binary(fed: LogisticFederation) -> np.ndarray:
    x = cp.Variable(fed.dim)
    terms = [p / a.shape[0] * cp.sum(cp.logistic(-cp.multiply(y, a @ x)))
             for p, a, y in zip(fed.weights, fed.features, fed.labels)]
    cp.Problem(cp.Minimize(sum(terms) + fed.reg / 2 * cp.sum_squares(x))).solve(solver=cp.CLARABEL)
    return x.value


def _cvxpy_multi(fed: LogisticFederation, C: int) -> np.ndarray:
    W = cp.Variable((fed.n_features, C))
    terms = []
    for p, a, y in zip(fed.weights, fed.features, fed.labels):
        Z = a @ W
        picked = cp.sum(cp.multiply(Z, np.eye(C)[y.astype(int)]), axis=1)
        terms.append(p / a.shape[0] * cp.sum(cp.log_sum_exp(Z, axis=1) - picked))
    cp.Problem(cp.Minimize(sum(terms) + fed.reg / 2 * cp.sum_squares(W))).solve(solver=cp.CLARABEL)
    return W.value.ravel()          # row-major: x[j*C + c] = W[j, c]


@pytest.mark.parametrize("n_classes", [None, 3])
def test_optimum_agrees_with_cvxpy(n_classes):
    fed = make_logistic(21, 3, 3, 10, n_classes=n_classes, reg=0.1)
    x_cvx = _cvxpy_binary(fed) if n_classes is None else _cvxpy_multi(fed, 3)
    x_star = fed.optimum()
    # strong convexity reg: ||x - x*|| <= ||grad F(x)|| / reg certifies the comparison
    assert np.linalg.norm(x_cvx - x_star) <= max(np.linalg.norm(fed.grad(x_cvx)) / fed.reg, 1e-7) * 1.0001
    # Clarabel stops at gap 1e-8 (its default), i.e. about 1e-4 in x for curvature reg = 0.1
    np.testing.assert_allclose(x_star, x_cvx, atol=1e-4)
    assert 0.0 <= fed.loss(x_cvx) - fed.loss(x_star) <= 1e-7


def test_separable_data_without_ridge_has_no_optimum():
    a = np.array([[1.0, 0.2], [2.0, -0.5], [-1.0, 0.3], [-1.5, -0.1]])
    y = np.array([1.0, 1.0, -1.0, -1.0])                     # separated by x = (1, 0)
    fed = LogisticFederation([a[:2], a[2:]], [y[:2], y[2:]])
    with pytest.raises(InvalidProblemError, match="separable"):
        fed.optimum()
    with pytest.raises(InvalidProblemError, match="client 0"):
        fed.client_optima()
    # with a ridge the optimum exists
    ridged = LogisticFederation([a[:2], a[2:]], [y[:2], y[2:]], reg=0.01)
    assert np.linalg.norm(ridged.grad(ridged.optimum())) <= 1e-10


def test_quasi_separable_multinomial_detected_and_overlap_accepted():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [2.0, 0.1]])
    with pytest.raises(InvalidProblemError, match="separable"):
        LogisticFederation([a], [np.array([0, 1, 2, 0])], n_classes=3).optimum()
    # duplicated rows with different labels overlap: a minimiser exists (W 1 = 0 one)
    b = np.vstack([a, a, a])
    y = np.array([0, 1, 2, 0, 1, 2, 0, 0, 1, 2, 2, 1])
    fed = LogisticFederation([b], [y], n_classes=3)
    x = fed.optimum()
    assert np.linalg.norm(fed.grad(x)) <= 1e-10
    np.testing.assert_allclose(x.reshape(2, 3).sum(axis=1), 0.0, atol=1e-10)
