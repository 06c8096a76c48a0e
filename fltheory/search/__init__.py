"""Counterexample search for any bound, in this process or on a Dask cluster.

Declare an instance space (:class:`Space` of :class:`Real`, :class:`Integer`,
:class:`Categorical` parameters, possibly conditional, or a
:class:`StrategySpace` over a Hypothesis strategy), give a bound as a
:class:`SearchTarget` (a builder-and-bound ``evaluate(point, seed) ->
BoundResult``) or a registered name, and :func:`search` looks for the largest
measured/bound among instances whose hypotheses hold::

    from fltheory.search import search
    res = search("efl_eq11_join", budget=2000, seed=0, out="runs/eq11")
    res.worst_ratio, res.counterexample      # results.parquet, worst.json in runs/eq11

Dask: ``processes=2`` (a LocalCluster) or ``scheduler="tcp://host:8786"``;
`run_tasks` runs other callables (experiments) on the same cluster.
Needs the ``search`` extra (dask[distributed], pyarrow) for Dask and Parquet.
"""

from .engine import SearchResult, candidate_seed, exploration_points, search
from .execution import ClusterUnavailableError, open_executor, run_tasks, task_runner
from .report import counterexample_snippet, instance_document
from .space import Categorical, Integer, Real, Space, StrategySpace, space_from_dict
from .store import read_table
from .target import SearchTarget, evaluate_point, get_target, register, registered_targets
from . import efl_target, targets  # noqa: F401  (the built-in targets register on import)

__all__ = [
    "Categorical",
    "ClusterUnavailableError",
    "Integer",
    "Real",
    "SearchResult",
    "SearchTarget",
    "Space",
    "StrategySpace",
    "candidate_seed",
    "counterexample_snippet",
    "evaluate_point",
    "exploration_points",
    "get_target",
    "instance_document",
    "open_executor",
    "read_table",
    "register",
    "registered_targets",
    "run_tasks", "task_runner",
    "search",
    "space_from_dict",
]
