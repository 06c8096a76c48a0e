"""NeuralFederation: a Sequential model plus per-client data, answering the
oracle calls of :class:`fltheory.problems.base.Federation`.

Client i holds n_i training samples (u_ij, t_ij) and
f_i(x) = (1/n_i) sum_j l(net(x; u_ij), t_ij) + (reg/2) ||x||^2;
F = sum_i p_i f_i with p_i = n_i / n unless weights are given.  The optional
weight decay ``reg`` makes F coercive, so stationary points exist.

What is batched: the clients' data are stored padded to n_max
(N, n_max, *input_shape) with per-sample weights w_ij = 1/n_i on real rows
and 0 on padding rows.  One oracle call evaluates all m listed rows (each
client at its own point, on its own data) in one forward/backward pass over
(m, n_max) samples: Dense layers are batched matmuls over the client axis,
convolutions one im2col matmul, recurrent layers loop over time steps only.
There is no Python loop over clients or samples.  Padding costs compute
proportional to n_max - n_i.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, positive
from ..errors import InvalidProblemError
from ..problems.base import Federation, normalize_weights
from .losses import Loss
from .sequential import Sequential
from ..aliases import ClientSelection

__all__ = ["NeuralFederation", "HESS_MAX_DIM"]

#: client_hess builds a dense (m, d, d) array from d exact Hessian-vector
#: products; refused above this d (memory 8 m d^2 bytes).
HESS_MAX_DIM = 2000
#: client_hess evaluates its d directions in blocks of about this many (direction, sample) pairs
_HESS_BLOCK_SAMPLES = 20000
#: loss_and_grad_norm2 evaluates F and grad F over the pooled real samples in chunks of this many.  Measured
#: by benchmarks/pooled_chunk.py (process CPU time and minor page faults, best of 3, one point, 1 BLAS thread,
#: the FULL neural_local_adaptivity CNN, 215,370 parameters): on 4,000 training samples chunks of 128 take
#: 5.9-7.1 s against 20.6 s for one pass over all samples, on 1,000 samples 1.5-1.8 s against 2.6-3.2 s (runs
#: on a shared, loaded machine).  The one pass has FEWER minor page faults (21,596 vs 47,712 on 4,000 samples;
#: 14,716-17,271 vs 44,219-44,730 on 1,000), so its extra time is not page faults; that it is cache misses on
#: its larger activations is a guess, not measured.
POOLED_CHUNK = 128


def _pad(arrays: Sequence[np.ndarray], nmax: int) -> np.ndarray:
    out = np.zeros((len(arrays), nmax, *arrays[0].shape[1:]), dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):                 # construction only
        out[i, : a.shape[0]] = a
    return out


class _ClientData:
    """Padded per-client arrays: u (N, n_max, *in), t (N, n_max, ...), n (N,), w (N, n_max)."""

    def __init__(self, model: Sequential, loss: Loss, inputs: Sequence[Any], targets: Sequence[Any],
                 what: str) -> None:
        if len(inputs) != len(targets) or len(inputs) == 0:
            raise InvalidProblemError(f"{what}: inputs and targets must be non-empty sequences of equal "
                                      f"length (one entry per client), got {len(inputs)} and {len(targets)}")
        us, ts = [], []
        for i, (u, t) in enumerate(zip(inputs, targets)):
            u = finite_array(f"{what} inputs[{i}]", u)
            if u.ndim != 1 + len(model.input_shape) or tuple(u.shape[1:]) != model.input_shape:
                raise InvalidProblemError(f"{what} inputs[{i}] must have shape (n_i, *{model.input_shape}), "
                                          f"got {u.shape}")
            if u.shape[0] == 0:
                raise InvalidProblemError(f"{what}: client {i} has no samples")
            t = loss.check_targets(t, model.output_shape, f"{what} targets[{i}]")
            if t.shape[0] != u.shape[0]:
                raise InvalidProblemError(f"{what}: client {i} has {u.shape[0]} inputs but {t.shape[0]} targets")
            us.append(u)
            ts.append(t)
        self.n = np.array([u.shape[0] for u in us], dtype=np.int64)
        nmax = int(self.n.max())
        self.u = _pad(us, nmax)
        self.t = _pad(ts, nmax)
        self.w = (np.arange(nmax)[None, :] < self.n[:, None]) / self.n[:, None]

    def pooled(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The real (unpadded) samples of all clients in client order, with per-sample weights
        weights_i / n_i: (u (n, *in), t (n, ...), w (n,))."""
        real = self.w > 0
        return self.u[real], self.t[real], (weights[:, None] * self.w)[real]

    def take(self, idx: np.ndarray, all_rows: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if all_rows:
            return self.u, self.t, self.w
        return self.u[idx], self.t[idx], self.w[idx]

    def subset(self, keep: np.ndarray) -> _ClientData:
        out = object.__new__(_ClientData)
        nmax = int(self.n[keep].max())
        out.n, out.u, out.t, out.w = self.n[keep], self.u[keep, :nmax], self.t[keep, :nmax], self.w[keep, :nmax]
        return out

    def unpadded(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        return ([self.u[i, :k] for i, k in enumerate(self.n)], [self.t[i, :k] for i, k in enumerate(self.n)])


class NeuralFederation(Federation):
    """N clients sharing one network architecture (module docstring).

    Parameters
    ----------
    model : Sequential
    loss : Loss
        ``SoftmaxCrossEntropy()`` (integer labels) or ``MSE()``.
    inputs, targets : sequences of length N
        Client i's training inputs (n_i, *model.input_shape) and targets.
    test_inputs, test_targets : sequences of length N, optional
        Held-out data per client, used by :meth:`accuracy` and
        :meth:`test_loss`.
    weights : array (N,), optional
        Client weights (normalised); default p_i = n_i / n.
    reg : float >= 0
        Weight decay (reg/2) ||x||^2 added to every f_i (default 0).
    """

    #: (weights array, a copy of its values, train data, pooled u, t, w) of :meth:`loss_and_grad_norm2`.
    #: The cache holds the arrays themselves (compared with ``is``: an object kept alive cannot have its
    #: id reused by another) and a copy of the weights (compared by value: a change in place is seen too).
    _pooled_cache: tuple[Any, ...] | None = None

    def __init__(self, model: Sequential, loss: Loss, inputs: Sequence[Any], targets: Sequence[Any], *,
                 test_inputs: Sequence[Any] | None = None, test_targets: Sequence[Any] | None = None,
                 weights: ArrayLike | None = None, reg: float = 0.0) -> None:
        self.reg = positive("reg", reg, allow_zero=True, error=InvalidProblemError)
        if not isinstance(model, Sequential):
            raise InvalidProblemError(f"model must be a Sequential, got {type(model).__name__}")
        if not isinstance(loss, Loss):
            raise InvalidProblemError(f"loss must be a Loss, got {type(loss).__name__}")
        self.model, self.loss_fn = model, loss
        self._train = _ClientData(model, loss, inputs, targets, "train")
        self._test: _ClientData | None = None
        if (test_inputs is None) != (test_targets is None):
            raise InvalidProblemError("give both test_inputs and test_targets, or neither")
        if test_inputs is not None and test_targets is not None:
            self._test = _ClientData(model, loss, test_inputs, test_targets, "test")
            if self._test.n.shape[0] != self._train.n.shape[0]:
                raise InvalidProblemError(f"test data has {self._test.n.shape[0]} clients, train data "
                                          f"{self._train.n.shape[0]}")
        self.n_clients, self.dim = int(self._train.n.shape[0]), model.dim
        self._explicit_weights = weights is not None
        self.weights, self.n_samples = normalize_weights(self.n_clients, self._train.n, weights)

    # ----------------------------------------------------------- helpers
    def init_params(self, rng: np.random.Generator) -> np.ndarray:
        """A fresh initial point (d,) from the model's init schemes; pass it as
        ``x0`` to ``run`` (the zero vector is a saddle of a ReLU network)."""
        return self.model.init(rng)

    def _eval(self, X: Any, clients: Any, mode: str, data: str = "train"
              ) -> tuple[np.ndarray, np.ndarray]:
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        d = self._data(data)
        u, t, w = d.take(idx, self._is_all(idx))
        val, G = self.model.value_and_grad(X, u, t, self.loss_fn, w, mode)
        if self.reg and mode == "sum":
            val = val + 0.5 * self.reg * np.einsum("md,md->m", X, X)
            G += self.reg * X
        return val, G

    def _data(self, data: str) -> _ClientData:
        if data == "train":
            return self._train
        if data == "test":
            if self._test is None:
                raise InvalidProblemError("this NeuralFederation has no test data; pass test_inputs/test_targets")
            return self._test
        raise InvalidProblemError(f"data must be 'train' or 'test', got {data!r}")

    def client_data(self, i: int, data: str = "train") -> tuple[np.ndarray, np.ndarray]:
        """Client i's (inputs (n_i, *input_shape), targets) of ``data``
        ("train" or "test"), without padding (views, do not modify)."""
        d = self._data(data)
        if not (isinstance(i, (int, np.integer)) and 0 <= i < self.n_clients):
            raise InvalidProblemError(f"client index must be an integer in [0, {self.n_clients}), got {i!r}")
        k = int(d.n[i])
        return d.u[i, :k], d.t[i, :k]

    # ----------------------------------------------------------- oracles
    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """f_i(X[r]) = (1/n_i) sum_j l(net(X[r]; u_ij), t_ij) + (reg/2)||X[r]||^2 -> (m,)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        u, t, w = self._train.take(idx, self._is_all(idx))
        out = self.model.predict(X, u)
        val = (self.loss_fn.value_and_grad(out, t)[0] * w).sum(axis=1)
        return val + 0.5 * self.reg * np.einsum("md,md->m", X, X) if self.reg else val

    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Exact grad f_i(X[r]) by backpropagation (+ reg X[r]) -> (m, d)."""
        return self._eval(X, clients, "sum")[1]

    def per_sample_grads(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """grad l_ij at X[r] for every sample j of each listed client (data
        term only, without reg) -> (m, n_max, d), zero rows on padding (j >= n_i)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        u, t, w = self._train.take(idx, self._is_all(idx))
        G = self.model.value_and_grad(X, u, t, self.loss_fn, (w > 0).astype(np.float64), "per_sample")[1]
        return G

    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """*Empirical* Fisher diagonal (1/n_i) sum_j grad l_ij (.) grad l_ij at
        X[r] (per-sample gradients of the data term squared and averaged,
        without reg; not the true Fisher E_{y ~ model}) -> (m, d).  Note: the
        quadratic and logistic federations' ``fisher_diag`` is the *true* Fisher
        (their ``empirical_fisher_diag`` the empirical one), so FedCurv, FedCL and EFL,
        which call ``fisher_diag``, use the empirical estimate on networks only."""
        return self._eval(X, clients, "sq_sum")[1]

    def _minibatch_grad(self, X: np.ndarray, idx: np.ndarray, rng: np.random.Generator,
                        batch_size: int) -> np.ndarray:
        """(1/b) sum_{k<b} grad l_{i j_k}(X[r]) (+ reg X[r]) with j_k = floor(u_k n_i),
        u = rng.random((m, b)) (one draw per call, rows in client order),
        sampled with replacement (base-class convention)."""
        m = idx.shape[0]
        n = self._train.n[idx]
        u = rng.random((m, batch_size))
        rows = np.minimum((u * n[:, None]).astype(np.int64), n[:, None] - 1)
        inputs = self._train.u[idx[:, None], rows]
        targets = self._train.t[idx[:, None], rows]
        G = self.model.value_and_grad(X, inputs, targets, self.loss_fn, None, "sum")[1]
        return G + self.reg * X if self.reg else G

    def client_hvp(self, X: ArrayLike, V: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Exact Hessian-vector products H_i(X[r]) V[r] (+ reg V[r]) -> (m, d).

        Forward-over-reverse (Pearlmutter's R-operator,
        :meth:`Sequential.hvp`): one pass over the (m, n_max) padded samples
        of the listed clients, each row at its own point and direction; no
        finite differences.  ReLU and max-pooling contribute, as in their
        gradients, the second derivative zero of their linear pieces.  ``V``
        is (m, d) or one direction (d,) for every row."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        V = finite_array("V", V)
        V = np.broadcast_to(V, X.shape) if V.ndim == 1 else V
        if V.shape != X.shape:
            raise InvalidProblemError(f"V must have shape {X.shape} (or ({self.dim},)), got {V.shape}")
        u, t, w = self._train.take(idx, self._is_all(idx))
        HV = self.model.hvp(X, V, u, t, self.loss_fn, w)
        return HV + self.reg * V if self.reg else HV

    def hvp(self, x: ArrayLike, v: ArrayLike) -> np.ndarray:
        """Exact Hessian-vector product of F at x: sum_i p_i H_i(x) v (:meth:`client_hvp`) -> (d,)."""
        x = self._check_point(x)
        v = self._check_point(v)
        return self.weights @ self.client_hvp(x, v)

    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Exact Hessian of f_i at X[r] -> (m, d, d): the columns H e_k from
        :meth:`client_hvp` in blocks of directions, symmetrised (the asymmetry
        is rounding only).  Costs about 3d gradient passes per row and
        8 m d^2 bytes; refused for d > HESS_MAX_DIM (use :meth:`client_hvp`)."""
        if self.dim > HESS_MAX_DIM:
            raise InvalidProblemError(
                f"client_hess of a network with d={self.dim} parameters would need {self.dim} Hessian-vector "
                f"products and a dense (m, d, d) array; the limit is d <= {HESS_MAX_DIM}. Use client_hvp(X, V)")
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        m, d = X.shape
        eye = np.eye(d)
        Hs = np.empty((m, d, d))
        block = max(1, min(d, _HESS_BLOCK_SAMPLES // max(1, int(self._train.u.shape[1]))))
        for r in range(m):          # one row at a time bounds memory to (d, d) per call
            for k in range(0, d, block):
                cols = eye[k:k + block]
                Hs[r, k:k + block] = self.client_hvp(np.broadcast_to(X[r], cols.shape), cols,
                                                     np.full(cols.shape[0], idx[r]))
            Hs[r] = 0.5 * (Hs[r] + Hs[r].T)
        return Hs

    def loss_and_grad_norm2(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(x_t) and ||grad F(x_t)||^2 for every row x_t of X (T, d) -> ((T,), (T,)).

        F(x) = sum_i p_i f_i(x) = sum_ij (p_i / n_i) l(net(x; u_ij), t_ij) + (reg/2) ||x||^2 (the p_i sum
        to one) and its gradient, by one forward and backward pass over the pooled real samples in
        chunks of ``POOLED_CHUNK``: no padding rows and no separate forward pass for the loss.  The
        same sums as ``loss`` and ``grad``, grouped differently (equal to rounding)."""
        X = np.atleast_2d(X)
        cache = self._pooled_cache
        if cache is None or cache[0] is not self.weights or cache[2] is not self._train \
                or not np.array_equal(cache[1], self.weights):
            cache = self._pooled_cache = (self.weights, np.array(self.weights, dtype=np.float64, copy=True),
                                          self._train, *self._train.pooled(self.weights))
        u, t, w = cache[3:]
        T, n = X.shape[0], u.shape[0]
        loss = np.zeros(T)
        grad = np.zeros_like(X, dtype=np.float64)
        for s in range(0, n, POOLED_CHUNK):         # cache blocks of samples, each a batched pass over all rows
            k = min(POOLED_CHUNK, n - s)
            val, G = self.model.value_and_grad(
                X, np.broadcast_to(u[s:s + k], (T, k, *u.shape[1:])), np.broadcast_to(t[s:s + k], (T, k, *t.shape[1:])),
                self.loss_fn, np.broadcast_to(w[s:s + k], (T, k)), "sum")
            loss += val
            grad += G
        if self.reg:
            loss += 0.5 * self.reg * np.einsum("td,td->t", X, X)
            grad += self.reg * X
        return loss, np.einsum("td,td->t", grad, grad)

    # ----------------------------------------------------------- evaluation
    def accuracy(self, x: ArrayLike, clients: ClientSelection = None, data: str = "test") -> float:
        """Fraction of correctly classified samples (argmax of the outputs)
        pooled over the listed clients' ``data`` ("test" or "train")."""
        if not self.loss_fn.classification:
            raise InvalidProblemError(f"accuracy needs a classification loss, this federation uses {self.loss_fn!r}")
        x = self._check_point(x)
        d = self._data(data)
        idx = self._clients(clients)
        u, t, w = d.take(idx, self._is_all(idx))
        pred = self.model.predict(np.broadcast_to(x, (idx.shape[0], self.dim)), u).argmax(axis=-1)
        real = w > 0
        return float(np.sum((pred == t) & real) / np.sum(real))

    def test_loss(self, x: ArrayLike) -> float:
        """sum_i p_i (1/n_i^test) sum_j l on the held-out data (no reg)."""
        x = self._check_point(x)
        d = self._data("test")
        out = self.model.predict(np.broadcast_to(x, (self.n_clients, self.dim)), d.u)
        return float(self.weights @ (self.loss_fn.value_and_grad(out, d.t)[0] * d.w).sum(axis=1))

    # ----------------------------------------------------------- no closed form
    def optimum(self) -> np.ndarray:
        """Not available: a neural objective is non-convex with no closed-form minimiser."""
        raise InvalidProblemError(
            "NeuralFederation has no closed-form optimum: the objective is non-convex; judge runs by "
            "||grad F||^2, loss and accuracy instead of distance to x*")

    def client_optima(self) -> np.ndarray:
        """Not available (see :meth:`optimum`)."""
        raise InvalidProblemError(
            "NeuralFederation has no closed-form client optima: the client objectives are non-convex")

    # ----------------------------------------------------------- shifting clients
    def _from_data(self, train: _ClientData, test: _ClientData | None, weights: Any) -> NeuralFederation:
        out = object.__new__(NeuralFederation)
        out.model, out.loss_fn, out._train, out._test = self.model, self.loss_fn, train, test
        out.reg = self.reg
        out.n_clients, out.dim = int(train.n.shape[0]), self.dim
        out._explicit_weights = weights is not None
        out.weights, out.n_samples = normalize_weights(out.n_clients, train.n, weights)
        return out

    def without_client(self, a: int) -> NeuralFederation:
        """Remove client ``a``; weights n_i / sum_{j != a} n_j (or the remaining
        explicit weights renormalised)."""
        if self.n_clients < 2:
            raise InvalidProblemError("cannot remove the only client of a federation")
        if not (isinstance(a, (int, np.integer)) and 0 <= a < self.n_clients):
            raise InvalidProblemError(f"client index must be an integer in [0, {self.n_clients}), got {a!r}")
        keep = np.delete(np.arange(self.n_clients), a)
        w = self.weights[keep] if self._explicit_weights else None
        out = self._from_data(self._train.subset(keep), None if self._test is None else self._test.subset(keep), w)
        out._batch_size = self._batch_size
        if self._noise_sigma2 is not None:
            out._noise_sigma2 = self._noise_sigma2[keep].copy()
        return out

    def with_client(self, other: Federation, *, weight: float | None = None) -> NeuralFederation:
        """Append the clients of ``other`` (same architecture and loss).  Weights
        become n_i / n_total, or with ``weight`` in (0, 1) the newcomers get
        total weight ``weight`` and the old weights are scaled by 1 - weight."""
        if not isinstance(other, NeuralFederation):
            raise InvalidProblemError(f"other must be a NeuralFederation, got {type(other).__name__}")
        if other.model is not self.model and (other.dim != self.dim or repr(other.model) != repr(self.model)):
            raise InvalidProblemError(f"other has model {other.model!r}, expected {self.model!r}")
        if other.reg != self.reg:
            raise InvalidProblemError(f"other has reg={other.reg}, expected {self.reg}")
        if type(other.loss_fn) is not type(self.loss_fn):
            raise InvalidProblemError(f"other uses loss {other.loss_fn!r}, expected {self.loss_fn!r}")
        weights = None
        if weight is not None:
            w = float(weight)
            if not 0 < w < 1:
                raise InvalidProblemError(f"weight must lie in (0, 1), got {weight!r}")
            weights = np.concatenate([self.weights * (1 - w), other.weights * w])
        elif self._explicit_weights or other._explicit_weights:
            raise InvalidProblemError("with_client on federations with explicit weights needs weight=")
        u1, t1 = self._train.unpadded()
        u2, t2 = other._train.unpadded()
        kw: dict[str, Any] = {}
        if self._test is not None and other._test is not None:
            a1, b1 = self._test.unpadded()
            a2, b2 = other._test.unpadded()
            kw = {"test_inputs": a1 + a2, "test_targets": b1 + b2}
        out = NeuralFederation(self.model, self.loss_fn, u1 + u2, t1 + t2, weights=weights, reg=self.reg, **kw)
        return self._copy_oracle_to(out, out.n_clients)
