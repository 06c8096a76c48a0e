"""Batched damped Newton method for smooth convex objectives.

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

from typing import Callable

import numpy as np

from ..errors import DivergenceError

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
