"""Exact Hessian-vector products (forward-over-reverse) held to

* an independent exact Hessian: second-order forward mode through a plain
  loop re-implementation of each layer (tests/nn/second_order_reference.py),
  relative error <= 1e-10, for every layer type (Dense, Conv2D with stride and
  padding, MaxPool2D, AvgPool2D, Flatten, ReLU, Tanh, Sigmoid, RNN, LSTM)
  and both losses;
* Richardson-extrapolated central differences of the exact gradient
  (truncation O(h^4)), relative error <= 1e-8;

with several clients evaluated in one batched call, each at its own point
and direction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fltheory.errors import InvalidProblemError
from fltheory.nn import (
    LSTM,
    MSE,
    RNN,
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    Layer,
    MaxPool2D,
    NeuralFederation,
    ReLU,
    Sequential,
    Sigmoid,
    SoftmaxCrossEntropy,
    Tanh,
)

from . import second_order_reference as ref

N_SAMPLES = 2


def _ref_forward(model: Sequential, P: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The network on one sample with the plain reference layers."""
    h: Any = u.astype(object)
    for layer, p in zip(model.layers, model.layout.views(P[None]), strict=True):
        p = {k: v[0] for k, v in p.items()}
        if isinstance(layer, Dense):
            h = ref.dense(h, p["W"], p["b"])
        elif isinstance(layer, Conv2D):
            h = ref.conv(h, p["W"], p["b"], layer.stride, layer.padding)
        elif isinstance(layer, (MaxPool2D, AvgPool2D)):
            h = ref.pool(h, layer.size, layer.stride, "max" if isinstance(layer, MaxPool2D) else "avg")
        elif isinstance(layer, Flatten):
            h = h.reshape(-1)
        elif isinstance(layer, (ReLU, Tanh, Sigmoid)):
            h = ref.elementwise[type(layer).__name__.lower()](h)
        elif isinstance(layer, (RNN, LSTM)):
            hs = (ref.rnn if isinstance(layer, RNN) else ref.lstm)(h, p["Wx"], p["Wh"], p["b"])
            h = np.array(hs, dtype=object) if layer.return_sequences else hs[-1]
        else:  # pragma: no cover - every layer type is listed
            raise AssertionError(layer)
    return h


def reference_hessian(model: Sequential, loss: Any, x: np.ndarray, inputs: np.ndarray,
                      targets: np.ndarray) -> np.ndarray:
    """Exact Hessian of (1/n) sum_j l(net(x; u_j), t_j) by second-order forward mode."""
    def total(P: np.ndarray) -> ref.Jet:
        acc = None
        for u, t in zip(inputs, targets, strict=True):
            out = _ref_forward(model, P, u)
            lj = ref.softmax_ce(out, int(t)) if isinstance(loss, SoftmaxCrossEntropy) else ref.mse(out, t)
            acc = lj if acc is None else acc + lj
        return acc / inputs.shape[0]
    return ref.exact_hessian(total, x)[2]


NETS = {
    "dense_tanh_ce": lambda: (Sequential([Dense(3), Tanh(), Dense(2)], (3,)), SoftmaxCrossEntropy()),
    "dense_sigmoid_mse": lambda: (Sequential([Dense(2), Sigmoid(), Dense(2)], (3,)), MSE()),
    "conv_relu_maxpool": lambda: (Sequential([Conv2D(2, 3, padding=1), ReLU(), MaxPool2D(2), Flatten(),
                                              Dense(2)], (1, 4, 4)), SoftmaxCrossEntropy()),
    "conv_stride_tanh_avgpool": lambda: (Sequential([Conv2D(2, 2, stride=2, padding=1), Tanh(),
                                                     AvgPool2D(2, stride=1), Flatten(), Dense(2)], (2, 4, 4)),
                                         SoftmaxCrossEntropy()),
    "rnn_stack": lambda: (Sequential([RNN(2, return_sequences=True), RNN(2), Dense(2)], (3, 2)),
                          SoftmaxCrossEntropy()),
    "lstm": lambda: (Sequential([LSTM(2), Dense(2, init="glorot")], (3, 2)), SoftmaxCrossEntropy()),
    "lstm_sequences_mse": lambda: (Sequential([LSTM(1, return_sequences=True), Flatten(), Dense(2)], (2, 2)),
                                   MSE()),
}


def federation(name: str, seed: int, reg: float = 0.0) -> tuple[NeuralFederation, np.random.Generator]:
    model, loss = NETS[name]()
    rng = np.random.default_rng(seed)
    K = model.output_shape[0]
    inputs = [rng.standard_normal((N_SAMPLES, *model.input_shape)) for _ in range(2)]
    if isinstance(loss, MSE):
        targets = [rng.standard_normal((N_SAMPLES, K)) for _ in range(2)]
    else:
        targets = [rng.integers(0, K, N_SAMPLES) for _ in range(2)]
    return NeuralFederation(model, loss, inputs, targets, reg=reg), rng


