"""Descent: the step-major loop of local steps on rows of Y (in place).

Step k of all rows still active (``steps[r] > k``) is one batched oracle call
in row order, then the plain step y <- y - lr_r (g + extra gradient) or the
optimizer step y <- y + lr_r u (FedOpt); see :func:`fltheory.algorithms.local.local_descent`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...optim.base import Optimizer, put_rows, take_rows
from ...problems.base import Federation
from .objective import LocalObjective

__all__ = ["descend"]


def descend(problem: Federation, Y: np.ndarray, clients: np.ndarray, steps: np.ndarray,
            lr: np.ndarray, rng: np.random.Generator | None, objective: LocalObjective,
            optimizer: Optimizer | None, state: Any, record: bool) -> tuple[Any, np.ndarray | None]:
    """The step-major loop on rows of Y (modified in place) -> (state, precond_sum)."""
    m = Y.shape[0]
    precond_sum = None
    kmax = int(steps.max()) if m else 0
    lr_col = np.asarray(lr, dtype=np.float64)[:, None]
    # a linear term alone (the SCAFFOLD correction): its gradient 0 - b = -b is
    # subtracted directly, G - b == G + (0 - b) exactly, with no zeros/extra pass
    linear_only = objective.D is None and objective.b is not None and not objective.has_l1
    kmin = int(steps.min()) if m else 0             # steps 0..kmin-1 involve every row
    for k in range(kmax):
        full = k < kmin
        rows = slice(None) if full else np.flatnonzero(steps > k)
        Ya = Y if full else Y[rows]
        G = problem.stochastic_grad(Ya, clients if full else clients[rows], rng)
        _add_extra_grad(G, objective if full else objective.take(rows), Ya, linear_only)
        if optimizer is None:
            G *= lr_col if full else lr_col[rows]
            if full:
                Y -= G
            else:
                Y[rows] -= G
            continue
        sub = state if full else take_rows(state, rows)
        U, sub = optimizer.update(G, sub, Ya)
        scale = lr_col if full else lr_col[rows]
        if _fresh(U, G, Ya, sub):
            U *= scale                                 # same products as scale * U, no temporary
        else:
            U = scale * U
        if full:
            Y += U
            state = sub
        else:
            Y[rows] += U
            state = put_rows(state, rows, sub)
        if record:
            P = np.asarray(optimizer.precond(sub))
            if precond_sum is None:
                precond_sum = np.zeros((m, *P.shape[1:]))
            if full:
                precond_sum += P
            else:
                precond_sum[rows] += P
    return state, precond_sum


def _add_extra_grad(G: np.ndarray, obj: LocalObjective, Y: np.ndarray, linear_only: bool) -> None:
    """G += gradient of the extra terms, in place (same floating-point result as
    ``G += obj.grad(Y)``)."""
    if linear_only:
        G -= obj.b
        return
    extra = obj.grad(Y)
    if extra is not None:
        G += extra


def _fresh(U: np.ndarray, G: np.ndarray, Y: np.ndarray, state: Any) -> bool:
    """True when the optimizer's step U is a writable array sharing no memory with
    the gradient, the point or the new state (so scaling it in place is safe)."""
    if not isinstance(U, np.ndarray) or U.dtype != np.float64 or not U.flags.writeable \
            or U.base is not None:
        return False
    if np.may_share_memory(U, G) or np.may_share_memory(U, Y):
        return False
    return not any(isinstance(f, np.ndarray) and np.may_share_memory(U, f) for f in (state or ()))
