"""The worst instance as a document that rebuilds it, and as a pytest snippet."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._validate import integer
from ..errors import InvalidHyperparameterError
from .target import SearchTarget, registered_targets

__all__ = ["counterexample_snippet", "instance_document"]


#: Fields of an evaluated row that the documents read.
_ROW_FIELDS = ("point", "seed", "index", "phase", "measured", "bound", "ratio", "hypotheses", "fltheory_version")


def _check(name: str, target: Any, row: Any) -> None:
    """InvalidHyperparameterError for a target that is not a SearchTarget or a row that is not a
    mapping holding the fields of an evaluated row (with ``point`` and ``hypotheses`` as JSON text)."""
    if not isinstance(target, SearchTarget):
        raise InvalidHyperparameterError(
            f"{name}: target must be a SearchTarget, got {target!r:.60} ({type(target).__name__})")
    if not isinstance(row, Mapping):
        raise InvalidHyperparameterError(
            f"{name}: row must be a mapping (an evaluated row), got {row!r:.60} ({type(row).__name__})")
    missing = [f for f in _ROW_FIELDS if f not in row]
    if missing:
        raise InvalidHyperparameterError(f"{name}: row lacks the field(s) {missing}")
    for field in ("point", "hypotheses"):
        try:
            json.loads(row[field])
        except (TypeError, ValueError) as exc:
            raise InvalidHyperparameterError(
                f"{name}: row[{field!r}] must be JSON text, got {row[field]!r:.60} ({exc})") from None
    for field in ("seed", "index"):
        integer(f"{name}: row[{field!r}]", row[field], minimum=0, maximum=None)


def instance_document(target: SearchTarget, row: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-able description of one evaluated instance.

    ``fltheory.search.evaluate_point(doc["target"], doc["point"], doc["seed"])``
    rebuilds it exactly (the point's floats are stored with full precision by
    ``json``; the instance is a deterministic function of point and seed).
    """
    _check("instance_document", target, row)
    return {
        "target": target.name, "reference": target.reference, "description": target.description,
        "point": json.loads(row["point"]), "seed": int(row["seed"]), "index": int(row["index"]),
        "phase": row["phase"], "measured": row["measured"], "bound": row["bound"], "ratio": row["ratio"],
        "hypotheses": json.loads(row["hypotheses"]), "fltheory_version": row["fltheory_version"],
        "rebuild": (f"fltheory.search.evaluate_point({target.name!r}, {row['point']!r}, {int(row['seed'])})"),
    }


def counterexample_snippet(target: SearchTarget, row: Mapping[str, Any]) -> str:
    """A pytest test (strict xfail) that rebuilds the violating instance and
    asserts the bound; ready to paste into a test module."""
    _check("counterexample_snippet", target, row)
    registered = registered_targets().get(target.name) is target
    func = "".join(c if c.isalnum() else "_" for c in target.name)
    point = json.loads(row["point"])
    shown = json.dumps(point, sort_keys=True).replace('"', "'")
    head = "" if registered else (
        f"# {target.name!r} is not a registered target: register it (fltheory.search.register)\n"
        "# in the module that defines it before running this test.\n")
    return f'''{head}import json

import pytest

from fltheory.search import evaluate_point

POINT = json.loads({json.dumps(json.dumps(point, sort_keys=True))})
SEED = {int(row["seed"])}


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: {target.reference} fails on a searched instance "
    "(every hypothesis held): point {shown}, seed {int(row["seed"])}, "
    "measured {row["measured"]!r} > bound {row["bound"]!r}, ratio {row["ratio"]!r}"))
def test_{func}_counterexample():
    res = evaluate_point({target.name!r}, POINT, SEED)
    assert res.valid, str(res)
    assert res.measured <= res.value, str(res)
'''
