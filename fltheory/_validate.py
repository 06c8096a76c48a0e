"""Small input checks shared by constructors and public entry points.

Each check raises a typed error (an :class:`~fltheory.errors.FLTheoryError`
that also derives from the matching built-in) whose message names the
argument, the value given and what was expected.  Booleans, strings, complex
numbers and objects are never taken for real numbers; integers (step counts,
sizes, seeds) must be integers, not floats that happen to be whole.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .errors import InvalidHyperparameterError, InvalidProblemError

#: Largest step count / round count accepted anywhere: beyond it a run would
#: not finish in any useful time, so the value is taken for a mistake.
MAX_STEPS = 10**7


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _real_dtype(dtype: np.dtype) -> bool:
    """Integer or floating, but not bool, complex, object or string."""
    return bool(np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating))


def real_array(name: str, value: Any, error: type[Exception]) -> np.ndarray:
    """``value`` as an array of a real numeric dtype (no bool/complex/object/str)."""
    if isinstance(value, (str, bytes)):
        raise error(f"{name} must be numeric, got the string {_short(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:     # ragged nested sequences
        raise error(f"{name} must be numeric, got {_short(value)}") from exc
    if not _real_dtype(arr.dtype):
        raise error(f"{name} must be numeric (real numbers), got dtype {arr.dtype} ({_short(value)})")
    return arr


def finite_array(name: str, value: Any, *, ndim: int | None = None,
                 error: type[Exception] = InvalidProblemError, copy: bool = True) -> np.ndarray:
    """Return ``value`` as a float64 array, rejecting non-real dtypes, NaN/inf and wrong ndim.

    The result is a new array unless ``copy=False`` and ``value`` is already a float64
    array (then ``value`` itself: for callers that own it)."""
    arr = real_array(name, value, error)
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    with np.errstate(over="ignore"):
        arr = arr.astype(np.float64, copy=copy)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        index = tuple(int(b) for b in bad)
        raise error(f"{name} contains a non-finite value {float(arr[index])!r} at index {index}")
    return arr


def real_scalar(name: str, value: Any, error: type[Exception] = InvalidHyperparameterError) -> float:
    """A finite real Python/numpy scalar (no bool, complex, string or array)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise error(f"{name} must be a real number, got {_short(value)} ({type(value).__name__})")
    v = float(value)
    if not np.isfinite(v):
        raise error(f"{name} must be finite, got {v!r}")
    return v


def positive(name: str, value: Any, *, allow_zero: bool = False,
             error: type[Exception] = InvalidHyperparameterError) -> float:
    """A finite real scalar > 0 (or >= 0 with ``allow_zero``)."""
    v = real_scalar(name, value, error)
    if v < 0 or (v == 0 and not allow_zero):
        expected = ">= 0" if allow_zero else "> 0"
        raise error(f"{name} must be finite and {expected}, got {v!r}")
    return v


