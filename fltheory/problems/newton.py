"""The batched damped Newton method of fltheory (smooth convex row objectives).

Minimises m independent objectives at once (one row per objective):
x+ = x - t H(x)^{-1} grad(x), with t halved from 1 until the Armijo
condition f(x+) <= f(x) + c t grad^T dx holds (c = 1e-4) for each row
separately.  Near the optimum the Armijo decrease falls below the rounding
of f; there a step is accepted when it reduces ||grad||.  Stops per row when
||grad|| <= tol.  ``null_projector`` (D, D), if given, spans directions along
which every objective is flat (the softmax shift invariance): it is added
to the Hessian, which keeps the Newton step orthogonal to those directions.

It is the one Newton solver of fltheory: the optima of logistic federations
(:func:`newton`) and the generic exact local solve of every federation
(:func:`shifted_newton`, the default of ``Federation.shifted_solve``) both run it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DivergenceError

if TYPE_CHECKING:
    from .base import Federation

__all__ = ["newton", "shifted_newton"]

_ARMIJO = 1e-4
_MAX_HALVINGS = 60


def _solve(H: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Rows of H^{-1} g (one batched LU solve); pseudo-inverse when some H is singular."""
    try:
        return np.linalg.solve(H, G[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        return np.matmul(np.linalg.pinv(H, hermitian=True), G[:, :, None])[:, :, 0]


def newton(loss: Callable[[np.ndarray, np.ndarray], np.ndarray],
           grad: Callable[[np.ndarray, np.ndarray], np.ndarray],
           hess: Callable[[np.ndarray, np.ndarray], np.ndarray],
           X0: np.ndarray, *, tol: float, max_iter: int = 200,
           null_projector: np.ndarray | None = None, what: str = "Newton",
           accept: float | None = None, polish: bool = False, polish_steps: int = 1) -> np.ndarray:
    """Minimise each row objective; ``loss/grad/hess(X, rows)`` evaluate the
    objectives of the listed rows at X (len(rows), D).

    ``accept`` (default ``tol``): after ``max_iter`` iterations, or when no row
    can move any more, rows with ||grad|| <= accept are returned rather than
    reported.  ``polish``: when every row has ||grad|| <= tol, take one more
    full Newton step per row and keep it where it lowers ||grad||: Newton
    converges quadratically, so this lands at the floating-point floor and the
    solution no longer depends (beyond rounding) on where ``tol`` cut the
    iteration.  ``polish_steps``: up to that many such steps, stopping when none lowers
    any row's ||grad||; a relative ``tol`` can stop far from the floor when the data mix
    scales (one feature of 1e8 among features of 1: ||grad|| <= 1e-2 left the optimum 1%
    off), and each further full step squares the error until rounding.

    Raises
    ------
    DivergenceError
        When some row does not reach ||grad|| <= tol within ``max_iter``
        iterations (the message names the rows and their gradient norms).
    """
    with np.errstate(over="ignore", invalid="ignore"):    # a non-finite gradient is reported below
        return _newton(loss, grad, hess, X0, tol=tol, max_iter=max_iter, null_projector=null_projector,
                       what=what, accept=accept, polish=polish, polish_steps=polish_steps)


def _newton(loss: Callable[[np.ndarray, np.ndarray], np.ndarray],
            grad: Callable[[np.ndarray, np.ndarray], np.ndarray],
            hess: Callable[[np.ndarray, np.ndarray], np.ndarray],
            X0: np.ndarray, *, tol: float, max_iter: int, null_projector: np.ndarray | None, what: str,
            accept: float | None, polish: bool, polish_steps: int) -> np.ndarray:
    X = np.array(X0, dtype=np.float64)
    active = np.arange(X.shape[0])
    gnorm = np.full(X.shape[0], np.inf)
    for _ in range(max_iter):
        Xa = X[active]
        G = grad(Xa, active)
        gn = np.linalg.norm(G, axis=1)
        gnorm[active] = gn
        keep = gn > tol
        if not keep.any():
            if polish:
                for _p in range(polish_steps):
                    X, improved = _polish(grad, hess, X, null_projector)
                    if not improved:
                        break
            return X
        active, Xa, G, gn = active[keep], Xa[keep], G[keep], gn[keep]
        H = hess(Xa, active)
        if null_projector is not None:
            H = H + null_projector
        dX = -_solve(H, G)
        f0 = loss(Xa, active)
        slope = np.einsum("md,md->m", G, dX)
        t = np.ones(active.shape[0])
        todo = np.ones(active.shape[0], dtype=bool)
        Xnew = Xa.copy()
        for _h in range(_MAX_HALVINGS):
            rows = np.flatnonzero(todo)
            Xt = Xa[rows] + t[rows, None] * dX[rows]
            ft = loss(Xt, active[rows])
            ok = np.isfinite(ft) & (ft <= f0[rows] + _ARMIJO * t[rows] * slope[rows])
            flat = np.abs(t[rows] * slope[rows]) <= 1e-13 * (1.0 + np.abs(f0[rows]))
            if flat.any():
                gt = np.linalg.norm(grad(Xt[flat], active[rows][flat]), axis=1)
                ok[flat] |= gt < gn[rows][flat]
            Xnew[rows[ok]] = Xt[ok]
            todo[rows[ok]] = False
            if not todo.any():
                break
            t[todo] *= 0.5
        X[active] = Xnew
        if todo.all():
            break          # no row can move: report them below
    G = grad(X[active], active)
    gn = np.linalg.norm(G, axis=1)
    bad = gn > (tol if accept is None else max(tol, accept))
    if bad.any():
        rows = active[bad]
        raise DivergenceError(
            f"{what} did not reach ||grad|| <= {tol:g} in {max_iter} iterations: rows "
            f"{rows.tolist()[:10]} end at ||grad|| = {gn[bad][:10].tolist()}")
    return X


def _polish(grad: Callable[[np.ndarray, np.ndarray], np.ndarray],
            hess: Callable[[np.ndarray, np.ndarray], np.ndarray], X: np.ndarray,
            null_projector: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """One more full Newton step per row, kept where it lowers the gradient norm; and
    whether any row took it."""
    rows = np.arange(X.shape[0])
    G = grad(X, rows)
    H = hess(X, rows)
    if null_projector is not None:
        H = H + null_projector
    Xnew = X - _solve(H, G)
    better = np.linalg.norm(grad(Xnew, rows), axis=1) < np.linalg.norm(G, axis=1)
    return np.where(better[:, None], Xnew, X), bool(better.any())


def shifted_newton(problem: Federation, clients: np.ndarray, D: np.ndarray, b: np.ndarray,
                   Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y for every row r (client i = clients[r]).

    :func:`newton` on the row objectives h_r (gradient g_i(y) + D_r * y - b_r,
    Hessian H_i(y) + diag(D_r)) from Y0, polished (one more full step where it
    lowers ||grad||); rows that end between ``tol`` and 1e-8 (the rounding
    floor of large problems) are accepted, beyond that DivergenceError.
    """
    eye = np.eye(Y0.shape[1])

    def loss(Y: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return problem.client_loss(Y, clients[rows]) + 0.5 * np.einsum("md,md->m", D[rows] * Y, Y) \
            - np.einsum("md,md->m", b[rows], Y)

    def grad(Y: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return problem.client_grad(Y, clients[rows]) + D[rows] * Y - b[rows]

    def hess(Y: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return problem.client_hess(Y, clients[rows]) + D[rows][:, :, None] * eye

    return newton(loss, grad, hess, Y0, tol=tol, max_iter=max_iter, accept=1e-8, polish=True,
                  what="exact local solve: Newton")
