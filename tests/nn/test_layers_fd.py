"""Every layer's backward pass against central finite differences, on
Hypothesis-drawn shapes (stride/padding edge cases included), for two client
rows with different parameters at once; per-sample gradients against the
same layer run on one sample; the squared sums against the per-sample ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.nn import (LSTM, RNN, AvgPool2D, Conv2D, Dense, Flatten, MaxPool2D, ReLU, Sigmoid, Tanh)
from fltheory.nn.params import ParamLayout

M = 2          # client rows evaluated together
H_FD = 1e-6    # central-difference step: error O(h^2) + O(1e-16 / h) ~ 1e-10


def central_diff(f, z: np.ndarray) -> np.ndarray:
    """Gradient of the scalar f at z by central differences, coordinate by coordinate."""
    g = np.zeros_like(z)
    flat, gflat = z.reshape(-1), g.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + H_FD
        fp = f(z)
        flat[k] = old - H_FD
        fm = f(z)
        flat[k] = old
        gflat[k] = (fp - fm) / (2 * H_FD)
    return g


def check_layer(layer, input_shape: tuple[int, ...], n: int, seed: int, scale: float = 0.7) -> None:
    rng = np.random.default_rng(seed)
    out_shape = layer.build(input_shape)
    layout = ParamLayout([layer.specs()])
    P = scale * rng.standard_normal((M, layout.dim))
    x = rng.standard_normal((M, n, *input_shape))
    R = rng.standard_normal((M, n, *out_shape))      # L = <layer(x), R>, so dL/dy = R

    def value(P_, x_):
        return float(np.sum(layer.forward(layout.views(P_)[0], x_)[0] * R))

    p = layout.views(P)[0]
    y, cache = layer.forward(p, x)
    assert y.shape == (M, n, *out_shape)
    dx, grads = layer.backward(p, cache, R, "sum", True)
    G = np.zeros_like(P)
    for name, g in grads.items():
        layout.views(G)[0][name][...] = g
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, central_diff(lambda z: value(P, z), x.copy()), **tol)
    if layout.dim:
        np.testing.assert_allclose(G, central_diff(lambda z: value(z, x), P.copy()), **tol)

    # per-sample gradients: sample j alone through the same layer
    _, per = layer.backward(p, cache, R, "per_sample", True)
    _, sq = layer.backward(p, cache, R, "sq_sum", True)
    for name in grads:
        assert per[name].shape == (M, n, *grads[name].shape[1:])
        np.testing.assert_allclose(per[name].sum(axis=1), grads[name], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(sq[name], (per[name] ** 2).sum(axis=1), rtol=1e-10, atol=1e-12)
        for j in range(n):
            _, cj = layer.forward(p, x[:, j:j + 1])
            _, gj = layer.backward(p, cj, R[:, j:j + 1], "sum", False)
            np.testing.assert_allclose(per[name][:, j], gj[name], rtol=1e-10, atol=1e-12)


seeds = st.integers(0, 2**31 - 1)


@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), seeds)
def test_dense(i, o, n, seed):
    check_layer(Dense(o), (i,), n, seed)


@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
       st.integers(1, 6), st.integers(1, 6), st.integers(1, 2), seeds)
def test_conv2d(c, o, k, s, pad, h, w, n, seed):
    assume(h + 2 * pad >= k and w + 2 * pad >= k)
    check_layer(Conv2D(o, k, stride=s, padding=pad), (c, h, w), n, seed)


@pytest.mark.parametrize("k,s,pad,h,w", [(3, 2, 1, 4, 5), (2, 3, 0, 7, 6), (5, 1, 2, 3, 3), (1, 2, 0, 5, 4),
                                         (4, 4, 2, 4, 4)])
def test_conv2d_edge_cases(k, s, pad, h, w):
    """Stride not dividing the padded size (trailing rows unused), padding
    wider than the image, 1x1 kernels, stride = kernel."""
    check_layer(Conv2D(2, k, stride=s, padding=pad), (2, h, w), 2, seed=k * 100 + s * 10 + pad)


@pytest.mark.parametrize("pool", [MaxPool2D, AvgPool2D])
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.integers(1, 6),
       st.integers(1, 2), seeds)
def test_pools(pool, c, k, s, h, w, n, seed):
    assume(h >= k and w >= k)
    check_layer(pool(k, stride=s), (c, h, w), n, seed)


@pytest.mark.parametrize("act", [ReLU, Tanh, Sigmoid, Flatten])
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(1, 3), seeds)
def test_elementwise_and_flatten(act, shape, n, seed):
    check_layer(act(), tuple(shape), n, seed)


@pytest.mark.parametrize("cell", [RNN, LSTM])
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.booleans(), st.integers(1, 2), seeds)
def test_recurrent(cell, T, D, hidden, seqs, n, seed):
    check_layer(cell(hidden, return_sequences=seqs), (T, D), n, seed)


def test_maxpool_routes_to_first_maximum_on_ties():
    """Ties (exactly equal inputs) send the whole gradient to the first maximum
    in row-major window order; the input gradient still sums to dy."""
    layer = MaxPool2D(2)
    layer.build((1, 2, 2))
    x = np.ones((1, 1, 1, 2, 2))
    y, arg = layer.forward({}, x)
    dx, _ = layer.backward({}, arg, np.full((1, 1, 1, 1, 1), 3.0))
    np.testing.assert_allclose(dx[0, 0, 0], [[3.0, 0.0], [0.0, 0.0]])


def test_sigmoid_is_stable_for_huge_inputs():
    layer = Sigmoid()
    layer.build((3,))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y, c = layer.forward({}, np.array([[[-1e4, 0.0, 1e4]]]))
        dx, _ = layer.backward({}, c, np.ones((1, 1, 3)))
    np.testing.assert_allclose(y[0, 0], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(dx[0, 0], [0.0, 0.25, 0.0])


@pytest.mark.parametrize("make,shape", [
    (lambda: Conv2D(2, 5), (1, 3, 3)),          # kernel larger than the padded image
    (lambda: MaxPool2D(3), (1, 2, 5)),
    (lambda: Dense(3), (2, 2)),                 # Dense on unflattened input
    (lambda: RNN(2), (4,)),
])
def test_bad_shapes_raise_typed_errors(make, shape):
    with pytest.raises((InvalidProblemError, InvalidHyperparameterError)):
        make().build(shape)


@pytest.mark.parametrize("bad", [lambda: Dense(0), lambda: Conv2D(2, 3, stride=0),
                                 lambda: Conv2D(2, 3, padding=-1), lambda: Dense(3, init="xavier"),
                                 lambda: LSTM(2.5)])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(InvalidHyperparameterError):
        bad()
