"""The step-major loop (algorithms.local.steps) against hand loops; memory safety of in-place steps."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms.local import LocalObjective, local_descent

from .builders import quadratic


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
