"""Layers: thin wrappers around the pure kernels that declare their parameter
blocks and build the cache of the backward pass.

A layer is configured by its constructor, sized by ``build(input_shape)``
(the per-sample input shape, returns the per-sample output shape) and then
used through two pure methods (nothing is stored on the layer):

* ``forward(p, x) -> (y, cache)``: p maps block names to (m, *shape) arrays
  (views into the flat parameters), x (m, n, *input_shape);
* ``backward(p, cache, dy, mode, need_dx[, out]) -> (dx, grads)``: dy (m, n,
  *output_shape); ``grads`` maps block names to

  - ``mode="sum"``: sum_j g_j, shape (m, *shape);
  - ``mode="per_sample"``: g_j, shape (m, n, *shape);
  - ``mode="sq_sum"``: sum_j g_j (.) g_j, shape (m, *shape);

  where g_j is the gradient of the j-th sample's term.  Samples never
  interact, so each g_j is exact.  Layers that accept ``out`` (Dense) may
  write the reduced gradients straight into those arrays (views into the
  flat gradient) and return them.

Exact Hessian-vector products use two more pure methods, the R-operator of
Pearlmutter (1994) applied to the two passes (rules in :mod:`.rop_kernels`);
``v`` maps block names to the direction's blocks, a leading ``r`` marks the
directional derivative R{q} = d/de q(params + e v) of a quantity q:

* ``forward_r(p, v, x, rx) -> (y, ry, cache)``;
* ``backward_r(p, v, cache, dy, rdy, need_dx) -> (dx, rdx, rgrads)`` with
  ``rgrads`` the R of the summed parameter gradients, shape (m, *shape).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from math import prod
from typing import Any

import numpy as np

from .._validate import flag
from ..errors import InvalidHyperparameterError, InvalidProblemError
from . import kernels as K
from . import recurrent_kernels as R
from . import rop_kernels as RK
from .params import INIT_SCHEMES, ParamSpec

__all__ = ["Layer", "Dense", "Conv2D", "MaxPool2D", "AvgPool2D", "Flatten", "ReLU", "Tanh",
           "Sigmoid", "RNN", "LSTM", "MODES"]

MODES = ("sum", "per_sample", "sq_sum")
Params = dict[str, np.ndarray]


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidHyperparameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _scheme(init: str) -> str:
    if not isinstance(init, str) or init not in INIT_SCHEMES[:2]:
        raise InvalidHyperparameterError(f"init must be one of {INIT_SCHEMES[:2]}, got {init!r}")
    return init


def _reduce(g: np.ndarray, mode: str) -> np.ndarray:
    """Per-sample block (m, n, ...) reduced according to ``mode``."""
    if mode == "per_sample":
        return g
    if mode == "sq_sum":
        return np.einsum("mn...,mn...->m...", g, g)
    return g.sum(axis=1)


class Layer(ABC):
    """Base class (see module docstring)."""

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    def build(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.input_shape = tuple(int(s) for s in input_shape)
        self.output_shape = self._output_shape(self.input_shape)
        return self.output_shape

    @abstractmethod
    def _output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        ...

    def specs(self) -> list[ParamSpec]:
        """Parameter blocks of the built layer (none by default)."""
        return []

    @abstractmethod
    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        ...

    @abstractmethod
    def backward(self, p: Params, cache: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        ...

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Outputs, their directional derivative along (v, rx), and the cache of
        :meth:`backward_r` (module docstring)."""
        raise InvalidProblemError(f"{type(self).__name__} has no exact Hessian-vector product: "
                                  "implement forward_r and backward_r")

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """dx, R{dx} and the R of the summed parameter gradients (module docstring)."""
        raise InvalidProblemError(f"{type(self).__name__} has no exact Hessian-vector product: "
                                  "implement forward_r and backward_r")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Dense(Layer):
    """y = x W + b, W (in, out) (kernels.dense_forward)."""

    def __init__(self, units: int, *, init: str = "he") -> None:
        self.units = _int("units", units, 1)
        self.init = _scheme(init)

    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        if len(s) != 1:
            raise InvalidProblemError(f"Dense expects flat inputs (features,), got input shape {s}; "
                                      "insert Flatten() first")
        return (self.units,)

    def specs(self) -> list[ParamSpec]:
        i, o = self.input_shape[0], self.units
        return [ParamSpec("W", (i, o), i, o, self.init), ParamSpec("b", (o,))]

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return K.dense_forward(x, p["W"], p["b"]), x

    def backward(self, p: Params, x: np.ndarray, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True, out: Params | None = None) -> tuple[np.ndarray | None, Params]:
        dx = np.matmul(dy, np.swapaxes(p["W"], 1, 2)) if need_dx else None
        if mode == "per_sample":
            dW, db = K.dense_per_sample(x, dy)
            return dx, {"W": dW, "b": db}
        if mode == "sq_sum":
            x, dy = x * x, dy * dy               # kernels.dense_sq_sum
        # kernels.dense_backward, written straight into the caller's buffers when given
        o = out or {}
        dW = np.matmul(np.swapaxes(x, 1, 2), dy, out=o.get("W"))
        db = np.sum(dy, axis=1, out=o.get("b"))
        return dx, {"W": dW, "b": db}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """R{y} = R{x} W + x V_W + V_b."""
        ry = np.matmul(rx, p["W"]) + np.matmul(x, v["W"]) + v["b"][:, None, :]
        return K.dense_forward(x, p["W"], p["b"]), ry, (x, rx)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """R{dx} = R{dy} W^T + dy V_W^T, R{dW} = R{x}^T dy + x^T R{dy}, R{db} = sum_j R{dy_j}."""
        x, rx = cache
        dx, rdx, rdW = RK.linear_backward_r(x, rx, p["W"], v["W"], dy, rdy, need_dx)
        return dx, rdx, {"W": rdW, "b": rdy.sum(axis=1)}

    def __repr__(self) -> str:
        return f"Dense({self.units})"


