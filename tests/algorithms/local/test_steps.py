"""The step-major loop (algorithms.local.steps) against hand loops; memory safety of in-place steps."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.local import LocalObjective, local_descent

from .builders import composed, quadratic


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


# --- the hot loop against the checked per-step loop it replaced (same bits) -----------------

def _checked_loop(fed, Y0, clients, steps, lr, objective, optimizer=None):
    """The local loop as written before the bound oracle: ``stochastic_grad`` (all argument
    checks) and ``objective.grad`` every step, lr as a column, step k on the active rows."""
    Y = np.array(Y0, dtype=np.float64)
    lr_col = np.broadcast_to(np.asarray(lr, dtype=np.float64), (Y.shape[0],))[:, None]
    state = None if optimizer is None else optimizer.init(Y, clients)
    for k in range(int(steps.max())):
        rows = np.flatnonzero(steps > k)
        G = fed.stochastic_grad(Y[rows], clients[rows], None)
        extra = objective.take(rows).grad(Y[rows])
        if extra is not None:
            G += extra
        if optimizer is None:
            Y[rows] -= lr_col[rows] * G
            continue
        sub = optim.take_rows(state, rows)
        U, sub = optimizer.update(G, sub, Y[rows])
        Y[rows] += lr_col[rows] * U
        state = optim.put_rows(state, rows, sub)
    return Y


def _objectives(m, d, rng):
    X0 = np.broadcast_to(rng.standard_normal(d), (m, d))
    return {
        "none": LocalObjective.zero(),
        "linear": LocalObjective.linear(rng.standard_normal((m, d))),
        "proximal, one mu, shared centre": LocalObjective.proximal(0.3, X0),
        "proximal, per-row mu": LocalObjective.proximal(np.linspace(0.1, 0.5, m), rng.standard_normal((m, d))),
        "composed": composed(m, d, seed=3),
        "l1": LocalObjective.proximal(0.2, X0) + LocalObjective.l1_term(0.05, X0),
    }


@pytest.mark.parametrize("name", ["none", "linear", "proximal, one mu, shared centre", "proximal, per-row mu",
                                  "composed", "l1"])
@pytest.mark.parametrize("rates", ["one", "per-row"])
@pytest.mark.parametrize("steps_kind", ["equal", "unequal"])
def test_hot_loop_gives_the_bits_of_the_checked_loop(name, rates, steps_kind):
    fed = quadratic(seed=11, N=6, d=5)
    m, d = fed.n_clients, fed.dim
    rng = np.random.default_rng(12)
    objective = _objectives(m, d, rng)[name]
    clients = np.arange(m)
    steps = np.full(m, 4) if steps_kind == "equal" else np.array([4, 2, 0, 4, 3, 1])
    lr = 0.07 if rates == "one" else np.linspace(0.03, 0.08, m)
    Y0 = rng.standard_normal((m, d))
    Y, _ = local_descent(fed, Y0, clients, steps, np.broadcast_to(lr, (m,)), None, objective)
    np.testing.assert_array_equal(Y, _checked_loop(fed, Y0, clients, steps, lr, objective))


@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("clients", [np.arange(5), np.array([4, 0, 2, 3, 1]), np.array([1, 2, 3, 4, 5])])
def test_hot_loop_with_an_optimizer_gives_the_bits_of_the_checked_loop(scale, clients):
    fed = quadratic(seed=13, N=6, d=4)
    m, d = clients.shape[0], fed.dim
    Y0 = np.random.default_rng(14).standard_normal((m, d))
    steps = np.full(m, 5)
    opt = optim.adagrad(0.1)
    Y, _ = local_descent(fed, Y0, clients, steps, np.full(m, scale), None, optimizer=opt)
    ref = _checked_loop(fed, Y0, clients, steps, scale, LocalObjective.zero(), optimizer=opt)
    np.testing.assert_array_equal(Y, ref)


def test_hot_loop_overflow_is_a_divergence_error_without_warnings():
    """The bound oracle checks nothing per step: an overflow shows as a non-finite
    iterate, reported as DivergenceError (no RuntimeWarning on the way)."""
    import warnings

    from fltheory.errors import DivergenceError
    fed = quadratic(seed=15)
    m = fed.n_clients
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError, match="non-finite"):
            local_descent(fed, np.full((m, fed.dim), 1e300), np.arange(m), np.full(m, 50), np.full(m, 10.0),
                          None)
        with pytest.raises(DivergenceError, match="non-finite"):   # rows with more steps than others
            local_descent(fed, np.full((m, fed.dim), 1e300), np.arange(m), np.array([50, 60, 50, 50]),
                          np.full(m, 10.0), None)


def test_proximal_term_of_one_mu_and_a_shared_centre_is_stored_as_views():
    rng = np.random.default_rng(16)
    x = rng.standard_normal(3)
    C = np.broadcast_to(x, (4, 3))
    shared = LocalObjective.proximal(0.4, C)
    full = LocalObjective.proximal(np.full(4, 0.4), np.array(C))
    assert shared.D is not None and shared.b is not None and full.D is not None and full.b is not None
    assert shared.D.strides == (0, 0) and shared.b.strides[0] == 0
    assert not shared.D.flags.writeable and not shared.b.flags.writeable
    np.testing.assert_array_equal(shared.D, full.D)
    np.testing.assert_array_equal(shared.b, full.b)
    Y = rng.standard_normal((4, 3))
    np.testing.assert_array_equal(shared.grad(Y), full.grad(Y))
    np.testing.assert_array_equal(shared.value(Y), full.value(Y))


@pytest.mark.parametrize("d", [3, 600])
def test_shared_centre_rows_give_the_bits_of_full_arrays(d):
    """A proximal centre shared by every row (a stride-0 view) and the same centre written
    out row by row give bit-identical local models, both for short rows (the shared row is
    written out once per batch) and for wide rows (applied as one broadcast row)."""
    from fltheory.algorithms.local.steps import _FULL_ROW_MAX
    from fltheory.problems.quadratic import QuadraticFederation
    assert (d <= _FULL_ROW_MAX) != (d == 600)
    rng = np.random.default_rng(17 + d)
    m = 5
    B = rng.standard_normal((m, d, 4))
    fed = QuadraticFederation(B @ np.swapaxes(B, 1, 2) / 4 + 0.5 * np.eye(d), rng.standard_normal((m, d)))
    x = rng.standard_normal(d)
    X0 = np.broadcast_to(x, (m, d))
    args = (fed, X0, np.arange(m), np.full(m, 7), np.full(m, 0.03), None)
    Y_shared, _ = local_descent(*args, LocalObjective.proximal(0.7, X0))
    Y_full, _ = local_descent(*args, LocalObjective.diagonal(np.full((m, d), 0.7), 0.7 * np.array(X0)))
    np.testing.assert_array_equal(Y_shared, Y_full)
    Y_linear, _ = local_descent(*args, LocalObjective.linear(np.broadcast_to(0.2 * x, (m, d))))
    Y_linear_full, _ = local_descent(*args, LocalObjective.linear(np.tile(0.2 * x, (m, 1))))
    np.testing.assert_array_equal(Y_linear, Y_linear_full)


def test_shared_rows_is_the_read_only_broadcast_view():
    """The rounds' stride-0 views equal np.broadcast_to for contiguous vectors, offset
    slices, strided and non-float inputs, and cannot be written through."""
    from fltheory.algorithms.local.objective import _shared_rows
    big = np.arange(20.0)
    for x in (big, big[5:12], big[::3], np.arange(4), np.zeros(0)):
        for m in (1, 3):
            view = _shared_rows(x, m)
            expected = np.broadcast_to(x, (m, x.shape[0]))
            assert view.shape == expected.shape and view.dtype == expected.dtype
            np.testing.assert_array_equal(view, expected)
            assert not view.flags.writeable
            if x.size:
                assert view.strides[0] == 0
    assert _shared_rows(big[5:12], 2)[1, 0] == 5.0


def test_local_descent_overflow_of_finite_entries_is_not_a_divergence():
    """Entries near the largest double whose sum overflows: no DivergenceError (the entries
    are finite), exactly as the entry-wise check decides."""
    from fltheory.algorithms.local import local_descent
    from fltheory.problems import QuadraticFederation
    fed = QuadraticFederation(np.stack([np.eye(2)] * 3), np.zeros((3, 2)))
    Y0 = np.full((3, 2), 1e308)
    Y, _ = local_descent(fed, Y0, np.arange(3), np.zeros(3, dtype=np.int64), np.full(3, 0.1), None)
    np.testing.assert_array_equal(Y, Y0)
