"""Argument checks shared by the optimizer constructors and their state
functions.  Hyperparameters raise :class:`InvalidHyperparameterError`; arrays
of the wrong shape raise :class:`InvalidProblemError`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import in_unit_interval, positive, real_array
from ..errors import InvalidHyperparameterError, InvalidProblemError, NonFinitePointError

__all__ = ["learning_rate", "decay", "stability", "accumulator", "rows", "grads_like",
           "client_index", "client_rows"]


def learning_rate(name: str, lr: Any) -> float:
    """A finite learning rate > 0."""
    return positive(name, lr)


def decay(name: str, beta: Any) -> float:
    """A decay / momentum coefficient in [0, 1)."""
    return in_unit_interval(name, beta, left_closed=True, right_closed=False)


def stability(name: str, eps: Any) -> float:
    """A stabilising constant eps > 0 (added to a square root in a denominator)."""
    return positive(name, eps)


def accumulator(name: str, value: Any) -> float:
    """An initial second-moment accumulator >= 0."""
    return positive(name, value, allow_zero=True)


def rows(params: Any, where: str) -> np.ndarray:
    """``params`` as a float64 (m, d) array (one row per client)."""
    arr = np.asarray(params, dtype=np.float64)
    if arr.ndim != 2:
        raise InvalidProblemError(
            f"{where}: params must be an (m, d) array with one row per client, got shape {arr.shape}")
    return arr


def grads_like(grads: Any, m: int, where: str) -> np.ndarray:
    """``grads`` as a float64 (m, d) array whose row count matches the state (a float64
    ndarray, what the local loop passes every step, is taken as it is: the same array
    ``real_array`` and ``astype(copy=False)`` would return, without their dtype checks)."""
    if type(grads) is np.ndarray and grads.dtype == np.float64:
        g = grads
    else:
        g = real_array(f"{where}: grads", grads, InvalidProblemError).astype(np.float64, copy=False)
    if g.ndim != 2 or g.shape[0] != m:
        raise InvalidProblemError(
            f"{where}: grads must be an ({m}, d) array matching the state's {m} rows, got shape {g.shape}")
    if not np.isfinite(g).all():
        raise NonFinitePointError(f"{where}: grads contain NaN or inf (an update would spread them "
                                  "into the optimizer state)")
    return g


def client_index(clients: Any, m: int, where: str) -> np.ndarray:
    """The (m,) int64 client indices of the rows; ``None`` means 0..m-1."""
    if clients is None:
        return np.arange(m, dtype=np.int64)
    if type(clients) is np.ndarray and clients.dtype == np.int64 and clients.shape == (m,):
        if m and clients.min() < 0:          # the checks below, without the dtype lookups
            raise InvalidHyperparameterError(f"{where}: client indices must be >= 0, got {clients.tolist()}")
        return clients.copy()
    c = np.asarray(clients)
    if c.shape != (m,) or not np.issubdtype(c.dtype, np.integer):
        raise InvalidHyperparameterError(
            f"{where}: clients must be an ({m},) integer array (one index per row), got {c!r}")
    if m and c.min() < 0:
        raise InvalidHyperparameterError(f"{where}: client indices must be >= 0, got {c.tolist()}")
    return c.astype(np.int64)


#: The last immutable client index array found valid, with its length (one tuple: read atomically).
_KNOWN_CLIENTS: list[tuple[Any, int]] = [(None, -1)]


def client_rows(clients: Any, m: int, where: str) -> None:
    """Check ``clients`` as :func:`client_index` does, without returning a copy.

    An (m,) int64 array with no negative entry passes without the copy; an array whose
    contents can never change (a read-only view of ``bytes``, e.g. the shared clients of
    full participation, ``fltheory.participation.full_participants``) is remembered once
    checked (a strong reference, so its identity cannot be reused) and then recognised
    without a pass over it."""
    known, length = _KNOWN_CLIENTS[0]
    if clients is known and length == m:
        return
    if not (type(clients) is np.ndarray and clients.dtype == np.int64 and clients.shape == (m,)
            and (m == 0 or np.minimum.reduce(clients) >= 0)):
        client_index(clients, m, where)
        return
    if type(clients.base) is bytes and not clients.flags.writeable:
        _KNOWN_CLIENTS[0] = (clients, m)
