"""``macros.tex`` and ``SUMMARY.md`` of one results directory.

Both are rebuilt from the JSON files present, and only written when their
text changes (a read-only directory whose files are current is left alone).
Before writing, :func:`summarise` checks that every present result is fresh
under the current keys: results computed with other library versions, other
sources or another data source (for example by another machine sharing the
directory) are refused, naming each and why, unless ``allow_mixed``; then
their lines are marked stale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fltheory.errors import ExperimentDefinitionError, InvalidProblemError, MixedResultsError
from fltheory.results import atomic_write

from . import _arguments as arg
from .keys import key_changes
from .protocol import STATUSES, Experiment
from .store import StoredResult, read_stored

__all__ = [
    "format_macro_value",
    "macro_name",
    "macro_prefix",
    "overall_status",
    "summarise",
    "write_macros",
    "write_summary",
]

_DIGITS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")


def _camel(text: str) -> str:
    words: list[str] = []
    current = ""
    for ch in text:
        if ch.isascii() and ch.isalpha():
            current += ch
        else:
            if current:
                words.append(current)
            current = ""
            if ch.isdigit():
                words.append(_DIGITS[int(ch)])
    if current:
        words.append(current)
    return "".join(w[0].upper() + w[1:] for w in words)


def macro_name(experiment: str, key: str, prefix: str = "") -> str:
    """``\\fl`` + ``prefix`` + CamelCase of experiment name and key, letters
    only: every digit becomes its English word, every other non-letter
    separates words.  ``macro_name("objective_shift", "max_ratio_n2")`` ->
    ``\\flObjectiveShiftMaxRatioNTwo``; with ``prefix="Full"`` ->
    ``\\flFullObjectiveShiftMaxRatioNTwo``.  Every argument must be a str (``experiment`` and
    ``key`` non-empty); the name must contain a letter after ``\\fl``."""
    experiment = arg.text("experiment", experiment)
    key = arg.text("key", key)
    prefix = arg.text("prefix", prefix, allow_empty=True)
    return "\\fl" + _camel(prefix) + _camel(experiment) + _camel(key)


def macro_prefix(mode: str, custom: bool) -> str:
    """"" for the default quick run, "Full" for full mode, "Custom" before
    either for a run with overrides: no two kinds of run share a macro name."""
    mode = arg.mode(mode)
    custom = arg.boolean("custom", custom)
    return ("Custom" if custom else "") + ("Full" if mode == "full" else "")


def format_macro_value(value: float | int) -> str:
    """4 significant digits; powers of ten as ``\\ensuremath{m\\times10^{e}}``.  ``value`` must be a
    finite real number (a Python or numpy int or float, not a bool): InvalidProblemError otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidProblemError(f"value must be a finite real number, got {arg.short(value)} "
                                  f"({type(value).__name__})")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if not math.isfinite(value):
        raise InvalidProblemError(f"value must be a finite real number, got {value!r}")
    text = f"{value:.4g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"\\ensuremath{{{mantissa}\\times10^{{{int(exponent)}}}}}"
    return text


def overall_status(checks: Sequence[Mapping[str, Any]]) -> str:
    """violated if any check is violated; holds if all hold; else not checkable
    (or 'holds (partly not checkable)' when some hold and the rest are not checkable).
    ``checks`` is a list of mappings whose ``"status"`` is one of :data:`STATUSES`."""
    statuses = [_status(i, c) for i, c in enumerate(_sequence("checks", checks))]
    if "violated" in statuses:
        return "violated"
    if statuses and all(s == "holds" for s in statuses):
        return "holds"
    if "holds" in statuses:
        return "holds (partly not checkable)"
    return "not checkable"


def _sequence(name: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise InvalidProblemError(f"{name} must be a list, got {arg.short(value)} ({type(value).__name__})")
    return list(value)


def _status(i: int, check: Any) -> str:
    status = check.get("status") if isinstance(check, Mapping) else None
    if not isinstance(status, str) or status not in STATUSES:
        raise InvalidProblemError(f"checks[{i}] must be a mapping whose 'status' is one of {STATUSES}, "
                                  f"got {arg.short(check)}")
    return status


def _stored_pairs(value: Any) -> list[tuple[Experiment, StoredResult]]:
    pairs = _sequence("stored", value)
    for i, pair in enumerate(pairs):
        if (not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], Experiment)
                or not isinstance(pair[1], StoredResult)):
            raise InvalidProblemError(f"stored[{i}] must be a pair (Experiment, StoredResult), got {arg.short(pair)}")
    return pairs


def _write_if_changed(target: Path, text: str) -> Path:
    try:
        if target.read_text(encoding="utf-8") == text:
            return target
    except (OSError, UnicodeDecodeError):
        pass
    with atomic_write(target, "w") as handle:
        handle.write(text)
    return target


