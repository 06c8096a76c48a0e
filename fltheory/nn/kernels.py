"""Pure forward/backward kernels of the feed-forward layers.

Every array carries a leading *client axis* m (one parameter set per row) and
a *sample axis* n, so m different parameter vectors are evaluated on m
different data sets in the same BLAS calls (``np.matmul`` broadcasts over the
client axis).  No kernel loops over clients or samples; the only Python loops
run over the k x k positions of a convolution/pooling window in the
scatter-add of the backward pass.

Shapes (m clients, n samples):

* dense: x (m, n, I), W (m, I, O), b (m, O) -> y (m, n, O);
* conv2d: x (m, n, C, H, W), weights (m, O, C, k, k), b (m, O)
  -> y (m, n, O, Ho, Wo) with Ho = (H + 2p - k) // s + 1, through im2col
  columns (m, C k k, n Ho Wo) and one batched matmul;
* pools: x (m, n, C, H, W) -> (m, n, C, Ho, Wo), Ho = (H - k) // s + 1.

Backward kernels return the input gradient and the parameter gradients
*summed over samples*; the ``*_per_sample`` kernels keep the sample axis and
the ``*_sq_sum`` kernels return sum_j g_j (.) g_j (the building block of the
empirical Fisher diagonal).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import expit

__all__ = [
    "dense_forward", "dense_backward", "dense_per_sample", "dense_sq_sum",
    "conv_output_size", "im2col", "col2im", "conv2d_forward", "conv2d_backward", "conv2d_input_grad",
    "conv2d_per_sample", "maxpool_forward", "maxpool_backward", "avgpool_forward",
    "avgpool_backward", "relu_forward", "relu_backward", "tanh_forward", "tanh_backward",
    "sigmoid_forward", "sigmoid_backward",
]


# ----------------------------------------------------------------- dense
def dense_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y = x W + b.  x (m, n, I), W (m, I, O), b (m, O) -> (m, n, O)."""
    return np.matmul(x, W) + b[:, None, :]


