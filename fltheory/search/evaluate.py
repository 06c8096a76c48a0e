"""The work of one task: evaluate candidates, maximise locally, shrink.

Each function is a pure function of its arguments (picklable, so Dask workers
run it) and returns the list of rows it evaluated, each a dict with the
candidate's global ``index``.  Scores are log(measured / bound) over counted
instances (every hypothesis held, bound > 0); others score -inf.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import __version__
from ..errors import FLTheoryError
from .space import Integer, Space
from .target import SearchTarget

__all__ = ["evaluate_batch", "evaluate_row", "local_maximise", "shrink"]

Row = dict[str, Any]


def _float(x: Any) -> float | None:
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def evaluate_row(target: SearchTarget, point: Mapping[str, Any], seed: int, index: int, phase: str,
                 search_seed: int) -> Row:
    """Evaluate one instance into one table row (errors of the library recorded, not raised)."""
    start = time.perf_counter()
    error = None
    try:
        res = target.evaluate(dict(point), int(seed))
        measured, bound = _float(res.measured), _float(res.value)
        hyps = [{"name": a.name, "held": bool(a.held), "detail": a.detail} for a in res.assumptions]
        valid = bool(res.valid)
        slack = None
        tags: Mapping[str, Any] = {}
        if valid and measured is not None and bound is not None:
            slack = float(target.slack(res)) if target.slack is not None else 1e-9 * abs(bound)
            tags = target.annotate(res) if target.annotate is not None else {}
    except FLTheoryError as exc:
        measured = bound = None
        hyps = []
        valid = False
        slack = None
        tags = {}
        error = f"{type(exc).__name__}: {exc}"
    runtime = time.perf_counter() - start
    counted = valid and measured is not None and bound is not None and bound > 0
    ratio = measured / bound if counted and measured is not None and bound is not None else None
    row: Row = {
        "index": int(index), "phase": phase, "seed": int(seed),
        "point": json.dumps(dict(point), sort_keys=True),
        "measured": measured, "bound": bound, "ratio": ratio,
        "valid": valid, "counted": counted, "slack": slack,
        "violation": bool(counted and measured is not None and bound is not None and slack is not None
                          and measured > bound + slack),
        "hypotheses": json.dumps(hyps), "error": error, "runtime_s": runtime,
        "search_seed": int(search_seed), "fltheory_version": __version__,
    }
    for name, value in point.items():
        row[f"p_{name}"] = value
    for h in hyps:
        row[f"held[{h['name']}]"] = h["held"]
    for key, value in tags.items():
        row[f"tag_{key}"] = value
    return row


def score(row: Row) -> float:
    """log(measured/bound) of a counted row (-inf for ratio 0 or uncounted)."""
    r = row["ratio"]
    return math.log(r) if row["counted"] and r is not None and r > 0 else -math.inf


def evaluate_batch(target: SearchTarget, candidates: list[tuple[int, dict[str, Any], int]], phase: str,
                   search_seed: int) -> list[Row]:
    """Rows of the candidates (index, point, seed), in order."""
    return [evaluate_row(target, point, seed, index, phase, search_seed) for index, point, seed in candidates]


class _Budget(Exception):
    """Raised inside the objective when the task's budget is spent."""


class _Evaluator:
    def __init__(self, target: SearchTarget, seed: int, first_index: int, budget: int, phase: str,
                 search_seed: int) -> None:
        self.target, self.seed, self.next, self.left = target, seed, first_index, budget
        self.phase, self.search_seed = phase, search_seed
        self.rows: list[Row] = []

    def __call__(self, point: Mapping[str, Any]) -> Row:
        if self.left <= 0:
            raise _Budget
        row = evaluate_row(self.target, point, self.seed, self.next, self.phase, self.search_seed)
        self.next += 1
        self.left -= 1
        self.rows.append(row)
        return row


def local_maximise(target: SearchTarget, space: Space, start: dict[str, Any], start_score: float,
                   seed: int, first_index: int, budget: int, search_seed: int) -> list[Row]:
    """Maximise log(measured/bound) from ``start`` with at most ``budget`` evaluations.

    Alternates Nelder-Mead (scipy, on the unit-cube coordinates of the active
    Real parameters, the discrete ones held) with a best-improvement sweep of
    neighbourhood moves on the discrete parameters (Integer +-1, other
    categories), until neither improves or the budget is spent.  Uncounted
    points (a hypothesis fails) score -inf: Nelder-Mead sees a large penalty.
    """
    from scipy.optimize import minimize
    ev = _Evaluator(target, seed, first_index, budget, "local", search_seed)
    best, best_score = dict(start), start_score
    try:
        while True:
            improved = False
            cont = space.continuous(best)
            if cont:
                base = np.array([space.params[i].encode(best[space.params[i].name]) for i in cont])
                found: dict[str, Any] = {}

                def objective(v: np.ndarray, cont: list[int] = cont, start: dict[str, Any] = best,
                              found: dict[str, Any] = found) -> float:
                    point = dict(start)
                    for k, i in enumerate(cont):
                        point[space.params[i].name] = space.params[i].decode(float(np.clip(v[k], 0.0, 1.0)))
                    s = score(ev(point))
                    if s > found.get("score", -math.inf):
                        found.update(score=s, point=point)
                    return -s if math.isfinite(s) else 1e6

                x0 = base
                simplex = np.vstack([x0] + [x0 + np.where(x0[k] > 0.5, -0.15, 0.15) * np.eye(len(cont))[k]
                                            for k in range(len(cont))])
                try:
                    minimize(objective, x0, method="Nelder-Mead",
                             options={"initial_simplex": simplex, "maxfev": max(ev.left, 1),
                                      "xatol": 1e-7, "fatol": 1e-10})
                finally:
                    if found.get("score", -math.inf) > best_score:
                        best, best_score, improved = found["point"], found["score"], True
            moves = [(score(ev(nb)), nb) for nb in space.neighbours(best)]
            top = max(moves, key=lambda m: m[0], default=None)
            if top is not None and top[0] > best_score:
                best_score, best, improved = top[0], top[1], True
            if not improved:
                break
    except _Budget:
        pass
    return ev.rows


def shrink(target: SearchTarget, space: Space, start: dict[str, Any], seed: int, first_index: int,
           budget: int, search_seed: int) -> list[Row]:
    """Reduce the ``shrink=True`` integers of a violating point while it still violates.

    For each such parameter in declaration order, the values low, low + 1, ...
    below the current one are tried in increasing order and the first that
    still gives a counted violation (every hypothesis held, ratio > 1) is
    kept; passes repeat until nothing shrinks or the budget is spent.
    """
    ev = _Evaluator(target, seed, first_index, budget, "shrink", search_seed)
    current = dict(start)
    names = [p.name for p in space.params if isinstance(p, Integer) and p.shrink]
    try:
        changed = True
        while changed:
            changed = False
            for name in names:
                if name not in current:
                    continue
                low = space.param(name).low   # type: ignore[union-attr]
                for value in range(int(low), int(current[name])):
                    cand = dict(current, **{name: value})
                    row = ev(cand)
                    if row["violation"]:
                        current, changed = cand, True
                        break
    except _Budget:
        pass
    return ev.rows
