"""Configuration overrides without editing code: ``--set key=value`` and ``--config FILE``.

An override names a declared configuration field (``lr``) or, inside a dict
field, a dotted path (``rounds.MLP``).  Values are JSON (``3``, ``0.5``,
``true``, ``[1, 2]``, ``"text"``); a value that is not JSON is taken as a
string.  Each value is checked against the type of the declared default: an
int field takes an int, a float field any finite number, a bool field a
bool, a str field a str, a list field a list (of numbers when the default is
a list of numbers), a dict field a dict (merged key by key).  An unknown
field is refused with the list of valid ones.  A config file is a JSON or
TOML (``.toml``) object of the same fields (nested objects for dict fields).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fltheory.errors import InvalidHyperparameterError
from fltheory.results import path_argument

__all__ = ["apply_overrides", "flatten_overrides", "load_config_file", "parse_assignments"]


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b.c=[1,2]"]`` -> ``{"a": 1, "b.c": [1, 2]}``.  ``items`` must be a list or tuple
    of str (InvalidHyperparameterError otherwise)."""
    if not isinstance(items, (list, tuple)):
        raise InvalidHyperparameterError(f"items must be a list of 'key=value' str, got {_short(items)}")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str):
            raise InvalidHyperparameterError(f"--set expects key=value (a str), got {_short(item)}")
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidHyperparameterError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = _parse_value(value.strip())
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return _short(value)


def _toml(target: Path) -> Any:
    try:
        import tomllib
    except ImportError as exc:          # Python 3.10
        raise InvalidHyperparameterError(
            f"--config {target}: TOML files need Python >= 3.11; give the overrides as JSON") from exc
    return tomllib


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The object in a JSON or TOML file (typed errors naming the file; ``path`` must be a path)."""
    target = path_argument("path", path)
    if target.suffix == ".toml":
        _toml(target)
    try:
        raw = target.read_bytes()
    except OSError as exc:
        raise InvalidHyperparameterError(
            f"--config {target}: cannot be read ({exc.strerror or exc})") from exc
    try:
        if target.suffix == ".toml":
            data: Any = _toml(target).loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        kind = "TOML" if target.suffix == ".toml" else "JSON"
        raise InvalidHyperparameterError(f"--config {target}: not valid {kind} ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidHyperparameterError(f"--config {target}: expected an object of config fields, "
                                         f"got {type(data).__name__}")
    return data


def flatten_overrides(nested: Mapping[str, Any], base: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested object of overrides as dotted keys, descending only where the
    declared default is itself a dict.  ``nested`` must be a mapping with str keys and ``prefix``
    a str (InvalidHyperparameterError otherwise); a ``base`` that is not a mapping has no dicts."""
    if not isinstance(nested, Mapping) or not all(isinstance(k, str) for k in nested):
        raise InvalidHyperparameterError(f"nested must be a mapping with str keys, got {_short(nested)}")
    if not isinstance(prefix, str):
        raise InvalidHyperparameterError(f"prefix must be a str, got {_short(prefix)}")
    out: dict[str, Any] = {}
    for key, value in nested.items():
        default = base.get(key) if isinstance(base, Mapping) else None
        if isinstance(value, dict) and isinstance(default, dict):
            out.update(flatten_overrides(value, default, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _valid_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in config.items():
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys.extend(_valid_keys(value, f"{prefix}{key}."))
    return keys


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _checked(field: str, default: Any, value: Any, experiment: str) -> Any:
    def refuse(expected: str) -> InvalidHyperparameterError:
        return InvalidHyperparameterError(
            f"{experiment}: --set {field}={_json_text(value)} is not {expected} "
            f"(the default is {_json_text(default)})")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse("a finite value")
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise refuse("a bool (true/false)")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse("an int")
    elif isinstance(default, float):
        if not _is_real(value):
            raise refuse("a number")
        return float(value)
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise refuse("a str")
    elif isinstance(default, list):
        if not isinstance(value, list):
            raise refuse("a list")
        if default and all(_is_real(v) for v in default) and not all(_is_real(v) for v in value):
            raise refuse("a list of numbers")
        if any(isinstance(v, float) and not math.isfinite(v) for v in value):
            raise refuse("a list of finite numbers")
    elif isinstance(default, dict):
        if not isinstance(value, dict):
            raise refuse("an object")
    return value


def apply_overrides(experiment: str, config: Mapping[str, Any],
                    overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``config`` with ``overrides`` (dotted keys) applied and checked.  ``experiment``
    must be a str and ``config`` / ``overrides`` mappings with str keys (InvalidHyperparameterError)."""
    if not isinstance(experiment, str):
        raise InvalidHyperparameterError(f"experiment must be a str (its name), got {_short(experiment)}")
    for name, value in (("config", config), ("overrides", overrides)):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise InvalidHyperparameterError(f"{name} must be a mapping with str keys, got {_short(value)}")
    result = copy.deepcopy(dict(config))
    valid = _valid_keys(config)
    for field, value in overrides.items():
        parts = field.split(".")
        node: Any = result
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                raise InvalidHyperparameterError(
                    f"{experiment}: unknown config field {field!r}; valid fields: {', '.join(valid)}")
            if depth == len(parts) - 1:
                if isinstance(node[part], dict) and isinstance(value, dict):
                    merged = apply_overrides(experiment, node[part],
                                             flatten_overrides(value, node[part]))
                    node[part] = merged
                else:
                    node[part] = _checked(field, node[part], value, experiment)
            else:
                node = node[part]
    return result
