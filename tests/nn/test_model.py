"""Losses, flat parameters and whole networks: gradients against central
differences, per-sample gradients summing to the batch gradient, the
squared-sum (Fisher) mode against explicit per-sample squares, init schemes."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.nn import (MSE, AvgPool2D, Conv2D, Dense, Flatten, Sequential, SoftmaxCrossEntropy, Tanh,
                         char_lstm, cnn, mlp)
from fltheory.nn.params import ParamSpec, init_weight

from .test_layers_fd import central_diff


def test_softmax_cross_entropy_matches_definition_and_fd():
    rng = np.random.default_rng(1)
    z = rng.standard_normal((2, 3, 4))
    y = rng.integers(0, 4, size=(2, 3))
    val, grad = SoftmaxCrossEntropy().value_and_grad(z, y)
    p = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    np.testing.assert_allclose(val, -np.log(np.take_along_axis(p, y[..., None], -1)[..., 0]), rtol=1e-12)
    fd = central_diff(lambda q: SoftmaxCrossEntropy().value_and_grad(q, y)[0].sum(), z.copy())
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_cross_entropy_is_stable_for_huge_logits():
    z = np.array([[[1e4, 0.0], [1e4, 0.0]]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        val, grad = SoftmaxCrossEntropy().value_and_grad(z, np.array([[0, 1]]))
    np.testing.assert_allclose(val, [[0.0, 1e4]])
    np.testing.assert_allclose(grad, [[[0.0, 0.0], [1.0, -1.0]]])


def test_mse_matches_fd():
    rng = np.random.default_rng(2)
    out, t = rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 3, 2))
    val, grad = MSE().value_and_grad(out, t)
    np.testing.assert_allclose(val, 0.5 * ((out - t) ** 2).sum(-1))
    fd = central_diff(lambda q: MSE().value_and_grad(q, t)[0].sum(), out.copy())
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


NETS = {
    "cnn": (lambda: cnn((1, 6, 6), 3, channels=(2, 3), kernel=3, fc=4), (1, 6, 6)),
    "conv_avg_tanh": (lambda: Sequential([Conv2D(2, 3, stride=2, padding=1), Tanh(), AvgPool2D(2, stride=1),
                                          Flatten(), Dense(3)], (2, 5, 5)), (2, 5, 5)),
    "char_lstm": (lambda: char_lstm(3, 4, hidden=3), (4, 3)),
    "mlp": (lambda: mlp(4, 3, hidden=(5, 4)), (4,)),
}


@pytest.mark.parametrize("name", sorted(NETS))
def test_network_gradient_per_sample_and_fisher(name):
    make, in_shape = NETS[name]
    net = make()
    rng = np.random.default_rng(3)
    m, n = 2, 3
    X = np.stack([net.init(rng) for _ in range(m)])
    u = rng.standard_normal((m, n, *in_shape))
    y = rng.integers(0, 3, size=(m, n))
    w = rng.random((m, n))
    loss = SoftmaxCrossEntropy()
    val, G = net.value_and_grad(X, u, y, loss, w)
    f = lambda Z: float(net.value_and_grad(Z, u, y, loss, w)[0].sum())
    np.testing.assert_allclose(G, central_diff(f, X.copy()), rtol=1e-5, atol=1e-7)
    _, P = net.value_and_grad(X, u, y, loss, w, mode="per_sample")
    np.testing.assert_allclose(P.sum(axis=1), G, rtol=1e-10, atol=1e-13)
    _, S = net.value_and_grad(X, u, y, loss, w, mode="sq_sum")
    # sq_sum holds sum_j w_j (grad l_j)^2 while per_sample rows are w_j grad l_j
    np.testing.assert_allclose(S, np.einsum("mnd,mn->md", P ** 2, 1.0 / w), rtol=1e-9, atol=1e-13)


def test_seed_models_have_the_published_shapes():
    net = mlp(784, 10)                      # seed 003: 784-200-100-10
    assert net.dim == 784 * 200 + 200 + 200 * 100 + 100 + 100 * 10 + 10
    c = cnn((1, 8, 8), 10)                  # seed 002 Table 1 on 8x8 inputs: 8 -> 4 -> 2
    assert c.dim == (16 * 25 + 16) + (32 * 16 * 25 + 32) + (32 * 2 * 2 * 512 + 512) + (512 * 10 + 10)
    assert c.output_shape == (10,)


def test_parameter_views_share_memory_and_init_is_reproducible():
    net = mlp(3, 2, hidden=(4,))
    X = np.stack([net.init(np.random.default_rng(5)), net.init(np.random.default_rng(5))])
    np.testing.assert_array_equal(X[0], X[1])
    views = net.layout.views(X)
    assert all(np.shares_memory(v, X) for layer in views for v in layer.values())
    views[0]["W"][1, 0, 0] = 42.0
    assert X[1, 0] == 42.0                 # the first block starts at offset 0
    assert np.all(views[0]["b"] == 0.0)    # biases start at zero


def test_init_schemes_statistics():
    rng = np.random.default_rng(6)
    he = init_weight(ParamSpec("W", (400, 100), 400, 100, "he"), rng)
    assert abs(he.std() / np.sqrt(2 / 400) - 1) < 0.03          # 4e4 draws: std error ~0.4%
    gl = init_weight(ParamSpec("W", (400, 100), 400, 100, "glorot"), rng)
    a = np.sqrt(6 / 500)
    assert np.abs(gl).max() <= a and np.abs(gl).max() > 0.99 * a
    assert abs(gl.var() / (a * a / 3) - 1) < 0.03


def test_bad_inputs_raise():
    net = mlp(3, 2, hidden=(4,))
    with pytest.raises(InvalidProblemError):
        net.forward(np.zeros(net.dim + 1), np.zeros((1, 2, 3)))
    with pytest.raises(InvalidProblemError):
        net.forward(np.zeros(net.dim), np.zeros((1, 2, 4)))
    with pytest.raises(InvalidHyperparameterError):
        net.init(0)
    with pytest.raises(InvalidHyperparameterError):
        net.backward(np.zeros(net.dim), [None] * 4, np.zeros((1, 1, 2)), mode="mean")