def write_macros(directory: Path, stored: Sequence[tuple[Experiment, StoredResult]],
                 prefix: str = "") -> Path:
    """``macros.tex``: one ``\\newcommand{\\Name}{value}`` per headline number
    of every readable result; duplicate names raise."""
    directory = arg.directory("directory", directory)
    stored = _stored_pairs(stored)
    prefix = arg.text("prefix", prefix, allow_empty=True)
    lines = ["% Generated by `fltheory reproduce`; do not edit.",
             "% One macro per headline number; full precision is in NAME.json."]
    if prefix:
        lines.append(f"% Macro prefix \\fl{prefix}: these numbers are not the default quick run's.")
    seen: dict[str, str] = {}
    for exp, result in stored:
        if result.doc is None:
            continue
        for key, value in sorted(result.doc["macros"].items()):
            name = macro_name(exp.name, key, prefix)
            where = f"{exp.name}.macros[{key!r}]"
            if name in seen:
                raise ExperimentDefinitionError(f"{where} and {seen[name]} both map to the macro {name}")
            seen[name] = where
            lines.append(f"\\newcommand{{{name}}}{{{format_macro_value(value)}}}")
    return _write_if_changed(Path(directory) / "macros.tex", "\n".join(lines) + "\n")


def _theorem_line(exp: Experiment, theorem_key: str, result: StoredResult, stale: list[str]) -> str:
    th = exp.theorem(theorem_key)
    head = f"- `{exp.name}` — {th.label()}:"
    if result.problem:
        return f"{head} unreadable result ({result.problem})"
    if result.doc is None:
        return f"{head} not run"
    mine = [c for c in result.doc["checks"] if c["theorem"] == theorem_key]
    if not mine:
        return f"{head} no check reported"
    status = overall_status(mine)
    # the tightness of the checks behind the status: a ratio of a check that could not be judged
    # (hypotheses failed) is no tightness of a bound that holds
    behind = "holds" if status == "holds (partly not checkable)" else status
    ratios = [c["ratio"] for c in mine if c["ratio"] is not None and c["status"] == behind]
    tight = f"; tightness (worst measured/bound) {max(ratios):.4g}" if ratios else ""
    details = [c["detail"] for c in mine if c["status"] == status and c["detail"]]
    if status == "violated":
        detail = "; instance: " + " | ".join(details)
    elif status == "not checkable":
        detail = "; why: " + " | ".join(details)
    else:
        detail = ""
    flag = f" (STALE: {'; '.join(stale)})" if stale else ""
    return f"{head} **{status}**{tight} ({len(mine)} check{'s' if len(mine) > 1 else ''}){detail}{flag}"


def write_summary(directory: Path, stored: Sequence[tuple[Experiment, StoredResult]],
                  stale: Mapping[str, list[str]] | None = None, heading: str = "") -> Path:
    """``SUMMARY.md``: one line per declared theorem of every experiment."""
    directory = arg.directory("directory", directory)
    stored = _stored_pairs(stored)
    stale = arg.mapping("stale", stale, optional=True)
    if not all(isinstance(v, (list, tuple)) and all(isinstance(w, str) for w in v) for v in stale.values()):
        raise InvalidProblemError(f"stale must map experiment names to lists of reasons (str), got {arg.short(stale)}")
    heading = arg.text("heading", heading, allow_empty=True)
    lines = ["# Theorem checks" + (f" ({heading})" if heading else ""), "",
             "Generated by `fltheory reproduce`. Tightness = worst measured / bound "
             "(> 1 is a violation).", ""]
    for exp, result in stored:
        for th in exp.theorems:
            lines.append(_theorem_line(exp, th.key, result, list((stale or {}).get(exp.name, []))))
    if not stored:
        lines.append("(no experiments registered)")
    return _write_if_changed(Path(directory) / "SUMMARY.md", "\n".join(lines) + "\n")


def summarise(directory: Path, experiments: Sequence[Experiment], keys: Mapping[str, Mapping[str, Any]],
              *, prefix: str = "", heading: str = "", allow_mixed: bool = False) -> dict[str, list[str]]:
    """Rebuild macros.tex and SUMMARY.md of ``directory`` over ``experiments``
    (``keys``: their current keys).  Returns {name: why stale} of the present
    results that are stale; with any of them and not ``allow_mixed``, nothing
    is written and :class:`~fltheory.errors.MixedResultsError` names them."""
    directory = arg.directory("directory", directory)
    experiments = arg.experiments("experiments", experiments)
    keys = arg.mapping("keys", keys)
    missing = [exp.name for exp in experiments if not isinstance(keys.get(exp.name), Mapping)]
    if missing:
        raise InvalidProblemError(f"keys must map every experiment's name to its current key (a mapping); "
                                  f"missing or not a mapping for {missing}")
    prefix = arg.text("prefix", prefix, allow_empty=True)
    heading = arg.text("heading", heading, allow_empty=True)
    allow_mixed = arg.boolean("allow_mixed", allow_mixed)
    stored = [(exp, read_stored(directory, exp.name)) for exp in experiments]
    stale: dict[str, list[str]] = {}
    for exp, result in stored:
        if result.doc is not None:
            why = key_changes(result.doc.get("key"), keys[exp.name])
            if why:
                stale[exp.name] = why
    if stale and not allow_mixed:
        lines = [f"  {name}: {'; '.join(why)}" for name, why in stale.items()]
        raise MixedResultsError(
            f"not summarising {directory}: {len(stale)} result(s) there were computed with other "
            f"sources, versions or data than the current ones:\n" + "\n".join(lines)
            + "\nrecompute them (fltheory reproduce " + " ".join(stale) + ") or pass --allow-mixed "
            "to summarise anyway (their lines are then marked STALE)")
    write_macros(directory, stored, prefix)
    write_summary(directory, stored, stale, heading)
    return stale
