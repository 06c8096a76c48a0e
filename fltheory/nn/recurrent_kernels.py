"""Pure forward/backward kernels of the Elman RNN and the LSTM.

Sequences carry a client axis m, a sample axis n and a time axis T:
x (m, n, T, D).  The initial state is zero.  The Python loop runs over the T
time steps (the recurrence), never over clients or samples; after the
backward recursion the parameter gradients are one einsum over (n, T).

Elman RNN (Elman 1990): a_t = x_t Wx + h_{t-1} Wh + b, h_t = tanh(a_t).
LSTM (Hochreiter & Schmidhuber 1997, with forget gate): z_t = x_t Wx +
h_{t-1} Wh + b split into [i, f, g, o] blocks of width H;
i, f, o = sigmoid(.), g = tanh(.); c_t = f c_{t-1} + i g; h_t = o tanh(c_t).
Wx (m, D, H) or (m, D, 4H), Wh (m, H, H) or (m, H, 4H), b (m, H) or (m, 4H).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit

__all__ = ["RNNCache", "LSTMCache", "rnn_forward", "rnn_backward", "lstm_forward",
           "lstm_backward", "recurrent_param_grads"]


class RNNCache(NamedTuple):
    """x (m,n,T,D) inputs; h (m,n,T+1,H) states with h[:, :, 0] = 0."""

    x: np.ndarray
    h: np.ndarray


class LSTMCache(NamedTuple):
    """x inputs; h, c (m,n,T+1,H) states (index 0 = zero initial state);
    gates (m,n,T,4H) activated [i, f, g, o]; tc (m,n,T,H) tanh(c_t)."""

    x: np.ndarray
    h: np.ndarray
    c: np.ndarray
    gates: np.ndarray
    tc: np.ndarray


def rnn_forward(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray
                ) -> tuple[np.ndarray, RNNCache]:
    """h_t = tanh(x_t Wx + h_{t-1} Wh + b) -> (h_1..h_T (m, n, T, H), cache)."""
    m, n, T, _ = x.shape
    Hd = Wh.shape[-1]
    h = np.zeros((m, n, T + 1, Hd))
    xw = np.matmul(x.reshape(m, n * T, -1), Wx).reshape(m, n, T, Hd) + b[:, None, None, :]
    for t in range(T):
        h[:, :, t + 1] = np.tanh(xw[:, :, t] + np.matmul(h[:, :, t], Wh))
    return h[:, :, 1:], RNNCache(x, h)


def rnn_backward(cache: RNNCache, Wx: np.ndarray, Wh: np.ndarray, dh_out: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Backpropagation through time.  dh_out (m, n, T, H) = dL/dh_t (direct
    contributions).  Returns dx (m, n, T, D) and dA (m, n, T, H) = dL/da_t,
    from which :func:`recurrent_param_grads` forms the parameter gradients."""
    h = cache.h
    T = dh_out.shape[2]
    dA = np.empty_like(dh_out)
    carry = np.zeros_like(dh_out[:, :, 0])
    WhT = np.swapaxes(Wh, 1, 2)
    for t in range(T - 1, -1, -1):
        ht = h[:, :, t + 1]
        da = (dh_out[:, :, t] + carry) * (1.0 - ht * ht)
        dA[:, :, t] = da
        carry = np.matmul(da, WhT)
    m, n = dA.shape[:2]
    dx = np.matmul(dA.reshape(m, n * T, -1), np.swapaxes(Wx, 1, 2)).reshape(m, n, T, -1)
    return dx, dA


def lstm_forward(x: np.ndarray, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray
                 ) -> tuple[np.ndarray, LSTMCache]:
    """LSTM over the sequence -> (h_1..h_T (m, n, T, H), cache)."""
    m, n, T, _ = x.shape
    Hd = Wh.shape[1]
    h = np.zeros((m, n, T + 1, Hd))
    c = np.zeros((m, n, T + 1, Hd))
    gates = np.empty((m, n, T, 4 * Hd))
    tc = np.empty((m, n, T, Hd))
    xw = np.matmul(x.reshape(m, n * T, -1), Wx).reshape(m, n, T, 4 * Hd) + b[:, None, None, :]
    for t in range(T):
        z = xw[:, :, t] + np.matmul(h[:, :, t], Wh)
        g = gates[:, :, t]
        g[..., :2 * Hd] = expit(z[..., :2 * Hd])
        g[..., 2 * Hd:3 * Hd] = np.tanh(z[..., 2 * Hd:3 * Hd])
        g[..., 3 * Hd:] = expit(z[..., 3 * Hd:])
        i, f, gg, o = np.split(g, 4, axis=-1)
        c[:, :, t + 1] = f * c[:, :, t] + i * gg
        tc[:, :, t] = np.tanh(c[:, :, t + 1])
        h[:, :, t + 1] = o * tc[:, :, t]
    return h[:, :, 1:], LSTMCache(x, h, c, gates, tc)


def lstm_backward(cache: LSTMCache, Wx: np.ndarray, Wh: np.ndarray, dh_out: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Backpropagation through time of the LSTM.  Returns dx (m, n, T, D) and
    dZ (m, n, T, 4H) = dL/dz_t (pre-activation gate gradients)."""
    T = dh_out.shape[2]
    dZ = np.empty((*dh_out.shape[:3], Wh.shape[-1]))
    dh_next = np.zeros_like(dh_out[:, :, 0])
    dc_next = np.zeros_like(dh_out[:, :, 0])
    WhT = np.swapaxes(Wh, 1, 2)
    for t in range(T - 1, -1, -1):
        i, f, g, o = np.split(cache.gates[:, :, t], 4, axis=-1)
        tc = cache.tc[:, :, t]
        dh = dh_out[:, :, t] + dh_next
        dc = dc_next + dh * o * (1.0 - tc * tc)
        dz = dZ[:, :, t]
        Hd = i.shape[-1]
        dz[..., :Hd] = dc * g * i * (1.0 - i)
        dz[..., Hd:2 * Hd] = dc * cache.c[:, :, t] * f * (1.0 - f)
        dz[..., 2 * Hd:3 * Hd] = dc * i * (1.0 - g * g)
        dz[..., 3 * Hd:] = dh * tc * o * (1.0 - o)
        dc_next = dc * f
        dh_next = np.matmul(dz, WhT)
    m, n = dZ.shape[:2]
    dx = np.matmul(dZ.reshape(m, n * T, -1), np.swapaxes(Wx, 1, 2)).reshape(m, n, T, -1)
    return dx, dZ


def recurrent_param_grads(x: np.ndarray, h: np.ndarray, dA: np.ndarray, per_sample: bool
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parameter gradients from the pre-activation gradients dA (m, n, T, G):
    dWx = sum_{j,t} x_{jt} dA_{jt}^T, dWh = sum_{j,t} h_{j,t-1} dA_{jt}^T,
    db = sum_{j,t} dA_{jt}.  With ``per_sample`` the sum over j is not taken
    (leading axes (m, n))."""
    hp = h[:, :, :-1]
    if per_sample:
        return (np.einsum("mntd,mntg->mndg", x, dA), np.einsum("mnth,mntg->mnhg", hp, dA),
                dA.sum(axis=2))
    return (np.einsum("mntd,mntg->mdg", x, dA), np.einsum("mnth,mntg->mhg", hp, dA),
            dA.sum(axis=(1, 2)))