class Conv2D(Layer):
    """2-D cross-correlation with square k x k kernels, stride and zero padding,
    computed by im2col (kernels.conv2d_forward).  Inputs (C, H, W)."""

    def __init__(self, channels: int, kernel: int, *, stride: int = 1, padding: int = 0,
                 init: str = "he") -> None:
        self.channels = _int("channels", channels, 1)
        self.kernel = _int("kernel", kernel, 1)
        self.stride = _int("stride", stride, 1)
        self.padding = _int("padding", padding, 0)
        self.init = _scheme(init)

    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        if len(s) != 3:
            raise InvalidProblemError(f"Conv2D expects inputs (C, H, W), got input shape {s}")
        ho = K.conv_output_size(s[1], self.kernel, self.stride, self.padding)
        wo = K.conv_output_size(s[2], self.kernel, self.stride, self.padding)
        if ho < 1 or wo < 1:
            raise InvalidHyperparameterError(
                f"Conv2D kernel {self.kernel} with padding {self.padding} does not fit input {s}")
        return (self.channels, ho, wo)

    def specs(self) -> list[ParamSpec]:
        C, k, O = self.input_shape[0], self.kernel, self.channels
        return [ParamSpec("W", (O, C, k, k), C * k * k, O * k * k, self.init), ParamSpec("b", (O,))]

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return K.conv2d_forward(x, p["W"], p["b"], self.stride, self.padding)

    def backward(self, p: Params, cols: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        C, H, W = self.input_shape                    # (channels, height, width), set by build
        if mode == "sum":
            dx, dW, db = K.conv2d_backward(cols, p["W"], dy, (C, H, W), self.stride,
                                           self.padding, need_dx)
            return dx, {"W": dW, "b": db}
        dx = K.conv2d_input_grad(p["W"], dy, (C, H, W), self.stride, self.padding) if need_dx else None
        dW, db = K.conv2d_per_sample(cols, dy, p["W"].shape[1:])
        return dx, {"W": _reduce(dW, mode), "b": _reduce(db, mode)}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """R{y} = conv(R{x}; W) + conv(x; V_W) + V_b (rop_kernels.conv2d_forward_r)."""
        y, ry, cols, rcols = RK.conv2d_forward_r(x, rx, p["W"], p["b"], v["W"], v["b"], self.stride,
                                                 self.padding)
        return y, ry, (cols, rcols)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """rop_kernels.conv2d_backward_r."""
        cols, rcols = cache
        C, H, W = self.input_shape
        dx, rdx, rdW, rdb = RK.conv2d_backward_r(cols, rcols, p["W"], v["W"], dy, rdy, (C, H, W),
                                                 self.stride, self.padding, need_dx)
        return dx, rdx, {"W": rdW, "b": rdb}

    def __repr__(self) -> str:
        return f"Conv2D({self.channels}, {self.kernel}, stride={self.stride}, padding={self.padding})"


class _Pool(Layer):
    def __init__(self, size: int, *, stride: int | None = None) -> None:
        self.size = _int("size", size, 1)
        self.stride = self.size if stride is None else _int("stride", stride, 1)

    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        if len(s) != 3 or s[1] < self.size or s[2] < self.size:
            raise InvalidProblemError(
                f"{type(self).__name__}({self.size}) expects inputs (C, H, W) with H, W >= "
                f"{self.size}, got input shape {s}")
        return (s[0], (s[1] - self.size) // self.stride + 1, (s[2] - self.size) // self.stride + 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, stride={self.stride})"


class MaxPool2D(_Pool):
    """Max over k x k windows with a stride (default stride = k, no padding)."""

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return K.maxpool_forward(x, self.size, self.stride)

    def backward(self, p: Params, arg: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        _, H, W = self.input_shape
        return (K.maxpool_backward(arg, dy, self.size, self.stride, H, W) if need_dx else None), {}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """R{y} = R{x} at each window's arg-max (the selection is locally constant)."""
        y, arg = K.maxpool_forward(x, self.size, self.stride)
        win = K._windows(rx, self.size, self.stride)
        flat = win.reshape(*win.shape[:-2], self.size * self.size)
        return y, np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0], arg

    def backward_r(self, p: Params, v: Params, arg: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """dx and R{dx}: dy and R{dy} routed to the arg-max."""
        if not need_dx:
            return None, None, {}
        _, H, W = self.input_shape
        both = K.maxpool_backward(np.concatenate([arg, arg], axis=1), np.concatenate([dy, rdy], axis=1),
                                  self.size, self.stride, H, W)
        n = dy.shape[1]
        return both[:, :n], both[:, n:], {}


class AvgPool2D(_Pool):
    """Mean over k x k windows with a stride (default stride = k, no padding)."""

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return K.avgpool_forward(x, self.size, self.stride), None

    def backward(self, p: Params, cache: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        _, H, W = self.input_shape
        return (K.avgpool_backward(dy, self.size, self.stride, H, W) if need_dx else None), {}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Linear: R{y} = avgpool(R{x})."""
        return (K.avgpool_forward(x, self.size, self.stride), K.avgpool_forward(rx, self.size, self.stride),
                None)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """Linear: R{dx} = avgpool_backward(R{dy})."""
        if not need_dx:
            return None, None, {}
        _, H, W = self.input_shape
        return (K.avgpool_backward(dy, self.size, self.stride, H, W),
                K.avgpool_backward(rdy, self.size, self.stride, H, W), {})


class Flatten(Layer):
    """(m, n, *s) -> (m, n, prod(s))."""

    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        return (prod(s),)

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return x.reshape(*x.shape[:2], -1), None

    def backward(self, p: Params, cache: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        return dy.reshape(*dy.shape[:2], *self.input_shape), {}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        return x.reshape(*x.shape[:2], -1), rx.reshape(*rx.shape[:2], -1), None

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        return (dy.reshape(*dy.shape[:2], *self.input_shape), rdy.reshape(*rdy.shape[:2], *self.input_shape),
                {})


class _Activation(Layer):
    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        return s


class ReLU(_Activation):
    """max(x, 0)."""

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return K.relu_forward(x), x

    def backward(self, p: Params, x: np.ndarray, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        return K.relu_backward(x, dy), {}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """R{y} = R{x} 1[x > 0]."""
        return K.relu_forward(x), K.relu_backward(x, rx), x

    def backward_r(self, p: Params, v: Params, x: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """R{dx} = R{dy} 1[x > 0] (the mask is locally constant away from x = 0)."""
        return K.relu_backward(x, dy), K.relu_backward(x, rdy), {}


class _SmoothActivation(_Activation):
    """y = f(x) elementwise with f' written through y (``_backward(y, dy) = dy f'(x)``)
    and the curvature factor ``_curvature(y) = f''(x) / f'(x)``, so that

        R{dx} = R{dy} f'(x) + dy f''(x) R{x} = _backward(y, R{dy}) + dy _curvature(y) R{y},

    with R{y} = f'(x) R{x} (hence f''(x) R{x} = (f''/f') R{y})."""

    @abstractmethod
    def _forward(self, x: np.ndarray) -> np.ndarray:
        """See the class docstring."""

    @abstractmethod
    def _backward(self, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
        """See the class docstring."""

    @abstractmethod
    def _curvature(self, y: np.ndarray) -> np.ndarray:
        """See the class docstring."""

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        y = self._forward(x)
        return y, y

    def backward(self, p: Params, y: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        return self._backward(y, dy), {}

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """R{y} = f'(x) R{x}."""
        y = self._forward(x)
        ry = self._backward(y, rx)
        return y, ry, (y, ry)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """dx = dy f'(x), R{dx} = R{dy} f'(x) + dy (f''/f') R{y} (class docstring)."""
        y, ry = cache
        return self._backward(y, dy), self._backward(y, rdy) + dy * self._curvature(y) * ry, {}


class Tanh(_SmoothActivation):
    """tanh(x): f' = 1 - y^2, f''/f' = -2 y."""

    def _forward(self, x: np.ndarray) -> np.ndarray:
        return K.tanh_forward(x)

    def _backward(self, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
        return K.tanh_backward(y, dy)

    def _curvature(self, y: np.ndarray) -> np.ndarray:
        return -2.0 * y


class Sigmoid(_SmoothActivation):
    """1 / (1 + exp(-x)), overflow-free: f' = y (1 - y), f''/f' = 1 - 2 y."""

    def _forward(self, x: np.ndarray) -> np.ndarray:
        return K.sigmoid_forward(x)

    def _backward(self, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
        return K.sigmoid_backward(y, dy)

    def _curvature(self, y: np.ndarray) -> np.ndarray:
        return 1.0 - 2.0 * y


class _Recurrent(Layer):
    gates = 1

    def __init__(self, hidden: int, *, return_sequences: bool = False, init: str = "glorot") -> None:
        self.hidden = _int("hidden", hidden, 1)
        self.return_sequences = flag("return_sequences", return_sequences)
        self.init = _scheme(init)

    def _output_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        if len(s) != 2:
            raise InvalidProblemError(
                f"{type(self).__name__} expects sequences (T, features), got input shape {s}")
        return (s[0], self.hidden) if self.return_sequences else (self.hidden,)

    def specs(self) -> list[ParamSpec]:
        D, Hd, G = self.input_shape[1], self.hidden, self.gates * self.hidden
        return [ParamSpec("Wx", (D, G), D, G, self.init), ParamSpec("Wh", (Hd, G), Hd, G, self.init),
                ParamSpec("b", (G,))]

    def _dh_out(self, dy: np.ndarray) -> np.ndarray:
        if self.return_sequences:
            return dy
        T = self.input_shape[0]
        dh = np.zeros((*dy.shape[:2], T, self.hidden))
        dh[:, :, -1] = dy
        return dh

    def _finish(self, h_all: np.ndarray, cache: Any) -> tuple[np.ndarray, Any]:
        return (h_all if self.return_sequences else h_all[:, :, -1]), cache

    def _finish_r(self, h_all: np.ndarray, cache: Any, rh: np.ndarray, tan: Any
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        y, _ = self._finish(h_all, cache)
        ry = rh[:, :, 1:] if self.return_sequences else rh[:, :, -1]
        return y, ry, (cache, tan)

    def _backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                    need_dx: bool, kernel: Any) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        plain, tan = cache
        dx, rdx, dA, rdA = kernel(plain, tan, p["Wx"], p["Wh"], v["Wx"], v["Wh"], self._dh_out(dy),
                                  self._dh_out(rdy))
        rWx, rWh, rb = RK.recurrent_param_grads_r(plain.x, tan.rx, plain.h, tan.rh, dA, rdA)
        grads = {"Wx": rWx, "Wh": rWh, "b": rb}
        return (dx, rdx, grads) if need_dx else (None, None, grads)

    def _grads(self, cache: Any, dA: np.ndarray, mode: str) -> Params:
        per = mode != "sum"
        dWx, dWh, db = R.recurrent_param_grads(cache.x, cache.h, dA, per)
        if per:
            dWx, dWh, db = (_reduce(g, mode) for g in (dWx, dWh, db))
        return {"Wx": dWx, "Wh": dWh, "b": db}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.hidden}, return_sequences={self.return_sequences})"


class RNN(_Recurrent):
    """Elman RNN h_t = tanh(x_t Wx + h_{t-1} Wh + b), h_0 = 0; outputs h_T
    (or all h_t with ``return_sequences``).  Inputs (T, D)."""

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return self._finish(*R.rnn_forward(x, p["Wx"], p["Wh"], p["b"]))

    def backward(self, p: Params, cache: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        dx, dA = R.rnn_backward(cache, p["Wx"], p["Wh"], self._dh_out(dy))
        return dx, self._grads(cache, dA, mode)

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """rop_kernels.rnn_forward_r."""
        h_all, cache = R.rnn_forward(x, p["Wx"], p["Wh"], p["b"])
        tan = RK.rnn_forward_r(cache, rx, p["Wx"], p["Wh"], v["Wx"], v["Wh"], v["b"])
        return self._finish_r(h_all, cache, tan.rh, tan)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """rop_kernels.rnn_backward_r and recurrent_param_grads_r."""
        return self._backward_r(p, v, cache, dy, rdy, need_dx, RK.rnn_backward_r)


class LSTM(_Recurrent):
    """LSTM with gates [i, f, g, o] (recurrent_kernels module docstring),
    h_0 = c_0 = 0; the forget-gate bias starts at 1 (Jozefowicz et al. 2015),
    the other biases at 0.  Inputs (T, D)."""

    gates = 4

    def specs(self) -> list[ParamSpec]:
        return super().specs()[:2] + [ParamSpec("b", (4 * self.hidden,), init="lstm_bias")]

    def forward(self, p: Params, x: np.ndarray) -> tuple[np.ndarray, Any]:
        return self._finish(*R.lstm_forward(x, p["Wx"], p["Wh"], p["b"]))

    def backward(self, p: Params, cache: Any, dy: np.ndarray, mode: str = "sum",
                 need_dx: bool = True) -> tuple[np.ndarray | None, Params]:
        dx, dZ = R.lstm_backward(cache, p["Wx"], p["Wh"], self._dh_out(dy))
        return dx, self._grads(cache, dZ, mode)

    def forward_r(self, p: Params, v: Params, x: np.ndarray, rx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """rop_kernels.lstm_forward_r."""
        h_all, cache = R.lstm_forward(x, p["Wx"], p["Wh"], p["b"])
        tan = RK.lstm_forward_r(cache, rx, p["Wx"], p["Wh"], v["Wx"], v["Wh"], v["b"])
        return self._finish_r(h_all, cache, tan.rh, tan)

    def backward_r(self, p: Params, v: Params, cache: Any, dy: np.ndarray, rdy: np.ndarray,
                   need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray | None, Params]:
        """rop_kernels.lstm_backward_r and recurrent_param_grads_r."""
        return self._backward_r(p, v, cache, dy, rdy, need_dx, RK.lstm_backward_r)
