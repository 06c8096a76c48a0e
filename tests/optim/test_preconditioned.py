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
    shared = optim.preconditioned(0.1, Ps[0], per_client=False)
    u, _ = shared.update(g, shared.init(np.zeros((2, 3))), None)
    np.testing.assert_allclose(u, -0.1 * g @ Ps[0].T, rtol=1e-13)
    diag = optim.preconditioned(0.1, np.array([1.0, 2.0, 3.0]))
    u, _ = diag.update(g, diag.init(np.zeros((2, 3))), None)
    np.testing.assert_allclose(u, -0.1 * g * np.array([1.0, 2.0, 3.0]), rtol=1e-15)
    # a square 2-D array read as per-client diagonals (per_client=True)
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
    opt = optim.preconditioned(lr, P, per_client=False)
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
    opt = optim.preconditioned(1.0, np.linalg.inv(H) / 2 + np.linalg.inv(H).T / 2, per_client=False)
    y = rng.normal(size=(1, 3))
    u, _ = opt.update(y @ H - e, opt.init(y), y)
    np.testing.assert_allclose(y[0] + u[0], np.linalg.solve(H, e), rtol=1e-10)


@pytest.mark.parametrize("P,kw", [
    (np.array([1.0, 0.0]), {}),                                   # diagonal not > 0
    (np.array([[1.0, 2.0], [2.0, 1.0]]), {"per_client": False}),  # symmetric, indefinite
    (np.array([[1.0, 0.5], [0.0, 1.0]]), {"per_client": False}),  # not symmetric
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


@pytest.mark.parametrize("P", [np.array([[2.0, 1.0], [1.0, 2.0]]),     # SPD: both readings valid
                               np.array([[1.0, 2.0], [3.0, 4.0]]),     # only per-client valid
                               np.eye(3)])
def test_square_two_dimensional_P_needs_explicit_per_client(P):
    """An (N, d) array with N == d is per-client diagonals or one shared (d, d)
    matrix; the constructor must not guess."""
    with pytest.raises(InvalidHyperparameterError, match="per_client=True or per_client=False"):
        optim.preconditioned(0.1, P)


def test_square_P_readings_differ_as_requested():
    P = np.array([[2.0, 1.0], [1.0, 2.0]])
    g = np.array([[1.0, -1.0]])
    shared = optim.preconditioned(1.0, P, per_client=False)
    u, s = shared.update(g, shared.init(np.zeros((1, 2)), clients=np.array([1])), None)
    np.testing.assert_allclose(u[0], -(P @ g[0]), rtol=0)                 # matrix product
    assert shared.precond(s).shape == (1, 2, 2)
    rows = optim.preconditioned(1.0, P, per_client=True)
    u, s = rows.update(g, rows.init(np.zeros((1, 2)), clients=np.array([1])), None)
    np.testing.assert_allclose(u[0], -(P[1] * g[0]), rtol=0)              # client 1's diagonal
    assert rows.precond(s).shape == (1, 2)


@pytest.mark.parametrize("flag", ["yes", 1, 0.0])
def test_per_client_must_be_a_bool(flag):
    with pytest.raises(InvalidHyperparameterError, match="per_client must be"):
        optim.preconditioned(0.1, np.ones((3, 2)), per_client=flag)
