"""The batched damped Newton method of fltheory (smooth convex row objectives).

Minimises m independent objectives at once (one row per objective):
x+ = x - t H(x)^{-1} grad(x), with t halved from 1 until the Armijo
condition f(x+) <= f(x) + c t grad^T dx holds (c = 1e-4) for each row
separately.  Near the optimum the Armijo decrease falls below the rounding
of f; there a step is accepted when it reduces ||grad||.  Stops per row when
||grad|| <= tol.  ``null_projector`` (D, D), if given, spans directions along
which every objective is flat (the softmax shift invariance): it is added
to the Hessian, which keeps the Newton step orthogonal to those directions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

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
           null_projector: np.ndarray | None = None, what: str = "Newton") -> np.ndarray:
    """Minimise each row objective; ``loss/grad/hess(X, rows)`` evaluate the
    objectives of the listed rows at X (len(rows), D).

    Raises
    ------
    DivergenceError
        When some row does not reach ||grad|| <= tol within ``max_iter``
        iterations (the message names the rows and their gradient norms).
    """
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
    bad = gn > tol
    if bad.any():
        rows = active[bad]
        raise DivergenceError(
            f"{what} did not reach ||grad|| <= {tol:g} in {max_iter} iterations: rows "
            f"{rows.tolist()[:10]} end at ||grad|| = {gn[bad][:10].tolist()}")
    return X


def _shifted_value(problem: Federation, clients: np.ndarray, D: np.ndarray, b: np.ndarray,
                   Y: np.ndarray) -> np.ndarray:
    return problem.client_loss(Y, clients) + 0.5 * np.einsum("md,md->m", D * Y, Y) \
        - np.einsum("md,md->m", b, Y)


def shifted_newton(problem: Federation, clients: np.ndarray, D: np.ndarray, b: np.ndarray,
                   Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D_r) y - b_r^T y for every row r, by Newton's method.

    All rows step together: y <- y - t_r (H_i(y) + diag(D_r))^{-1} g_r(y), with
    g_r = grad f_i(y) + D_r * y - b_r and t_r halved from 1 until the Armijo
    condition h_r(y - t s) <= h_r(y) - 1e-4 t g_r^T s holds or the step halves
    the gradient norm (near the optimum values tie in floating point and Armijo
    cannot hold).  Rows with ||g_r|| <= tol stay put; when every row is there,
    one more full Newton step is taken per row and kept where it lowers the
    gradient norm (:func:`_newton_polish`).  DivergenceError when some row still
    has ||g_r|| > max(tol, 1e-8) after ``max_iter`` iterations.
    """
    Y = np.array(Y0, dtype=np.float64, copy=True, order="C")
    m, d = Y.shape
    eye = np.eye(d)
    for _ in range(max_iter):
        G = problem.client_grad(Y, clients) + D * Y - b
        norms = np.linalg.norm(G, axis=1)
        if np.all(norms <= tol):
            return _newton_polish(problem, clients, D, b, Y, G, norms, eye)
        Hs = problem.client_hess(Y, clients) + D[:, :, None] * eye
        step = np.linalg.solve(Hs, G[:, :, None])[:, :, 0]
        f0 = _shifted_value(problem, clients, D, b, Y)
        slope = np.einsum("md,md->m", G, step)
        t = np.ones(m)
        for _ls in range(60):
            Ynew = Y - t[:, None] * step
            ok = _shifted_value(problem, clients, D, b, Ynew) <= f0 - 1e-4 * t * slope
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


def _newton_polish(problem: Federation, clients: np.ndarray, D: np.ndarray, b: np.ndarray,
                   Y: np.ndarray, G: np.ndarray, norms: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """One more full Newton step per row, kept where it lowers the gradient norm.

    Newton converges quadratically, so a row stopped at ||grad|| <= tol lands at
    the floating-point floor after one more step; this makes the solution
    independent (to rounding) of where the tolerance cut the iteration."""
    Hs = problem.client_hess(Y, clients) + D[:, :, None] * eye
    Ynew = Y - np.linalg.solve(Hs, G[:, :, None])[:, :, 0]
    new_norms = np.linalg.norm(problem.client_grad(Ynew, clients) + D * Ynew - b, axis=1)
    return np.where((new_norms < norms)[:, None], Ynew, Y)
