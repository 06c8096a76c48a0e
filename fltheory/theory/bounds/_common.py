"""Small shared helpers of the bound modules: hypothesis checks that build
:class:`~fltheory.theory.result.Assumption` records, and duck-typed reading of
problem-constant objects (``fltheory.problems.constants.ProblemConstants`` or
anything with the same attribute names)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validate import _short, real_array
from ...errors import InvalidHyperparameterError
from ..result import Assumption

__all__ = ["positive_check", "constant_from", "as_float", "uniform_smoothness", "uniform_convexity",
           "probability_weights", "real_values"]


def real_values(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array of a real dtype (strings, complex, bool, objects refused);
    finiteness and shape stay the caller's checks."""
    return real_array(name, value, InvalidHyperparameterError).astype(np.float64)


def probability_weights(name: str, value: Any) -> np.ndarray:
    """A 1-D array of finite positive weights summing to 1 (to 1e-9)."""
    p = real_values(name, value)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p <= 0) or abs(p.sum() - 1) > 1e-9:
        raise InvalidHyperparameterError(
            f"{name} must be a non-empty 1-D array of positive weights summing to 1, got {_short(value)}")
    return p


def as_float(name: str, value: Any) -> float:
    """A finite real scalar (typed error otherwise)."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidHyperparameterError(f"{name} must be a real number, got {value!r}") from exc
    if not np.isfinite(v):
        raise InvalidHyperparameterError(f"{name} must be finite, got {v!r}")
    return v


def positive_check(name: str, value: float, *, allow_zero: bool = False) -> Assumption:
    """Assumption record for ``value > 0`` (or ``>= 0``)."""
    ok = value >= 0 if allow_zero else value > 0
    return Assumption(f"{name} {'>=' if allow_zero else '>'} 0", bool(ok), f"{name} = {value!r}")


def constant_from(obj: Any, *names: str, default: Any = None, required: bool = True) -> Any:
    """First attribute of ``obj`` among ``names`` (duck-typed ProblemConstants)."""
    for n in names:
        if hasattr(obj, n):
            v = getattr(obj, n)
            if v is not None:
                return v
    if required and default is None:
        raise InvalidHyperparameterError(
            f"{type(obj).__name__} has none of the attributes {names}; pass the constant explicitly")
    return default


def uniform_smoothness(obj: Any) -> float:
    """max_k L_k from ``client_L`` when present (every client L-smooth), else ``L``."""
    if getattr(obj, "client_L", None) is not None:
        return float(np.max(obj.client_L))
    return float(constant_from(obj, "beta", "L"))


def uniform_convexity(obj: Any) -> float:
    """min_k mu_k from ``client_mu`` when present (every client mu-strongly convex), else ``mu``."""
    if getattr(obj, "client_mu", None) is not None:
        return float(np.min(obj.client_mu))
    return float(constant_from(obj, "mu"))
