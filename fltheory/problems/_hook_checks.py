"""Argument checks of the federation hooks (``Federation.shifted_solve`` and co).

The hooks are public methods that algorithms and theory routines call at most
a few times per round (never per local step: the local loop uses the unchecked
``row_gradient`` kernel), so each checks its arguments: client indices, (m, d)
row arrays of real finite numbers, scalar options.  Bad input raises a typed
error naming the argument, the value and what is expected.  The checks convert
nothing a caller passes correctly (float64 arrays come back as the same
objects), so no numerical result changes.

:func:`checked_hooks` wraps the hooks a federation class defines; the base
class applies it to itself and to every subclass (``__init_subclass__``), so a
user's federation gets the same checks for free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import ArgumentCheck, check_methods_of, _short, integer, positive, real_array
from ..errors import InvalidHyperparameterError, InvalidProblemError, NonFinitePointError

if TYPE_CHECKING:
    from .base import Federation

__all__ = ["HOOK_CHECKS", "checked_hooks", "check_rows", "check_client_index"]


def check_rows(fed: Federation, name: str, value: Any, m: int) -> np.ndarray:
    """``value`` as a finite float64 (m, d) array (one row per listed client); NaN/inf
    raise NonFinitePointError (an InvalidProblemError), as the oracles do."""
    arr = real_array(name, value, InvalidProblemError)
    if arr.shape != (m, fed.dim):
        raise InvalidProblemError(
            f"{name} must have shape ({m}, {fed.dim}) (one row per listed client), got shape {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):      # NonFinitePointError: runners read it as divergence
        raise NonFinitePointError(f"{name} must be finite, got a non-finite entry in {_short(arr)}")
    return arr


def check_client_index(fed: Federation, name: str, value: Any) -> int:
    """One client index in [0, N)."""
    return integer(name, value, minimum=0, maximum=fed.n_clients - 1, error=InvalidProblemError)


def _shifted_solve(fed: Federation, clients: Any, D: Any, b: Any, Y0: Any, *, tol: Any = 1e-12,
                   max_iter: Any = 100) -> tuple[tuple[Any, ...], dict[str, Any]]:
    idx = fed._clients(clients)
    m = idx.shape[0]
    D = check_rows(fed, "D", D, m)
    if np.any(D < 0):
        raise InvalidProblemError(f"D must be >= 0 (diagonal proximal weights), got {_short(D)}")
    b = check_rows(fed, "b", b, m)
    Y0 = check_rows(fed, "Y0", Y0, m)
    tol = positive("tol", tol)
    max_iter = integer("max_iter", max_iter, minimum=1)
    return (idx, D, b, Y0), {"tol": tol, "max_iter": max_iter}


def _smoothness_bounds(fed: Federation, clients: Any, Y: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    idx = fed._clients(clients)
    return (idx, check_rows(fed, "Y", Y, idx.shape[0])), {}


def _client_gaps(fed: Federation, W: Any, clients: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    idx = fed._clients(clients)
    return (check_rows(fed, "W", W, idx.shape[0]), idx), {}


def _loss_and_grad_norm2(fed: Federation, X: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    arr = real_array("X", X, InvalidProblemError)
    if arr.ndim != 2 or arr.shape[1] != fed.dim:
        raise InvalidProblemError(f"X must have shape (T, {fed.dim}) (one point per row), got shape {arr.shape}")
    return (check_rows(fed, "X", arr, arr.shape[0]),), {}


def _client_block(fed: Federation, start: Any, stop: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    a = integer("start", start, minimum=0, maximum=fed.n_clients, error=InvalidProblemError)
    b = integer("stop", stop, minimum=a, maximum=fed.n_clients, error=InvalidProblemError)
    return (a, b), {}


def _cvxpy_client_loss(fed: Federation, client: Any, y: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    k = check_client_index(fed, "client", client)
    if not type(y).__module__.startswith("cvxpy") or tuple(getattr(y, "shape", ())) != (fed.dim,):
        raise InvalidHyperparameterError(
            f"cvxpy_client_loss: y must be a cvxpy expression of shape ({fed.dim},) (e.g. cvxpy.Variable({fed.dim})), "
            f"got {_short(y)} ({type(y).__name__})")
    return (k, y), {}


#: hook name -> check(fed, *args, **kwargs) -> (checked args, checked kwargs)
HOOK_CHECKS: dict[str, ArgumentCheck] = {
    "shifted_solve": _shifted_solve,
    "smoothness_bounds": _smoothness_bounds,
    "client_gaps": _client_gaps,
    "loss_and_grad_norm2": _loss_and_grad_norm2,
    "client_block": _client_block,
    "cvxpy_client_loss": _cvxpy_client_loss,
}


def checked_hooks(cls: type) -> None:
    """Replace each method of ``HOOK_CHECKS`` that ``cls`` itself defines by a checked version (once)."""
    check_methods_of(cls, HOOK_CHECKS)
