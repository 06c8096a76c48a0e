"""Objective composition: the extra local terms every seed algorithm adds to f_i.

All smooth penalties of the seed algorithms are diagonal quadratics plus
linear terms, so a local objective of the m participating rows is

    h_r(y) = f_{i_r}(y) + 1/2 y^T diag(D_r) y - b_r^T y + l1_r ||y - z_r||_1,

with gradient (a subgradient for the l1 term) g_r(y) + D_r * y - b_r
+ l1_r sign(y - z_r):

=====================  ==========================  ==============================
term                   D                           b
=====================  ==========================  ==============================
proximal mu/2||y-c||^2 mu                          mu c
Fisher elastic (EFL)   lambda U                    lambda V
FedCurv alpha sum_j    2 alpha sum_j I_j           2 alpha sum_j I_j * w_j
FedDyn                 alpha                       grad_k + alpha x
SCAFFOLD correction    0                           -(c - c_i)
elastic net l2 part    lambda_2                    lambda_2 x
=====================  ==========================  ==============================

``LocalObjective`` holds (D, b, l1, z) and adds with ``+``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidProblemError

__all__ = ["LocalObjective"]


def _shared_rows(x: np.ndarray, m: int) -> np.ndarray:
    """``np.broadcast_to(x, (m, d))`` for a 1-D array x: the read-only (m, d) view whose
    every row is x (row stride 0), built directly for a contiguous float64 x (about half
    the cost of ``broadcast_to``, which rounds call several times)."""
    if x.ndim == 1 and x.dtype == np.float64 and x.flags.c_contiguous and x.size and m > 0:
        view = np.ndarray((m, x.shape[0]), dtype=np.float64, buffer=x, strides=(0, 8))
        view.flags.writeable = False
        return view
    return np.broadcast_to(x, (m, *x.shape))


def _rows(a: Any, m: int, d: int) -> np.ndarray | None:
    if a is None:
        return None
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return np.full((m, d), float(a))
    if a.ndim == 1:
        if a.shape[0] == m:
            return np.repeat(a[:, None], d, axis=1)
        if a.shape[0] == d:
            return np.broadcast_to(a, (m, d)).copy()
    if a.shape != (m, d):
        raise InvalidProblemError(f"local term must broadcast to ({m}, {d}), got shape {a.shape}")
    return a


@dataclass(frozen=True)
class LocalObjective:
    """Extra local terms 1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 for m rows.

    ``D`` and ``b`` are (m, d) arrays or ``None`` (zero); ``l1`` is a scalar or
    (m,) array, ``z`` (m, d) its centre.  Build with the class methods.
    """

    D: np.ndarray | None = None
    b: np.ndarray | None = None
    l1: np.ndarray | None = None
    z: np.ndarray | None = None

    @classmethod
    def zero(cls) -> LocalObjective:
        return cls()

    @classmethod
    def proximal(cls, mu: Any, center: np.ndarray) -> LocalObjective:
        """(mu/2) ||y - center||^2; ``mu`` scalar or (m,).

        A scalar ``mu`` with one centre row shared by all rows (``center`` a
        broadcast view, stride 0 along the rows, as the received model x of
        FedProx) gives D and b as read-only broadcast views of mu and mu * c:
        the same numbers as the full arrays, without m copies of them."""
        m, d = center.shape
        mu_arr = np.asarray(mu, dtype=np.float64)
        if mu_arr.ndim == 0 and m > 1 and center.strides[0] == 0:
            # D: the read-only (m, d) view of the one number (what np.broadcast_to(mu_arr, (m, d))
            # gives, built directly: broadcast_to costs ~2 us a round)
            D = np.ndarray((m, d), dtype=np.float64, buffer=mu_arr, strides=(0, 0))
            D.flags.writeable = False
            return cls(D=D, b=_shared_rows(mu_arr * center[0], m))
        D = _rows(mu, m, d)
        return cls(D=D, b=D * center)

    @classmethod
    def diagonal(cls, D: np.ndarray, b: np.ndarray) -> LocalObjective:
        """1/2 y^T diag(D) y - b^T y."""
        return cls(D=np.asarray(D, dtype=np.float64), b=np.asarray(b, dtype=np.float64))

    @classmethod
    def linear(cls, b: np.ndarray) -> LocalObjective:
        """-b^T y (gradient shift -b)."""
        return cls(b=np.asarray(b, dtype=np.float64))

    @classmethod
    def l1_term(cls, lam: Any, center: np.ndarray) -> LocalObjective:
        """lam ||y - center||_1; ``lam`` scalar or (m,)."""
        m = center.shape[0]
        lam_arr = np.broadcast_to(np.asarray(lam, dtype=np.float64), (m,)).copy()
        return cls(l1=lam_arr, z=np.asarray(center, dtype=np.float64))

    def __add__(self, other: LocalObjective) -> LocalObjective:
        def add(a, b):
            if a is None:
                return b
            if b is None:
                return a
            return a + b
        if self.l1 is not None and other.l1 is not None:
            raise InvalidProblemError("a local objective can hold one l1 term")
        return LocalObjective(D=add(self.D, other.D), b=add(self.b, other.b),
                              l1=self.l1 if self.l1 is not None else other.l1,
                              z=self.z if self.z is not None else other.z)

    def take(self, rows: np.ndarray | slice) -> LocalObjective:
        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]
        return LocalObjective(D=pick(self.D), b=pick(self.b), l1=pick(self.l1), z=pick(self.z))

    @property
    def has_l1(self) -> bool:
        return self.l1 is not None and bool(np.any(self.l1 != 0))

    def smooth_grad(self, Y: np.ndarray) -> np.ndarray | None:
        """D * y - b, or None when both are absent."""
        if self.D is None and self.b is None:
            return None
        g = np.zeros_like(Y) if self.D is None else self.D * Y
        if self.b is not None:
            g -= self.b
        return g

    def grad(self, Y: np.ndarray) -> np.ndarray | None:
        """Gradient of the extra terms; l1 contributes l1 * sign(y - z)."""
        g = self.smooth_grad(Y)
        if self.has_l1 and self.l1 is not None:
            s = self.l1[:, None] * np.sign(Y - self.z)
            g = s if g is None else g + s
        return g

    def value(self, Y: np.ndarray) -> np.ndarray:
        """Value of the extra terms per row -> (m,)."""
        v = np.zeros(Y.shape[0])
        if self.D is not None:
            v += 0.5 * np.einsum("md,md->m", self.D * Y, Y)
        if self.b is not None:
            v -= np.einsum("md,md->m", self.b, Y)
        if self.has_l1:
            v += self.l1 * np.abs(Y - self.z).sum(axis=1)
        return v
