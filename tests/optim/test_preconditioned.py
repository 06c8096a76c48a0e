"""Fixed-preconditioner GD: row selection by client, closed-form convergence
on quadratics (y_k - y* = (I - lr P H)^k (y_0 - y*))."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.errors import InvalidHyperparameterError


def _spd(rng, d, lo=0.5, hi=4.0):
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Q @ np.diag(rng.uniform(lo, hi, size=d)) @ Q.T


def test_per_client_diagonal_rows_follow_clients():
    P = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])      # N = 3, d = 2 (non-square: per client)
    opt = optim.preconditioned(0.5, P)
    s = opt.init(np.zeros((2, 2)), clients=np.array([2, 0]))
    g = np.array([[1.0, -1.0], [2.0, 1.0]])
    u, s = opt.update(g, s, None)
    np.testing.assert_allclose(u, -0.5 * P[[2, 0]] * g, rtol=1e-15)
    np.testing.assert_allclose(opt.precond(s), P[[2, 0]], rtol=0)


def test_per_client_full_and_shared_forms():
    rng = np.random.default_rng(0)
    Ps = np.stack([_spd(rng, 3) for _ in range(4)])
    g = rng.normal(size=(2, 3))
    opt = optim.preconditioned(0.1, Ps)
    u, s = opt.update(g, opt.init(np.zeros((2, 3)), clients=np.array([3, 1])), None)
    np.testing.assert_allclose(u, -0.1 * np.stack([Ps[3] @ g[0], Ps[1] @ g[1]]), rtol=1e-13)
    assert opt.precond(s).shape == (2, 3, 3)
    shared = optim.preconditioned(0.1, Ps[0])
    u, _ = shared.update(g, shared.init(np.zeros((2, 3))), None)
    np.testing.assert_allclose(u, -0.1 * g @ Ps[0].T, rtol=1e-13)
    diag = optim.preconditioned(0.1, np.array([1.0, 2.0, 3.0]))
    u, _ = diag.update(g, diag.init(np.zeros((2, 3))), None)
    np.testing.assert_allclose(u, -0.1 * g * np.array([1.0, 2.0, 3.0]), rtol=1e-15)
    # a square 2-D array is a shared matrix unless per_client=True
    sq = np.array([[1.0, 2.0], [3.0, 4.0]])
    pc = optim.preconditioned(1.0, sq, per_client=True)
    u, _ = pc.update(np.ones((1, 2)), pc.init(np.zeros((1, 2)), clients=np.array([1])), None)
    np.testing.assert_allclose(u, -sq[[1]], rtol=0)


def test_preconditioned_gd_on_quadratic_follows_matrix_power():
    rng = np.random.default_rng(1)
    d, K, lr = 4, 30, 0.4
    H, P = _spd(rng, d), _spd(rng, d, 0.2, 1.0)
    e = rng.normal(size=d)
    ystar = np.linalg.solve(H, e)
    y = rng.normal(size=(1, d))
    y0 = y.copy()
    opt = optim.preconditioned(lr, P)
    s = opt.init(y)
    for _ in range(K):
        u, s = opt.update(y @ H - e, s, y)
        y = y + u
    M = np.eye(d) - lr * P @ H
    np.testing.assert_allclose(y[0] - ystar, np.linalg.matrix_power(M, K) @ (y0[0] - ystar),
                               rtol=1e-9, atol=1e-12)
    rho = np.max(np.abs(np.linalg.eigvals(M)))
    assert rho < 1                                           # converges per theory
    err = np.linalg.norm(y[0] - ystar)
    assert err <= np.linalg.cond(np.linalg.eig(M)[1]) * rho ** K * np.linalg.norm(y0[0] - ystar) * (1 + 1e-9)


def test_newton_preconditioner_converges_in_one_step():
    rng = np.random.default_rng(2)
    H = _spd(rng, 3)
    e = rng.normal(size=3)
    opt = optim.preconditioned(1.0, np.linalg.inv(H) / 2 + np.linalg.inv(H).T / 2)
    y = rng.normal(size=(1, 3))
    u, _ = opt.update(y @ H - e, opt.init(y), y)
    np.testing.assert_allclose(y[0] + u[0], np.linalg.solve(H, e), rtol=1e-10)


@pytest.mark.parametrize("P,kw", [
    (np.array([1.0, 0.0]), {}),                                   # diagonal not > 0
    (np.array([[1.0, 2.0], [2.0, 1.0]]), {}),                     # symmetric, indefinite
    (np.array([[1.0, 0.5], [0.0, 1.0]]), {}),                     # not symmetric
    (np.ones((2, 3, 4)), {}),                                      # non-square per-client matrices
    (np.ones((2, 2, 2, 2)), {}),                                   # wrong ndim
    (np.array([1.0, np.nan]), {}),
    (np.array([1.0, 2.0]), {"per_client": True}),                 # contradiction
    (np.ones((3, 2)), {"per_client": False}),                      # (3,2) is not a square matrix
])
def test_invalid_preconditioners(P, kw):
    with pytest.raises(InvalidHyperparameterError):
        optim.preconditioned(0.1, P, **kw)


def test_dimension_and_client_range_checked_at_init():
    opt = optim.preconditioned(0.1, np.ones((3, 2)))
    with pytest.raises(InvalidHyperparameterError, match="dimension 2"):
        opt.init(np.zeros((1, 5)))
    with pytest.raises(InvalidHyperparameterError, match="3 clients"):
        opt.init(np.zeros((1, 2)), clients=np.array([3]))
