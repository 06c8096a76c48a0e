"""Text layout of ``fltheory list`` and ``fltheory show`` (kept apart from the argument handling).

* :func:`list_lines`: one line per experiment, at most ``width`` (100)
  characters: name, verdict, number of theorems and the title cut to fit;
  the theorems themselves are in ``show``.
* :func:`show_json`: the stored result as valid, complete JSON.
* :func:`show_lines`: a readable table of the stored result: checks, macros
  and every result as ``dotted.key  value``, wrapped at ``width``; long
  numeric lists are summarised by their length and range in words, so
  nothing on screen looks like truncated JSON.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .results import to_jsonable

__all__ = ["WIDTH", "describe_value", "flatten", "list_lines", "show_json", "show_lines"]

#: Terminal width the command output is laid out for.
WIDTH = 100


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def list_lines(rows: Iterable[tuple[str, str, int, str]], width: int = WIDTH) -> list[str]:
    """Lines of ``fltheory list``: ``(name, status, number of theorems, title)`` per experiment.

    Every line has at most ``width`` characters; a last line says where the details are.
    """
    rows = list(rows)
    if not rows:
        return []
    wn = max(len(r[0]) for r in rows)
    ws = max(len(r[1]) for r in rows)
    lines = [f"{'experiment':<{wn}}  {'last result':<{ws}}  thm  title"]
    for name, status, n_theorems, title in rows:
        head = f"{name:<{wn}}  {status:<{ws}}  {n_theorems:>3}  "
        lines.append(head + _cut(" ".join(title.split()), max(width - len(head), 10)))
    lines.append("thm: number of theorems checked; details (theorems, checks, numbers): "
                 "fltheory show NAME [--json]")
    return [_cut(line, width) for line in lines]


def describe_value(value: Any, width: int = 70) -> str:
    """A value in words: numbers with 6 digits, lists of numbers by length and range."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return _cut(value, width)
    if isinstance(value, Sequence):
        flat = list(_leaves(value))
        numbers = [v for v in flat if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(flat) <= 6 and len(numbers) == len(flat):
            return "[" + ", ".join(describe_value(v) for v in flat) + "]"
        if numbers and len(numbers) == len(flat):
            return f"{len(flat)} numbers in [{min(numbers):.4g}, {max(numbers):.4g}]"
        return f"{len(value)} items"
    if isinstance(value, Mapping):
        return f"{len(value)} entries"
    return _cut(str(value), width)


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def flatten(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested mappings as dotted keys: ``{"a": {"b": 1}}`` -> ``[("a.b", 1)]``."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(flatten(value, name + "."))
        else:
            out.append((name, value))
    return out


def show_json(document: Mapping[str, Any]) -> str:
    """The whole stored result as indented, valid JSON (nothing cut)."""
    return json.dumps(to_jsonable(dict(document)), indent=2, sort_keys=False, allow_nan=True)


def _pairs(pairs: Sequence[tuple[str, str]], width: int, sep: str = " = ") -> list[str]:
    """``  key = value`` lines; a long value continues on indented lines (at most ``width``)."""
    if not pairs:
        return ["  (none)"]
    out = []
    for key, text in pairs:
        out += textwrap.wrap(f"{key}{sep}{text}", width=width, initial_indent="  ",
                             subsequent_indent="      ", break_on_hyphens=False) or [f"  {key}{sep}"]
    return out


def show_lines(document: Mapping[str, Any], title: str = "",
               theorems: Sequence[tuple[str, str]] = (), width: int = WIDTH) -> list[str]:
    """Readable table of a stored result (see module docstring).

    ``theorems`` lists (key, label) of the experiment's theorems.
    """
    record = document.get("record", {}) or {}
    key = document.get("key", {}) or {}
    name = (document.get("experiment", {}) or {}).get("name", "?")
    lines = textwrap.wrap(f"{name}: {title}" if title else str(name), width=width)
    lines.append(_cut(f"mode {key.get('mode')}, seed {key.get('seed')}, computed {record.get('timestamp')} "
                      f"at commit {record.get('git_commit')}"
                      f"{' (dirty)' if record.get('git_dirty') else ''}", width))
    if theorems:
        lines.append("theorems:")
        lines += _pairs([(k, v) for k, v in theorems], width, sep=": ")
    lines.append("checks:")
    checks = []
    for c in document.get("checks", []):
        ratio = "n/a" if c.get("ratio") is None else f"{c['ratio']:.4g}"
        text = f"{c.get('status')}, measured/bound {ratio}" + (f"; {c['detail']}" if c.get("detail") else "")
        checks.append((str(c.get("theorem")), text))
    lines += _pairs(checks, width, sep=": ")
    lines.append("macros:")
    lines += _pairs([(k, describe_value(v)) for k, v in (document.get("macros", {}) or {}).items()], width)
    lines.append("results:")
    lines += _pairs([(k, describe_value(v)) for k, v in flatten(document.get("data", {}) or {})], width)
    lines.append("config:")
    lines += _pairs([(k, describe_value(v)) for k, v in flatten(key.get("config", {}) or {})], width)
    lines.append("(full numbers: fltheory show NAME --json)")
    return lines
