"""Declared instance spaces: what a counterexample search may vary.

A :class:`Space` is a tuple of parameters, each mapped to one coordinate of the
unit cube [0, 1)^k, so that quasi-random designs (Sobol, Latin hypercube) and
Nelder-Mead work on every space alike:

* :class:`Real` ``low <= x <= high``, linear (x = low + u (high - low)) or log
  scale (x = low (high/low)^u);
* :class:`Integer` ``low <= n <= high``, linear or log scale, the cube cell
  [j/m, (j+1)/m) of the m = high - low + 1 values mapping to the j-th value
  (log scale: the rounded log-uniform value);
* :class:`Categorical` one of a finite list of JSON values, equal cells;
* any parameter may be *conditional* (``when={"kind": ["join"]}``): it exists
  only when the named categorical parameters take one of the listed values;
  otherwise the point does not carry it (its coordinate is ignored).

``shrink=True`` on an Integer marks a size (clients, dimension) that the search
tries to reduce on the worst instance.

A :class:`StrategySpace` wraps a Hypothesis strategy of JSON-able points
instead: it supports exploration only (no coordinates to move).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..errors import InvalidHyperparameterError

__all__ = ["Categorical", "Integer", "Parameter", "Real", "Space", "StrategySpace", "space_from_dict"]

Point = dict[str, Any]


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidHyperparameterError(f"a parameter name must be an identifier, got {name!r}")
    return name


def _check_when(name: str, when: Any) -> dict[str, tuple[Any, ...]]:
    if when is None:
        return {}
    if not isinstance(when, Mapping) or not when:
        raise InvalidHyperparameterError(
            f"parameter {name!r}: when must be a non-empty mapping {{categorical: [values]}}, got {when!r}")
    return {str(k): tuple(v) for k, v in when.items()}


def _when_dict(when: Mapping[str, Sequence[Any]] | None) -> dict[str, Any]:
    return {"when": {k: list(v) for k, v in when.items()}} if when else {}


def _check_range(name: str, low: float, high: float, log: bool) -> None:
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InvalidHyperparameterError(f"parameter {name!r}: range [{low!r}, {high!r}] must be finite")
    if high < low:
        raise InvalidHyperparameterError(
            f"parameter {name!r}: inverted range, low = {low!r} > high = {high!r}; expected low <= high")
    if log and low <= 0:
        raise InvalidHyperparameterError(
            f"parameter {name!r}: a log-scale range needs low > 0, got low = {low!r}")


@dataclass(frozen=True)
class Real:
    """A real parameter in [low, high] (``log=True``: log-uniform coordinates).

    ``low == high`` is allowed (a fixed value); ``low > high`` is an inverted
    range and raises InvalidHyperparameterError, as does an empty log range
    (``low <= 0``).
    """

    name: str
    low: float
    high: float
    log: bool = False
    when: Mapping[str, Sequence[Any]] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        _check_range(self.name, self.low, self.high, self.log)
        object.__setattr__(self, "when", _check_when(self.name, self.when))

    def decode(self, u: float) -> float:
        """x = low + u (high - low), or low (high/low)^u on a log scale."""
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            return float(self.low * (self.high / self.low) ** u)
        return float(self.low + u * (self.high - self.low))

    def encode(self, x: Any) -> float:
        """The inverse of :meth:`decode` (0.5 for a fixed value)."""
        if self.high == self.low:
            return 0.5
        if self.log:
            return math.log(float(x) / self.low) / math.log(self.high / self.low)
        return (float(x) - self.low) / (self.high - self.low)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "real", "name": self.name, "low": self.low, "high": self.high,
                "log": self.log, **_when_dict(self.when)}


@dataclass(frozen=True)
class Integer:
    """An integer parameter in {low, ..., high} (``log=True``: log-uniform).

    ``shrink=True`` marks a size the search reduces on the worst instance.
    """

    name: str
    low: int
    high: int
    log: bool = False
    shrink: bool = False
    when: Mapping[str, Sequence[Any]] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        for end in ("low", "high"):
            v = getattr(self, end)
            if isinstance(v, bool) or not float(v).is_integer():
                raise InvalidHyperparameterError(
                    f"parameter {self.name!r}: {end} must be an integer, got {v!r}")
            object.__setattr__(self, end, int(v))
        _check_range(self.name, self.low, self.high, self.log)
        object.__setattr__(self, "when", _check_when(self.name, self.when))

    def decode(self, u: float) -> int:
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            lo, hi = math.log(self.low - 0.5 if self.low > 1 else self.low), math.log(self.high + 0.5)
            return int(min(max(round(math.exp(lo + u * (hi - lo))), self.low), self.high))
        m = self.high - self.low + 1
        return int(self.low + min(int(u * m), m - 1))

    def encode(self, x: Any) -> float:
        if self.log:
            lo, hi = math.log(self.low - 0.5 if self.low > 1 else self.low), math.log(self.high + 0.5)
            return (math.log(int(x)) - lo) / (hi - lo) if hi > lo else 0.5
        m = self.high - self.low + 1
        return (int(x) - self.low + 0.5) / m

    def to_dict(self) -> dict[str, Any]:
        return {"type": "integer", "name": self.name, "low": self.low, "high": self.high, "log": self.log,
                "shrink": self.shrink,
                **_when_dict(self.when)}


@dataclass(frozen=True)
class Categorical:
    """One of ``choices`` (JSON values: str, int, float, bool or None)."""

    name: str
    choices: Sequence[Any] = field(default_factory=tuple)
    when: Mapping[str, Sequence[Any]] | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        choices = tuple(self.choices)
        if not choices:
            raise InvalidHyperparameterError(f"parameter {self.name!r}: empty list of choices")
        for c in choices:
            if not (c is None or isinstance(c, (str, int, float, bool))):
                raise InvalidHyperparameterError(
                    f"parameter {self.name!r}: choices must be JSON scalars, got {c!r}")
        object.__setattr__(self, "choices", choices)
        object.__setattr__(self, "when", _check_when(self.name, self.when))

    def decode(self, u: float) -> Any:
        u = min(max(float(u), 0.0), 1.0)
        m = len(self.choices)
        return self.choices[min(int(u * m), m - 1)]

    def encode(self, x: Any) -> float:
        return (self.choices.index(x) + 0.5) / len(self.choices)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "name": self.name, "choices": list(self.choices),
                **_when_dict(self.when)}


Parameter = Union[Real, Integer, Categorical]  # noqa: UP007  (a runtime alias)


class Space:
    """A product of parameters, some conditional, decoded from the unit cube.

    Parameters
    ----------
    params : sequence of Real, Integer, Categorical
        Unique names; a condition ``when={"c": [...]}`` must name a
        Categorical declared *before* the parameter.
    """

    kind = "box"

    def __init__(self, params: Sequence[Parameter]) -> None:
        if not isinstance(params, (list, tuple)):
            raise InvalidHyperparameterError(
                f"params must be a list or tuple of Real, Integer or Categorical, got {params!r:.60} "
                f"({type(params).__name__})")
        params = tuple(params)
        if not params:
            raise InvalidHyperparameterError("a Space needs at least one parameter, got none")
        seen: dict[str, Parameter] = {}
        for p in params:
            if not isinstance(p, (Real, Integer, Categorical)):
                raise InvalidHyperparameterError(
                    f"space parameters must be Real, Integer or Categorical, got {p!r}")
            if p.name in seen:
                raise InvalidHyperparameterError(f"parameter {p.name!r} declared twice")
            for cond, values in (p.when or {}).items():
                parent = seen.get(cond)
                if not isinstance(parent, Categorical):
                    raise InvalidHyperparameterError(
                        f"parameter {p.name!r}: condition on {cond!r}, which is not a Categorical "
                        "declared before it")
                unknown = [v for v in values if v not in parent.choices]
                if unknown:
                    raise InvalidHyperparameterError(
                        f"parameter {p.name!r}: condition values {unknown} are not choices of {cond!r} "
                        f"{list(parent.choices)}")
            seen[p.name] = p
        self.params = params

    @property
    def dim(self) -> int:
        """Number of unit-cube coordinates (one per parameter)."""
        return len(self.params)

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def active(self, param: Parameter, point: Mapping[str, Any]) -> bool:
        """Whether a conditional parameter exists at ``point``."""
        return all(point.get(k) in v for k, v in (param.when or {}).items())

    def decode(self, u: Any) -> Point:
        """The point of unit-cube coordinates ``u`` (inactive parameters omitted)."""
        u = np.asarray(u, dtype=np.float64)
        point: Point = {}
        for p, ui in zip(self.params, u, strict=True):
            if self.active(p, point):
                point[p.name] = p.decode(float(ui))
        return point

    def encode(self, point: Mapping[str, Any]) -> np.ndarray:
        """Coordinates of ``point`` (centre of the cell; 0.5 for absent parameters)."""
        return np.array([p.encode(point[p.name]) if p.name in point else 0.5 for p in self.params])

    def continuous(self, point: Mapping[str, Any]) -> list[int]:
        """Indices of the Real parameters active at ``point``."""
        return [i for i, p in enumerate(self.params) if isinstance(p, Real) and p.name in point
                and p.high > p.low]

    def neighbours(self, point: Mapping[str, Any]) -> list[Point]:
        """Points one move away on a discrete coordinate: an Integer +-1, another
        category of a Categorical (conditional parameters re-decoded from the
        cell centres of the current coordinates)."""
        out: list[Point] = []
        u = self.encode(point)
        for i, p in enumerate(self.params):
            if p.name not in point:
                continue
            values: list[Any]
            if isinstance(p, Integer):
                values = [v for v in (point[p.name] - 1, point[p.name] + 1) if p.low <= v <= p.high]
            elif isinstance(p, Categorical):
                values = [c for c in p.choices if c != point[p.name]]
            else:
                continue
            for v in values:
                w = u.copy()
                w[i] = p.encode(v)
                cand = self.decode(w)
                for name, value in point.items():       # keep exact continuous values
                    if name in cand and name != p.name and isinstance(self.param(name), Real):
                        cand[name] = value
                out.append(cand)
        return out

    def param(self, name: str) -> Parameter:
        for p in self.params:
            if p.name == name:
                return p
        raise InvalidHyperparameterError(f"no parameter {name!r} in the space {self.names()}")

    def to_dict(self) -> dict[str, Any]:
        return {"params": [p.to_dict() for p in self.params]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return f"Space({list(self.params)!r})"


class StrategySpace:
    """Points drawn from a Hypothesis strategy of JSON-able dicts.

    Exploration only: the n candidates of seed s are the first n distinct
    examples Hypothesis generates with ``@seed(s)`` (its generation phase, no
    shrinking, no database), a deterministic list for a given Hypothesis
    version.  No local maximisation or shrinking (there are no coordinates).
    """

    kind = "strategy"

    def __init__(self, strategy: Any, description: str = "") -> None:
        if not isinstance(description, str):
            raise InvalidHyperparameterError(
                f"description must be a str, got {description!r:.60} ({type(description).__name__})")
        self.strategy = strategy
        self.description = description or repr(strategy)

    def sample(self, n: int, seed: int) -> list[Point]:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hyp_seed
        points: list[Point] = []
        keys: set[str] = set()

        @hyp_seed(seed)
        @settings(max_examples=max(n, 1) * 2, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), deadline=None, derandomize=False)
        @given(self.strategy)
        def collect(point: Any) -> None:
            if len(points) >= n:
                return
            if not isinstance(point, Mapping):
                raise InvalidHyperparameterError(f"the strategy must generate dicts, got {point!r}")
            key = json.dumps(point, sort_keys=True, default=repr)
            if key not in keys:
                keys.add(key)
                points.append(dict(point))

        collect()
        return points

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.description}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


_TYPES: dict[str, type] = {"real": Real, "integer": Integer, "categorical": Categorical}


def space_from_dict(doc: Mapping[str, Any]) -> Space:
    """A Space from its JSON form ``{"params": [{"type": "real", "name": ..., ...}]}``."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("params"), list):
        raise InvalidHyperparameterError(f"a space file holds {{'params': [...]}}, got {str(doc)[:200]}")
    params: list[Parameter] = []
    for entry in doc["params"]:
        entry = dict(entry)
        kind = entry.pop("type", None)
        if kind not in _TYPES:
            raise InvalidHyperparameterError(f"parameter type must be one of {sorted(_TYPES)}, got {kind!r}")
        try:
            params.append(_TYPES[kind](**entry))
        except TypeError as exc:
            raise InvalidHyperparameterError(f"bad {kind} parameter {entry!r}: {exc}") from exc
    return Space(params)
