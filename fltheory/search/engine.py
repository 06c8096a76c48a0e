"""Counterexample search: the largest measured/bound over a declared instance space.

:func:`search` runs three phases, each a set of independent tasks:

1. *exploration*: the first n_e points of a scrambled Sobol sequence (or a
   Latin hypercube) of the given seed over the space's unit cube, decoded to
   points, in batches of ``batch_size`` candidates per task (amortising the
   per-task overhead of a cluster);
2. *local maximisation*: from the ``n_starts`` best counted points of phase 1,
   Nelder-Mead on the continuous coordinates alternating with neighbourhood
   moves on the discrete ones (:func:`fltheory.search.evaluate.local_maximise`),
   one task per start; when these converge before spending the local budget,
   further rounds start from the next-best explored points;
3. *shrinking*: if the worst instance violates the bound, its ``shrink=True``
   integers (clients, dimension) are reduced while it still violates.

Only *counted* rows compete: every hypothesis of the bound held and the bound
is positive.  Rows whose hypotheses fail are kept in the table (with each
hypothesis and its numbers) and never reported as counterexamples.

Determinism: candidate i of phase 1 is the i-th design point and its
instance seed is ``SeedSequence([seed, i])``; phases 2 and 3 depend only on the
rows of the previous phases, each task's rows carry fixed global indices.  So
the same seed gives the same rows whatever the executor or worker count
(only ``runtime_s`` differs).  With ``out=`` every task's rows are checkpointed
as they complete; rerunning after a kill evaluates only the missing tasks.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from .._validate import instance, integer
from ..errors import InvalidHyperparameterError
from .evaluate import evaluate_batch, local_maximise, shrink
from .execution import Executor, Task, open_executor
from .report import counterexample_snippet, instance_document
from .space import Integer, Space, StrategySpace
from .store import CheckpointStore, _rows_table
from .target import SearchTarget, get_target

__all__ = ["SearchResult", "candidate_seed", "exploration_points", "search"]


@dataclass(frozen=True)
class SearchResult:
    """Outcome of :func:`search`.

    Attributes
    ----------
    target : str
        Name of the bound searched.
    rows : list of dict
        Every evaluated instance (one row each, by index; see :func:`search`).
    worst : dict or None
        The counted row with the largest measured/bound (None: nothing counted).
    counterexample : dict or None
        The smallest violating instance found by shrinking the worst violating one (that
        one itself when it cannot shrink; not always ``worst``, whose ratio may lie within
        its own slack); None when no counted row violates.
    out : Path or None
        Directory of the files, when ``out=`` was given.
    """

    target: str
    rows: list[dict[str, Any]]
    worst: dict[str, Any] | None
    counterexample: dict[str, Any] | None
    out: Path | None = None

    @property
    def n_evaluated(self) -> int:
        return len(self.rows)

    @property
    def n_counted(self) -> int:
        return sum(bool(r["counted"]) for r in self.rows)

    @property
    def n_invalid(self) -> int:
        """Rows whose instance failed a hypothesis of the bound (not counted)."""
        return sum(not r["valid"] and r["error"] is None for r in self.rows)

    @property
    def n_errors(self) -> int:
        """Rows whose evaluation raised one of the library's errors (the row's ``error``: an
        instance that could not be built, a run that diverged, a measured value out of float64
        range); not counted, and not known to have met or failed the hypotheses."""
        return sum(r["error"] is not None for r in self.rows)

    @property
    def n_violations(self) -> int:
        return sum(bool(r["violation"]) for r in self.rows)

    @property
    def worst_ratio(self) -> float | None:
        return None if self.worst is None else float(self.worst["ratio"])

    def table(self) -> Any:
        """The rows as a pyarrow Table (what ``results.parquet`` holds)."""
        import pyarrow as pa
        return _rows_table(pa, self.rows)


def candidate_seed(seed: int, index: int) -> int:
    """Instance seed of candidate ``index``: ``SeedSequence([seed, index])``; both are
    integers >= 0 (InvalidHyperparameterError otherwise)."""
    seed = integer("candidate_seed: seed", seed, minimum=0, maximum=None)
    index = integer("candidate_seed: index", index, minimum=0, maximum=None)
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0])


def exploration_points(space: Space, n: int, seed: int, design: str = "sobol") -> np.ndarray:
    """(n, space.dim) unit-cube design: scrambled Sobol (its first n points) or
    a Latin hypercube, from ``seed``.  ``space`` a Space, ``n`` an integer in [1, 10^7],
    ``seed`` an integer >= 0, ``design`` 'sobol' or 'lhs' (InvalidHyperparameterError otherwise)."""
    from scipy.stats import qmc
    instance("exploration_points: space", space, Space, "a Space (a box of Real/Integer/Categorical)",
             InvalidHyperparameterError)
    n = integer("exploration_points: n", n, minimum=1)
    seed = integer("exploration_points: seed", seed, minimum=0, maximum=None)
    if not isinstance(design, str) or design not in ("sobol", "lhs"):
        raise InvalidHyperparameterError(f"exploration_points: design must be 'sobol' or 'lhs', got {design!r:.60}")
    if design == "sobol":
        engine: Any = qmc.Sobol(space.dim, scramble=True, seed=np.random.default_rng(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)     # n not a power of 2: balance lost, fine
            return np.asarray(engine.random(n))
    if design == "lhs":
        return np.asarray(qmc.LatinHypercube(space.dim, seed=np.random.default_rng(seed)).random(n))
    raise InvalidHyperparameterError(f"design must be 'sobol' or 'lhs', got {design!r}")


def _resolve(target: str | SearchTarget) -> SearchTarget:
    if isinstance(target, SearchTarget):
        return target
    if isinstance(target, str):
        return get_target(target)
    raise InvalidHyperparameterError(f"target must be a registered name or a SearchTarget, got {target!r}")


def _int_arg(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidHyperparameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _best(rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The k counted rows of largest ratio (ties: smallest index), distinct points."""
    ranked = sorted((r for r in rows if r["counted"]), key=lambda r: (-r["ratio"], r["index"]))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in ranked:
        if r["point"] not in seen:
            seen.add(r["point"])
            out.append(r)
        if len(out) == k:
            break
    return out


