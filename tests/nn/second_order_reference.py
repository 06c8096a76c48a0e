"""An independent exact Hessian for small networks (test reference only).

Second-order forward mode: every scalar of the computation is a :class:`Jet`
carrying its value, its gradient g and its Hessian H with respect to all d
parameters; the product and chain rules

    (ab)'' = a b'' + b a'' + a' b'^T + b' a'^T,   f(a)'' = f'(a) a'' + f''(a) a' a'^T

propagate them exactly through a plain per-sample, per-unit re-implementation
of each layer (explicit loops, no code shared with fltheory.nn).  The loss's
Jet then holds the exact Hessian.  Cost O(d^2) per scalar operation, so only
for networks with a few dozen parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


class Jet:
    """A scalar with its gradient (d,) and Hessian (d, d)."""

    __slots__ = ("H", "g", "v")

    def __init__(self, v: float, g: np.ndarray, H: np.ndarray) -> None:
        self.v, self.g, self.H = float(v), g, H

    @staticmethod
    def lift(c: Any, d: int) -> Jet:
        return c if isinstance(c, Jet) else Jet(float(c), np.zeros(d), np.zeros((d, d)))

    def __add__(self, o: Any) -> Jet:
        if not isinstance(o, Jet):
            return Jet(self.v + o, self.g, self.H)
        return Jet(self.v + o.v, self.g + o.g, self.H + o.H)

    __radd__ = __add__

    def __neg__(self) -> Jet:
        return Jet(-self.v, -self.g, -self.H)

    def __sub__(self, o: Any) -> Jet:
        return self + (-o)

    def __rsub__(self, o: Any) -> Jet:
        return (-self) + o

    def __mul__(self, o: Any) -> Jet:
        if not isinstance(o, Jet):
            return Jet(self.v * o, self.g * o, self.H * o)
        cross = np.outer(self.g, o.g)
        return Jet(self.v * o.v, self.v * o.g + o.v * self.g, self.v * o.H + o.v * self.H + cross + cross.T)

    __rmul__ = __mul__

    def __truediv__(self, c: float) -> Jet:
        return self * (1.0 / c)

    def apply(self, f0: float, f1: float, f2: float) -> Jet:
        """f(self) given f, f', f'' at self.v."""
        return Jet(f0, f1 * self.g, f1 * self.H + f2 * np.outer(self.g, self.g))

    def __gt__(self, o: Any) -> bool:
        return self.v > (o.v if isinstance(o, Jet) else o)


def tanh(a: Jet) -> Jet:
    t = math.tanh(a.v)
    return a.apply(t, 1 - t * t, -2 * t * (1 - t * t))


def sigmoid(a: Jet) -> Jet:
    s = 1.0 / (1.0 + math.exp(-a.v))
    return a.apply(s, s * (1 - s), s * (1 - s) * (1 - 2 * s))


def exp(a: Jet) -> Jet:
    e = math.exp(a.v)
    return a.apply(e, e, e)


def log(a: Jet) -> Jet:
    return a.apply(math.log(a.v), 1 / a.v, -1 / a.v ** 2)


def relu(a: Jet) -> Any:
    return a if a.v > 0 else 0.0 * a


elementwise = {name: np.frompyfunc(f, 1, 1) for name, f in
               (("tanh", tanh), ("sigmoid", sigmoid), ("relu", relu))}


def params(x: np.ndarray) -> np.ndarray:
    """The d parameters as Jets with unit gradients and zero Hessians (object array)."""
    d = x.shape[0]
    eye = np.eye(d)
    out = np.empty(d, dtype=object)
    for k in range(d):
        out[k] = Jet(x[k], eye[k], np.zeros((d, d)))
    return out


# ------------------------------------------------------------ reference layers
def dense(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (I,), W (I, O), b (O,) -> (O,): y_o = b_o + sum_i x_i W_io."""
    return np.array([b[o] + sum(x[i] * W[i, o] for i in range(W.shape[0])) for o in range(W.shape[1])],
                    dtype=object)


def conv(x: np.ndarray, W: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """Cross-correlation of one sample x (C, H, W) with W (O, C, k, k), zero padding."""
    C, Hh, Ww = x.shape
    n_out, _, k, _ = W.shape
    xp = np.zeros((C, Hh + 2 * pad, Ww + 2 * pad), dtype=object)
    xp[...] = 0.0
    xp[:, pad:pad + Hh, pad:pad + Ww] = x
    Ho, Wo = (Hh + 2 * pad - k) // stride + 1, (Ww + 2 * pad - k) // stride + 1
    y = np.empty((n_out, Ho, Wo), dtype=object)
    for o in range(n_out):
        for p in range(Ho):
            for q in range(Wo):
                acc = b[o]
                for c in range(C):
                    for a in range(k):
                        for bb in range(k):
                            acc = acc + W[o, c, a, bb] * xp[c, stride * p + a, stride * q + bb]
                y[o, p, q] = acc
    return y


def pool(x: np.ndarray, k: int, stride: int, kind: str) -> np.ndarray:
    C, Hh, Ww = x.shape
    Ho, Wo = (Hh - k) // stride + 1, (Ww - k) // stride + 1
    y = np.empty((C, Ho, Wo), dtype=object)
    for c in range(C):
        for p in range(Ho):
            for q in range(Wo):
                win = [x[c, stride * p + a, stride * q + bb] for a in range(k) for bb in range(k)]
                if kind == "max":
                    best = win[0]
                    for z in win[1:]:
                        if z > best:
                            best = z
                    y[c, p, q] = best
                else:
                    y[c, p, q] = sum(win[1:], win[0]) / (k * k)
    return y


def rnn(xs: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray) -> list:
    h: Any = np.array([0.0] * Wh.shape[0], dtype=object)
    out = []
    for x in xs:
        a = dense(x, Wx, b) + dense(h, Wh, np.zeros(Wh.shape[1]))
        h = elementwise["tanh"](a)
        out.append(h)
    return out


def lstm(xs: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray) -> list:
    Hd = Wh.shape[0]
    h: Any = np.array([0.0] * Hd, dtype=object)
    c: Any = np.array([0.0] * Hd, dtype=object)
    out = []
    for x in xs:
        z = dense(x, Wx, b) + dense(h, Wh, np.zeros(4 * Hd))
        i = elementwise["sigmoid"](z[:Hd])
        f = elementwise["sigmoid"](z[Hd:2 * Hd])
        g = elementwise["tanh"](z[2 * Hd:3 * Hd])
        o = elementwise["sigmoid"](z[3 * Hd:])
        c = f * c + i * g
        h = o * elementwise["tanh"](c)
        out.append(h)
    return out


def softmax_ce(z: np.ndarray, y: int) -> Jet:
    """log sum_k exp(z_k) - z_y (logits are small in the tests: no shift needed)."""
    s = exp(z[0])
    for zk in z[1:]:
        s = s + exp(zk)
    return log(s) - z[y]


def mse(z: np.ndarray, t: np.ndarray) -> Jet:
    r = z - t
    return sum((0.5 * rk * rk for rk in r[1:]), 0.5 * r[0] * r[0])


def exact_hessian(loss_of_params: Callable[[np.ndarray], Jet], x: np.ndarray) -> tuple[float, np.ndarray,
                                                                                          np.ndarray]:
    """(value, gradient, Hessian) of a scalar function written with Jets."""
    J = loss_of_params(params(x))
    return J.v, J.g, J.H
