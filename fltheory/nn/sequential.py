"""Sequential models over one flat parameter vector.

``Sequential(layers, input_shape)`` builds the layers, lays their parameter
blocks out in one vector of length ``dim`` and evaluates the network for m
parameter rows at once: ``X`` (m, d) and ``inputs`` (m, n, *input_shape),
row r of X applied to the samples inputs[r].  This is how a federation
evaluates m clients, each at its own point on its own data, in one pass.

Gradients of L(X_r) = sum_j w_rj l(net(X_r; u_rj), t_rj) come from one
backward pass with dl_j/dout scaled by w_rj (exact backpropagation):

* ``mode="sum"``: the gradient (m, d);
* ``mode="per_sample"``: the per-sample gradients w_rj grad l_j (m, n, d);
* ``mode="sq_sum"``: sum_j (w_rj grad l_j)^2 elementwise (m, d), computed
  for Dense layers as (x^2)^T (dy^2) without forming per-sample gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import integer
from ..errors import InvalidHyperparameterError, InvalidProblemError, NonFinitePointError, OutOfRangeError
from .batch_threads import chunk_count, split_value_and_grad
from .layers import MODES, Conv2D, Dense, Layer
from .losses import Loss
from .params import ParamLayout

__all__ = ["Sequential"]


class Sequential:
    """A chain of layers with flat parameters (see module docstring).

    Parameters
    ----------
    layers : sequence of Layer
        Built in order; each layer instance belongs to one model.
    input_shape : tuple of int
        Per-sample input shape, e.g. (64,) for flat 8x8 digits, (1, 8, 8) for
        a CNN, (T, V) for one-hot character sequences.
    """

    def __init__(self, layers: Sequence[Layer], input_shape: Sequence[int]) -> None:
        if isinstance(layers, (str, bytes, np.ndarray)) or not isinstance(layers, Sequence):
            raise InvalidProblemError(f"layers must be a list of Layer instances, got {layers!r:.80} "
                                      f"({type(layers).__name__})")
        if len(layers) == 0:
            raise InvalidProblemError("Sequential needs at least one layer")
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise InvalidProblemError(f"layers[{i}] must be a Layer, got {type(layer).__name__}")
        self.layers = list(layers)
        if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
            raise InvalidProblemError(f"input_shape must be a tuple of positive integers, got {input_shape!r}")
        self.input_shape = tuple(integer("input_shape entry", s, minimum=1, maximum=None,
                                         error=InvalidProblemError) for s in input_shape)
        if not self.input_shape:
            raise InvalidProblemError("input_shape must have at least one entry, got ()")
        shape = self.input_shape
        for layer in self.layers:
            shape = layer.build(shape)
        self.output_shape = shape
        self.layout = ParamLayout([layer.specs() for layer in self.layers])
        self._has_conv = any(isinstance(layer, Conv2D) for layer in self.layers)
        self.dim = self.layout.dim

    # ----------------------------------------------------------- parameters
    def init(self, rng: np.random.Generator) -> np.ndarray:
        """A flat initial vector (d,) from each block's scheme (params module)."""
        if not isinstance(rng, np.random.Generator):
            raise InvalidHyperparameterError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return self.layout.init(rng)

    def _rows(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None]
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise InvalidProblemError(f"parameters must have shape (m, {self.dim}) or ({self.dim},), "
                                      f"got {X.shape}")
        if not np.isfinite(X).all():
            raise NonFinitePointError(f"parameters contain non-finite values (NaN or inf) in "
                                      f"{int((~np.isfinite(X)).any(axis=1).sum())} of {X.shape[0]} rows; "
                                      f"a model is evaluated at finite parameters only")
        # the block views need unit stride along d only; a broadcast or row-gathered
        # X is used as is (no (m, d) copy)
        return X if X.strides[1] == X.itemsize else np.ascontiguousarray(X)

    def _inputs(self, inputs: Any, m: int) -> np.ndarray:
        u = np.asarray(inputs, dtype=np.float64)
        if u.ndim != 2 + len(self.input_shape) or u.shape[0] != m \
                or tuple(u.shape[2:]) != self.input_shape:
            raise InvalidProblemError(f"inputs must have shape ({m}, n, *{self.input_shape}), got {u.shape}")
        if not np.isfinite(u).all():
            raise NonFinitePointError(f"inputs contain {int((~np.isfinite(u)).sum())} non-finite values (NaN or "
                                      f"inf) of {u.size}; a model is evaluated on finite inputs only")
        return u

    # --------------------------------------------------------------- passes
    def forward(self, X: ArrayLike, inputs: ArrayLike) -> tuple[np.ndarray, list[Any]]:
        """Outputs (m, n, *output_shape) and the per-layer caches."""
        X = self._rows(X)
        h = u = self._inputs(inputs, X.shape[0])
        caches = []
        with np.errstate(over="ignore", invalid="ignore"):      # an overflow is reported just below
            for layer, p in zip(self.layers, self.layout.views(X)):
                h, cache = layer.forward(p, h)
                caches.append(cache)
        if not np.isfinite(h).all():
            raise OutOfRangeError(f"the forward pass overflows float64 at these finite parameters and inputs "
                                  f"(largest |parameter| {float(np.abs(X).max()):.3g}, largest |input| "
                                  f"{float(np.abs(u).max()) if u.size else 0.0:.3g})")
        return h, caches

    def predict(self, X: ArrayLike, inputs: ArrayLike) -> np.ndarray:
        """Outputs (m, n, *output_shape)."""
        return self.forward(X, inputs)[0]

    def backward(self, X: ArrayLike, caches: list[Any], dout: np.ndarray, mode: str = "sum") -> np.ndarray:
        """Parameter gradients from dL/dout (m, n, *output_shape): (m, d) for
        ``"sum"``/``"sq_sum"``, (m, n, d) for ``"per_sample"``."""
        if mode not in MODES:
            raise InvalidHyperparameterError(f"mode must be one of {MODES}, got {mode!r}")
        X = self._rows(X)
        m, n = dout.shape[:2]
        # every block is written below (each declared block receives its gradient)
        G = np.empty((m, n, self.dim) if mode == "per_sample" else (m, self.dim))
        gviews = self.layout.views(G)
        pviews = self.layout.views(X)
        dy: np.ndarray | None = dout
        for l in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[l]
            assert dy is not None                # need_dx was l > 0 for the layer above
            if isinstance(layer, Dense) and mode != "per_sample":
                dy, grads = layer.backward(pviews[l], caches[l], dy, mode, need_dx=l > 0, out=gviews[l])
            else:
                dy, grads = layer.backward(pviews[l], caches[l], dy, mode, need_dx=l > 0)
            for name, g in grads.items():
                if g is not gviews[l][name]:
                    gviews[l][name][...] = g
        return G

    def value_and_grad(self, X: ArrayLike, inputs: ArrayLike, targets: np.ndarray, loss: Loss,
                       sample_weights: np.ndarray | None = None, mode: str = "sum"
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(L (m,), gradient) with L_r = sum_j w_rj l_j (w = 1/n by default).

        ``mode`` as in :meth:`backward`; for ``"per_sample"`` the rows are
        w_rj grad l_j, for ``"sq_sum"`` the gradient block holds
        sum_j w_rj (grad l_j)^2 (the weights enter as sqrt(w) in dout).

        Models with a convolution, evaluated while the BLAS thread count is
        above one, split the samples over threads (:mod:`.batch_threads`):
        the same sums grouped by chunk, equal to rounding; with the library's
        default single BLAS thread the computation is the one above."""
        if mode != "per_sample" and self._has_conv:
            X = self._rows(X)
            u = self._inputs(inputs, X.shape[0])
            m, n = u.shape[:2]
            chunks = chunk_count(n)
            if chunks > 1:
                t = np.asarray(targets)
                w_all = np.full((m, n), 1.0 / n) if sample_weights is None else np.asarray(sample_weights)
                return split_value_and_grad(n, chunks, lambda s: self._value_and_grad(
                    X, u[:, s], t[:, s], loss, w_all[:, s], mode))
            inputs = u
        return self._value_and_grad(X, inputs, targets, loss, sample_weights, mode)

    def _value_and_grad(self, X: ArrayLike, inputs: ArrayLike, targets: np.ndarray, loss: Loss,
                        sample_weights: np.ndarray | None, mode: str) -> tuple[np.ndarray, np.ndarray]:
        out, caches = self.forward(X, inputs)
        val, dl = loss.value_and_grad(out, targets)
        m, n = val.shape
        w = np.full((m, n), 1.0 / n) if sample_weights is None else sample_weights
        scale = np.sqrt(w) if mode == "sq_sum" else w
        dout = dl * scale.reshape(m, n, *([1] * (dl.ndim - 2)))
        L, G = (val * w).sum(axis=1), self.backward(X, caches, dout, mode)
        if not (np.isfinite(L).all() and np.isfinite(G).all()):
            raise OutOfRangeError("the loss or its gradient overflows float64 at these finite parameters and "
                                  f"inputs (loss {L.tolist() if L.size <= 4 else 'of ' + str(L.size) + ' rows'})")
        return L, G

    def hvp(self, X: Any, V: Any, inputs: Any, targets: np.ndarray, loss: Loss,
            sample_weights: np.ndarray | None = None) -> np.ndarray:
        """Exact Hessian-vector products H(X_r) V_r of L(X_r) = sum_j w_rj l_j -> (m, d).

        Forward-over-reverse (Pearlmutter 1994): one forward pass carrying the
        tangents R{h} of every activation along V (``Layer.forward_r``), the
        loss's output Hessian applied to R{out} (``Loss.output_hvp``), then one
        backward pass carrying R{dh} (``Layer.backward_r``); the R of the
        parameter gradient is H V.  About three times the cost of a gradient."""
        X = self._rows(X)
        V = self._rows(V)
        if V.shape != X.shape:
            raise InvalidProblemError(f"V must have the shape of X {X.shape}, got {V.shape}")
        h = self._inputs(inputs, X.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):      # an overflow is reported just below
            rh = np.zeros_like(h)
            pviews, vviews = self.layout.views(X), self.layout.views(V)
            caches = []
            for layer, p, v in zip(self.layers, pviews, vviews, strict=True):
                h, rh, cache = layer.forward_r(p, v, h, rh)
                caches.append(cache)
            _, dl = loss.value_and_grad(h, targets)
            rdl = loss.output_hvp(h, targets, rh)
            m, n = dl.shape[:2]
            w = np.full((m, n), 1.0 / n) if sample_weights is None else sample_weights
            w = w.reshape(m, n, *([1] * (dl.ndim - 2)))
            dy, rdy = dl * w, rdl * w
            HV = np.empty((m, self.dim))
            hviews = self.layout.views(HV)
            for k in range(len(self.layers) - 1, -1, -1):
                dy_k, rdy_k, rgrads = self.layers[k].backward_r(pviews[k], vviews[k], caches[k], dy, rdy,
                                                                need_dx=k > 0)
                for name, g in rgrads.items():
                    hviews[k][name][...] = g
                if dy_k is not None and rdy_k is not None:
                    dy, rdy = dy_k, rdy_k
        if not np.isfinite(HV).all():
            raise OutOfRangeError("the Hessian-vector product overflows float64 at these finite parameters, "
                                  "directions and inputs (as the gradient would: see value_and_grad)")
        return HV

    def __repr__(self) -> str:
        return f"Sequential({self.layers!r}, input_shape={self.input_shape}, dim={self.dim})"