def integer(name: str, value: Any, *, minimum: int = 0, maximum: int | None = MAX_STEPS,
            error: type[Exception] = InvalidHyperparameterError) -> int:
    """A Python/numpy integer (not bool, not a float) in [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise error(f"{name} must be an integer, got {_short(value)} ({type(value).__name__})")
    v = int(value)
    if v < minimum or (maximum is not None and v > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise error(f"{name} must be an integer >= {minimum}{upper}, got {v}")
    return v


def in_unit_interval(name: str, value: Any, *, left_closed: bool = False,
                     right_closed: bool = True,
                     error: type[Exception] = InvalidHyperparameterError) -> float:
    """A real scalar in (0, 1] by default; the interval ends are selectable."""
    v = real_scalar(name, value, error)
    lo_ok = v >= 0 if left_closed else v > 0
    hi_ok = v <= 1 if right_closed else v < 1
    if not (lo_ok and hi_ok):
        interval = ("[" if left_closed else "(") + "0, 1" + ("]" if right_closed else ")")
        raise error(f"{name} must lie in {interval}, got {v!r}")
    return v


def per_client(name: str, value: Any, n_clients: int | None, *, integer: bool = False,
               minimum: float = 0.0, strict: bool = True,
               error: type[Exception] = InvalidHyperparameterError) -> np.ndarray | float | int:
    """A scalar, or an array of length ``n_clients`` (checked when known), all
    > minimum (>= with ``strict=False``).  With ``integer=True`` the values must
    have an integer dtype (a float such as ``2.0`` or ``1e12`` is refused) and be
    at most :data:`MAX_STEPS`.  Scalars are returned as Python scalars."""
    arr = real_array(name, value, error)
    if arr.ndim > 1:
        raise error(f"{name} must be a scalar or a 1-D per-client array, got shape {arr.shape}")
    if arr.ndim == 1 and n_clients is not None and arr.shape[0] != n_clients:
        raise error(f"{name} has {arr.shape[0]} entries but the problem has {n_clients} clients")
    if arr.ndim == 1 and arr.shape[0] == 0:
        raise error(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise error(f"{name} must be finite, got {_short(value)}")
    if integer and not np.issubdtype(arr.dtype, np.integer):
        raise error(f"{name} must be an integer (or an integer array), got {_short(value)} of dtype {arr.dtype}")
    bad = arr <= minimum if strict else arr < minimum
    if np.any(bad):
        op = ">" if strict else ">="
        raise error(f"{name} must be {op} {minimum}, got {_short(value)}")
    if integer and np.any(arr > MAX_STEPS):
        raise error(f"{name} must be <= {MAX_STEPS} (larger step counts never finish), got {_short(value)}")
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


def flag(name: str, value: Any, error: type[Exception] = InvalidHyperparameterError) -> bool:
    """A boolean switch: True/False (numpy bools included), never an array or a string."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be True or False, got {_short(value)} ({type(value).__name__})")
    return bool(value)


OptionT = TypeVar("OptionT")


def choice(name: str, value: Any, options: tuple[OptionT, ...],
           error: type[Exception] = InvalidHyperparameterError) -> OptionT:
    """One of the named options."""
    if not any(value is o or (isinstance(value, str) and value == o) for o in options):
        raise error(f"{name} must be one of {options}, got {_short(value)}")
    return value


def seed_value(name: str, value: Any, error: type[Exception] = InvalidHyperparameterError
               ) -> int | np.random.SeedSequence:
    """A non-negative integer seed or a :class:`numpy.random.SeedSequence`."""
    if isinstance(value, np.random.SeedSequence):
        return value
    return integer(name, value, minimum=0, maximum=None, error=error)


def generator(name: str, value: Any, error: type[Exception] = InvalidHyperparameterError
              ) -> np.random.Generator:
    """A :class:`numpy.random.Generator` (random draws are always explicit)."""
    if not isinstance(value, np.random.Generator):
        raise error(f"{name} must be a numpy.random.Generator (e.g. np.random.default_rng(0)), "
                    f"got {_short(value)}")
    return value


_REAL_ANNOTATIONS = {"float", "float | None", "Optional[float]"}
_INT_ANNOTATIONS = {"int", "int | None", "Optional[int]"}
_BOOL_ANNOTATIONS = {"bool"}
_CONSTANT_NAMES = {"constant"}