def _worst_violation(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The violating row of largest ratio (ties: smallest index), or None.  Not always the
    row of largest ratio: a row's slack (its rounding allowance) is its own, so a row whose
    ratio exceeds a violation's may still sit within its slack."""
    violating = [r for r in rows if r["counted"] and r["violation"]]
    return min(violating, key=lambda r: (-r["ratio"], r["index"])) if violating else None


def _point(row: Mapping[str, Any]) -> dict[str, Any]:
    import json
    return dict(json.loads(row["point"]))


class _Runner:
    """Runs task lists through an executor, with the checkpoint and progress bar."""

    def __init__(self, executor: Executor, store: CheckpointStore | None, total: int, progress: bool | None):
        from tqdm.auto import tqdm
        self.executor, self.store = executor, store
        self.rows: dict[str, list[dict[str, Any]]] = {}
        done = store.done() if store is not None else set()
        if store is not None and done:
            for tid in done:
                self.rows[tid] = store.read([tid])
        self.bar = tqdm(total=total, desc="falsify", unit="eval",
                        disable=(None if progress is None else not progress),
                        initial=sum(len(v) for v in self.rows.values()))

    def run(self, tasks: list[Task]) -> list[dict[str, Any]]:
        todo = [t for t in tasks if t[0] not in self.rows]
        for task_id, rows in self.executor.run(todo):
            if self.store is not None:
                self.store.write(task_id, rows)
            self.rows[task_id] = rows
            self.bar.update(len(rows))
        out = [r for t in tasks for r in self.rows[t[0]]]
        out.sort(key=lambda r: r["index"])
        return out

    def close(self) -> None:
        self.bar.close()


def search(target: str | SearchTarget, space: Space | StrategySpace | None = None, *, budget: int = 1000,
           seed: int = 0, processes: int | None = None, scheduler: str | None = None,
           out: str | os.PathLike[str] | None = None, batch_size: int = 32, design: str = "sobol",
           explore_fraction: float = 0.5, n_starts: int = 4, timeout: float = 10.0,
           progress: bool | None = None) -> SearchResult:
    """Search the space for the largest measured/bound among instances whose hypotheses hold.

    Parameters
    ----------
    target : str or SearchTarget
        A registered bound name (see :func:`~fltheory.search.registered_targets`)
        or a :class:`SearchTarget`.
    space : Space or StrategySpace, optional
        The instance space (default: the target's).
    budget : int
        Maximum number of evaluations (exploration takes ``explore_fraction``
        of it, shrinking up to max(8, budget/20), local maximisation the rest,
        in rounds until spent or every counted explored point has been a start;
        shrinking stops when nothing shrinks: fewer evaluations are then made).
    seed : int
        Master seed of the design and of every candidate's instance.
    processes, scheduler : optional
        Run on a local Dask cluster of ``processes`` worker processes, or on the
        Dask scheduler at ``scheduler`` (unreachable within ``timeout`` s:
        :class:`~fltheory.search.ClusterUnavailableError`, nothing written).
        Default: in this process.  Tasks carry the target by reference to its
        module (pickled), so the workers of an existing cluster need the same
        fltheory installed and, for a user's target, its module importable.
    out : path, optional
        Directory for the checkpoint (``parts/``), ``results.parquet``,
        ``worst.json``, ``counterexample.json`` and ``test_counterexample.py``.
        An interrupted search rerun with the same arguments resumes.
    batch_size : int
        Exploration candidates per task.
    design : {"sobol", "lhs"}
    n_starts : int
        Starting points of the local maximisation.

    Returns
    -------
    SearchResult
        Each row holds ``index``, ``phase``, ``seed`` (of the instance),
        ``point`` (JSON), one ``p_<name>`` column per parameter, ``measured``,
        ``bound``, ``ratio``, ``valid``, ``counted``, ``violation``,
        ``hypotheses`` (JSON: name, held, detail), one ``held[<hypothesis>]``
        column per hypothesis, ``error``, ``runtime_s``, ``search_seed`` and
        ``fltheory_version``.
    """
    tgt = _resolve(target)
    space = tgt.space if space is None else space
    if not isinstance(space, (Space, StrategySpace)):
        raise InvalidHyperparameterError(f"space must be a Space or StrategySpace, got {space!r}")
    budget = _int_arg("budget", budget, 1)
    seed = _int_arg("seed", seed, 0)
    batch_size = _int_arg("batch_size", batch_size, 1)
    n_starts = _int_arg("n_starts", n_starts, 1)
    if not (0 < explore_fraction <= 1):
        raise InvalidHyperparameterError(f"explore_fraction must lie in (0, 1], got {explore_fraction!r}")
    if design not in ("sobol", "lhs"):
        raise InvalidHyperparameterError(f"design must be 'sobol' or 'lhs', got {design!r}")

    boxed = isinstance(space, Space)
    n_explore = budget if not boxed else max(1, min(budget, math.ceil(budget * explore_fraction)))
    rest = budget - n_explore
    can_shrink = boxed and any(isinstance(p, Integer) and p.shrink for p in space.params)  # type: ignore[union-attr]
    shrink_budget = min(rest, max(8, budget // 20)) if can_shrink else 0
    local_budget = rest - shrink_budget
    config = {"target": tgt.name, "space": space.to_dict(), "budget": budget, "seed": seed,
              "batch_size": batch_size, "design": design, "explore_fraction": explore_fraction,
              "n_starts": n_starts, "fltheory_version": __version__}

    with open_executor(processes=processes, scheduler=scheduler, timeout=timeout) as executor:
        store = None
        if out is not None:
            store = CheckpointStore(out, config)
            store.open()
        runner = _Runner(executor, store, budget, progress)
        try:
            # phase 1: exploration
            if boxed:
                U = exploration_points(space, n_explore, seed, design)  # type: ignore[arg-type]
                points = [space.decode(u) for u in U]  # type: ignore[union-attr]
            else:
                points = space.sample(n_explore, seed)  # type: ignore[union-attr]
            cands = [(i, p, candidate_seed(seed, i)) for i, p in enumerate(points)]
            tasks: list[Task] = [
                (f"explore-{k:06d}", evaluate_batch, (tgt, cands[s:s + batch_size], "explore", seed))
                for k, s in enumerate(range(0, len(cands), batch_size))]
            rows = runner.run(tasks)

            # phase 2: local maximisation from the best explored points, in rounds of
            # n_starts tasks; a round that converges early hands its unused budget to
            # the next round, started from the next-best explored points
            cursor, left, round_ = n_explore, local_budget, 0
            ranked = _best(rows, len(rows)) if boxed else []
            while boxed and left >= 1 and ranked:
                starts, ranked = ranked[:n_starts], ranked[n_starts:]
                per_start = left // len(starts)
                if per_start < 1:
                    break
                tasks = [(f"local-{round_:03d}-{j:03d}", local_maximise,
                          (tgt, space, _point(r), math.log(r["ratio"]) if r["ratio"] > 0 else -math.inf,
                           int(r["seed"]), cursor + j * per_start, per_start, seed))
                         for j, r in enumerate(starts)]
                new_rows = runner.run(tasks)
                rows = rows + new_rows
                cursor += len(starts) * per_start
                left -= len(new_rows)
                round_ += 1
                if not new_rows:
                    break

            # phase 3: shrink the worst violating instance (indices after every local round)
            w = _worst_violation(rows)
            if w is not None and shrink_budget > 0:
                args = (tgt, space, _point(w), int(w["seed"]), cursor, shrink_budget, seed)
                rows = rows + runner.run([("shrink", shrink, args)])
        finally:
            runner.close()

    rows.sort(key=lambda r: r["index"])
    best = _best(rows, 1)
    worst_row = best[0] if best else None
    counter = None
    worst_violation = _worst_violation([r for r in rows if r["phase"] != "shrink"])
    if worst_violation is not None:
        violating = [worst_violation] + [r for r in rows if r["phase"] == "shrink" and r["violation"]]
        smallest = min(_size(r, space) for r in violating)      # the last accepted shrink step
        counter = max((r for r in violating if _size(r, space) == smallest), key=lambda r: r["index"])
    result = SearchResult(tgt.name, rows, worst_row, counter, Path(out) if out is not None else None)
    if store is not None:
        _write_outputs(store, result, tgt)
    return result


def _size(row: Mapping[str, Any], space: Space | StrategySpace) -> tuple[int, ...]:
    point = _point(row)
    if not isinstance(space, Space):
        return ()
    return tuple(int(point.get(p.name, 0)) for p in space.params if isinstance(p, Integer) and p.shrink)


def _write_outputs(store: CheckpointStore, result: SearchResult, tgt: SearchTarget) -> None:
    store.write_table(result.rows)
    summary = {"target": tgt.name, "reference": tgt.reference, "evaluated": result.n_evaluated,
               "counted": result.n_counted, "hypothesis_violated": result.n_invalid, "errors": result.n_errors,
               "violations": result.n_violations, "worst_ratio": result.worst_ratio,
               "worst_index": None if result.worst is None else result.worst["index"],
               "counterexample_index": (None if result.counterexample is None
                                        else result.counterexample["index"])}
    store.write_json("summary.json", summary)
    if result.worst is not None:
        store.write_json("worst.json", instance_document(tgt, result.worst))
    if result.counterexample is not None:
        store.write_json("counterexample.json", instance_document(tgt, result.counterexample))
        store.write_text("test_counterexample.py", counterexample_snippet(tgt, result.counterexample))
