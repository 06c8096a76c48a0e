"""Quadratic clients with structured Hessians H_i = diag(D_i) + U_i U_i^T.

f_i(x) = 1/2 x^T H_i x - e_i^T x + c_i with D_i > 0 (d,) and U_i (d, r); rank
r = 0 gives diagonal Hessians.  Memory is O(N d r): no oracle, hook, round,
round map or matrix-free theory routine forms a d x d matrix.  Only
``client_hess``, ``hess`` and ``to_dense`` return dense matrices (their
contracts), used by the generic ``constants()`` formulas (budgeted, see
:meth:`StructuredQuadraticFederation.constants`), the reference loops and the
exact moments, whose d x d second moments are dense anyway.  Same formulas as
:class:`~fltheory.problems.QuadraticFederation` (grad f_i = H_i x - e_i,
x* = Hbar^{-1} ebar with Hbar = sum_i p_i H_i, ebar = sum_i p_i e_i), evaluated
through the structure (``fltheory.problems._structured_linalg``):

* products H_i x = D_i * x + U_i (U_i^T x), O(d r) per client;
* solves (client optima, FedProx/FedDyn/EFL exact local steps) by the
  Woodbury identity with an r x r capacitance, iteratively refined;
* client extremes L_i, mu_i exact (to a few ulp) by bisection on Sylvester's
  inertia count with an r x r Schur complement;
* Hbar = diag(Dbar) + W W^T with W = [sqrt(p_1) U_1, ..., sqrt(p_N) U_N] of
  total rank R = N r: optimum by Woodbury (R x R capacitance) when
  R <= :data:`WOODBURY_MAX_RANK`, else preconditioned conjugate gradients, then
  mixed-precision iterative refinement (as for the client optima); L and
  mu exact by the inertia bisection (R x R Schur complement) when
  R^2 d <= :data:`EXACT_EIG_BUDGET`; up to :data:`CERTIFY_EIG_BUDGET`, ARPACK
  Lanczos estimates with brackets certified by the same count and bisected
  (exact, about 20 counts); beyond, certified bounds L >= lambda_max and
  mu <= lambda_min (``curvature_bounds().exact`` False, as its contract says for
  bounds): the Lanczos values moved out by twice their residual and certified
  by one count each up to :data:`BOUND_EIG_BUDGET`, else min Dbar and Weyl's
  max Dbar + sum_i p_i ||U_i||^2; the Ritz estimates are in the note.
"""

from __future__ import annotations

import copy
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import finite_array, real_array
from ..aliases import ClientSelection
from ..errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ._structured_linalg import (
    bracketed_extremes,
    count_below,
    extreme_eigenvalues,
    lanczos_extremes,
    matvec,
    woodbury_solve,
)
from .base import client_offsets, Federation, finite_output, normalize_weights
from .constants import CurvatureBounds, ProblemConstants
from .quadratic import QuadraticFederation
from .structured_constants import diagonal_constants

__all__ = ["StructuredQuadraticFederation"]

#: Largest total rank R = N r of sum_i p_i U_i U_i^T for which the global optimum is
#: solved directly by Woodbury (an R x R capacitance); above, by conjugate gradients.
WOODBURY_MAX_RANK = 512
#: Largest R^2 d for which L and mu of Hbar are computed exactly (about 110 inertia
#: counts with an R x R Schur complement each); above, Lanczos (see CERTIFY_EIG_BUDGET).
EXACT_EIG_BUDGET = 2 ** 27
#: Largest R^2 d for which the Lanczos estimates of L and mu are made exact (brackets
#: certified by the inertia count, then bisected: about 20 counts); above, estimates.
CERTIFY_EIG_BUDGET = 2 ** 30
#: Largest R^2 d for which the certified bounds of the Lanczos route are tightened by one
#: inertia count each (beyond, the bounds min Dbar and Weyl's).
BOUND_EIG_BUDGET = 2 ** 33
#: Relative residual ||ebar - Hbar x|| / ||ebar|| at which conjugate gradients stop.
CG_TOL = 1e-14
#: Largest N d^2 (float64 entries) for which ``constants()`` forms the dense client
#: Hessians that the generic delta, G2 and SCAFFOLD (G, B) formulas need.
DENSE_CONSTANTS_BUDGET = 2 ** 24


