"""Argument checks of the public methods every algorithm shares.

``init(problem, x0, rng)``, ``round(state, problem, participation, rng)``,
``nominal_steps(problem)``, ``participants(problem, participation, rng, t)``
and ``linear_invariants(problem)`` check their arguments before the
algorithm's own code runs.  ``round`` and ``nominal_steps`` run every round,
so their checks are O(1) (types, the shape of the state's model, the round
counter); ``init`` also checks that x0 is finite (O(d), once per run).  Bad
input raises a typed error naming the argument, the value and what is
expected.  :func:`checked_methods` wraps the methods a class defines; the
base class applies it to every subclass (``__init_subclass__``), so a user's
algorithm gets the same checks.
"""

from __future__ import annotations

import typing
from typing import Any

import numpy as np

from .._validate import ArgumentCheck, ResultCheck, check_methods_of, _short, finite_array, generator, integer
from ..errors import DivergenceError, InvalidHyperparameterError, InvalidProblemError
from ..participation import Participation
from ..problems.base import Federation

__all__ = ["checked_methods", "check_problem", "check_state"]


def check_problem(problem: Any) -> Federation:
    """``problem`` if it is a Federation."""
    if not isinstance(problem, Federation):
        raise InvalidProblemError(
            f"problem must be an fltheory Federation, got {_short(problem)} ({type(problem).__name__})")
    return problem


def _check_participation(participation: Any) -> None:
    """None, a Participation, or any object with a ``draw(rng, t, local_steps)`` method."""
    if participation is not None and not isinstance(participation, Participation) \
            and not callable(getattr(participation, "draw", None)):
        raise InvalidHyperparameterError(
            f"participation must be an fltheory.participation.Participation (an object with "
            f"draw(rng, t, local_steps)) or None (full participation), got {_short(participation)} "
            f"({type(participation).__name__})")


_STATE_TYPES: dict[type, type | None] = {}


def _state_type(cls: type) -> type | None:
    """The class ``cls.init`` is annotated to return, or None (``Any`` or unresolvable);
    resolved once per algorithm class."""
    if cls not in _STATE_TYPES:
        _STATE_TYPES[cls] = _resolve_state_type(cls)
    return _STATE_TYPES[cls]


def _resolve_state_type(cls: Any) -> type | None:
    try:
        hint = typing.get_type_hints(cls.init).get("return")
    except Exception:          # annotations that do not resolve: only the generic check
        return None
    return hint if isinstance(hint, type) and hint is not Any else None


def check_state(algorithm: Any, state: Any, problem: Federation) -> None:
    """O(1) check that ``state`` is a state of ``algorithm`` for ``problem``: the type
    ``init`` returns (when annotated), a model ``x`` of shape (d,), a counter ``t >= 0``."""
    expected = _state_type(type(algorithm))
    x = getattr(state, "x", None)
    t = getattr(state, "t", None)
    if (expected is not None and not isinstance(state, expected)) or not isinstance(x, np.ndarray) \
            or isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
        kind = expected.__name__ if expected is not None else "state with a model x and a round counter t"
        raise InvalidProblemError(
            f"state must be a state of {algorithm.name} (a {kind}, as returned by its init(...)), "
            f"got {_short(state)} ({type(state).__name__})")
    if t < 0:                # the counter participants() checks (rounds may skip that call)
        integer("t", t, minimum=0, maximum=None)
    if x.shape != (problem.dim,):
        raise InvalidProblemError(
            f"state.x has shape {x.shape} but the problem has dim {problem.dim}: the state belongs to "
            "another problem")


def _check_rng(rng: Any) -> None:
    """A Generator, or None (deterministic rounds draw nothing; a routine that must draw
    says so with its own typed error)."""
    if rng is not None:
        generator("rng", rng)


def _init(alg: Any, problem: Any, x0: Any, rng: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    fed = check_problem(problem)
    x = finite_array("x0", x0, ndim=1)
    if x.shape != (fed.dim,):
        raise InvalidProblemError(f"x0 must have shape ({fed.dim},), got {x.shape}")
    _check_rng(rng)
    return (fed, x0, rng), {}


def _round(alg: Any, state: Any, problem: Any, participation: Any, rng: Any
           ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    fed = check_problem(problem)
    check_state(alg, state, fed)
    _check_participation(participation)
    _check_rng(rng)
    return (state, fed, participation, rng), {}


def _problem_only(alg: Any, problem: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (check_problem(problem),), {}


def _participants(alg: Any, problem: Any, participation: Any, rng: Any, t: Any
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    fed = check_problem(problem)
    _check_participation(participation)
    _check_rng(rng)
    integer("t", t, minimum=0, maximum=None)
    return (fed, participation, rng, t), {}


#: method name -> check(algorithm, *args, **kwargs) -> (checked args, checked kwargs)
METHOD_CHECKS: dict[str, ArgumentCheck] = {
    "init": _init,
    "round": _round,
    "nominal_steps": _problem_only,
    "linear_invariants": _problem_only,
    "participants": _participants,
}


def _round_result(alg: Any, out: Any) -> None:
    """A round must not hand back a non-finite server model (an overflowing server step, say):
    DivergenceError, as ``run`` and the local loop raise for the same event."""
    state = out[0] if isinstance(out, tuple) and out else None
    x = getattr(state, "x", None)
    if isinstance(x, np.ndarray) and not np.isfinite(x).all():
        raise DivergenceError(f"{alg.name}: round {getattr(state, 't', '?')} produced a non-finite server "
                              f"model x ({int(np.count_nonzero(~np.isfinite(x)))} of {x.size} entries)")


#: method name -> check(algorithm, result), run after the method
RESULT_CHECKS: dict[str, ResultCheck] = {"round": _round_result}


def checked_methods(cls: type) -> None:
    """Replace each method of ``METHOD_CHECKS`` that ``cls`` itself defines by a checked version (once)."""
    check_methods_of(cls, METHOD_CHECKS, RESULT_CHECKS)
