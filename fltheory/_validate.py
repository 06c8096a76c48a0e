"""Small input checks shared by constructors; each raises a typed error whose
message names the argument, the value given and what was expected."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from .errors import InvalidHyperparameterError, InvalidProblemError


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def finite_array(name: str, value: Any, *, ndim: int | None = None,
                 error: type[Exception] = InvalidProblemError) -> np.ndarray:
    """Return ``value`` as a float64 array, rejecting NaN/inf and wrong ndim."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be numeric, got {_short(value)}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise error(f"{name} contains a non-finite value {arr[tuple(bad)]!r} at index {tuple(int(b) for b in bad)}")
    return arr


def positive(name: str, value: Any, *, allow_zero: bool = False,
             error: type[Exception] = InvalidHyperparameterError) -> float:
    """A finite real scalar > 0 (or >= 0 with ``allow_zero``)."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be a real number, got {_short(value)}") from exc
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        expected = ">= 0" if allow_zero else "> 0"
        raise error(f"{name} must be finite and {expected}, got {v!r}")
    return v


def in_unit_interval(name: str, value: Any, *, left_closed: bool = False,
                     right_closed: bool = True,
                     error: type[Exception] = InvalidHyperparameterError) -> float:
    """A real scalar in (0, 1] by default; the interval ends are selectable."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} must be a real number, got {_short(value)}") from exc
    lo_ok = v >= 0 if left_closed else v > 0
    hi_ok = v <= 1 if right_closed else v < 1
    if not (np.isfinite(v) and lo_ok and hi_ok):
        interval = ("[" if left_closed else "(") + "0, 1" + ("]" if right_closed else ")")
        raise error(f"{name} must lie in {interval}, got {v!r}")
    return v


def per_client(name: str, value: Any, n_clients: int | None, *, integer: bool = False,
               minimum: float = 0.0, strict: bool = True,
               error: type[Exception] = InvalidHyperparameterError) -> np.ndarray | float | int:
    """A scalar, or an array of length ``n_clients`` (checked when known), all
    > minimum (>= with ``strict=False``).  Integers are required with
    ``integer=True``.  Scalars are returned as Python scalars."""
    arr = np.asarray(value)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise error(f"{name} must be a number or an array of numbers, got {_short(value)}")
    if arr.ndim > 1:
        raise error(f"{name} must be a scalar or a 1-D per-client array, got shape {arr.shape}")
    if arr.ndim == 1 and n_clients is not None and arr.shape[0] != n_clients:
        raise error(f"{name} has {arr.shape[0]} entries but the problem has {n_clients} clients")
    if arr.ndim == 1 and arr.shape[0] == 0:
        raise error(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise error(f"{name} must be finite, got {_short(value)}")
    if integer and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise error(f"{name} must be integer-valued, got {_short(value)}")
    bad = arr <= minimum if strict else arr < minimum
    if np.any(bad):
        op = ">" if strict else ">="
        raise error(f"{name} must be {op} {minimum}, got {_short(value)}")
    if arr.ndim == 0:
        return int(arr) if integer else float(arr)
    return arr.astype(np.int64 if integer else np.float64)


def scalar_int(name: str, value: Any, *, minimum: float = 0.0, strict: bool = True,
               error: type[Exception] = InvalidHyperparameterError) -> int:
    """An integer-valued scalar > minimum (>= with ``strict=False``), as a Python int;
    the checks and messages of :func:`per_client`, and a per-client array is rejected."""
    checked = per_client(name, value, None, integer=True, minimum=minimum, strict=strict, error=error)
    if isinstance(checked, np.ndarray):
        raise error(f"{name} must be a scalar integer here, got an array of shape {checked.shape}")
    return int(checked)


OptionT = TypeVar("OptionT")


def choice(name: str, value: Any, options: tuple[OptionT, ...],
           error: type[Exception] = InvalidHyperparameterError) -> OptionT:
    """One of the named options."""
    if value not in options:
        raise error(f"{name} must be one of {options}, got {_short(value)}")
    return value
