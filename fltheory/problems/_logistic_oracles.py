"""Batched logistic-regression oracles on padded per-client data.

Every function takes

* ``A``  (m, n, f): the features of the rows of m clients, padding rows zero;
* ``y``  (m, n): labels (binary: +-1; multinomial: class index), padding 0;
* ``rw`` (m, n): row weights, mask / n_i for client oracles (zero on padding);
* ``X``  (m, D): one parameter row per client; D = f (binary) or f*C.

and sums row terms weighted by ``rw``, so a client's objective is the
mean over its n_i rows, and pooling all clients of a federation in one row
block with rw = p_i / n_i gives the global objective F = sum_i p_i f_i.

Binary (docs/theory/problems.md): l(x; a, y) = log(1 + exp(-y a^T x)) computed as
logaddexp(0, -z); gradient -y s(-z) a; Hessian s(z) s(-z) a a^T, with s the
logistic sigmoid (scipy.special.expit, stable for |z| up to 1e4 and beyond).

Multinomial: the parameter is the row-major flattening of W in R^{f x C},
x[j*C + c] = W[j, c]; logits z = W^T a; l = logsumexp(z) - z_y;
gradient a (p - e_y)^T with p = softmax(z); Hessian (a a^T) kron (diag p - p p^T)
in the same (j, c) ordering.  The ridge term (reg/2)||x||^2 is added by the
caller's ``reg`` argument to loss, gradient and Hessian only.
"""

from __future__ import annotations

import threading

import numpy as np
from scipy.special import expit, log_softmax

from ..errors import InvalidProblemError


