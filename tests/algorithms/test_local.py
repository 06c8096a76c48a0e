"""local_descent (algorithms.local) against a hand loop with per-row steps."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.algorithms.local import local_descent

from .local.builders import composed, logistic, quadratic


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
