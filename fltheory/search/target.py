"""What a search maximises: a bound evaluated on an instance built from a point.

A :class:`SearchTarget` couples a *builder-and-bound* callable
``evaluate(point, seed) -> BoundResult`` (the builder turns the point and a
per-candidate seed into an instance; the bound returns its measured value,
its value and its hypotheses) with a default :class:`~fltheory.search.space.Space`.
The registry maps names to targets so that ``fltheory falsify NAME`` and
Dask workers find them by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._validate import integer
from ..errors import InvalidHyperparameterError
from ..theory import BoundResult
from .space import Space, StrategySpace

__all__ = ["SearchTarget", "evaluate_point", "get_target", "register", "registered_targets"]

Evaluate = Callable[[Mapping[str, Any], int], BoundResult]


@dataclass(frozen=True)
class SearchTarget:
    """A bound to falsify.

    Attributes
    ----------
    name : str
        Registry name (``fltheory falsify NAME``).
    evaluate : callable
        ``evaluate(point, seed) -> BoundResult`` with ``measured`` set; a
        deterministic function of (point, seed).  It may raise an
        :class:`~fltheory.errors.FLTheoryError` for a point that builds no valid
        instance: the row is recorded as invalid with the message.
    space : Space or StrategySpace
        The default instance space.
    reference : str
        Paper, theorem and equation of the bound.
    description : str
        One line: what is measured against what.
    slack : callable, optional
        ``slack(result) -> float``: the floating-point error allowance of one
        instance; a counted row violates when ``measured > bound + slack``
        (its ``ratio`` is reported unrounded either way).  Default:
        ``1e-9 * bound``.
    annotate : callable, optional
        ``annotate(result) -> {key: scalar}`` for counted rows: extra columns
        ``tag_<key>`` (e.g. whether an instance lies in a known failure region).
    """

    name: str
    evaluate: Evaluate
    space: Space | StrategySpace
    reference: str
    description: str = ""
    slack: Callable[[BoundResult], float] | None = None
    annotate: Callable[[BoundResult], Mapping[str, Any]] | None = None


_REGISTRY: dict[str, SearchTarget] = {}


def register(target: SearchTarget) -> SearchTarget:
    """Add ``target`` to the registry (a name may be registered once); ``target`` must be a
    SearchTarget with a non-empty str name (InvalidHyperparameterError otherwise)."""
    if not isinstance(target, SearchTarget):
        raise InvalidHyperparameterError(
            f"register: target must be a SearchTarget, got {target!r:.60} ({type(target).__name__})")
    if not isinstance(target.name, str) or not target.name:
        raise InvalidHyperparameterError(f"register: target.name must be a non-empty str, got {target.name!r:.60}")
    if target.name in _REGISTRY and _REGISTRY[target.name] is not target:
        raise InvalidHyperparameterError(f"a search target named {target.name!r} is already registered")
    _REGISTRY[target.name] = target
    return target


def _load_builtin() -> None:
    """The built-in targets register themselves when ``fltheory.search`` is imported
    (its ``__init__`` imports ``targets`` and ``efl_target``); importing this module
    imports that package first, so nothing is left to load here."""


def registered_targets() -> dict[str, SearchTarget]:
    """Name -> target of every registered bound (the built-ins included)."""
    _load_builtin()
    return dict(_REGISTRY)


def get_target(name: str) -> SearchTarget:
    """The registered target ``name``; unknown names raise InvalidHyperparameterError."""
    if not isinstance(name, str):
        raise InvalidHyperparameterError(
            f"get_target: name must be a str (a registered target), got {name!r:.60} ({type(name).__name__})")
    targets = registered_targets()
    if name not in targets:
        raise InvalidHyperparameterError(
            f"unknown bound name {name!r}; registered: {', '.join(sorted(targets))}")
    return targets[name]


def evaluate_point(name: str, point: Mapping[str, Any] | str, seed: int) -> BoundResult:
    """Rebuild and evaluate one instance of a registered target (``point`` as a
    dict or its JSON text): what the saved worst instances and the generated
    pytest snippets call.  ``seed`` is an integer >= 0; a point that is neither a mapping with
    str keys nor the JSON text of one raises InvalidHyperparameterError."""
    target = get_target(name)
    seed = integer("evaluate_point: seed", seed, minimum=0, maximum=None)
    if isinstance(point, str):
        try:
            loaded = json.loads(point)
        except ValueError as exc:
            raise InvalidHyperparameterError(
                f"evaluate_point: point is not valid JSON ({exc}): {point!r:.60}") from None
    else:
        loaded = point
    if not isinstance(loaded, Mapping) or not all(isinstance(k, str) for k in loaded):
        raise InvalidHyperparameterError(
            f"evaluate_point: point must be a mapping of parameter names to values (or its JSON text), "
            f"got {point!r:.60} ({type(point).__name__})")
    return target.evaluate(dict(loaded), seed)
