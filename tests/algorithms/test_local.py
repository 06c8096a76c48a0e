"""LocalObjective, local_descent and exact_local_solve against finite differences,
hand loops and optimality conditions."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.local import LocalObjective, exact_local_solve, local_descent
from fltheory.problems.generators import random_quadratic
from fltheory.problems.logistic import LogisticFederation


def quadratic(seed=0, N=4, d=3):
    return random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed)


def logistic(seed=0, N=3, f=3, n=15):
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((n + i, f)) for i in range(N)]
    y = [np.where(rng.random(n + i) < 0.5, -1.0, 1.0) for i in range(N)]
    return LogisticFederation(A, y, reg=0.05)


def composed(m, d, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((m, d))
    return (LocalObjective.proximal(np.linspace(0.2, 0.8, m), C)
            + LocalObjective.diagonal(rng.random((m, d)), rng.standard_normal((m, d)))
            + LocalObjective.linear(rng.standard_normal((m, d))))


def test_gradient_matches_central_differences():
    m, d = 3, 4
    obj = composed(m, d)
    Y = np.random.default_rng(1).standard_normal((m, d))
    h = 1e-6
    fd = np.zeros((m, d))
    for j in range(d):                              # test code: loop over coordinates
        E = np.zeros((m, d))
        E[:, j] = h
        fd[:, j] = (obj.value(Y + E) - obj.value(Y - E)) / (2 * h)
    np.testing.assert_allclose(obj.grad(Y), fd, rtol=1e-8, atol=1e-8)


def test_proximal_term_is_mu_over_two_squared_distance():
    C = np.array([[1.0, -2.0], [0.5, 0.0]])
    Y = np.array([[0.0, 1.0], [2.0, 2.0]])
    obj = LocalObjective.proximal(np.array([2.0, 0.5]), C)
    expected = np.array([2.0, 0.5]) / 2 * np.sum((Y - C) ** 2, axis=1)
    # value drops the constant (mu/2)||c||^2
    np.testing.assert_allclose(obj.value(Y) + np.array([2.0, 0.5]) / 2 * np.sum(C ** 2, axis=1),
                               expected, rtol=1e-14)
    np.testing.assert_allclose(obj.grad(Y), np.array([2.0, 0.5])[:, None] * (Y - C), rtol=1e-14)


@pytest.mark.parametrize("make", [quadratic, logistic])
def test_local_descent_matches_hand_loop_with_per_row_steps(make):
    fed = make()
    m = fed.n_clients
    clients = np.arange(m)
    steps = np.array([0, 3, 1, 5][:m])
    lr = np.linspace(0.05, 0.1, m)
    obj = composed(m, fed.dim, seed=2)
    Y0 = np.random.default_rng(3).standard_normal((m, fed.dim)) * 0.3
    Y, _ = local_descent(fed, Y0, clients, steps, lr, None, obj)
    for r in range(m):
        y = Y0[r].copy()
        for _ in range(steps[r]):
            g = fed.client_grad(y[None, :], [r])[0] + obj.take(np.array([r])).grad(y[None, :])[0]
            y = y - lr[r] * g
        np.testing.assert_allclose(Y[r], y, rtol=0, atol=1e-14)


def test_record_precond_sums_the_preconditioners():
    fed = quadratic(4)
    m = fed.n_clients
    steps = np.array([1, 2, 3, 4])
    Y0 = np.zeros((m, fed.dim))
    _, info = local_descent(fed, Y0, np.arange(m), steps, np.ones(m), None,
                            optimizer=optim.sgd(0.1), record_precond=True)
    np.testing.assert_allclose(info["precond_sum"], np.repeat(steps[:, None], fed.dim, axis=1), rtol=0)
    opt = optim.adagrad(0.1)
    _, info = local_descent(fed, Y0, np.arange(m), steps, np.ones(m), None, optimizer=opt,
                            record_precond=True)
    for r in range(m):                       # AdaGrad: m_k = 1 / (sqrt(v_k) + eps)
        y, v, total = Y0[r].copy(), np.zeros(fed.dim), np.zeros(fed.dim)
        for _ in range(steps[r]):
            g = fed.H[r] @ y - fed.e[r]
            v = v + g * g
            total += 1 / (np.sqrt(v) + 1e-8)
            y = y - 0.1 * g / (np.sqrt(v) + 1e-8)
        np.testing.assert_allclose(info["precond_sum"][r], total, rtol=1e-12)


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


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_threaded_path_equals_step_major(monkeypatch, threads):
    """Exact quadratic batches run in cache-sized row blocks on a thread pool; every row
    must get exactly the numbers of the one-batch step-major loop (plain and optimizer
    steps, per-row step counts, preconditioner sums)."""
    from fltheory.algorithms.local import blocking

    fed = random_quadratic(23, 5, L=4.0, mu=0.5, heterogeneity=1.0, seed=3)
    m = fed.n_clients
    clients = np.arange(m)
    steps = np.arange(m) % 4
    lr = np.linspace(0.05, 0.1, m)
    obj = composed(m, fed.dim, seed=4)
    Y0 = np.random.default_rng(5).standard_normal((m, fed.dim))

    def both(**kw):
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 2 ** 62)
        one = local_descent(fed, Y0, clients, steps, lr, None, obj, **kw)
        monkeypatch.setattr(blocking, "_BLOCK_BYTES", 8 * fed.dim * fed.dim * 4)   # blocks of 4 rows
        blocking.set_num_threads(threads)
        try:
            assert len(blocking.row_blocks(fed, m, fed.dim)) == 6
            many = local_descent(fed, Y0, clients, steps, lr, None, obj, **kw)
        finally:
            blocking.set_num_threads(2)
        return one, many

    (Y1, _), (Y2, _) = both()
    np.testing.assert_array_equal(Y1, Y2)
    (Y1, i1), (Y2, i2) = both(optimizer=optim.adagrad(0.1), record_precond=True)
    np.testing.assert_array_equal(Y1, Y2)
    np.testing.assert_array_equal(i1["precond_sum"], i2["precond_sum"])
    for f1, f2 in zip(i1["opt_state"], i2["opt_state"]):
        np.testing.assert_array_equal(f1, f2)


def test_bad_thread_count():
    from fltheory.algorithms.local import set_num_threads
    from fltheory.errors import InvalidProblemError
    with pytest.raises(InvalidProblemError, match="threads"):
        set_num_threads(0)


def test_linear_term_alone_matches_hand_loop_and_is_not_modified():
    """The SCAFFOLD shape: only a linear term b (gradient shift -b), subtracted in place
    by the local loop; per-row steps exercise the partial-row path too."""
    fed = quadratic(seed=5)
    m = fed.n_clients
    clients = np.arange(m)
    steps = np.array([2, 0, 4, 1])
    lr = np.linspace(0.05, 0.1, m)
    b = np.random.default_rng(6).standard_normal((m, fed.dim))
    b_before = b.copy()
    Y0 = np.random.default_rng(7).standard_normal((m, fed.dim))
    Y, _ = local_descent(fed, Y0, clients, steps, lr, None, LocalObjective.linear(b))
    np.testing.assert_array_equal(b, b_before)
    for r in range(m):
        y = Y0[r].copy()
        for _ in range(steps[r]):
            y = y - lr[r] * (fed.H[r] @ y - fed.e[r] - b[r])
        np.testing.assert_allclose(Y[r], y, rtol=0, atol=1e-13)


@pytest.mark.parametrize("alias", ["gradient", "state"])
def test_optimizer_step_sharing_memory_is_not_scaled_in_place(alias):
    """The local loop scales an optimizer's step in place only when the step is a fresh
    array; a step that is the gradient itself or a field of the new state must be left
    alone (its state would otherwise be corrupted)."""
    from typing import NamedTuple

    from fltheory.optim.base import Optimizer

    class Held(NamedTuple):
        v: np.ndarray

    def init(params, clients=None):
        return Held(np.zeros_like(np.asarray(params, dtype=float)))

    def update(g, state, params=None):
        if alias == "gradient":
            return g, Held(state.v + g)
        new = -0.1 * g
        return new, Held(new)           # u_k = -0.1 g_k, and the state holds that step

    opt = Optimizer(init, update, lambda s: np.ones_like(s[0]), "alias")
    fed = quadratic(seed=8)
    m, d = fed.n_clients, fed.dim
    scale = np.array([0.5, 1.0, 2.0, 0.25])
    steps = np.array([3, 3, 1, 2])
    Y0 = np.random.default_rng(9).standard_normal((m, d))
    Y, info = local_descent(fed, Y0, np.arange(m), steps, scale, None, optimizer=opt)
    for r in range(m):
        y, s = Y0[r].copy(), np.zeros(d)
        for _ in range(steps[r]):
            g = fed.H[r] @ y - fed.e[r]
            u = g if alias == "gradient" else -0.1 * g
            s = s + g if alias == "gradient" else -0.1 * g
            y = y + scale[r] * u
        np.testing.assert_allclose(Y[r], y, rtol=0, atol=1e-13)
        np.testing.assert_allclose(info["opt_state"][0][r], s, rtol=0, atol=1e-13)