class StructuredQuadraticFederation(Federation):
    """N quadratic clients with Hessians H_i = diag(D_i) + U_i U_i^T (memory O(N d r)).

    Parameters
    ----------
    diag : array (N, d)
        Positive diagonals D_i (D_i > 0 makes every H_i positive definite).
    e : array (N, d)
        Linear terms: grad f_i(x) = H_i x - e_i.
    factors : array (N, d, r), optional
        Low-rank factors U_i; None (default) or r = 0 gives diagonal Hessians.
    n_samples, weights, offsets :
        As in :class:`~fltheory.problems.QuadraticFederation`.
    """

    has_constant_hessians = True

    def __init__(self, diag: ArrayLike, e: ArrayLike, factors: ArrayLike | None = None,
                 n_samples: ArrayLike | None = None, weights: ArrayLike | None = None,
                 offsets: ArrayLike | None = None) -> None:
        self._setup(diag, e, factors, n_samples, weights, offsets, owned=False)

    @classmethod
    def _adopt(cls, diag: np.ndarray, e: np.ndarray, V: np.ndarray, *, n_samples: ArrayLike | None = None,
               weights: ArrayLike | None = None, offsets: ArrayLike | None = None) -> StructuredQuadraticFederation:
        """The federation of ``StructuredQuadraticFederation(diag, e, swapaxes(V, 1, 2), ...)``
        storing the caller's (N, r, d) float64 array ``V`` itself (no copy): for generators that
        built V and hold no other reference to it."""
        fed = cls.__new__(cls)
        fed._setup(diag, e, np.swapaxes(V, 1, 2), n_samples, weights, offsets, owned=True)
        return fed

    def _setup(self, diag: ArrayLike, e: ArrayLike, factors: ArrayLike | None, n_samples: ArrayLike | None,
               weights: ArrayLike | None, offsets: ArrayLike | None, *, owned: bool) -> None:
        D = finite_array("diag", diag, ndim=2, copy=not owned)
        e = finite_array("e", e, ndim=2, copy=not owned)
        N, d = D.shape
        if N == 0 or d == 0:
            raise InvalidProblemError(f"diag must have at least one client and dimension, got shape {D.shape}")
        if e.shape != (N, d):
            raise InvalidProblemError(f"e must have shape ({N}, {d}) to match diag {D.shape}, got {e.shape}")
        if np.any(D <= 0):
            i, k = (int(t) for t in np.argwhere(D <= 0)[0])
            raise InvalidProblemError(
                f"diag must be positive (H_i = diag(D_i) + U_i U_i^T positive definite), got diag[{i}, {k}] = "
                f"{D[i, k]!r}")
        if factors is None:
            V = np.zeros((N, 0, d))
        else:
            U = real_array("factors", factors, InvalidProblemError)   # no copy yet
            if U.ndim != 3 or U.shape[:2] != (N, d):
                raise InvalidProblemError(f"factors must have shape ({N}, {d}, r), got {U.shape}")
            # one copy, transposed to (N, r, d) (rows are the columns of U_i): construction peaks at
            # the caller's array plus the stored one (and a boolean mask of 1/8 of its size)
            V = np.ascontiguousarray(np.swapaxes(U, 1, 2), dtype=np.float64)
            if not owned and np.may_share_memory(V, U):            # the caller's array: keep a private copy
                V = V.copy()
            if not np.all(np.isfinite(V)):
                i, k, j = (int(t) for t in np.argwhere(~np.isfinite(V))[0])
                raise InvalidProblemError(f"factors contains a non-finite value {V[i, k, j]!r} at index "
                                          f"({i}, {j}, {k})")
        with np.errstate(over="ignore"):
            scale = D.max(axis=1) + np.einsum("nrd,nrd->n", V, V)     # >= ||H_i||_2
        if not np.all(np.isfinite(scale)):
            i = int(np.argmin(np.isfinite(scale)))
            raise InvalidProblemError(
                f"H[{i}] = diag(D_{i}) + U_{i} U_{i}^T overflows float64 (max diag + ||U_{i}||_F^2 = "
                f"{float(scale[i])!r}); rescale the problem")
        self.diag = D
        self.e = e
        self._V = V
        self.n_clients, self.dim = N, d
        self.weights, self.n_samples = normalize_weights(N, n_samples, weights)
        self.offsets = client_offsets(N, offsets)
        self._explicit_weights = weights is not None

    # ------------------------------------------------------------ structure
    @property
    def rank(self) -> int:
        """r, the number of columns of every U_i (0: diagonal Hessians)."""
        return int(self._V.shape[1])

    @property
    def factors(self) -> np.ndarray:
        """U_i -> (N, d, r), a read-only view."""
        view = np.swapaxes(self._V, 1, 2)
        view.flags.writeable = False
        return view

    def _rows(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._is_all(idx):
            return self.diag, self._V, self.e
        return self.diag[idx], self._V[idx], self.e[idx]

    # --------------------------------------------------------------- oracles
    def client_loss(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """f_i(x) = 1/2 (sum_k D_ik x_k^2 + ||U_i^T x||^2) - e_i^T x + c_i -> (m,)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        D, V, e = self._rows(idx)
        with np.errstate(over="ignore", invalid="ignore"):
            HX = matvec(D, V, X)
            out = 0.5 * np.einsum("mi,mi->m", X, HX) - np.einsum("mi,mi->m", e, X) + self.offsets[idx]
        return finite_output("client loss", out)

    def client_grad(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """grad f_i(x) = D_i * x + U_i (U_i^T x) - e_i -> (m, d)."""
        idx = self._clients(clients)
        X = self._points(X, idx.shape[0])
        D, V, e = self._rows(idx)
        with np.errstate(over="ignore", invalid="ignore"):
            G = matvec(D, V, X)
            G -= e
        return finite_output("client gradient", G)

    def client_hvp(self, X: ArrayLike, V: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """H_i v_r = D_i * v_r + U_i (U_i^T v_r) (independent of X) -> (m, d)."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        Vr = self._points(V, idx.shape[0])
        D, F, _ = self._rows(idx)
        with np.errstate(over="ignore", invalid="ignore"):
            out = matvec(D, F, np.ascontiguousarray(Vr))
        return finite_output("Hessian-vector product", out)

    def client_hess(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """H_i = diag(D_i) + U_i U_i^T as dense matrices -> (m, d, d) (the oracle's contract;
        rounds, round maps and matrix-free theory never call it)."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        V = self._V[idx]
        H = np.matmul(np.swapaxes(V, 1, 2), V)
        k = np.arange(self.dim)
        H[:, k, k] += self.diag[idx]
        return H

    def fisher_diag(self, X: ArrayLike, clients: ClientSelection = None) -> np.ndarray:
        """True Fisher diagonal of the Gaussian linear model with unit noise variance,
        diag(H_i) = D_i + sum_k U_i[:, k]^2 (independent of x) -> (m, d)."""
        idx = self._clients(clients)
        self._points(X, idx.shape[0])
        return self._hess_diag[idx].copy()

    @cached_property
    def _hess_diag(self) -> np.ndarray:
        return self.diag + np.einsum("nrd,nrd->nd", self._V, self._V)

    # ----------------------------------------------------- global quadratic
    @cached_property
    def _global_parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Dbar, V2, w) with Hbar = diag(Dbar) + V2^T diag(w) V2: V2 (N r, d) stacks
        the rows of every V_i (a view), w repeats p_i r times."""
        N, r, d = self._V.shape
        return self.weights @ self.diag, self._V.reshape(N * r, d), np.repeat(self.weights, r)

    def _hbar_matvec(self, X: np.ndarray) -> np.ndarray:
        """Rows Hbar x_t for X (T, d) -> (T, d): two matrix products with V2."""
        Dbar, V2, w = self._global_parts
        out = X * Dbar
        if V2.shape[0]:
            out += ((X @ V2.T) * w) @ V2
        return out

    def hess(self, x: ArrayLike | None = None) -> np.ndarray:
        """Hbar = sum p_i H_i as a dense (d, d) matrix (the oracle's contract; the
        point is optional: F is quadratic)."""
        if x is not None:
            self._check_point(x)
        Dbar, V2, w = self._global_parts
        H = (V2.T * w) @ V2
        H[np.arange(self.dim), np.arange(self.dim)] += Dbar
        return H

    def loss_and_grad_norm2(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """F(x_t) and ||grad F(x_t)||^2 for all rows at once from F(x) = 1/2 x^T Hbar x -
        ebar^T x + cbar, Hbar x by the structure (O(N d r) per row)."""
        HX = self._hbar_matvec(X)
        ebar, cbar = self.weights @ self.e, float(self.weights @ self.offsets)
        loss = 0.5 * np.einsum("td,td->t", HX, X) - X @ ebar + cbar
        G = HX - ebar
        return loss, np.einsum("td,td->t", G, G)

    # ------------------------------------------------------------ solutions
    def optimum(self) -> np.ndarray:
        """x* = Hbar^{-1} ebar: Woodbury when N r <= WOODBURY_MAX_RANK, else
        Jacobi-preconditioned conjugate gradients to relative residual CG_TOL = 1e-14
        (OutOfRangeError if not reached); both followed by mixed-precision iterative
        refinement (residuals in extended precision), which brings the error to
        about 1e-16 + cond(Hbar) 1e-19 as for the dense QuadraticFederation."""
        return self._optimum.copy()

    @cached_property
    def _optimum(self) -> np.ndarray:
        Dbar, V2, w = self._global_parts
        b = self.weights @ self.e
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if V2.shape[0] <= WOODBURY_MAX_RANK:
                W = (V2 * np.sqrt(w)[:, None])[None]
                x = woodbury_solve(Dbar[None], W, b[None], refine=10, wide=True)[0]
            else:
                x = self._refined_cg_solve(b)
        return finite_output("the global optimum x*", x)

    def _hbar_residual_wide(self, b: np.ndarray, x: np.ndarray) -> np.ndarray:
        """b - Hbar x in ``numpy.longdouble`` (chunks of the stacked factors, so the wide
        copies stay small), rounded to float64 once."""
        Dbar, V2, w = self._global_parts
        wide = np.longdouble
        xw = x.astype(wide)
        acc = b.astype(wide) - Dbar.astype(wide) * xw
        per = max(1, (1 << 22) // max(8 * self.dim, 1))
        for k in range(0, V2.shape[0], per):
            Vc = V2[k:k + per].astype(wide)
            acc -= ((Vc @ xw) * w[k:k + per].astype(wide)) @ Vc
        return acc.astype(np.float64)

    def _refined_cg_solve(self, b: np.ndarray, max_steps: int = 10) -> np.ndarray:
        """Conjugate gradients, then mixed-precision refinement x <- x + CG(b - Hbar x) with
        the residual in extended precision, while the correction keeps halving."""
        x = self._cg_solve(b)
        previous = np.inf
        for _ in range(max_steps):
            r = self._hbar_residual_wide(b, x)
            if not np.any(r):
                break
            dx = self._cg_solve(r)
            size = float(np.max(np.abs(dx)))
            if not size < 0.5 * previous:
                break
            x = x + dx
            previous = size
        return x

    def _cg_solve(self, b: np.ndarray) -> np.ndarray:
        Dbar, V2, w = self._global_parts
        precond = 1.0 / (Dbar + w @ (V2 * V2))
        x = b * precond
        r = b - self._hbar_matvec(x[None])[0]
        z = precond * r
        p = z.copy()
        rz = float(r @ z)
        target = CG_TOL * float(np.linalg.norm(b))
        for _ in range(20 * self.dim + 100):
            if float(np.linalg.norm(r)) <= target:
                return x
            Ap = self._hbar_matvec(p[None])[0]
            alpha = rz / float(p @ Ap)
            x = x + alpha * p
            r = r - alpha * Ap
            z = precond * r
            rz_new = float(r @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        raise OutOfRangeError(
            f"the global optimum x*: conjugate gradients did not reach relative residual {CG_TOL:g} "
            f"(residual {float(np.linalg.norm(r)) / max(float(np.linalg.norm(b)), 1e-300):.3e})")

    def client_optima(self) -> np.ndarray:
        """x_i* = H_i^{-1} e_i -> (N, d) by Woodbury (r x r capacitances) with mixed-precision
        refinement (as :meth:`optimum`)."""
        return self._client_optima.copy()

    @cached_property
    def _client_optima(self) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            X = woodbury_solve(self.diag, self._V, self.e, refine=10, wide=True)
        return finite_output("the client optima x_i*", X)

    # ------------------------------------------------------------ curvature
    @cached_property
    def _client_extremes(self) -> tuple[np.ndarray, np.ndarray]:
        return extreme_eigenvalues(self.diag, self._V)

    @property
    def client_L(self) -> np.ndarray:
        """L_i = lambda_max(H_i) -> (N,), exact to a few ulp (inertia bisection)."""
        return self._client_extremes[1].copy()

    @property
    def client_mu(self) -> np.ndarray:
        """mu_i = lambda_min(H_i) -> (N,), exact to a few ulp (inertia bisection)."""
        return self._client_extremes[0].copy()

    @cached_property
    def _global_extremes(self) -> tuple[float, float, bool, str]:
        Dbar, V2, w = self._global_parts
        R = V2.shape[0]
        if R == 0:
            return float(Dbar.min()), float(Dbar.max()), True, "extremes of the averaged diagonal (exact)"
        W = V2 * np.sqrt(w)[:, None]
        if R * R * self.dim <= EXACT_EIG_BUDGET:
            lo, hi = extreme_eigenvalues(Dbar[None], W[None])
            return float(lo[0]), float(hi[0]), True, (
                "extreme eigenvalues of sum p_i H_i by bisection on Sylvester's inertia count (exact to ~4 ulp)")
        lo_f, hi_f, res = lanczos_extremes(Dbar, W)
        if R * R * self.dim <= CERTIFY_EIG_BUDGET:
            refined = bracketed_extremes(Dbar, W, lo_f, hi_f, res)
            if refined is not None:
                return refined[0], refined[1], True, (
                    "extreme eigenvalues of sum p_i H_i: ARPACK Lanczos estimates, brackets certified by "
                    "Sylvester's inertia count and bisected to ~4 ulp (exact)")
        # Certified bounds: Hbar >= diag(Dbar) gives mu >= min Dbar; Weyl's inequality with
        # ||U_i||_2^2 = lambda_max(U_i^T U_i) gives L <= max Dbar + sum_i p_i ||U_i||_2^2.  Within
        # BOUND_EIG_BUDGET one inertia count each tightens them to the Ritz values -/+ 2 residuals.
        gram = np.matmul(self._V, np.swapaxes(self._V, 1, 2))                  # U_i^T U_i (N, r, r)
        top = float(Dbar.max() + self.weights @ np.linalg.eigvalsh(gram)[:, -1])
        bottom = float(Dbar.min())
        how = "min Dbar and Weyl's max Dbar + sum p_i ||U_i||^2"
        if R * R * self.dim <= BOUND_EIG_BUDGET:
            width = max(2.0 * res, 8 * np.finfo(float).eps * abs(hi_f))
            if hi_f + width < top and count_below(Dbar, W, hi_f + width) == self.dim:
                top = hi_f + width
            if lo_f - width > bottom and count_below(Dbar, W, lo_f - width) == 0:
                bottom = lo_f - width
            how = "Ritz values -/+ 2 residuals where the inertia count certifies them, else " + how
        return bottom, top, False, (
            f"certified bounds mu >= {bottom:.6g} and L <= {top:.6g} of sum p_i H_i ({how}); total rank {R} too "
            f"large for the exact count; ARPACK Lanczos Ritz values mu ~ {lo_f:.6g}, L ~ {hi_f:.6g} (residual "
            f"{res:.1e})")

    @property
    def L(self) -> float:
        """lambda_max(sum p_i H_i), or a certified upper bound of it when
        ``curvature_bounds().exact`` is False (module docstring)."""
        return self._global_extremes[1]

    @property
    def mu(self) -> float:
        """lambda_min(sum p_i H_i), or a certified lower bound of it when
        ``curvature_bounds().exact`` is False (module docstring)."""
        return self._global_extremes[0]

    def constants(self, **kwargs: Any) -> ProblemConstants:
        """:class:`~fltheory.problems.ProblemConstants`, every field exact.

        Diagonal Hessians (rank 0): the coordinate-wise formulas of
        :func:`~fltheory.problems.structured_constants.diagonal_constants` at any size
        (keywords ``radius``, ``center``, ``scaffold_B2``; the estimation keywords
        ``points``, ``rng``, ``n_sphere`` of the generic routine play no role for quadratic
        clients and are accepted and ignored).  Rank r > 0: the generic formulas with this
        federation's exact curvature (:meth:`curvature_bounds`); delta, G2 and the SCAFFOLD
        (G, B) pair then need the dense client Hessians, and above N d^2 =
        DENSE_CONSTANTS_BUDGET entries OutOfRangeError (L, mu, client_L, client_mu,
        optimum and client_optima remain available as attributes)."""
        if self.rank == 0:
            unknown = set(kwargs) - {"radius", "center", "scaffold_B2", "points", "rng", "n_sphere"}
            if unknown:
                raise InvalidHyperparameterError(f"constants() got unexpected keywords {sorted(unknown)}")
            return diagonal_constants(self, radius=kwargs.get("radius"), center=kwargs.get("center"),
                                      scaffold_B2=kwargs.get("scaffold_B2"))
        size = self.n_clients * self.dim * self.dim
        if size > DENSE_CONSTANTS_BUDGET:
            raise OutOfRangeError(
                f"constants() of a structured federation with rank {self.rank} and N d^2 = {size:.3g} > "
                f"{DENSE_CONSTANTS_BUDGET} entries: delta, G2 and the SCAFFOLD (G, B) pair need the dense client "
                "Hessians; use the attributes L, mu, client_L, client_mu, optimum() and client_optima()")
        return super().constants(**kwargs)

    # ------------------------------------------------------------- hooks
    def shifted_solve(self, clients: np.ndarray, D: np.ndarray, b: np.ndarray, Y0: np.ndarray, *,
                      tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
        """argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y: (diag(D_i + D_r) + U_i U_i^T) y =
        e_i + b_r by Woodbury with refinement (``Y0``, ``tol``, ``max_iter`` unused)."""
        return woodbury_solve(self.diag[clients] + D, self._V[clients], self.e[clients] + b)

    def smoothness_bounds(self, clients: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """L_i = lambda_max(H_i) (exact)."""
        return self.client_L[clients]

    def strong_convexity(self) -> float:
        """lambda_min(sum p_i H_i) (or a certified lower bound, see :attr:`mu`)."""
        return self.mu

    def curvature_bounds(self) -> CurvatureBounds:
        """Extreme eigenvalues of sum p_i H_i and of every H_i (``exact`` False only when the
        global pair is a pair of certified bounds: total rank beyond CERTIFY_EIG_BUDGET)."""
        lo, hi, exact, note = self._global_extremes
        return CurvatureBounds(L=hi, mu=lo, client_L=self.client_L, client_mu=self.client_mu,
                               exact=exact, note=note)

    def client_gaps(self, W: np.ndarray, clients: np.ndarray) -> np.ndarray:
        """f_k(w) - f_k* = 1/2 (w - x_k*)^T H_k (w - x_k*) (no cancellation)."""
        R = W - self._client_optima[clients]
        return 0.5 * np.einsum("mi,mi->m", R, matvec(self.diag[clients], self._V[clients], R))

    def client_block(self, start: int, stop: int) -> StructuredQuadraticFederation | None:
        """A shallow copy viewing clients start..stop-1 (exact oracle only)."""
        if type(self) is not StructuredQuadraticFederation or self.is_stochastic:
            return None
        view = copy.copy(self)
        view.__dict__ = {k: v for k, v in self.__dict__.items() if not k.startswith("_") or k in _ARRAYS}
        view.diag = self.diag[start:stop]
        view.e = self.e[start:stop]
        view._V = self._V[start:stop]
        view.n_clients = stop - start
        return view

    def client_data_bytes(self) -> int:
        """8 d (r + 2): a row reads D_i, e_i and U_i."""
        return 8 * self.dim * (self.rank + 2)

    def cvxpy_client_loss(self, client: int, y: Any) -> Any:
        """1/2 sum_k D_ik y_k^2 + 1/2 ||U_i^T y||^2 - e_i^T y."""
        import cvxpy as cp
        quad = cp.sum(cp.multiply(self.diag[client], cp.square(y)))
        if self.rank:
            quad = quad + cp.sum_squares(self._V[client] @ y)
        return 0.5 * quad - self.e[client] @ y

    # ------------------------------------------------------------ dense copy
    def to_dense(self) -> QuadraticFederation:
        """The same federation stored densely (a QuadraticFederation with H_i formed), with the
        same weights, offsets and configured oracle: O(N d^2) memory."""
        H = self.client_hess(np.zeros(self.dim))
        if self._explicit_weights:
            out = QuadraticFederation(H, self.e, weights=self.weights, offsets=self.offsets)
        else:
            out = QuadraticFederation(H, self.e, n_samples=self.n_samples, offsets=self.offsets)
        return self._copy_oracle_to(out)

    # ------------------------------------------------------- shifting clients
    def _subset(self, keep: np.ndarray, weights: np.ndarray | None) -> StructuredQuadraticFederation:
        n = None if self.n_samples is None else self.n_samples[keep]
        out = StructuredQuadraticFederation(self.diag[keep], self.e[keep], np.swapaxes(self._V[keep], 1, 2),
                                            n_samples=n, weights=weights, offsets=self.offsets[keep])
        out._batch_size = self._batch_size
        if self._noise_sigma2 is not None:
            out._noise_sigma2 = self._noise_sigma2[keep].copy()
        return out

    def without_client(self, a: int) -> StructuredQuadraticFederation:
        """Remove client ``a`` (weights renormalised as in QuadraticFederation)."""
        if self.n_clients < 2:
            raise InvalidProblemError("cannot remove the only client of a federation")
        if isinstance(a, bool) or not (isinstance(a, (int, np.integer)) and 0 <= a < self.n_clients):
            raise InvalidProblemError(f"client index must be an integer in [0, {self.n_clients}), got {a!r}")
        keep = np.delete(np.arange(self.n_clients), int(a))
        return self._subset(keep, self.weights[keep] if self._explicit_weights else None)

    def with_client(self, other: Federation, *, weight: float | None = None) -> StructuredQuadraticFederation:
        """Append the clients of another StructuredQuadraticFederation (factors padded with zero
        columns to the larger rank); weights as in QuadraticFederation.with_client."""
        if not isinstance(other, StructuredQuadraticFederation):
            raise InvalidProblemError(
                f"other must be a StructuredQuadraticFederation, got {type(other).__name__}")
        if other.dim != self.dim:
            raise InvalidProblemError(f"other has dim {other.dim}, expected {self.dim}")
        r = max(self.rank, other.rank)

        def padded(f: StructuredQuadraticFederation) -> np.ndarray:
            return np.pad(f._V, [(0, 0), (0, r - f.rank), (0, 0)])

        V = np.concatenate([padded(self), padded(other)])
        if weight is not None:
            if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)) \
                    or not 0 < float(weight) < 1:
                raise InvalidProblemError(f"weight must lie in (0, 1), got {weight!r}")
            w = float(weight)
            weights: np.ndarray | None = np.concatenate([self.weights * (1 - w), other.weights * w])
            n = None
        elif self._explicit_weights or other._explicit_weights or \
                self.n_samples is None or other.n_samples is None:
            raise InvalidProblemError(
                "with_client needs sample counts on both federations, or an explicit weight=")
        else:
            weights, n = None, np.concatenate([self.n_samples, other.n_samples])
        out = StructuredQuadraticFederation(
            np.concatenate([self.diag, other.diag]), np.concatenate([self.e, other.e]),
            np.swapaxes(V, 1, 2), n_samples=n, weights=weights,
            offsets=np.concatenate([self.offsets, other.offsets]))
        out._explicit_weights = weight is not None
        return self._copy_oracle_to(out, out.n_clients)

    def __repr__(self) -> str:
        return f"StructuredQuadraticFederation(n_clients={self.n_clients}, dim={self.dim}, rank={self.rank})"


#: Private attributes a client_block view keeps (the rest are per-instance caches).
_ARRAYS = frozenset({"_V", "_explicit_weights", "_noise_sigma2", "_batch_size"})