def _matvec(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """(m, n, f) @ (m, f) -> (m, n)."""
    return np.matmul(A, X[:, :, None])[:, :, 0]


def _rmatvec(A: np.ndarray, R: np.ndarray) -> np.ndarray:
    """A^T R per client: (m, n, f), (m, n) -> (m, f)."""
    return np.matmul(R[:, None, :], A)[:, 0, :]


# ---------------------------------------------------------------- binary
def binary_loss(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float) -> np.ndarray:
    z = y * _matvec(A, X)
    out = np.einsum("mn,mn->m", rw, np.logaddexp(0.0, -z))
    return out + 0.5 * reg * np.einsum("md,md->m", X, X) if reg else out   # no 0 * inf at huge x


def binary_coef(A: np.ndarray, y: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row gradient coefficients -y s(-y a^T x), and the margins y a^T x."""
    z = y * _matvec(A, X)
    return -y * expit(-z), z


def binary_grad(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float) -> np.ndarray:
    coef, _ = binary_coef(A, y, X)
    return _rmatvec(A, rw * coef) + reg * X


def binary_loss_grad(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float) -> np.ndarray:
    """Loss and gradient from one product with A -> (m, 1 + f): column 0 is
    :func:`binary_loss`, columns 1: are :func:`binary_grad` (the same operations,
    so the same numbers; the margins a^T x are computed once)."""
    z = y * _matvec(A, X)
    loss = np.einsum("mn,mn->m", rw, np.logaddexp(0.0, -z))
    if reg:
        loss = loss + 0.5 * reg * np.einsum("md,md->m", X, X)
    out = np.empty((X.shape[0], 1 + X.shape[1]))
    out[:, 0] = loss
    out[:, 1:] = _rmatvec(A, rw * (-y * expit(-z))) + reg * X
    return out


def binary_curvature(A: np.ndarray, y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """s(z) s(-z) per row (the same for z and -z, so labels drop out)."""
    z = _matvec(A, X)
    return expit(z) * expit(-z)


def binary_hess(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float) -> np.ndarray:
    w = rw * binary_curvature(A, y, X)
    H = np.matmul(np.swapaxes(A * w[:, :, None], 1, 2), A)
    if reg:
        H += reg * np.eye(A.shape[2])
    return H


def binary_fisher_diag(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray) -> np.ndarray:
    """True Fisher diagonal (1/n) sum_j s(z_j) s(-z_j) a_j^2 (no ridge)."""
    return _rmatvec(A * A, rw * binary_curvature(A, y, X))


def binary_empirical_fisher_diag(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray) -> np.ndarray:
    """sum_j rw_j (y_j s(-z_j))^2 a_j^2 (data-term per-sample gradients squared) -> (m, f)."""
    coef, _ = binary_coef(A, y, X)
    return _rmatvec(A * A, rw * coef * coef)


def binary_per_sample(A: np.ndarray, y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Per-row data gradients -y_j s(-z_j) a_j -> (m, n, f) (zero on padding)."""
    coef, _ = binary_coef(A, y, X)
    return coef[:, :, None] * A


# ----------------------------------------------------------- multinomial
def _logits(A: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    m, n, f = A.shape
    return np.matmul(A, X.reshape(m, f, C))            # (m, n, C)


def _softmax(Z: np.ndarray) -> np.ndarray:
    """softmax over the last axis, computed in place in ``Z`` (a fresh temporary):
    exp(z - max z) / sum exp(z - max z), so large logits neither overflow nor warn.
    Same formula as scipy.special.softmax without its per-call dispatch overhead,
    which dominated the small per-bucket calls."""
    Z -= Z.max(axis=-1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=-1, keepdims=True)
    return Z


def multi_loss(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float, C: int) -> np.ndarray:
    """sum_j rw_j (logsumexp(z_j) - z_{j, y_j}) + (reg/2)||x||^2 -> (m,), on
    class-major logits (m, C, n) as in :func:`multi_grad`; logsumexp is
    max_c z + log sum_c exp(z - max_c z)."""
    m, n, f = A.shape
    Z = np.matmul(np.swapaxes(X.reshape(m, f, C), 1, 2), np.swapaxes(A, 1, 2))   # (m, C, n)
    picked = np.take_along_axis(Z, y[:, None, :].astype(np.int64, copy=False), axis=1)[:, 0, :]
    top = Z.max(axis=1)
    Z -= top[:, None, :]
    np.exp(Z, out=Z)
    rows = (top - picked) + np.log(Z.sum(axis=1))     # margin first: exact at large logits
    out = np.einsum("mn,mn->m", rw, rows)
    return out + 0.5 * reg * np.einsum("md,md->m", X, X) if reg else out   # no 0 * inf at huge x


def multi_residual(A: np.ndarray, y: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    """p - e_y per row -> (m, n, C) (padding rows, label 0, give p - e_0)."""
    R = _softmax(_logits(A, X, C))
    flat = R.reshape(-1)                                   # a view: R is a fresh contiguous array
    flat[np.arange(y.size) * C + y.reshape(-1).astype(np.int64, copy=False)] -= 1.0
    return R


def label_positions(y: np.ndarray, C: int) -> np.ndarray:
    """Flat positions of the labels in class-major logits (m, C, n): entry
    (i, y_ij, j) for every row j of every client i -> (m n,)."""
    m, n = y.shape
    return (np.arange(m)[:, None] * (C * n) + y.astype(np.int64, copy=False) * n + np.arange(n)).reshape(-1)


def multi_grad(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float, C: int,
               at: np.ndarray | None = None) -> np.ndarray:
    """sum_j rw_j a_j (p_j - e_yj)^T + reg W, flattened (j, c) -> (m, f*C).

    Works on class-major logits Z^T = W^T A^T (m, C, n): the max / sum over
    classes then run over the outer axis (contiguous rows of n, vectorised)
    instead of over a short last axis, and G = A^T (rw (.) (P - E_y)) straight in the (f, C) layout.
    ``at``: :func:`label_positions` of ``y`` when the caller has them."""
    m, n, f = A.shape
    Z = np.matmul(np.swapaxes(X.reshape(m, f, C), 1, 2), np.swapaxes(A, 1, 2))   # (m, C, n)
    Z -= Z.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z *= rw[:, None, :] / Z.sum(axis=1, keepdims=True)                           # rw_j p_jc
    flat = Z.reshape(-1)                                   # a view: Z is a fresh contiguous array
    flat[label_positions(y, C) if at is None else at] -= rw.reshape(-1)            # - rw_j e_yj
    G = np.matmul(np.swapaxes(A, 1, 2), np.swapaxes(Z, 1, 2)).reshape(m, f * C)    # A^T (.), (f, C) order
    if reg:
        G += reg * X
    return G


def multi_loss_grad(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float, C: int
                    ) -> np.ndarray:
    """Loss and gradient from one logit product -> (m, 1 + f*C): column 0 is
    :func:`multi_loss`, columns 1: are :func:`multi_grad` (the same operations on
    the same logits, so the same numbers; the logits, their maximum over classes
    and the exponentials are computed once instead of twice)."""
    m, n, f = A.shape
    Z = np.matmul(np.swapaxes(X.reshape(m, f, C), 1, 2), np.swapaxes(A, 1, 2))   # (m, C, n)
    picked = np.take_along_axis(Z, y[:, None, :].astype(np.int64, copy=False), axis=1)[:, 0, :]
    top = Z.max(axis=1)
    Z -= top[:, None, :]
    np.exp(Z, out=Z)
    total = Z.sum(axis=1)
    loss = np.einsum("mn,mn->m", rw, (top - picked) + np.log(total))
    if reg:
        loss = loss + 0.5 * reg * np.einsum("md,md->m", X, X)
    Z *= rw[:, None, :] / total[:, None, :]                                      # rw_j p_jc
    flat = Z.reshape(-1)
    flat[label_positions(y, C)] -= rw.reshape(-1)                                 # - rw_j e_yj
    out = np.empty((m, 1 + f * C))
    out[:, 0] = loss
    G = np.matmul(np.swapaxes(A, 1, 2), np.swapaxes(Z, 1, 2)).reshape(m, f * C)    # as in multi_grad
    if reg:
        G += reg * X
    out[:, 1:] = G
    return out


_BLOCK_FLOATS = 4_000_000   # temporaries of at most ~32 MB per row block


def multi_hess(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, reg: float, C: int) -> np.ndarray:
    """sum_j rw_j (a_j a_j^T) kron (diag p_j - p_j p_j^T) + reg I, (j, c) order.

    Rows are processed in blocks (a blocked sum, each block fully vectorized)
    so the (m, rows, f*C) temporaries stay below ~32 MB."""
    m, n, f = A.shape
    P = _softmax(_logits(A, X, C))
    T = np.zeros((m, C, f, f))
    H = np.zeros((m, f * C, f * C))
    step = max(1, _BLOCK_FLOATS // max(1, m * f * C))
    for s in range(0, n, step):
        Ab, Pb, wb = A[:, s:s + step], P[:, s:s + step], rw[:, s:s + step]
        # diagonal-in-class part: T[m, c] = sum_j rw_j p_jc a_j a_j^T
        WP = (wb[:, :, None] * Pb).transpose(0, 2, 1)                      # (m, C, b)
        T += np.matmul(np.swapaxes(Ab[:, None] * WP[:, :, :, None], 2, 3), Ab[:, None])
        # rank-one part: V_j = sqrt(rw_j) a_j kron p_j
        V = (np.sqrt(wb)[:, :, None, None] * Ab[:, :, :, None] * Pb[:, :, None, :]).reshape(m, -1, f * C)
        H -= np.matmul(np.swapaxes(V, 1, 2), V)
    H5 = H.reshape(m, f, C, f, C)
    ar = np.arange(C)
    H5[:, :, ar, :, ar] += T.transpose(1, 0, 2, 3)
    if reg:
        H += reg * np.eye(f * C)
    return H


def multi_fisher_diag(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    """True (softmax) Fisher diagonal sum_j rw_j a_jk^2 p_jc (1 - p_jc) -> (m, f*C)."""
    m, n, f = A.shape
    P = _softmax(_logits(A, X, C))
    F = np.matmul(np.swapaxes(A * A, 1, 2), rw[:, :, None] * P * (1.0 - P))
    return F.reshape(m, f * C)


def multi_per_sample(A: np.ndarray, y: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    """Per-row data gradients a_j (p_j - e_yj)^T flattened -> (m, n, f*C)."""
    m, n, f = A.shape
    R = multi_residual(A, y, X, C)
    return (A[:, :, :, None] * R[:, :, None, :]).reshape(m, n, f * C)


def multi_empirical_fisher_diag(A: np.ndarray, y: np.ndarray, rw: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    """sum_j rw_j (a_jk (p_jc - [y_j = c]))^2 -> (m, f*C)."""
    m, n, f = A.shape
    R = multi_residual(A, y, X, C)
    F = np.matmul(np.swapaxes(A * A, 1, 2), rw[:, :, None] * R * R)
    return F.reshape(m, f * C)


def multi_log_probs(A: np.ndarray, X: np.ndarray, C: int) -> np.ndarray:
    """log softmax of the logits -> (m, n, C) (used by predictions)."""
    return log_softmax(_logits(A, X, C), axis=2)


_TRANSPOSED_BYTES = 64 * 2 ** 20   # SoftmaxGroupsGrad keeps a transposed copy of its features up to this size


class SoftmaxGroupsGrad:
    """:func:`multi_grad` of several size groups with one class-major logit buffer.

    ``order`` lists, for the groups' clients stacked in group order, their
    rows in the caller's point array of ``n_points`` rows (group g holds stacked rows
    o_g .. o_g + m_g - 1).  Each call gathers the points in that order into
    a buffer, writes the logits of every group by its matmul straight into
    column ranges of one (C, R) buffer (R = the groups' padded rows), runs the
    softmax (max over classes, shift, exp, sum, scaling by rw_j / sum, minus
    rw_j at the label) as a handful of calls over all groups at once instead
    of once per group, lets the second product read its group's columns in
    place and write its rows of the result, adds the ridge term to all rows
    at once and scatters the rows back.  The buffers and their per-group views
    are made once, so a call costs two matmul calls per group plus about ten
    calls in all.  Every entry sees the same operations in the same order as
    in :func:`multi_grad` (maximum and class sums run over the outer axis, one
    class after the other), so the gradients are the same bits.  A group
    padded to one row is left to :func:`multi_grad`: there numpy sums the C
    logits of a row along a contiguous axis with its pairwise kernel, whose
    order differs.  Calls are serialised by a lock (the buffers are shared)."""

    def __init__(self, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]], C: int,
                 order: np.ndarray, n_points: int) -> None:
        self.C = C
        self.order = order
        self.rows_needed = int(order.max()) + 1 if order.size else 0           # X must have these rows
        self.identity = bool(np.array_equal(order, np.arange(n_points)))      # every row, in order
        M = order.shape[0]
        D = groups[0][0].shape[2] * C if groups else 0
        self.X = np.empty((M, D))                           # gathered points
        self.G = np.empty((M, D))                           # gradients in stacked order
        starts = np.concatenate([[0], np.cumsum([g[0].shape[0] for g in groups])]).astype(np.int64)
        rows = [(int(starts[j]), int(starts[j + 1])) for j in range(len(groups))]
        fused = [j for j, (A, _, _) in enumerate(groups) if A.shape[1] > 1]
        self.alone = [(rows[j], groups[j], label_positions(groups[j][1], C))
                      for j in range(len(groups)) if groups[j][0].shape[1] <= 1]
        sizes = [groups[j][0].shape[0] * groups[j][0].shape[1] for j in fused]
        cols = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        R = int(cols[-1])
        self.R = R
        self.Z = np.empty((C, R))
        self.rw = np.concatenate([groups[j][2].reshape(-1) for j in fused]) if R else np.zeros(0)
        y = np.concatenate([groups[j][1].reshape(-1) for j in fused]) if R else np.zeros(0)
        self.at = y.astype(np.int64) * R + np.arange(R)        # label entries of the (C, R) buffer
        # per fused group: W^T (m, C, f) and A^T (m, f, k) (a contiguous copy, see below) for the logits,
        # A^T (a view), V (m, C, k) their columns of Z, V^T (m, k, C) and the result rows (m, f, C)
        # for the second product
        self.products = []
        self.loss_rows = [(rows[j], np.swapaxes(groups[j][0], 1, 2), int(c))
                          for j, c in zip(fused, cols[:-1], strict=True)]
        # the logits read a contiguous copy of A^T (m, f, k) while the copies of all groups stay within
        # _TRANSPOSED_BYTES: the same products (same bits) about 1.4x faster than through the view of A
        # (Synthetic(1,1): 190 -> 130 us per step); the second product reads A itself
        copy_t = 8 * sum(A.size for A, _, _ in groups) <= _TRANSPOSED_BYTES
        for j, c in zip(fused, cols[:-1], strict=True):
            A = groups[j][0]
            (a, b), (m, k, f) = rows[j], A.shape
            V = self.Z[:, c:c + m * k].reshape(C, m, k).transpose(1, 0, 2)
            At = np.swapaxes(A, 1, 2)
            self.products.append((np.swapaxes(self.X[a:b].reshape(m, f, C), 1, 2),
                                  np.ascontiguousarray(At) if copy_t else At, At, V,
                                  V.transpose(0, 2, 1), self.G[a:b].reshape(m, f, C)))
        # per-call temporaries made once: the class maximum and class sum of every column, the ridge term
        self.top = np.empty(R)
        self.total = np.empty(R)
        self.ridge = np.empty((M, D))
        self._lock = threading.Lock()

    def __call__(self, X: np.ndarray, reg: float, out: np.ndarray, loss_out: np.ndarray | None = None) -> None:
        """Gradients at the caller's points X (m, f*C) written into the listed rows of
        ``out``; with ``loss_out`` (m,) also the losses of :func:`multi_loss` (the same
        operations on the same logits: margin top - z_y first, then the log of the
        class sum, the rw-weighted row sum per client, then the ridge term)."""
        if X.ndim != 2 or X.shape[0] < self.rows_needed:
            # checked here: the gather below clips positions (it would silently repeat the last row)
            raise InvalidProblemError(f"the bound softmax gradient needs points of shape (>= {self.rows_needed}, "
                                      f"{self.X.shape[1]}), got shape {X.shape}")
        with self._lock:
            # mode="clip": the positions are valid (checked above), and numpy buffers ``out`` in the
            # default mode (2.5x slower)
            np.take(X, self.order, axis=0, out=self.X, mode="clip")
            Z = self.Z
            for Wt, At_first, _, V, _, _ in self.products:
                np.matmul(Wt, At_first, out=V)
            rows = None
            if self.R:
                top, total = self.top, self.total
                np.maximum.reduce(Z, axis=0, out=top)                                # Z.max(axis=0)
                if loss_out is not None:
                    rows = top - Z.reshape(-1)[self.at]                              # top - z_y
                Z -= top
                np.exp(Z, out=Z)
                np.add.reduce(Z, axis=0, out=total)                                  # Z.sum(axis=0)
                if rows is not None:
                    rows += np.log(total)
                Z *= np.divide(self.rw, total, out=total)                            # rw_j p_jc
                Z.reshape(-1)[self.at] -= self.rw                                    # - rw_j e_yj
            for _, _, At, _, Vt, G in self.products:
                np.matmul(At, Vt, out=G)
            if reg:
                self.G += np.multiply(self.X, reg, out=self.ridge)                   # + reg x
            losses = np.empty(self.X.shape[0]) if loss_out is not None else None
            for (a, b), (A, y, rw), at in self.alone:
                if losses is None:
                    self.G[a:b] = multi_grad(A, y, rw, self.X[a:b], reg, C=self.C, at=at)
                else:
                    both = multi_loss_grad(A, y, rw, self.X[a:b], reg, self.C)
                    losses[a:b], self.G[a:b] = both[:, 0], both[:, 1:]
            if losses is not None and rows is not None:
                for (a, b), At, c in self.loss_rows:
                    m, k = b - a, At.shape[2]
                    per = np.einsum("mn,mn->m", self.rw[c:c + m * k].reshape(m, k), rows[c:c + m * k].reshape(m, k))
                    if reg:
                        Xg = self.X[a:b]
                        per = per + 0.5 * reg * np.einsum("md,md->m", Xg, Xg)
                    losses[a:b] = per
            if self.identity:
                out[...] = self.G
                if loss_out is not None:
                    loss_out[...] = losses
            else:
                out[self.order] = self.G
                if loss_out is not None:
                    loss_out[self.order] = losses
