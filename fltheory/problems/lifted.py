"""p independent copies of a quadratic federation side by side (block products of round maps).

For a quadratic federation with clients f_i(x) = 1/2 x^T H_i x - e_i^T x + c_i
on R^d, :class:`LiftedQuadraticFederation` is the federation on R^{p d} whose
client i is

    f_i^(p)(y) = sum_{k=1}^{p} f_i(y_k),   y = (y_1, ..., y_p),  y_k = y[k d:(k + 1) d],

so grad f_i^(p)(y) = (H_i y_1 - e_i, ..., H_i y_p - e_i) and its Hessian is
block-diagonal with p copies of H_i.  An algorithm whose round treats every
coordinate through the oracles, sums over clients and per-client scalars
(FedAvg, FedProx, SCAFFOLD, FedDyn, FedCurv, ...) then runs p independent
problems in one round: the exact theory applies the linear part of a round
map to p vectors at once (``fltheory.theory.matrix_free``), reading each
Hessian once per local step for all p copies (a (p, d) x (d, d) product
instead of p matrix-vector products).  Whether an algorithm really keeps the
copies apart is checked by the caller against single rounds.

Obtained through the federation hook ``Federation.lifted(p)``; only the exact
oracle is provided (``is_stochastic`` is False).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..aliases import ClientSelection
from ..errors import InvalidProblemError
from .base import Federation, finite_output
from .constants import CurvatureBounds

if TYPE_CHECKING:
    from .quadratic import QuadraticFederation

__all__ = ["LiftedQuadraticFederation"]


class LiftedQuadraticFederation(Federation):
    """p copies of a :class:`~fltheory.problems.quadratic.QuadraticFederation` in R^{p d}
    (module docstring).  Shares (does not copy) the Hessians and linear terms."""

    has_constant_hessians = True

    def __init__(self, base: QuadraticFederation, copies: int) -> None:
        if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 1:
            raise InvalidProblemError(f"copies must be an integer >= 1, got {copies!r}")
        self.base = base
        self.copies = int(copies)
        self.H = base.H
        self.e = base.e
        self.offsets = base.offsets
        self.base_dim = base.dim
        self.n_clients = base.n_clients
        self.dim = base.dim * self.copies
        self.weights = base.weights
        self.n_samples = base.n_samples
        self._first = 0          # index in ``base`` of client 0 (client_block views)

    def _H(self, idx: np.ndarray) -> np.ndarray:
        return self.H if self._is_all(idx) else self.H[idx]

    def _e(self, idx: np.ndarray) -> np.ndarray:
        return self.e if self._is_all(idx) else self.e[idx]

    def _split(self, X: np.ndarray) -> np.ndarray:
        """(m, p d) -> (m, p, d) view: copy k of row r is Y[r, k]."""
        return X.reshape(X.shape[0], self.copies, self.base_dim)

    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """sum_k f_i(y_k) for each listed client -> (m,)."""
        idx = self._clients(clients)
        Y = self._split(np.ascontiguousarray(self._points(X, idx.shape[0])))
        with np.errstate(over="ignore", invalid="ignore"):
            HY = np.matmul(Y, self._H(idx))
            out = (0.5 * np.einsum("mkd,mkd->m", Y, HY) - np.einsum("md,mkd->m", self._e(idx), Y)
                   + self.copies * self.offsets[idx])
        return finite_output("client loss", out)

    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """(H_i y_k - e_i)_k for each listed client -> (m, p d): rows y_k^T H_i (H_i symmetric),
        one stacked (p, d) x (d, d) product per client."""
        idx = self._clients(clients)
        m = idx.shape[0]
        Y = self._split(np.ascontiguousarray(self._points(X, m)))
        with np.errstate(over="ignore", invalid="ignore"):
            G = np.matmul(Y, self._H(idx))
            G -= self._e(idx)[:, None, :]
        return finite_output("client gradient", G.reshape(m, self.dim))

    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """Block-diagonal diag(H_i, ..., H_i) -> (m, p d, p d)."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        d = self.base_dim
        out = np.zeros((idx.shape[0], self.dim, self.dim))
        for k in range(self.copies):                       # p blocks (not a loop over clients)
            out[:, k * d:(k + 1) * d, k * d:(k + 1) * d] = self.H[idx]
        return out

    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """The base federation's Fisher diagonal (independent of x) repeated for every copy."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        diag = self.base.fisher_diag(np.zeros(self.base_dim), idx + self._first)
        return np.tile(diag, (1, self.copies))

    def optimum(self) -> np.ndarray:
        """(x*, ..., x*)."""
        return np.tile(self.base.optimum(), self.copies)

    def client_optima(self) -> np.ndarray:
        """(N, p d): (x_i*, ..., x_i*) per client."""
        return np.tile(self.base.client_optima(), (1, self.copies))

    def without_client(self, a: int) -> Federation:
        raise InvalidProblemError("a lifted federation is a computational view: objective shifts "
                                  "are taken on the base federation")

    def with_client(self, other: Federation, *, weight: float | None = None) -> Federation:
        raise InvalidProblemError("a lifted federation is a computational view: objective shifts "
                                  "are taken on the base federation")

    # ------------------------------------------------------------------ hooks
    def shifted_solve(self, clients: np.ndarray, D: np.ndarray, b: np.ndarray, Y0: np.ndarray, *,
                      tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
        """(H_i + diag(D_rk)) y_k = e_i + b_rk for every copy k: one factorisation per row
        with p right-hand sides when the shift is the same in every copy, else p solves."""
        m, d, p = clients.shape[0], self.base_dim, self.copies
        D3 = np.asarray(D, dtype=np.float64).reshape(m, p, d)
        B3 = (np.asarray(b, dtype=np.float64).reshape(m, p, d) + self.e[clients][:, None, :])
        eye = np.eye(d)
        if np.array_equal(D3, np.broadcast_to(D3[:, :1], D3.shape)):
            A = self.H[clients] + D3[:, 0, :, None] * eye
            out = np.linalg.solve(A, B3.transpose(0, 2, 1)).transpose(0, 2, 1)
        else:
            out = np.empty((m, p, d))
            for k in range(p):                                 # copies, not clients
                A = self.H[clients] + D3[:, k, :, None] * eye
                out[:, k] = np.linalg.solve(A, B3[:, k, :, None])[:, :, 0]
        return out.reshape(m, self.dim)

    def smoothness_bounds(self, clients: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """L_i of the base client (the copies are decoupled)."""
        return self.base.smoothness_bounds(clients + self._first, np.zeros((clients.shape[0], self.base_dim)))

    def strong_convexity(self) -> float | None:
        return self.base.strong_convexity()

    def curvature_bounds(self) -> CurvatureBounds | None:
        """The base federation's constants (the Hessians are block copies of its own)."""
        return self.base.curvature_bounds()

    def client_block(self, start: int, stop: int) -> LiftedQuadraticFederation:
        """A shallow copy viewing clients start..stop-1 (cache-blocked local steps)."""
        view = copy.copy(self)
        view.H = self.H[start:stop]
        view.e = self.e[start:stop]
        view.offsets = self.offsets[start:stop]
        view.n_clients = stop - start
        view._first = self._first + start
        return view

    def client_data_bytes(self) -> int:
        """8 d^2: a row reads its client's Hessian once for all p copies."""
        return 8 * self.base_dim * self.base_dim

    def __repr__(self) -> str:
        return (f"LiftedQuadraticFederation(n_clients={self.n_clients}, dim={self.base_dim}, "
                f"copies={self.copies})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (LiftedQuadraticFederation, (self.base, self.copies))
