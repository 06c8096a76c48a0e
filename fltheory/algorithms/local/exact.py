"""Exact local solves: argmin of the composed local objective, all rows at once.

Without an l1 term the solve is the federation hook ``Federation.shifted_solve``
(a batched linear solve on quadratic clients, the batched Newton method of
``fltheory.problems.newton`` by default); with one, an accelerated proximal
gradient method.
"""

from __future__ import annotations

import numpy as np

from ...errors import DivergenceError
from ...problems.base import Federation
from .objective import LocalObjective

__all__ = ["accelerated_l1_solve", "exact_local_solve", "row_smoothness"]


def exact_local_solve(problem: Federation, clients: np.ndarray, objective: LocalObjective,
                      Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y (+ l1 ||y - z||_1), row by row, batched.

    * no l1 term: the federation hook ``problem.shifted_solve`` (quadratic
      clients: the linear system (H_i + diag(D)) y = e_i + b; by default Newton's
      method with backtracking on all rows at once, stopped when every row's
      gradient norm is <= tol; see :meth:`fltheory.problems.Federation.shifted_solve`);
    * l1 term: accelerated proximal gradient with adaptive restart (FISTA,
      step 1/L_r with L_r the row's smoothness bound) until the relative
      fixed-point residual is <= tol (``_proximal_gradient``).
    """
    m, d = Y0.shape
    D = np.zeros((m, d)) if objective.D is None else objective.D
    b = np.zeros((m, d)) if objective.b is None else objective.b
    if not objective.has_l1:
        return problem.shifted_solve(clients, D, b, Y0, tol=tol, max_iter=max_iter)
    return _proximal_gradient(problem, clients, objective, D, b, Y0, tol)


def _proximal_gradient(problem: Federation, clients: np.ndarray, objective: LocalObjective,
                       D: np.ndarray, b: np.ndarray, Y0: np.ndarray, tol: float,
                       max_iter: int = 200_000) -> np.ndarray:
    """Accelerated proximal gradient (FISTA; Beck and Teboulle 2009) with the
    gradient-based adaptive restart of O'Donoghue and Candes (2015), step 1/L_r
    with L_r the row's smoothness bound plus max_j D_rj:

        y^+ = z + S_{l1/L}(w - (grad f(w) + D w - b)/L - z),   S the soft-threshold,
        t^+ = (1 + sqrt(1 + 4 t^2))/2,   w^+ = y^+ + ((t - 1)/t^+)(y^+ - y),
        restart (t = 1, w^+ = y^+) on rows where <w - y^+, y^+ - y> > 0.

    Stops when every row's fixed-point residual max_j |prox(y - grad/L) - y| is
    <= tol * max(1, max_j |y_j|), checked every 10 iterations.  The tolerance is
    relative for rows of large magnitude: an absolute 1e-12 is below the
    floating-point spacing of entries above ~5e3, where the residual cannot get
    under it.  Iterations scale with sqrt(L/mu) instead of L/mu (50 quadratic
    clients, d = 100, L/mu = 1000: 0.3 s per FedElasticNet round against 21 s
    with plain ISTA).
    """
    m = Y0.shape[0]
    step = 1.0 / (row_smoothness(problem, clients, Y0) + D.max(axis=1))
    thr = (step * objective.l1)[:, None]
    z = objective.z

    def prox_grad(W: np.ndarray) -> np.ndarray:
        V = W - step[:, None] * (problem.client_grad(W, clients) + D * W - b) - z
        return z + np.sign(V) * np.maximum(np.abs(V) - thr, 0.0)

    Y = np.array(Y0, dtype=np.float64, copy=True, order="C")
    W = Y.copy()
    t = np.ones(m)
    res = np.inf
    for it in range(1, max_iter + 1):
        Y_new = prox_grad(W)
        restart = np.einsum("md,md->m", W - Y_new, Y_new - Y) > 0
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        beta = np.where(restart, 0.0, (t - 1.0) / t_new)
        W = Y_new + beta[:, None] * (Y_new - Y)
        t = np.where(restart, 1.0, t_new)
        Y = Y_new
        if it % 10 == 0:
            R = np.abs(prox_grad(Y) - Y).max(axis=1) / np.maximum(1.0, np.abs(Y).max(axis=1))
            res = float(R.max())
            if res <= tol:
                return Y
            if not np.isfinite(res):
                break
    raise DivergenceError(
        f"exact l1 local solve: accelerated proximal gradient did not reach relative residual "
        f"{tol:g} in {max_iter} iterations (residual {res:.3e})")


def accelerated_l1_solve(problem: Federation, clients: np.ndarray, objective: LocalObjective,
                         Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 200_000) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 for all rows at
    once, by the accelerated proximal gradient of :func:`exact_local_solve`
    (``max_iter`` exposed); without an l1 term it is :func:`exact_local_solve`."""
    if not objective.has_l1:
        return exact_local_solve(problem, clients, objective, Y0, tol=tol)
    m, d = Y0.shape
    D = np.zeros((m, d)) if objective.D is None else objective.D
    b = np.zeros((m, d)) if objective.b is None else objective.b
    return _proximal_gradient(problem, clients, objective, D, b, Y0, tol, max_iter)


def row_smoothness(problem: Federation, clients: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """An upper bound of the smoothness constant of each listed client (the
    federation hook ``smoothness_bounds``)."""
    return problem.smoothness_bounds(clients, Y)
