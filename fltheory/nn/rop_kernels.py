"""Directional-derivative kernels for exact Hessian-vector products.

Pearlmutter's R-operator (Pearlmutter, "Fast exact multiplication by the
Hessian", Neural Computation 6(1), 1994): for a parameter direction v write
R{q} = d/de q(x + e v) |_{e=0} for any quantity q of the forward or backward
pass.  Applying R to the forward pass gives the tangents of the activations
(forward mode); applying it to the backward pass gives R{grad L} = H v
(forward-over-reverse).  Every rule below is the product/chain rule applied
to one line of the plain pass; nothing is approximated, so H v is exact up
to rounding (ReLU and max-pooling are treated, like their gradients, as
piecewise linear: their second derivative is zero away from kinks).

Shapes follow :mod:`fltheory.nn.kernels` and
:mod:`fltheory.nn.recurrent_kernels` (client axis m, sample axis n); a
leading ``r`` marks an R-quantity of the same shape as the plain one, a
leading ``V`` the direction's block of a weight.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import kernels as K
from .recurrent_kernels import LSTMCache, RNNCache

__all__ = [
    "LSTMTangent",
    "RNNTangent",
    "conv2d_backward_r",
    "conv2d_forward_r",
    "linear_backward_r",
    "lstm_backward_r",
    "lstm_forward_r",
    "product_r",
    "recurrent_param_grads_r",
    "rnn_backward_r",
    "rnn_forward_r",
]


# ------------------------------------------------------- linear maps
def product_r(a: np.ndarray, ra: np.ndarray, b: np.ndarray, rb: np.ndarray) -> np.ndarray:
    """Product rule of a batched matrix product: R{a b} = R{a} b + a R{b}."""
    return np.matmul(ra, b) + np.matmul(a, rb)


def linear_backward_r(x: np.ndarray, rx: np.ndarray, W: np.ndarray, V: np.ndarray, dy: np.ndarray,
                      rdy: np.ndarray, need_dx: bool) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """R of the backward pass of y = x W + b, in the layout of :func:`fltheory.nn.kernels.dense_forward`
    (x (m, n, I), W (m, I, O), dy (m, n, O); V the direction's block of W):

    * dx = dy W^T, R{dx} = R{dy} W^T + dy V^T;
    * R{dW} = R{x^T dy} = R{x}^T dy + x^T R{dy};  (R{db} = sum_j R{dy_j} is the caller's.)

    A convolution is this map on its im2col columns (:func:`conv2d_backward_r`).
    -> (dx, R{dx}) (None unless ``need_dx``), R{dW} (m, I, O)."""
    dx = rdx = None
    if need_dx:
        Wt = np.swapaxes(W, 1, 2)
        dx = np.matmul(dy, Wt)
        rdx = product_r(dy, rdy, Wt, np.swapaxes(V, 1, 2))
    return dx, rdx, product_r(np.swapaxes(x, 1, 2), np.swapaxes(rx, 1, 2), dy, rdy)


# ------------------------------------------------------------------ conv
def _apply_cols(weight: np.ndarray, cols: np.ndarray, n: int, Ho: int, Wo: int) -> np.ndarray:
    """weight (m, O, C, k, k) applied to im2col columns -> (m, n, O, Ho, Wo), no bias."""
    m, n_out = weight.shape[:2]
    return np.matmul(weight.reshape(m, n_out, -1), cols).reshape(m, n_out, n, Ho, Wo).transpose(0, 2, 1, 3, 4)


def conv2d_forward_r(x: np.ndarray, rx: np.ndarray, weight: np.ndarray, b: np.ndarray, Vw: np.ndarray,
                     Vb: np.ndarray, stride: int, padding: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """y = conv(x; W) + b and R{y} = conv(R{x}; W) + conv(x; V_W) + V_b (the
    convolution is bilinear in (x, W)).  -> (y, ry, cols(x), cols(rx))."""
    y, cols = K.conv2d_forward(x, weight, b, stride, padding)
    ry, rcols = K.conv2d_forward(rx, weight, Vb, stride, padding)
    ry += _apply_cols(Vw, cols, *y.shape[1:2], *y.shape[3:])
    return y, ry, cols, rcols


def conv2d_backward_r(cols: np.ndarray, rcols: np.ndarray, weight: np.ndarray, Vw: np.ndarray,
                      dy: np.ndarray, rdy: np.ndarray, in_shape: tuple[int, int, int], stride: int,
                      padding: int, need_dx: bool
                      ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    """R of the convolution backward pass.  With dy_c, rdy_c the output
    gradients in column layout:

    * dx = col2im(W^T dy_c), R{dx} = col2im(W^T rdy_c + V_W^T dy_c);
    * R{dW} = rdy_c cols^T + dy_c rcols^T, R{db} = sum rdy_c.

    -> (dx, R{dx}) (None unless ``need_dx``), R{dW} (m, O, C, k, k), R{db} (m, O)."""
    m, n_out = weight.shape[:2]
    n = dy.shape[1]
    dyc = dy.transpose(0, 2, 1, 3, 4).reshape(m, n_out, -1)
    rdyc = rdy.transpose(0, 2, 1, 3, 4).reshape(m, n_out, -1)
    rdW = product_r(dyc, rdyc, np.swapaxes(cols, 1, 2), np.swapaxes(rcols, 1, 2))
    dx = rdx = None
    if need_dx:
        Wt = np.swapaxes(weight.reshape(m, n_out, -1), 1, 2)
        k = weight.shape[-1]
        dx = K.col2im(np.matmul(Wt, dyc), n, *in_shape, k, stride, padding)
        rcol = product_r(Wt, np.swapaxes(Vw.reshape(m, n_out, -1), 1, 2), dyc, rdyc)
        rdx = K.col2im(rcol, n, *in_shape, k, stride, padding)
    return dx, rdx, rdW.reshape(weight.shape), rdyc.sum(axis=-1)


# ------------------------------------------------------------- recurrent
class RNNTangent(NamedTuple):
    """rx (m,n,T,D) input tangent; rh (m,n,T+1,H) state tangents, rh[:, :, 0] = 0."""

    rx: np.ndarray
    rh: np.ndarray


class LSTMTangent(NamedTuple):
    """Tangents of the LSTM cache: rx, rh, rc (state tangents, index 0 = 0),
    rgates (m,n,T,4H) of the activated gates [i, f, g, o], rtc of tanh(c_t)."""

    rx: np.ndarray
    rh: np.ndarray
    rc: np.ndarray
    rgates: np.ndarray
    rtc: np.ndarray


def _input_tangent(x: np.ndarray, rx: np.ndarray, h: np.ndarray, Wx: np.ndarray, VWx: np.ndarray,
                   VWh: np.ndarray, Vb: np.ndarray) -> np.ndarray:
    """The part of R{a_t} known before the recursion:
    R{x_t} Wx + x_t V_Wx + h_{t-1} V_Wh + V_b for all t at once -> (m, n, T, G)."""
    m, n, T, _ = x.shape
    G = Wx.shape[-1]
    flat = lambda z: z.reshape(m, n * T, -1)
    out = np.matmul(flat(rx), Wx) + np.matmul(flat(x), VWx) + np.matmul(flat(h[:, :, :-1]), VWh)
    return out.reshape(m, n, T, G) + Vb[:, None, None, :]


def rnn_forward_r(cache: RNNCache, rx: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, VWx: np.ndarray,
                  VWh: np.ndarray, Vb: np.ndarray) -> RNNTangent:
    """R{a_t} = R{x_t} Wx + x_t V_Wx + R{h_{t-1}} Wh + h_{t-1} V_Wh + V_b,
    R{h_t} = (1 - h_t^2) R{a_t}."""
    h = cache.h
    ra = _input_tangent(cache.x, rx, h, Wx, VWx, VWh, Vb)
    rh = np.zeros_like(h)
    for t in range(ra.shape[2]):
        ht = h[:, :, t + 1]
        rh[:, :, t + 1] = (1.0 - ht * ht) * (ra[:, :, t] + np.matmul(rh[:, :, t], Wh))
    return RNNTangent(rx, rh)


def rnn_backward_r(cache: RNNCache, tan: RNNTangent, Wx: np.ndarray, Wh: np.ndarray, VWx: np.ndarray,
                   VWh: np.ndarray, dh_out: np.ndarray, rdh_out: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """R of backpropagation through time (recurrent_kernels.rnn_backward).
    With s_t = dh_out_t + carry_t: da_t = s_t (1 - h_t^2),
    R{da_t} = R{s_t} (1 - h_t^2) - 2 s_t h_t R{h_t}, carry_{t-1} = da_t Wh^T,
    R{carry_{t-1}} = R{da_t} Wh^T + da_t V_Wh^T.
    -> dx, R{dx}, dA, R{dA}."""
    h, rh = cache.h, tan.rh
    T = dh_out.shape[2]
    dA = np.empty_like(dh_out)
    rdA = np.empty_like(dh_out)
    carry = np.zeros_like(dh_out[:, :, 0])
    rcarry = np.zeros_like(carry)
    WhT, VWhT = np.swapaxes(Wh, 1, 2), np.swapaxes(VWh, 1, 2)
    for t in range(T - 1, -1, -1):
        ht = h[:, :, t + 1]
        s = dh_out[:, :, t] + carry
        rs = rdh_out[:, :, t] + rcarry
        da = s * (1.0 - ht * ht)
        rda = rs * (1.0 - ht * ht) - 2.0 * s * ht * rh[:, :, t + 1]
        dA[:, :, t], rdA[:, :, t] = da, rda
        carry = np.matmul(da, WhT)
        rcarry = np.matmul(rda, WhT) + np.matmul(da, VWhT)
    dx, rdx = _input_grads_r(dA, rdA, Wx, VWx)
    return dx, rdx, dA, rdA


def _input_grads_r(dA: np.ndarray, rdA: np.ndarray, Wx: np.ndarray, VWx: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """dx = dA Wx^T and R{dx} = R{dA} Wx^T + dA V_Wx^T over all (n, T)."""
    m, n, T, G = dA.shape
    flat_d, flat_r = dA.reshape(m, n * T, G), rdA.reshape(m, n * T, G)
    WxT = np.swapaxes(Wx, 1, 2)
    dx = np.matmul(flat_d, WxT).reshape(m, n, T, -1)
    rdx = (np.matmul(flat_r, WxT) + np.matmul(flat_d, np.swapaxes(VWx, 1, 2))).reshape(m, n, T, -1)
    return dx, rdx


def lstm_forward_r(cache: LSTMCache, rx: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, VWx: np.ndarray,
                   VWh: np.ndarray, Vb: np.ndarray) -> LSTMTangent:
    """Tangents of the LSTM forward pass: R{z_t} as for the RNN; R{i} = i(1-i) R{z_i}
    (same for f, o), R{g} = (1-g^2) R{z_g}; R{c_t} = R{f} c_{t-1} + f R{c_{t-1}} +
    R{i} g + i R{g}; R{tanh c_t} = (1 - tanh^2 c_t) R{c_t}; R{h_t} = R{o} tanh c_t + o R{tanh c_t}."""
    h, c, gates, tc = cache.h, cache.c, cache.gates, cache.tc
    rz_in = _input_tangent(cache.x, rx, h, Wx, VWx, VWh, Vb)
    Hd = h.shape[-1]
    rh, rc = np.zeros_like(h), np.zeros_like(c)
    rgates, rtc = np.empty_like(gates), np.empty_like(tc)
    for t in range(gates.shape[2]):
        rz = rz_in[:, :, t] + np.matmul(rh[:, :, t], Wh)
        g = gates[:, :, t]
        sig_slope = g * (1.0 - g)
        rg = rgates[:, :, t]
        rg[...] = sig_slope * rz
        rg[..., 2 * Hd:3 * Hd] = (1.0 - g[..., 2 * Hd:3 * Hd] ** 2) * rz[..., 2 * Hd:3 * Hd]
        i, f, gg, o = np.split(g, 4, axis=-1)
        ri, rf, rgg, ro = np.split(rg, 4, axis=-1)
        rc[:, :, t + 1] = rf * c[:, :, t] + f * rc[:, :, t] + ri * gg + i * rgg
        tct = tc[:, :, t]
        rtc[:, :, t] = (1.0 - tct * tct) * rc[:, :, t + 1]
        rh[:, :, t + 1] = ro * tct + o * rtc[:, :, t]
    return LSTMTangent(rx, rh, rc, rgates, rtc)


def lstm_backward_r(cache: LSTMCache, tan: LSTMTangent, Wx: np.ndarray, Wh: np.ndarray,
                    VWx: np.ndarray, VWh: np.ndarray, dh_out: np.ndarray, rdh_out: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """R of the LSTM backward pass (recurrent_kernels.lstm_backward), line by line:
    dh = dh_out_t + dh_next, dc = dc_next + dh o (1 - tc^2),
    dz = [dc g i(1-i), dc c_{t-1} f(1-f), dc i (1-g^2), dh tc o(1-o)],
    dc_next = dc f, dh_next = dz Wh^T, each differentiated by the product rule
    (sigma' = s(1-s) has R{s(1-s)} = (1-2s) R{s}; (1-u^2) has -2u R{u}).
    -> dx, R{dx}, dZ, R{dZ}."""
    T = dh_out.shape[2]
    G = Wh.shape[-1]
    Hd = G // 4
    dZ = np.empty((*dh_out.shape[:3], G))
    rdZ = np.empty_like(dZ)
    dh_next = np.zeros_like(dh_out[:, :, 0])
    dc_next, rdh_next, rdc_next = (np.zeros_like(dh_next) for _ in range(3))
    WhT, VWhT = np.swapaxes(Wh, 1, 2), np.swapaxes(VWh, 1, 2)
    for t in range(T - 1, -1, -1):
        i, f, g, o = np.split(cache.gates[:, :, t], 4, axis=-1)
        ri, rf, rg, ro = np.split(tan.rgates[:, :, t], 4, axis=-1)
        tc, rtc = cache.tc[:, :, t], tan.rtc[:, :, t]
        cp, rcp = cache.c[:, :, t], tan.rc[:, :, t]
        dh = dh_out[:, :, t] + dh_next
        rdh = rdh_out[:, :, t] + rdh_next
        slope_c = 1.0 - tc * tc
        dc = dc_next + dh * o * slope_c
        rdc = rdc_next + rdh * o * slope_c + dh * ro * slope_c - 2.0 * dh * o * tc * rtc
        si, sf, so = i * (1.0 - i), f * (1.0 - f), o * (1.0 - o)
        sg = 1.0 - g * g
        dz, rdz = dZ[:, :, t], rdZ[:, :, t]
        dz[..., :Hd] = dc * g * si
        dz[..., Hd:2 * Hd] = dc * cp * sf
        dz[..., 2 * Hd:3 * Hd] = dc * i * sg
        dz[..., 3 * Hd:] = dh * tc * so
        rdz[..., :Hd] = rdc * g * si + dc * rg * si + dc * g * (1.0 - 2.0 * i) * ri
        rdz[..., Hd:2 * Hd] = rdc * cp * sf + dc * rcp * sf + dc * cp * (1.0 - 2.0 * f) * rf
        rdz[..., 2 * Hd:3 * Hd] = rdc * i * sg + dc * ri * sg - 2.0 * dc * i * g * rg
        rdz[..., 3 * Hd:] = rdh * tc * so + dh * rtc * so + dh * tc * (1.0 - 2.0 * o) * ro
        dc_next, rdc_next = dc * f, rdc * f + dc * rf
        dh_next = np.matmul(dz, WhT)
        rdh_next = np.matmul(rdz, WhT) + np.matmul(dz, VWhT)
    dx, rdx = _input_grads_r(dZ, rdZ, Wx, VWx)
    return dx, rdx, dZ, rdZ


def recurrent_param_grads_r(x: np.ndarray, rx: np.ndarray, h: np.ndarray, rh: np.ndarray,
                            dA: np.ndarray, rdA: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R of recurrent_kernels.recurrent_param_grads (summed over samples):
    R{dWx} = sum_{j,t} (R{x_jt} dA_jt^T + x_jt R{dA_jt}^T), R{dWh} likewise
    with h_{j,t-1}, R{db} = sum_{j,t} R{dA_jt}."""
    m, n, T = dA.shape[:3]
    flat = lambda z: z.reshape(m, n * T, -1)
    dAf, rdAf = flat(dA), flat(rdA)
    hp, rhp = flat(h[:, :, :-1]), flat(rh[:, :, :-1])
    rdWx = np.matmul(np.swapaxes(flat(rx), 1, 2), dAf) + np.matmul(np.swapaxes(flat(x), 1, 2), rdAf)
    rdWh = np.matmul(np.swapaxes(rhp, 1, 2), dAf) + np.matmul(np.swapaxes(hp, 1, 2), rdAf)
    return rdWx, rdWh, rdAf.sum(axis=1)
