"""Gradient descent with a fixed preconditioner, y <- y - lr P_i g.

LocalAdaptivity section 4 (the quadratic example: ClientOpt with a fixed
client-specific preconditioner P_i, whose fixed point moves with P_i;
docs/theory/index.md#algorithms, "fixed-preconditioner GD").
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InvalidHyperparameterError
from . import _checks
from .base import Optimizer, rebuildable

__all__ = ["PreconditionedState", "preconditioned"]


class PreconditionedState(NamedTuple):
    """count: (m,) steps taken; clients: (m,) the client index of each row
    (selects the row of a per-client P; integer, so :func:`mean_rows` keeps it)."""

    count: np.ndarray  # type: ignore[assignment]  # the step counter; shadows tuple.count on purpose
    clients: np.ndarray


def _check_P(P: Any) -> tuple[np.ndarray, bool, bool]:
    """Return (P, per_client, full) after validating shape and positivity."""
    try:
        arr = np.asarray(P, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidHyperparameterError(f"preconditioned: P must be numeric, got {P!r}") from exc
    if arr.ndim not in (1, 2, 3) or arr.size == 0:
        raise InvalidHyperparameterError(
            "preconditioned: P must be a shared diagonal (d,), a shared matrix (d, d), "
            f"per-client diagonals (N, d) or per-client matrices (N, d, d); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidHyperparameterError("preconditioned: P contains non-finite values")
    if arr.ndim == 1:
        per_client, full = False, False
    elif arr.ndim == 3:
        per_client, full = True, True
    elif arr.shape[0] != arr.shape[1]:
        per_client, full = True, False       # (N, d) per-client diagonals
    else:
        per_client, full = False, True       # square: ambiguous, resolved by the caller's per_client
    return arr, per_client, full


@rebuildable
def preconditioned(lr: float, P: ArrayLike, *, per_client: bool | None = None) -> Optimizer:
    r"""Fixed-preconditioner gradient descent: u = -lr P_i g (elementwise for a diagonal).

    Parameters
    ----------
    lr : float
        Learning rate > 0.
    P : array
        ``(d,)`` shared diagonal, ``(d, d)`` shared symmetric positive definite
        matrix, ``(N, d)`` per-client diagonals or ``(N, d, d)`` per-client SPD
        matrices.  Row i of a per-client P belongs to client i and is selected
        by the ``clients`` argument of ``init``.  Diagonals must be > 0.
    per_client : bool, optional
        Required for a square 2-D P (N == d), which is otherwise ambiguous:
        ``True`` reads it as (N, d) per-client diagonals, ``False`` as a shared
        (d, d) matrix; omitting it raises :class:`InvalidHyperparameterError`
        (never a silent guess).  For other shapes it may be given and must
        agree with the shape.

    Notes
    -----
    ``precond``: P_i of each row ((m, d) or (m, d, d)); 0 before any update.
    Gradient descent on f_i(y) = 1/2 y^T H y - e^T y with a full P converges
    iff the spectral radius of I - lr P H is < 1 (the error obeys
    y_k - y* = (I - lr P H)^k (y_0 - y*)).
    """
    lr = _checks.learning_rate("preconditioned: lr", lr)
    if per_client is not None and not isinstance(per_client, (bool, np.bool_)):
        raise InvalidHyperparameterError(
            f"preconditioned: per_client must be True, False or None, got {per_client!r}")
    arr, pc, full = _check_P(P)
    square = arr.ndim == 2 and arr.shape[0] == arr.shape[1]
    if square and per_client is None:
        raise InvalidHyperparameterError(
            f"preconditioned: P of shape {arr.shape} is ambiguous (per-client diagonals for "
            f"{arr.shape[0]} clients, or one shared {arr.shape[0]}x{arr.shape[1]} matrix); "
            "pass per_client=True or per_client=False explicitly")
    if square:
        pc, full = bool(per_client), not bool(per_client)
    elif per_client is not None and bool(per_client) != pc:
        raise InvalidHyperparameterError(
            f"preconditioned: per_client={per_client} contradicts P of shape {arr.shape}")
    if full:
        if arr.shape[-1] != arr.shape[-2]:
            raise InvalidHyperparameterError(
                f"preconditioned: a full P must be square (d, d) per client, got shape {arr.shape}")
        asym = np.max(np.abs(arr - np.swapaxes(arr, -1, -2)))
        scale = max(1.0, float(np.max(np.abs(arr))))
        if asym > 1e-12 * scale:
            raise InvalidHyperparameterError(
                f"preconditioned: a full P must be symmetric, max |P - P^T| = {asym:.3g}")
        eig_min = float(np.min(np.linalg.eigvalsh(arr)))
        if eig_min <= 0:
            raise InvalidHyperparameterError(
                f"preconditioned: a full P must be positive definite, smallest eigenvalue {eig_min:.3g}")
    elif np.any(arr <= 0):
        raise InvalidHyperparameterError(
            f"preconditioned: a diagonal P must be > 0 entrywise, smallest entry {float(arr.min()):.3g}")
    dim = arr.shape[-1]
    n_rows = arr.shape[0] if pc else None

    def init(params: Any, clients: Any = None) -> PreconditionedState:
        x = _checks.rows(params, "preconditioned.init")
        if x.shape[1] != dim:
            raise InvalidHyperparameterError(
                f"preconditioned.init: P acts on dimension {dim} but params have d = {x.shape[1]}")
        c = _checks.client_index(clients, x.shape[0], "preconditioned.init")
        if n_rows is not None and x.shape[0] and c.max() >= n_rows:
            raise InvalidHyperparameterError(
                f"preconditioned.init: P has rows for {n_rows} clients, got client index {int(c.max())}")
        return PreconditionedState(np.zeros(x.shape[0], dtype=np.int64), c)

    def _rows(state: PreconditionedState) -> np.ndarray:
        if pc:
            return arr[state.clients]
        return np.broadcast_to(arr, (state.count.shape[0],) + arr.shape)

    def update(grads: Any, state: PreconditionedState, params: Any = None
               ) -> tuple[np.ndarray, PreconditionedState]:
        g = _checks.grads_like(grads, state.count.shape[0], "preconditioned.update")
        Pr = _rows(state)
        step = np.einsum("mij,mj->mi", Pr, g) if full else Pr * g
        return -lr * step, PreconditionedState(state.count + 1, state.clients)

    def precond(state: PreconditionedState) -> np.ndarray:
        Pr = _rows(state)
        started = (state.count > 0).reshape((-1,) + (1,) * (Pr.ndim - 1))
        return np.where(started, Pr, 0.0)

    kind = ("per-client " if pc else "shared ") + ("matrix" if full else "diagonal")
    return Optimizer(init, update, precond, f"preconditioned(lr={lr:g}, {kind} P)")
