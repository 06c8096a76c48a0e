"""SGD and momentum: hand-computed steps, readable loops, closed-form
recursions on quadratics, and the local-correction weights."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory import optim


def _run(opt, grads_seq, x0):
    """Apply opt to a fixed sequence of gradients; return steps and preconds."""
    state = opt.init(x0)
    steps, pre = [], []
    for g in grads_seq:
        u, state = opt.update(g, state, x0)
        steps.append(u)
        pre.append(opt.precond(state))
    return np.array(steps), np.array(pre), state


def test_sgd_one_step_and_precond():
    g = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
    opt = optim.sgd(0.3)
    s = opt.init(np.zeros((2, 3)))
    np.testing.assert_allclose(opt.precond(s), np.zeros((2, 3)), atol=0)
    u, s = opt.update(g, s, np.zeros((2, 3)))
    np.testing.assert_allclose(u, -0.3 * g, rtol=1e-15)
    np.testing.assert_allclose(opt.precond(s), np.ones((2, 3)), rtol=0)
    assert s.count.tolist() == [1, 1]


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_against_readable_loop(nesterov):
    rng = np.random.default_rng(3)
    m, d, K, lr, beta = 3, 4, 6, 0.2, 0.7
    G = rng.normal(size=(K, m, d))
    steps, _, _ = _run(optim.momentum(lr, beta, nesterov), G, np.zeros((m, d)))
    for i in range(m):                     # per client, per coordinate, plain floats
        for j in range(d):
            b = 0.0
            for k in range(K):
                b = beta * b + G[k, i, j]
                expected = -lr * (G[k, i, j] + beta * b) if nesterov else -lr * b
                assert steps[k, i, j] == pytest.approx(expected, rel=1e-13, abs=1e-15)


def _closed_form_error(h, lr, beta, e0, e1, k, nesterov):
    """e_k from e_0, e_1 via the roots of the characteristic polynomial of the
    three-term recursion on f = h/2 e^2:
    heavy ball  r^2 - (1 + beta - lr h) r + beta = 0,
    Nesterov    r^2 - (1 + beta)(1 - lr h) r + beta (1 - lr h) = 0."""
    if nesterov:
        b, c = -(1 + beta) * (1 - lr * h), beta * (1 - lr * h)
    else:
        b, c = -(1 + beta - lr * h), beta
    disc = complex(b * b - 4 * c)
    r1, r2 = (-b + np.sqrt(disc)) / 2, (-b - np.sqrt(disc)) / 2
    assert abs(r1 - r2) > 1e-6                    # distinct roots on this instance
    # e_k = A r1^(k-1) + B r2^(k-1) with e_1 = A + B, e_2 given by the recursion
    e2 = (-b) * e1 - c * e0
    A = (e2 - r2 * e1) / (r1 - r2)
    B = e1 - A
    return (A * r1 ** (k - 1) + B * r2 ** (k - 1)).real


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_on_quadratic_matches_closed_form(nesterov):
    rng = np.random.default_rng(0)
    d, lr, beta, K = 3, 0.1, 0.6, 25
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    hs = np.array([0.5, 2.0, 7.0])
    H = Q @ np.diag(hs) @ Q.T
    xstar = rng.normal(size=d)
    x = rng.normal(size=(1, d))
    x0 = x.copy()
    opt = optim.momentum(lr, beta, nesterov)
    s = opt.init(x)
    traj = [x.copy()]
    for _ in range(K):
        u, s = opt.update((x - xstar) @ H, s, x)
        x = x + u
        traj.append(x.copy())
    # eigen-coordinates of the error; first step from the buffer form
    z0 = Q.T @ (x0[0] - xstar)
    z1 = z0 - lr * (1 + (beta if nesterov else 0.0)) * hs * z0
    for k in (1, 2, 5, K):
        zk = np.array([_closed_form_error(h, lr, beta, a, b_, k, nesterov)
                       for h, a, b_ in zip(hs, z0, z1)])
        np.testing.assert_allclose(Q.T @ (traj[k][0] - xstar), zk, rtol=1e-9, atol=1e-12)


@given(st.floats(0.0, 0.95), st.integers(1, 8), st.booleans())
def test_momentum_correction_weight_is_sum_of_gradient_weights(beta, K, nesterov):
    """Delta = -lr sum_j A^(j) g_j with A^(j) = sum_{k>=j} beta^(k-j) (heavy
    ball; Nesterov adds 1 for the direct term and uses weights beta^(k-j+1)),
    and sum_k precond_k = sum_j A^(j)."""
    rng = np.random.default_rng(K)
    lr, d = 0.05, 2
    G = rng.normal(size=(K, 1, d))
    steps, pre, _ = _run(optim.momentum(lr, beta, nesterov), G, np.zeros((1, d)))
    A = np.zeros(K)
    for j in range(K):
        tail = sum(beta ** (k - j) for k in range(j, K))
        A[j] = 1.0 + beta * tail if nesterov else tail
    delta = steps.sum(axis=0)
    np.testing.assert_allclose(delta, -lr * np.tensordot(A, G, axes=(0, 0)), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(pre.sum(axis=0), np.full((1, d), A.sum()), rtol=1e-12)


def test_momentum_zero_beta_is_sgd():
    rng = np.random.default_rng(1)
    G = rng.normal(size=(4, 2, 3))
    a, pa, _ = _run(optim.momentum(0.3, 0.0), G, np.zeros((2, 3)))
    b, pb, _ = _run(optim.sgd(0.3), G, np.zeros((2, 3)))
    np.testing.assert_allclose(a, b, rtol=1e-15)
    np.testing.assert_allclose(pa, pb, rtol=1e-15)


def test_nesterov_iterates_are_the_classical_look_ahead_points_for_nonlinear_gradients():
    """Sutskever et al. 2013: theta_{k+1} = z_k - lr g(z_k), z_{k+1} = theta_{k+1}
    + beta (theta_{k+1} - theta_k); the buffer-form Nesterov iterates y_k equal z_k
    for a non-linear gradient (here g(y) = y^3 + y/2 - 1, elementwise)."""
    grad = lambda y: y ** 3 + 0.5 * y - 1.0
    lr, beta, K = 0.05, 0.8, 10
    opt = optim.momentum(lr, beta, nesterov=True)
    y = np.array([[1.5, -0.7, 0.2]])
    s = opt.init(y)
    theta = z = y[0].copy()
    for _ in range(K):
        u, s = opt.update(grad(y), s, y)
        y = y + u
        theta_next = z - lr * grad(z)
        z = theta_next + beta * (theta_next - theta)
        theta = theta_next
        np.testing.assert_allclose(y[0], z, rtol=1e-13, atol=1e-15)
