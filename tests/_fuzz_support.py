"""Machinery of the public-API fuzz suite (tests/test_fuzz_public_api.py).

The public surface is read from the ``__all__`` of every public package, so a
function or class added there is fuzzed the day it is added.  Each callable is
called with plausible arguments (:func:`base_arguments`, chosen by parameter
name) in which exactly one parameter is replaced by a bad value.  The contract:
the call raises an :class:`~fltheory.errors.FLTheoryError` or returns a
result whose numbers are all finite, within :data:`TIME_LIMIT` seconds.
Anything else (a raw numpy/Python exception, NaN/inf in the result, a hang)
is a failure.  Outcomes are tallied in :data:`TALLY` and printed at the end of
the session by ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib
import inspect
import signal
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from fltheory.errors import FLTheoryError

#: Packages whose ``__all__`` is the public surface under test.
PUBLIC_PACKAGES = ("fltheory.problems", "fltheory.algorithms", "fltheory.theory",
                   "fltheory.theory.bounds", "fltheory.nn", "fltheory.optim",
                   "fltheory.compression", "fltheory.participation")

#: Seconds one call may take before it counts as a hang.
TIME_LIMIT = 3.0


class Outcome(str, enum.Enum):
    TYPED = "typed fltheory error"
    FINITE = "finite result"
    RAW = "raw exception"
    NONFINITE = "non-finite result"
    HANG = "hang (time limit)"


#: Outcome counts and the set of distinct inputs tried in this session.
TALLY: Counter[str] = Counter()
INPUTS: set[str] = set()


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def _alarm(signum: int, frame: Any) -> None:
        raise _Hang
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _is_data_container(obj: Any) -> bool:
    """Result / state records (NamedTuples, frozen result dataclasses, enums):
    they hold what routines computed and are not entry points."""
    if isinstance(obj, type):
        if issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return True
        if issubclass(obj, (enum.Enum, BaseException)):
            return True
        if dataclasses.is_dataclass(obj) and not _has_own_init_checks(obj):
            return True
    return False


def _has_own_init_checks(cls: type) -> bool:
    return "__post_init__" in vars(cls) or ("__init__" in vars(cls) and not dataclasses.is_dataclass(cls))


def public_callables() -> list[tuple[str, Callable[..., Any]]]:
    """(qualified name, callable) for every public function and concrete class."""
    seen: dict[int, str] = {}
    out: list[tuple[str, Callable[..., Any]]] = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not callable(obj) or id(obj) in seen or _is_data_container(obj):
                continue
            if isinstance(obj, type) and inspect.isabstract(obj):
                continue
            if getattr(obj, "_is_protocol", False):
                continue
            try:
                inspect.signature(obj)
            except (TypeError, ValueError):
                continue
            seen[id(obj)] = name
            out.append((f"{package}.{name}", obj))
    return out


# ---------------------------------------------------------------- arguments
def _quadratic() -> Any:
    from fltheory.problems import random_quadratic
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _logistic() -> Any:
    from fltheory.problems import LogisticFederation
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((6, 2)) for _ in range(3)]
    y = [np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]) for _ in range(3)]
    return LogisticFederation(A, y, reg=0.1)


def _algorithm() -> Any:
    from fltheory.algorithms import FedAvg
    return FedAvg(lr=0.1, local_steps=2)


def _affine_map() -> Any:
    from fltheory.theory import affine_round_map
    return affine_round_map(_algorithm(), _quadratic())


#: Plausible values by parameter name (factories, so every call gets fresh objects).
_PLAUSIBLE: dict[str, Callable[[], Any]] = {
    "problem": _quadratic, "fed": _quadratic, "federation": _quadratic,
    "algorithm": _algorithm, "amap": _affine_map,
    "rng": lambda: np.random.default_rng(0), "seed": lambda: 0,
    "x": lambda: np.zeros(2), "x0": lambda: np.zeros(2), "center": lambda: np.zeros(2),
    "X": lambda: np.zeros((3, 2)), "W": lambda: np.zeros((3, 2)),
    "H": lambda: np.stack([np.eye(2)] * 3), "e": lambda: np.zeros((3, 2)),
    "n_clients": lambda: 3, "dim": lambda: 2, "d": lambda: 2, "n": lambda: 6, "N": lambda: 3,
    "rounds": lambda: 2, "local_steps": lambda: 2, "K": lambda: 2, "tau": lambda: 2, "E": lambda: 2,
    "R": lambda: 10, "S": lambda: 2, "J": lambda: 2, "T": lambda: 2, "k": lambda: 1,
    "steps": lambda: np.array([1, 2, 1]), "size": lambda: 2, "units": lambda: 2,
    "lr": lambda: 0.1, "server_lr": lambda: 1.0, "eta_l": lambda: 0.1, "eta_g": lambda: 1.0,
    "mu": lambda: 0.5, "L": lambda: 1.0, "beta": lambda: 1.0, "gamma": lambda: 0.5,
    "heterogeneity": lambda: 0.5, "eps": lambda: 0.1, "sigma2": lambda: 0.1, "G": lambda: 1.0,
    "G2": lambda: 1.0, "B": lambda: 1.0, "D": lambda: 1.0, "zeta2": lambda: 0.1, "delta": lambda: 0.1,
    "theta": lambda: 1.5, "q": lambda: 0.5, "p": lambda: 0.5, "prob": lambda: 0.5,
    "constant": lambda: 1.0, "init_dist2": lambda: 1.0, "dist2": lambda: 1.0,
    "labels": lambda: np.array([0, 1, 0, 1, 0, 1]), "features": lambda: [np.ones((2, 2))] * 3,
    "input_shape": lambda: (2,), "input_dim": lambda: 2, "hidden": lambda: 2, "n_classes": lambda: 2,
    "weights": lambda: None, "n_samples": lambda: None, "participation": lambda: None,
    "V": lambda: np.ones((3, 2)), "values": lambda: np.ones(4), "bin_width": lambda: 0.1,
    "mean": lambda: 1.0, "sigma": lambda: 1.0, "concentration": lambda: 1.0,
    "layers": list, "method": lambda: "simulate", "constants": lambda: _quadratic().constants(),
    "diag": lambda: np.ones((3, 2)), "rank": lambda: 1,          # StructuredQuadraticFederation
}


def base_arguments(fn: Callable[..., Any]) -> tuple[dict[str, Any], list[str]]:
    """Keyword arguments for every required parameter of ``fn`` (plausible values
    by name, 1.0 when unknown) and the names of all parameters that can be fuzzed."""
    kwargs: dict[str, Any] = {}
    names: list[str] = []
    for name, par in inspect.signature(fn).parameters.items():
        if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD) or name == "self":
            continue
        if par.kind is par.POSITIONAL_ONLY:
            return {}, []          # not addressable by keyword: skipped
        names.append(name)
        if par.default is par.empty:
            kwargs[name] = _PLAUSIBLE.get(name, lambda: 1.0)()
    return kwargs, names


def _bad_values() -> list[tuple[str, Any]]:
    return [
        ("nan", float("nan")), ("inf", float("inf")), ("-inf", -float("inf")),
        ("negative", -1), ("negative float", -0.5), ("zero", 0), ("huge int", 10**12),
        ("huge float", 1e300), ("bool", True), ("string", "abc"), ("complex", 1j),
        ("object", object()), ("empty array", np.array([])),
        ("nan array", np.full((3, 2), np.nan)), ("wrong rank", np.ones((2, 2, 2, 2))),
        ("complex array", np.ones((3, 2), dtype=complex)), ("object array", np.array([1, "a"], dtype=object)),
        ("bool array", np.ones((3, 2), dtype=bool)), ("float32 nan", np.float32("nan")),
    ]


BAD_VALUES: list[tuple[str, Any]] = _bad_values()


def _nonfinite(value: Any, depth: int = 0) -> bool:
    """True when a numeric part of ``value`` (arrays, floats, containers, one
    level of record fields) is NaN or inf."""
    if depth > 3:
        return False
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return False
    if isinstance(value, (int, np.integer)):
        return False
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return not np.isfinite(value)
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.number):
            data = value.compressed() if isinstance(value, np.ma.MaskedArray) else value
            return not bool(np.all(np.isfinite(data)))
        return False
    if isinstance(value, (list, tuple)):
        return any(_nonfinite(v, depth + 1) for v in value[:64])
    if isinstance(value, dict):
        return any(_nonfinite(v, depth + 1) for v in list(value.values())[:64])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_nonfinite(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


@dataclasses.dataclass
class Call:
    """One fuzzed call and what happened."""

    target: str
    parameter: str
    kind: str
    outcome: Outcome
    detail: str = ""


@contextlib.contextmanager
def registries_restored() -> Iterator[None]:
    """Undo what a fuzzed call registers globally (``register_run_method``
    accepts any string name: a fuzzed "abc" must not outlive the call)."""
    run_module = importlib.import_module("fltheory.algorithms.run")
    saved = dict(run_module._METHODS)
    try:
        yield
    finally:
        run_module._METHODS.clear()
        run_module._METHODS.update(saved)


def fuzz_call(target: str, fn: Callable[..., Any], parameter: str, kind: str, value: Any,
              base: Callable[[], dict[str, Any]] | None = None) -> Call:
    """Call ``fn`` with its base arguments (updated by ``base()`` when given: working
    values where the plausible ones by name do not fit) and ``parameter=value``; classify."""
    kwargs, _ = base_arguments(fn)
    if base is not None:
        kwargs.update(base())
    kwargs[parameter] = value
    INPUTS.add(f"{target}|{parameter}|{kind}")
    try:
        with registries_restored(), time_limit(TIME_LIMIT), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                result = fn(**kwargs)
    except _Hang:
        outcome, detail = Outcome.HANG, f"more than {TIME_LIMIT} s"
    except FLTheoryError as exc:
        outcome, detail = Outcome.TYPED, str(exc)[:120]
    except Exception as exc:
        outcome, detail = Outcome.RAW, f"{type(exc).__name__}: {str(exc)[:120]}"
    else:
        outcome = Outcome.NONFINITE if _nonfinite(result) else Outcome.FINITE
        detail = "" if outcome is Outcome.FINITE else repr(result)[:120]
    TALLY[outcome.value] += 1
    return Call(target, parameter, kind, outcome, detail)


def sweep(target: str, fn: Callable[..., Any], kinds: list[tuple[str, Any]] | None = None,
          base: Callable[[], dict[str, Any]] | None = None) -> list[Call]:
    """Every fuzzable parameter of ``fn`` times every bad value (``base`` as in :func:`fuzz_call`)."""
    _, names = base_arguments(fn)
    calls = []
    for parameter in names:
        for kind, value in (BAD_VALUES if kinds is None else kinds):
            calls.append(fuzz_call(target, fn, parameter, kind, value, base))
    return calls
