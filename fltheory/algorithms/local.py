"""The shared local loop: every client objective is f_i plus composable terms.

All smooth penalties of the seed algorithms are diagonal quadratics plus
linear terms, so a local objective of the m participating rows is

    h_r(y) = f_{i_r}(y) + 1/2 y^T diag(D_r) y - b_r^T y + l1_r ||y - z_r||_1,

with gradient (a subgradient for the l1 term) g_r(y) + D_r * y - b_r
+ l1_r sign(y - z_r).  The penalties of section 2 of THEORY.md map onto it:

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

``LocalObjective`` holds (D, b, l1, z) and adds with ``+``.  ``local_descent``
runs the vectorized local steps of all rows together; ``exact_local_solve``
returns the exact minimiser (closed form on quadratic clients, batched Newton
with backtracking on smooth clients, proximal gradient for the l1 term).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DivergenceError, InvalidProblemError
from ..optim.base import Optimizer
from ..problems.base import Federation

__all__ = ["LocalObjective", "local_descent", "exact_local_solve"]


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
    def zero(cls) -> "LocalObjective":
        return cls()

    @classmethod
    def proximal(cls, mu: Any, center: np.ndarray) -> "LocalObjective":
        """(mu/2) ||y - center||^2; ``mu`` scalar or (m,)."""
        m, d = center.shape
        D = _rows(mu, m, d)
        return cls(D=D, b=D * center)

    @classmethod
    def diagonal(cls, D: np.ndarray, b: np.ndarray) -> "LocalObjective":
        """1/2 y^T diag(D) y - b^T y."""
        return cls(D=np.asarray(D, dtype=np.float64), b=np.asarray(b, dtype=np.float64))

    @classmethod
    def linear(cls, b: np.ndarray) -> "LocalObjective":
        """-b^T y (gradient shift -b)."""
        return cls(b=np.asarray(b, dtype=np.float64))

    @classmethod
    def l1_term(cls, lam: Any, center: np.ndarray) -> "LocalObjective":
        """lam ||y - center||_1; ``lam`` scalar or (m,)."""
        m = center.shape[0]
        lam_arr = np.broadcast_to(np.asarray(lam, dtype=np.float64), (m,)).copy()
        return cls(l1=lam_arr, z=np.asarray(center, dtype=np.float64))

    def __add__(self, other: "LocalObjective") -> "LocalObjective":
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

    def take(self, rows: np.ndarray) -> "LocalObjective":
        pick = lambda a: None if a is None else a[rows]
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
        if self.has_l1:
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


def local_descent(problem: Federation, Y0: np.ndarray, clients: np.ndarray, steps: np.ndarray,
                  lr: np.ndarray, rng: np.random.Generator | None,
                  objective: LocalObjective | None = None,
                  optimizer: Optimizer | None = None,
                  opt_state: Any = None,
                  record_precond: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
    """Run ``steps[r]`` local steps on every row r, all rows together.

    Plain steps (``optimizer is None``), seed 002 Alg. 1 / THEORY.md section 2:
        y <- y - lr_r (g_i(y) + grad of the extra terms),
    with g_i from ``problem.stochastic_grad`` (exact unless the federation has a
    stochastic oracle).  With an ``optimizer`` (FedOpt, seed 001 eq. 3):
        (u, state) = update(g, state, y);  y <- y + lr_r u,
    where ``lr`` is the per-row rate *scale* (1 for the optimizer's own rate).

    At step k only rows with steps[r] > k move; their oracle calls are made in
    row order (the RNG convention of ``reference.py``).

    Returns (Y, info) with info["opt_state"] (final optimizer state, rows
    updated only while active), info["precond_sum"] (sum over the row's steps
    of the preconditioner m_k when ``record_precond``) and info["grad_first"]
    (the oracle gradient at Y0 of rows with at least one step, (m, d), zeros
    elsewhere; used by SCAFFOLD option I style controls when exact).
    """
    Y = np.array(Y0, dtype=np.float64, copy=True)
    m, d = Y.shape
    steps = np.asarray(steps, dtype=np.int64)
    lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), (m,))
    objective = objective or LocalObjective.zero()
    state = opt_state
    if optimizer is not None and state is None:
        state = optimizer.init(Y, clients)
    precond_sum = None
    if record_precond:
        precond_sum = None
    kmax = int(steps.max()) if m else 0
    for k in range(kmax):
        active = steps > k
        full = bool(active.all())
        rows = slice(None) if full else np.flatnonzero(active)
        Ya = Y if full else Y[rows]
        G = problem.stochastic_grad(Ya, clients if full else clients[rows], rng)
        obj = objective if full else objective.take(rows)
        extra = obj.grad(Ya)
        if extra is not None:
            G += extra
        if optimizer is None:
            step = lr[:, None] * G if full else lr[rows][:, None] * G
            if full:
                Y -= step
            else:
                Y[rows] -= step
            continue
        from ..optim.base import put_rows, take_rows
        sub = state if full else take_rows(state, rows)
        U, sub = optimizer.update(G, sub, Ya)
        scale = lr if full else lr[rows]
        U = scale[:, None] * U
        if full:
            Y += U
            state = sub
        else:
            Y[rows] += U
            state = put_rows(state, rows, sub)
        if record_precond:
            P = np.asarray(optimizer.precond(sub))
            if precond_sum is None:
                precond_sum = np.zeros((m,) + P.shape[1:])
            if full:
                precond_sum += P
            else:
                precond_sum[rows] += P
    if not np.all(np.isfinite(Y)):
        raise DivergenceError("local steps produced non-finite values")
    return Y, {"opt_state": state, "precond_sum": precond_sum}


def exact_local_solve(problem: Federation, clients: np.ndarray, objective: LocalObjective,
                      Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y (+ l1 ||y - z||_1), row by row, batched.

    * quadratic clients, no l1: the linear system (H_i + diag(D)) y = e_i + b;
    * smooth clients, no l1: Newton's method with backtracking (Armijo) on all
      rows at once, stopped when every row's gradient norm is <= tol;
    * l1 term: proximal gradient (ISTA) with step 1/L_r, L_r the row's
      smoothness bound, until the fixed-point residual is <= tol.
    """
    from ..problems.quadratic import QuadraticFederation

    m, d = Y0.shape
    D = np.zeros((m, d)) if objective.D is None else objective.D
    b = np.zeros((m, d)) if objective.b is None else objective.b
    if isinstance(problem, QuadraticFederation) and not objective.has_l1:
        A = problem.H[clients] + D[:, :, None] * np.eye(d)
        return np.linalg.solve(A, (problem.e[clients] + b)[:, :, None])[:, :, 0]
    if not objective.has_l1:
        return _batched_newton(problem, clients, D, b, Y0, tol, max_iter)
    return _proximal_gradient(problem, clients, objective, D, b, Y0, tol)


def _smooth_value(problem, clients, D, b, Y):
    return problem.client_loss(Y, clients) + 0.5 * np.einsum("md,md->m", D * Y, Y) \
        - np.einsum("md,md->m", b, Y)


def _batched_newton(problem, clients, D, b, Y0, tol, max_iter):
    Y = np.array(Y0, dtype=np.float64, copy=True)
    m, d = Y.shape
    eye = np.eye(d)
    for _ in range(max_iter):
        G = problem.client_grad(Y, clients) + D * Y - b
        norms = np.linalg.norm(G, axis=1)
        if np.all(norms <= tol):
            return _newton_polish(problem, clients, D, b, Y, G, norms, eye)
        Hs = problem.client_hess(Y, clients) + D[:, :, None] * eye
        step = np.linalg.solve(Hs, G[:, :, None])[:, :, 0]
        f0 = _smooth_value(problem, clients, D, b, Y)
        slope = np.einsum("md,md->m", G, step)
        t = np.ones(m)
        for _ls in range(60):
            Ynew = Y - t[:, None] * step
            ok = _smooth_value(problem, clients, D, b, Ynew) <= f0 - 1e-4 * t * slope
            # near the optimum values tie in floating point and Armijo cannot hold;
            # a step that halves the gradient norm is accepted there
            ok |= np.linalg.norm(problem.client_grad(Ynew, clients) + D * Ynew - b, axis=1) \
                <= 0.5 * norms
            ok |= norms <= tol
            if ok.all():
                break
            t = np.where(ok, t, 0.5 * t)
        Y = np.where((norms <= tol)[:, None], Y, Y - t[:, None] * step)
    G = problem.client_grad(Y, clients) + D * Y - b
    worst = float(np.linalg.norm(G, axis=1).max())
    if worst > max(tol, 1e-8):
        raise DivergenceError(
            f"exact local solve: Newton did not reach gradient norm {tol:g} in {max_iter} iterations "
            f"(worst row {worst:.3e})")
    return Y


def _newton_polish(problem, clients, D, b, Y, G, norms, eye):
    """One more full Newton step per row, kept where it lowers the gradient norm.

    Newton converges quadratically, so a row stopped at ||grad|| <= tol lands at
    the floating-point floor after one more step; this makes the solution
    independent (to rounding) of where the tolerance cut the iteration."""
    Hs = problem.client_hess(Y, clients) + D[:, :, None] * eye
    Ynew = Y - np.linalg.solve(Hs, G[:, :, None])[:, :, 0]
    new_norms = np.linalg.norm(problem.client_grad(Ynew, clients) + D * Ynew - b, axis=1)
    return np.where((new_norms < norms)[:, None], Ynew, Y)


def _proximal_gradient(problem, clients, objective, D, b, Y0, tol, max_iter=200000):
    """ISTA on f_i + smooth terms with prox of l1 ||y - z||_1 (soft-thresholding around z)."""
    Y = np.array(Y0, dtype=np.float64, copy=True)
    m, d = Y.shape
    L = _row_smoothness(problem, clients, Y) + D.max(axis=1)
    step = 1.0 / L
    lam = objective.l1
    z = objective.z
    for _ in range(max_iter):
        G = problem.client_grad(Y, clients) + D * Y - b
        V = Y - step[:, None] * G - z
        Ynew = z + np.sign(V) * np.maximum(np.abs(V) - (step * lam)[:, None], 0.0)
        res = np.abs(Ynew - Y).max()
        Y = Ynew
        if res <= tol:
            return Y
    raise DivergenceError(f"exact l1 local solve: proximal gradient did not converge (residual {res:.3e})")


def _row_smoothness(problem, clients, Y):
    """An upper bound of the smoothness constant of each listed client."""
    from ..problems.quadratic import QuadraticFederation

    if isinstance(problem, QuadraticFederation):
        return problem.client_L[clients]
    bound = getattr(problem, "client_L", None)
    if bound is not None:
        return np.asarray(bound)[clients]
    Hs = problem.client_hess(Y, clients)
    return np.linalg.eigvalsh(Hs)[:, -1]
