"""Argument checks shared by the public entry points of :mod:`fltheory.theory`.

Each check raises a typed error (:mod:`fltheory.errors`) whose message names
the argument, the value given and what is expected, before any work is done:
an object that is not an algorithm, a start vector with NaN, a tolerance that
is a string, client indices that are floats.  (The checks of a start state and
of a recovered affine map live beside their types, in ``round_maps`` and
``affine``: this module imports neither, so it adds no import cycle.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import _short, finite_array, flag, generator, integer, positive, real_array, real_scalar
from ..algorithms.base import Algorithm
from ..errors import InvalidHyperparameterError, InvalidProblemError
from ..problems.base import Federation

__all__ = ["algorithm_and_problem", "client_indices", "condition_limit", "optional_flag",
           "optional_generator", "server_model", "size_limit", "tolerance"]


def algorithm_and_problem(algorithm: Any, problem: Any) -> None:
    """``algorithm`` an :class:`~fltheory.algorithms.base.Algorithm`, ``problem`` a Federation."""
    if not isinstance(algorithm, Algorithm):
        raise InvalidHyperparameterError(
            f"algorithm must be an fltheory Algorithm (e.g. FedAvg(lr=0.1, local_steps=2)), "
            f"got {_short(algorithm)} ({type(algorithm).__name__})")
    if not isinstance(problem, Federation):
        raise InvalidProblemError(f"problem must be a Federation, got {_short(problem)} ({type(problem).__name__})")


def server_model(name: str, value: Any, dim: int) -> np.ndarray:
    """A finite float64 vector of shape (dim,) (a copy)."""
    x = finite_array(name, value, error=InvalidProblemError)
    if x.shape != (dim,):
        raise InvalidProblemError(f"{name} must be a finite vector of shape ({dim},), got shape {x.shape}")
    return x.copy()


def tolerance(name: str, value: Any, *, below_one: bool = False) -> float:
    """A finite real number > 0 (and < 1 with ``below_one``)."""
    v = positive(name, value)
    if below_one and v >= 1:
        raise InvalidHyperparameterError(f"{name} must lie in (0, 1), got {v!r}")
    return v


def condition_limit(name: str, value: Any) -> float:
    """A finite real number > 1 (a largest accepted condition number)."""
    v = real_scalar(name, value)
    if not v > 1:
        raise InvalidHyperparameterError(f"{name} must be a finite number > 1, got {v!r}")
    return v


def size_limit(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (a largest accepted dimension or count)."""
    return integer(name, value, minimum=minimum, maximum=None)


def optional_generator(name: str, value: Any) -> np.random.Generator | None:
    """None or a :class:`numpy.random.Generator`."""
    return None if value is None else generator(name, value)


def optional_flag(name: str, value: Any) -> bool | None:
    """None, True or False."""
    return None if value is None else flag(name, value)


def client_indices(name: str, value: Any, n_clients: int) -> np.ndarray:
    """None (every client) or integer indices in [0, n_clients) -> (m,) int64."""
    if value is None:
        return np.arange(n_clients)
    idx = real_array(name, value, InvalidProblemError)
    if idx.ndim == 0:
        idx = idx[None]
    if idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
        raise InvalidProblemError(f"{name} must be an integer index or a 1-D array of integer indices, "
                                  f"got {_short(value)}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= n_clients):
        raise InvalidProblemError(f"{name} must lie in [0, {n_clients}), got {idx.tolist()[:10]}")
    return idx