@pytest.mark.parametrize("name", list(NETS))
def test_hessian_equals_the_independent_second_order_reference(name):
    fed, rng = federation(name, seed=7)
    X = np.stack([0.8 * fed.init_params(rng) + 0.1 * rng.standard_normal(fed.dim) for _ in range(2)])
    H = fed.client_hess(X)                                   # exact HVPs against e_1..e_d, both clients
    for i in range(2):
        u, t = fed.client_data(i)
        Href = reference_hessian(fed.model, fed.loss_fn, X[i], u, t)
        scale = np.abs(Href).max()
        assert np.abs(H[i] - Href).max() <= 1e-10 * scale
    V = rng.standard_normal(X.shape)
    HV = fed.client_hvp(X, V)                                # unsymmetrised products
    np.testing.assert_allclose(HV, np.einsum("mij,mj->mi", H, V), rtol=0, atol=1e-10 * np.abs(HV).max())


@pytest.mark.parametrize("name", list(NETS))
def test_hvp_equals_richardson_differences_of_the_gradient(name):
    fed, rng = federation(name, seed=11)
    X = np.stack([fed.init_params(rng) for _ in range(2)])
    V = rng.standard_normal(X.shape)
    HV = fed.client_hvp(X, V)

    def diff(h: float) -> np.ndarray:
        return (fed.client_grad(X + h * V) - fed.client_grad(X - h * V)) / (2 * h)
    h = 1e-3
    fd = (4 * diff(h / 2) - diff(h)) / 3                     # cancels the h^2 term of the central difference
    assert np.abs(HV - fd).max() <= 1e-8 * np.abs(HV).max()


def test_rows_are_independent_and_weight_decay_adds_reg_v():
    fed, rng = federation("dense_tanh_ce", seed=3, reg=0.3)
    X = rng.standard_normal((3, fed.dim))
    V = rng.standard_normal((3, fed.dim))
    clients = np.array([1, 0, 1])
    HV = fed.client_hvp(X, V, clients)
    for r, i in enumerate(clients):
        np.testing.assert_allclose(HV[r], fed.client_hvp(X[r], V[r], [i])[0], rtol=1e-13, atol=1e-15)
    plain, _ = federation("dense_tanh_ce", seed=3)
    np.testing.assert_allclose(HV - 0.3 * V, plain.client_hvp(X, V, clients), rtol=1e-12, atol=1e-14)
    x, v = X[0], V[0]
    np.testing.assert_allclose(fed.hvp(x, v), fed.weights @ fed.client_hvp(x, v), rtol=1e-14)


def test_hvp_is_linear_in_v_and_zero_for_v_zero():
    fed, rng = federation("lstm", seed=5)
    x = fed.init_params(rng)
    v, w = rng.standard_normal((2, fed.dim))
    np.testing.assert_allclose(fed.hvp(x, 2 * v - 3 * w), 2 * fed.hvp(x, v) - 3 * fed.hvp(x, w),
                               rtol=1e-10, atol=1e-12)
    assert np.all(fed.hvp(x, np.zeros(fed.dim)) == 0)


def test_layer_without_r_operator_raises_a_typed_error():
    class Square(Layer):
        def _output_shape(self, s):
            return s

        def forward(self, p, x):
            return x * x, x

        def backward(self, p, x, dy, mode="sum", need_dx=True):
            return 2 * x * dy, {}

    net = Sequential([Dense(2), Square(), Dense(2)], (2,))
    fed = NeuralFederation(net, SoftmaxCrossEntropy(), [np.ones((2, 2))], [np.array([0, 1])])
    with pytest.raises(InvalidProblemError, match="Square has no exact Hessian-vector product"):
        fed.hvp(np.ones(fed.dim), np.ones(fed.dim))
    with pytest.raises(InvalidProblemError, match="V must have shape"):
        fed.client_hvp(np.ones(fed.dim), np.ones((3, fed.dim)))


def test_an_overflowing_hvp_is_a_typed_error_like_the_gradient():
    """Parameters of 1e300 (or output weights of 1e308 behind a tanh): value_and_grad raised
    OutOfRangeError while hvp returned NaN rows."""
    import warnings

    from fltheory.errors import OutOfRangeError
    from fltheory.nn import Dense, Sequential, SoftmaxCrossEntropy, Tanh
    u, t = 1e10 * np.ones((1, 2, 4)), np.array([[0, 1]])
    plain = Sequential([Dense(3)], (4,))
    deep = Sequential([Dense(2), Tanh(), Dense(3)], (4,))
    x_deep = np.ones(deep.dim)
    x_deep[-9:] = 1e308
    for model, x, inputs in ((plain, np.full(plain.dim, 1e300), u), (deep, x_deep, u * 1e-9)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")           # reported, not warned about
            with pytest.raises(OutOfRangeError, match="Hessian-vector product overflows"):
                model.hvp(x, np.ones((1, model.dim)), inputs, t, SoftmaxCrossEntropy())
