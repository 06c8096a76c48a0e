"""Argument checks of the public entry points of :mod:`fltheory.theory.moments`.

Every check runs once, at the public entry, before any work starts; the engines
behind the entries (the per-round recursions) take checked values and do not
check again.  Each check raises a typed error (:mod:`fltheory.errors`, also the
matching built-in) naming the argument, the value given and what is expected.

Two limits refuse sizes that would not finish or not fit, before anything is
allocated:

* a round count above :data:`~fltheory._validate.MAX_STEPS` (every round of an
  exact recursion is at least one (d, d) matrix update and stores one (d, d)
  second moment, so such a count would run for days);
* a result or a working array above :data:`MAX_BYTES` (the memory it would take
  is stated in the message).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validate import MAX_STEPS, finite_array, instance, integer, positive, real_array
from ...algorithms.base import Algorithm
from ...errors import InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from ...participation import Participation
from ...problems.base import Federation
from ...problems.quadratic import QuadraticFederation

#: Largest array (bytes) a moments routine allocates for its result or its working set: 2 GiB.
MAX_BYTES = 2 * 1024**3


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 1024**3:.3g} GiB"


def memory_guard(what: str, n_floats: float) -> None:
    """Refuse an allocation of ``n_floats`` float64 numbers above :data:`MAX_BYTES`, saying what it is for."""
    need = 8.0 * float(n_floats)
    if need > MAX_BYTES:
        raise InvalidHyperparameterError(
            f"{what} would take {_gib(need)} of memory, more than the limit of {_gib(MAX_BYTES)}; "
            "use fewer rounds, clients, steps or dimensions")


def count(name: str, value: Any, *, minimum: int, why: str) -> int:
    """An integer >= ``minimum`` (not a bool, not a float) and at most :data:`MAX_STEPS`; ``why`` says
    what the count costs, for the message that refuses a larger one."""
    v = integer(name, value, minimum=minimum, maximum=None)
    if v > MAX_STEPS:
        raise InvalidHyperparameterError(
            f"{name} must be an integer <= {MAX_STEPS}, got {v}: {why}, so a larger count would not "
            "finish in any useful time")
    return v


def rounds_of(value: Any, d: int, *, per_round_floats: float = 0.0) -> int:
    """The round count R of an exact-moments routine: an integer in [0, MAX_STEPS] whose result
    ((R+1) second moments of size d x d, plus ``per_round_floats`` more per round) fits in memory."""
    R = count("rounds", value, minimum=0,
              why="every round is at least one exact (d, d) moment update and stores E[x_t x_t^T]")
    memory_guard(f"the moments of {R} rounds at d = {d} (one ({d}, {d}) second moment per round)",
                 (R + 1) * (d * d + d + per_round_floats))
    return R


def quadratic_problem(value: Any) -> QuadraticFederation:
    """A :class:`QuadraticFederation` (the closed-form paths read H_i and e_i)."""
    return instance("problem", value, QuadraticFederation, "a QuadraticFederation (exact moments need "
                    "quadratic clients)", error=InvalidProblemError)


def constant_hessian_problem(value: Any) -> Federation:
    """A federation of quadratic clients (constant Hessians: the round is affine in the state)."""
    fed = instance("problem", value, Federation, "a Federation of quadratic clients (a QuadraticFederation)",
                   error=InvalidProblemError)
    if not fed.has_constant_hessians:
        raise InvalidProblemError(
            f"problem must have quadratic clients (QuadraticFederation), got {type(value).__name__}: on other "
            "clients the round is not affine in the state")
    return fed


def algorithm_of(value: Any) -> Algorithm:
    return instance("algorithm", value, Algorithm, "an fltheory Algorithm (e.g. FedAvg(lr=0.1, local_steps=2))",
                    error=InvalidHyperparameterError)


def participation_of(value: Any) -> Participation | None:
    if value is None:
        return None
    return instance("participation", value, Participation,
                    "a Participation (e.g. UniformSampling(2)) or None for full participation",
                    error=InvalidHyperparameterError)


def model_vector(name: str, value: Any, d: int) -> np.ndarray:
    """A finite real (d,) vector (zeros when None)."""
    if value is None:
        return np.zeros(d)
    x = finite_array(name, value, error=InvalidProblemError)
    if x.shape != (d,):
        raise InvalidProblemError(f"{name} must be a finite vector of shape ({d},), got shape {x.shape}")
    return x.copy()


#: Smallest tolerance of the affinity check of a recovered map: its residual is a difference of
#: rounded float64 evaluations, so below this an affine round would be called non-affine.
MIN_RTOL = 1e-14


def tolerance(name: str, value: Any) -> float:
    """The relative tolerance of an affinity check, in [MIN_RTOL, 1)."""
    v = positive(name, value)
    if not MIN_RTOL <= v < 1.0:
        raise InvalidHyperparameterError(
            f"{name} must be a relative tolerance in [{MIN_RTOL:g}, 1), got {v!r} (below {MIN_RTOL:g} the "
            "rounding of the check itself would call an affine round non-affine)")
    return v


def step_counts(name: str, value: Any, *, length: int | None = None, minimum: int = 0) -> np.ndarray:
    """A 1-D integer array (an integer dtype: 2.0 is refused) with entries in [minimum, MAX_STEPS]."""
    arr = real_array(name, value, InvalidHyperparameterError)
    if arr.ndim != 1:
        raise InvalidHyperparameterError(f"{name} must be a 1-D array of integers, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise InvalidHyperparameterError(f"{name} must have {length} entries, got {arr.shape[0]}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidHyperparameterError(f"{name} must have an integer dtype, got {arr.dtype} ({arr!r})")
    if arr.size and (arr.min() < minimum or arr.max() > MAX_STEPS):
        raise InvalidHyperparameterError(
            f"{name} must have entries in [{minimum}, {MAX_STEPS}] (larger step counts never finish), got {arr!r}")
    return arr.astype(np.int64)


def finite_result(routine: str, arrays: dict[str, np.ndarray], context: str = "") -> None:
    """Refuse to return NaN/inf: the exact moments left float64 range (OutOfRangeError names where;
    ``context`` names the arguments that led there)."""
    at = f" at {context}" if context else ""
    for name, arr in arrays.items():
        bad = ~np.isfinite(arr)
        if np.any(bad):
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise OutOfRangeError(
                f"{routine}{at}: {name} leaves float64 range at index {where} (value {arr[where]!r}); the exact "
                "moments grow beyond what double precision represents (a diverging step size, a start x0 or "
                "a noise covariance too large, or too many rounds or steps at this instance)")
