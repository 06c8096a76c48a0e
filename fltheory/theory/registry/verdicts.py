"""Verdicts of registry items from the experiments' last results (``figures/NAME.json``).

Each experiment check is ``{"theorem", "status", "ratio", "detail"}`` (see
``fltheory.reproduce``).  An item's verdict over the checks it names is
the worst status among them (violated > not checkable > holds) with the
largest ratio of that status and the detail of that check.  Items with no
experiment check get their verdict from the registry: "holds" when tests hold
them to mathematics, "not checkable" or "not evaluated" with the reason.

The counterexample search (experiment ``bound_search``, targets of
``fltheory.search``) evaluates some bounds on thousands of instances; its
checks join those the items name (:data:`SEARCHED_BOUNDS`), so a searched
bound's verdict shows the worst ratio found and the instance that attains it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...errors import InvalidHyperparameterError, ResultsFileError
from ._arguments import file_stem, path
from ._item_arguments import registry_item, registry_items
from .model import VERDICT_STATUSES, Item, Verdict

__all__ = ["SEARCH_EXPERIMENT", "SEARCHED_BOUNDS", "item_checks", "read_checks", "verdict", "verdicts"]

SEARCH_EXPERIMENT = "bound_search"
SEARCHED_BOUNDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "efl:thm1": ("efl_theorem1",),
    "efl:thm2-depart": ("efl_eq10_depart",),
    "efl:thm2-join": ("efl_eq11_join", "efl_eq11_join_derived"),
    "local-adaptivity:thm1": ("fedopt_theorem1",),
})
"""Registry item key -> the ``fltheory.search`` targets (checks of ``bound_search``) that evaluate it."""


def item_checks(it: Item) -> tuple[str, ...]:
    """The ``"experiment:theorem"`` checks of ``it``: those it names plus its searched bounds."""
    it = registry_item("it", it)
    return tuple(it.checks) + tuple(f"{SEARCH_EXPERIMENT}:{key}" for key in SEARCHED_BOUNDS.get(it.key, ()))

_RANK = {"violated": 0, "not checkable": 1, "holds": 2}


def _results_dir(value: Any) -> Path:
    """``results_dir`` as a path; a path that exists but is not a directory is refused."""
    directory = path("results_dir", value)
    if directory.exists() and not directory.is_dir():
        raise InvalidHyperparameterError(f"results_dir must be a directory of experiment results, got the "
                                         f"non-directory {str(directory)!r}")
    return directory


def _checked_rows(checks: list[Any], source: Path) -> list[dict[str, Any]]:
    """The rows of a ``checks`` list, each a mapping whose ``theorem``/``status``/``detail`` are strings
    and whose ``ratio`` is None or a finite real number; ResultsFileError naming the file otherwise."""
    for i, row in enumerate(checks):
        where = f"{source}: checks[{i}]"
        if not isinstance(row, dict):
            raise ResultsFileError(f"{where} must be an object, got {row!r:.80}")
        for name in ("theorem", "status", "detail"):
            if name in row and not isinstance(row[name], str):
                raise ResultsFileError(f"{where}.{name} must be a string, got {row[name]!r:.80}")
        if "status" in row and row["status"] not in VERDICT_STATUSES:
            raise ResultsFileError(f"{where}.status must be one of {VERDICT_STATUSES}, got {row['status']!r:.80}")
        ratio = row.get("ratio")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                  or not math.isfinite(ratio)):
            raise ResultsFileError(f"{where}.ratio must be null or a finite number, got {ratio!r:.80}")
    return checks


def read_checks(results_dir: str | Path, experiment: str) -> list[dict[str, Any]] | None:
    """The ``checks`` list of ``results_dir/experiment.json``, or None if the file is absent or unreadable.

    Raises
    ------
    InvalidHyperparameterError
        When ``results_dir`` is not a path or names a non-directory, or ``experiment`` is not a bare
        name (a name with directory parts could read outside ``results_dir``).
    ResultsFileError
        When a row of the file's ``checks`` is malformed (not an object, a non-string theorem /
        status / detail, a status outside ``VERDICT_STATUSES``, a ratio that is not null or a finite number).
    """
    directory = _results_dir(results_dir)
    source = directory / f"{file_stem('experiment', experiment)}.json"
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    checks = doc.get("checks") if isinstance(doc, dict) else None
    return _checked_rows(checks, source) if isinstance(checks, list) else None


def _cache(value: Any) -> dict[str, list[dict[str, Any]] | None]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, list))
                                              for k, v in value.items()):
        raise InvalidHyperparameterError(f"cache must be None or a dict experiment -> checks list (or None), as "
                                         f"filled by verdict, got {value!r:.80}")
    return value


def verdict(it: Item, results_dir: str | Path = "figures",
            cache: dict[str, list[dict[str, Any]] | None] | None = None) -> Verdict:
    """The verdict on ``it`` (see the module docstring); ``cache`` (filled here) maps an experiment
    name to its checks so that :func:`verdicts` reads each results file once."""
    it = registry_item("it", it)
    results_dir = _results_dir(results_dir)
    cache = _cache(cache)
    refs = item_checks(it)
    if not refs:
        if not it.checkable:
            return Verdict("not checkable", None, it.note, "registry")
        if it.tests and it.coverage != "none":
            return Verdict("holds", None,
            f"checked by {len(it.tests)} test(s)" + (f"; {it.note}" if it.note else ""),
                           "tests")
        return Verdict("not evaluated", None, it.note or "no check names it", "registry")
    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for ref in refs:
        exp, key = ref.split(":")
        if exp not in cache:
            cache[exp] = read_checks(results_dir, exp)
        rows = cache[exp]
        if rows is None:
            missing.append(exp)
            continue
        found.extend(c for c in rows if c.get("theorem") == key)
    files = sorted({ref.split(":")[0] for ref in refs} - set(missing))
    if not found:
        why = (f"no results for {sorted(set(missing))} in {results_dir}/ (run `fltheory "
               f"reproduce`)" if missing
               else f"the results in {results_dir}/ hold no check {list(refs)}")
        return Verdict("not evaluated", None, why, "registry")
    worst = min(found, key=lambda c: (_RANK.get(c.get("status", ""), 1), -(c.get("ratio") or 0.0)))
    status = worst.get("status", "not checkable")
    same = [float(c["ratio"]) for c in found if c.get("status") == status and c.get("ratio") is not None]
    ratio = max(same) if same else None
    detail = f"{worst.get('theorem')}: {worst.get('detail', '')}"
    if missing:
        detail += f" (no results yet for {sorted(set(missing))})"
    return Verdict(status, ratio, detail, "reproduce (" + ", ".join(f"{f}.json" for f in files) + ")")


def verdicts(items: tuple[Item, ...], results_dir: str | Path = "figures") -> dict[str, Verdict]:
    """``{item key: Verdict}`` for ``items``, reading each results file once."""
    items = registry_items("items", items)
    results_dir = _results_dir(results_dir)
    cache: dict[str, list[dict[str, Any]] | None] = {}
    return {it.key: verdict(it, results_dir, cache) for it in items}