def _annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def checked_arguments(fn: Any) -> Any:
    """Decorator for functions of explicit constants (the bounds): every argument
    annotated ``float`` must be a finite real number, every ``int`` an integer
    (not a float, not a bool), every ``constant`` (an O(.) constant) > 0;
    ``X | None`` also accepts None.  An OverflowError or ZeroDivisionError from
    the formula, or a NaN/inf ``value`` in the returned record, becomes
    :class:`~fltheory.errors.OutOfRangeError`.  Signs and ranges that are a
    theorem's hypotheses stay the function's business (reported as assumptions).
    """
    import functools
    import inspect

    from .errors import OutOfRangeError

    signature = inspect.signature(fn)
    kinds: dict[str, tuple[str, bool]] = {}
    for name, par in signature.parameters.items():
        text = _annotation_text(par.annotation)
        optional = "None" in text
        if text in _REAL_ANNOTATIONS:
            kinds[name] = ("real", optional)
        elif text in _INT_ANNOTATIONS:
            kinds[name] = ("int", optional)
        elif text in _BOOL_ANNOTATIONS:
            kinds[name] = ("bool", False)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidHyperparameterError(f"{fn.__name__}: {exc}") from None
        for name, value in bound.arguments.items():
            if name not in kinds or (value is None and kinds[name][1]):
                continue
            kind = kinds[name][0]
            if kind == "bool":
                flag(f"{fn.__name__}: {name}", value)
            elif kind == "int":
                integer(f"{fn.__name__}: {name}", value, minimum=-(2**62), maximum=None)
            elif name in _CONSTANT_NAMES:
                positive(f"{fn.__name__}: {name}", value)
            else:
                real_scalar(f"{fn.__name__}: {name}", value)
        try:
            with np.errstate(over="raise", divide="raise", invalid="raise"):
                result = fn(*args, **kwargs)
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            raise OutOfRangeError(f"{fn.__name__}: the formula leaves float64 range at these "
                                  f"arguments ({exc})") from None
        value = getattr(result, "value", None)
        if isinstance(value, float) and np.isnan(value):
            raise OutOfRangeError(f"{fn.__name__}: the bound evaluates to NaN at these arguments")
        return result

    return wrapper


def instance(name: str, value: Any, cls: type | tuple[type, ...], expected: str,
             error: type[Exception] = InvalidProblemError) -> Any:
    """``value`` if it is an instance of ``cls``; else a typed error saying what is expected."""
    if not isinstance(value, cls):
        raise error(f"{name} must be {expected}, got {_short(value)} ({type(value).__name__})")
    return value


#: A check of a method's arguments: (self, *args, **kwargs) -> (checked args, checked kwargs).
ArgumentCheck = Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]
#: A check of a method's result: (self, result) -> None, raising a typed error.
ResultCheck = Callable[[Any, Any], None]


def check_methods_of(cls: type, checks: dict[str, ArgumentCheck],
                     results: dict[str, ResultCheck] | None = None) -> None:
    """Replace each method named in ``checks`` that ``cls`` itself defines by a version that
    runs its check first, and the check of its result in ``results`` (if any) after (once per
    method; abstract methods are left alone).  Used by ``Federation`` and ``Algorithm``
    subclasses so that user classes keep the typed-error contract."""
    for name, check in checks.items():
        method = vars(cls).get(name)
        if callable(method) and not getattr(method, "__arguments_checked__", False) \
                and not getattr(method, "__isabstractmethod__", False):
            setattr(cls, name, _checked_method(method, check, (results or {}).get(name)))


def _checked_method(method: Callable[..., Any], check: ArgumentCheck,
                    result_check: ResultCheck | None = None) -> Callable[..., Any]:
    if result_check is None:
        @functools.wraps(method)
        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = check(self, *args, **kwargs)     # a missing argument: Python's own TypeError
            return method(self, *args, **kwargs)
    else:
        @functools.wraps(method)
        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = check(self, *args, **kwargs)
            out = method(self, *args, **kwargs)
            result_check(self, out)
            return out
    checked.__arguments_checked__ = True  # type: ignore[attr-defined]
    return checked


def known_keywords(where: str, kwargs: dict[str, Any], target: Callable[..., Any],
                   exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """``kwargs`` if every key is a keyword parameter of ``target`` (the callee
    the keywords are forwarded to), less ``exclude``; else a typed error naming
    the unknown keywords and the accepted ones (a forwarded ``**kwargs`` would
    otherwise give Python's bare TypeError from inside the library)."""
    params = inspect.signature(target).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    accepted = sorted(n for n, p in params.items()
                      if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                      and n not in exclude)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise InvalidHyperparameterError(f"{where}: unknown keyword argument(s) {unknown}; "
                                         f"accepted: {accepted}")
    return kwargs