def dense_backward(x: np.ndarray, W: np.ndarray, dy: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx = dy W^T, dW = x^T dy, db = sum_j dy_j.  -> (m,n,I), (m,I,O), (m,O)."""
    dx = np.matmul(dy, np.swapaxes(W, 1, 2))
    dW = np.matmul(np.swapaxes(x, 1, 2), dy)
    return dx, dW, dy.sum(axis=1)


def dense_per_sample(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample dW_j = x_j dy_j^T (m, n, I, O) and db_j = dy_j (m, n, O)."""
    return x[..., :, None] * dy[..., None, :], dy.copy()


def dense_sq_sum(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sum_j (x_j dy_j^T)^2 elementwise = (x^2)^T (dy^2), without forming the
    per-sample gradients; and sum_j dy_j^2.  -> (m, I, O), (m, O)."""
    return np.matmul(np.swapaxes(x * x, 1, 2), dy * dy), (dy * dy).sum(axis=1)


# ------------------------------------------------------------------ conv
def conv_output_size(size: int, k: int, stride: int, padding: int) -> int:
    """floor((size + 2 padding - k) / stride) + 1 (may be < 1: caller checks)."""
    return (size + 2 * padding - k) // stride + 1


def _windows(xp: np.ndarray, k: int, stride: int) -> np.ndarray:
    """Strided k x k windows of the last two axes: (..., Ho, Wo, k, k), a view."""
    win = sliding_window_view(xp, (k, k), axis=(-2, -1))
    return win[..., ::stride, ::stride, :, :]


def im2col(x: np.ndarray, k: int, stride: int, padding: int) -> np.ndarray:
    """Patches of the zero-padded input in channels-first column layout:
    (m, n, C, H, W) -> cols (m, C k k, n Ho Wo), a contiguous array whose entry
    [c k^2 + a k + b, (j Ho + p) Wo + q] is x_pad[j, c, s p + a, s q + b]."""
    if padding:
        x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(padding, padding)] * 2)
    win = _windows(x, k, stride)                       # (m, n, C, Ho, Wo, k, k)
    m, n, C, Ho, Wo = win.shape[:5]
    return np.ascontiguousarray(win.transpose(0, 2, 5, 6, 1, 3, 4)).reshape(m, C * k * k, n * Ho * Wo)


def _scatter_windows(dwin: np.ndarray, Hp: int, Wp: int, stride: int) -> np.ndarray:
    """Adjoint of :func:`_windows`: dwin (..., Ho, Wo, k, k) -> (..., Hp, Wp),
    summing the contributions of overlapping windows (loop over the k^2
    window offsets only; the window axes are moved to the front once so that
    every slice read in the loop is contiguous)."""
    *lead, Ho, Wo, k, _ = dwin.shape
    nl = len(lead)
    front = np.ascontiguousarray(np.moveaxis(dwin, (nl + 2, nl + 3), (0, 1)))
    return _scatter_front(front, Hp, Wp, stride)


def _scatter_front(front: np.ndarray, Hp: int, Wp: int, stride: int) -> np.ndarray:
    """front (k, k, ..., Ho, Wo) -> (..., Hp, Wp): out[..., s p + a, s q + b] += front[a, b, ..., p, q]."""
    k = front.shape[0]
    *lead, Ho, Wo = front.shape[2:]
    out = np.zeros((*lead, Hp, Wp), dtype=front.dtype)
    hs, ws = stride * (Ho - 1) + 1, stride * (Wo - 1) + 1
    for a in range(k):
        for b in range(k):
            out[..., a:a + hs:stride, b:b + ws:stride] += front[a, b]
    return out


def col2im(dcols: np.ndarray, n: int, C: int, H: int, W: int, k: int, stride: int,
           padding: int) -> np.ndarray:
    """Adjoint of :func:`im2col`: (m, C k k, n Ho Wo) -> (m, n, C, H, W)."""
    m = dcols.shape[0]
    Ho = conv_output_size(H, k, stride, padding)
    Wo = conv_output_size(W, k, stride, padding)
    front = dcols.reshape(m, C, k, k, n, Ho, Wo).transpose(2, 3, 0, 1, 4, 5, 6)   # (k, k, m, C, n, Ho, Wo)
    dxp = _scatter_front(front, H + 2 * padding, W + 2 * padding, stride)      # (m, C, n, Hp, Wp)
    if padding:
        dxp = dxp[..., padding:padding + H, padding:padding + W]
    return dxp.transpose(0, 2, 1, 3, 4)


def conv2d_forward(x: np.ndarray, weight: np.ndarray, b: np.ndarray, stride: int,
                   padding: int) -> tuple[np.ndarray, np.ndarray]:
    """Cross-correlation y[o, p, q] = b[o] + sum_{c,a,b'} w[o,c,a,b'] x_pad[c, s p + a, s q + b'].

    x (m, n, C, H, W), weight (m, O, C, k, k), b (m, O) -> (y (m, n, O, Ho, Wo),
    cols (m, C k k, n Ho Wo) of :func:`im2col`, kept for the backward pass);
    one matmul W (m, O, C k k) @ cols."""
    m, O = weight.shape[:2]
    k = weight.shape[-1]
    n, _, H, W = x.shape[1:]
    Ho, Wo = conv_output_size(H, k, stride, padding), conv_output_size(W, k, stride, padding)
    cols = im2col(x, k, stride, padding)
    y = np.matmul(weight.reshape(m, O, -1), cols).reshape(m, O, n, Ho, Wo)
    return y.transpose(0, 2, 1, 3, 4) + b[:, None, :, None, None], cols


def _dy_columns(dy: np.ndarray) -> np.ndarray:
    """dy (m, n, O, Ho, Wo) -> (m, O, n Ho Wo), the layout of the output columns."""
    m, n, O = dy.shape[:3]
    return dy.transpose(0, 2, 1, 3, 4).reshape(m, O, -1)


def conv2d_input_grad(weight: np.ndarray, dy: np.ndarray, in_shape: tuple[int, int, int], stride: int,
                      padding: int) -> np.ndarray:
    """dx = col2im(W^T dy_cols) -> (m, n, C, H, W)."""
    m, O = weight.shape[:2]
    dcols = np.matmul(np.swapaxes(weight.reshape(m, O, -1), 1, 2), _dy_columns(dy))
    return col2im(dcols, dy.shape[1], *in_shape, weight.shape[-1], stride, padding)


def conv2d_backward(cols: np.ndarray, weight: np.ndarray, dy: np.ndarray,
                    in_shape: tuple[int, int, int], stride: int, padding: int,
                    need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """dx (m,n,C,H,W) (None unless ``need_dx``), dweight = dy_cols cols^T
    (m,O,C,k,k), db (m,O), summed over samples.  dy (m, n, O, Ho, Wo)."""
    m, O = weight.shape[:2]
    dyc = _dy_columns(dy)
    dW = np.matmul(dyc, np.swapaxes(cols, 1, 2)).reshape(weight.shape)
    db = dyc.sum(axis=-1)
    dx = None
    if need_dx:
        dcols = np.matmul(np.swapaxes(weight.reshape(m, O, -1), 1, 2), dyc)
        dx = col2im(dcols, dy.shape[1], *in_shape, weight.shape[-1], stride, padding)
    return dx, dW, db


def conv2d_per_sample(cols: np.ndarray, dy: np.ndarray, weight_shape: tuple[int, int, int, int]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample gradients (weight_shape = (O, C, k, k) of one client):
    dweight_j = sum_{p,q} dy_j[:, p, q] cols_j[:, p, q]^T
    -> (m, n, O, C, k, k) and db_j = sum_{p,q} dy_j -> (m, n, O)."""
    m, n, O, Ho, Wo = dy.shape
    dyr = dy.reshape(m, n, O, Ho * Wo)
    per = cols.reshape(m, -1, n, Ho * Wo).transpose(0, 2, 3, 1)      # (m, n, HoWo, K) view
    dW = np.matmul(dyr, per)                                         # (m, n, O, K)
    return dW.reshape(m, n, *weight_shape), dyr.sum(axis=-1)


# ----------------------------------------------------------------- pools
def maxpool_forward(x: np.ndarray, k: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """y[c, p, q] = max_{a,b < k} x[c, s p + a, s q + b] -> (y, argmax (..., Ho, Wo)),
    ties resolved to the first maximum in row-major window order."""
    win = _windows(x, k, stride)
    flat = win.reshape(*win.shape[:-2], k * k)
    arg = flat.argmax(axis=-1)
    y = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    return y, arg


def maxpool_backward(arg: np.ndarray, dy: np.ndarray, k: int, stride: int, H: int, W: int
                     ) -> np.ndarray:
    """Route dy to the arg-max of each window: -> (m, n, C, H, W)."""
    dwin = np.zeros((*dy.shape, k * k), dtype=dy.dtype)
    np.put_along_axis(dwin, arg[..., None], dy[..., None], axis=-1)
    return _scatter_windows(dwin.reshape(*dy.shape, k, k), H, W, stride)


def avgpool_forward(x: np.ndarray, k: int, stride: int) -> np.ndarray:
    """y[c, p, q] = (1/k^2) sum_{a,b < k} x[c, s p + a, s q + b]."""
    return _windows(x, k, stride).mean(axis=(-2, -1))


def avgpool_backward(dy: np.ndarray, k: int, stride: int, H: int, W: int) -> np.ndarray:
    """dx = sum over windows containing a pixel of dy / k^2: -> (m, n, C, H, W)."""
    dwin = np.broadcast_to((dy / (k * k))[..., None, None], (*dy.shape, k, k))
    return _scatter_windows(dwin, H, W, stride)


# ----------------------------------------------------------- activations
def relu_forward(x: np.ndarray) -> np.ndarray:
    """max(x, 0)."""
    return np.maximum(x, 0.0)


def relu_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dy 1[x > 0] (the subgradient 0 is taken at x = 0)."""
    return dy * (x > 0)


def tanh_forward(x: np.ndarray) -> np.ndarray:
    """tanh(x)."""
    return np.tanh(x)


def tanh_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dy (1 - y^2) with y = tanh(x)."""
    return dy * (1.0 - y * y)


def sigmoid_forward(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) evaluated without overflow (scipy.special.expit)."""
    return expit(x)


def sigmoid_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dy y (1 - y) with y = sigmoid(x)."""
    return dy * y * (1.0 - y)
