"""A model evaluated at non-finite parameters or inputs, or whose forward pass
overflows, raises a typed error instead of returning NaN or inf (issue 16: "a
neural model's forward with NaN input" returned NaN silently)."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import nn
from fltheory.errors import NonFinitePointError, OutOfRangeError


@pytest.fixture
def model_and_params() -> tuple[nn.Sequential, np.ndarray]:
    m = nn.mlp(3, 2, hidden=(4,))
    return m, m.init(np.random.default_rng(0))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_refused(model_and_params: tuple[nn.Sequential, np.ndarray], bad: float) -> None:
    m, X = model_and_params
    u = np.ones((1, 2, 3))
    u[0, 1, 2] = bad
    for call in (lambda: m.forward(X, u), lambda: m.predict(X, u),
                 lambda: m.value_and_grad(X, u, np.zeros((1, 2), dtype=np.int64), nn.losses.SoftmaxCrossEntropy())):
        with pytest.raises(NonFinitePointError, match="inputs contain 1 non-finite values"):
            call()


def test_non_finite_parameters_are_refused(model_and_params: tuple[nn.Sequential, np.ndarray]) -> None:
    m, X = model_and_params
    bad = np.vstack([X, X])
    bad[1, 0] = np.nan
    with pytest.raises(NonFinitePointError, match="in 1 of 2 rows"):
        m.forward(bad, np.ones((2, 2, 3)))


def test_overflowing_forward_is_out_of_range(model_and_params: tuple[nn.Sequential, np.ndarray]) -> None:
    m, X = model_and_params
    with pytest.raises(OutOfRangeError, match="overflows float64"):
        m.forward(X * 1e300, np.full((1, 2, 3), 1e10))


def test_finite_evaluation_unchanged(model_and_params: tuple[nn.Sequential, np.ndarray]) -> None:
    """The checks only raise: a finite evaluation returns the layers' own arithmetic."""
    m, X = model_and_params
    u = np.random.default_rng(1).normal(size=(1, 5, 3))
    out = m.forward(X, u)[0]
    first, _, last = m.layout.views(X[None])
    W1, b1 = (np.asarray(v[0]) for v in first.values())
    W2, b2 = (np.asarray(v[0]) for v in last.values())
    ref = np.maximum(u[0] @ W1 + b1, 0.0) @ W2 + b2
    np.testing.assert_allclose(out[0], ref, rtol=1e-14, atol=1e-15)
