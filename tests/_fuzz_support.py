"""Machinery of the public-API fuzz suite (tests/test_fuzz_public_api.py).

The public surface is read from the ``__all__`` of every public package, so a
function or class added there is fuzzed the day it is added.  Each callable is
called with plausible arguments (:func:`base_arguments`, chosen by parameter
name) in which exactly one parameter is replaced by a bad value.  The contract:
the call raises an :class:`~fltheory.errors.FLTheoryError` or returns a
result whose numbers are all finite, within :data:`TIME_LIMIT` CPU seconds.
Anything else (a raw numpy/Python exception, NaN/inf in the result, a hang)
is a failure.  Outcomes are tallied in :data:`TALLY` and printed at the end of
the session by ``tests/conftest.py``.

:data:`FUNCTION_BASES` gives working arguments to functions whose parameters the
plausible values by name do not fit (a closed-form matrix-free map, a search row),
so that the sweep reaches each parameter's own check; :data:`ASSERTION_HELPERS`
are test helpers whose AssertionError is their documented verdict.
:func:`unreached_callables` walks every non-private module for the completeness test.
"""

from __future__ import annotations

import contextlib
import functools
import dataclasses
import enum
import importlib
import inspect
import json
import os
import signal
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fltheory.errors import FLTheoryError

#: Packages whose ``__all__`` is the public surface under test.
PUBLIC_PACKAGES: tuple[str, ...] = ("fltheory.problems", "fltheory.algorithms", "fltheory.theory",
                   "fltheory.theory.bounds", "fltheory.nn", "fltheory.optim",
                   "fltheory.compression", "fltheory.participation", "fltheory.theory.moments",
                   "fltheory.theory.bounds.recursions", "fltheory.theory.matrix_free", "fltheory.theory.krylov",
                   "fltheory.theory.closed_form_maps", "fltheory.theory.powered_krylov",
                   "fltheory.search", "fltheory.theory.symbolic", "fltheory.testing", "fltheory.references",
                   "fltheory.theory.bounds.fedavg_hard_instance", "fltheory.theory.registry",
                   "fltheory.theory.registry.verdicts",
                   # display / plotting and the nn entries not exported by fltheory.nn (issue 16)
                   "fltheory.display", "fltheory.plotting", "fltheory.nn.datasets",
                   "fltheory.nn.trajectory_constants")
#: The results store and the reproduce framework (their working arguments: :func:`_reproduce_bases`).
PUBLIC_PACKAGES += ("fltheory.results", "fltheory.reproduce", "fltheory.reproduce.discovery",
                    "fltheory.reproduce.keys", "fltheory.reproduce.locks", "fltheory.reproduce.overrides",
                    "fltheory.reproduce.progress", "fltheory.reproduce.protocol", "fltheory.reproduce.runner",
                    "fltheory.reproduce.seeding", "fltheory.reproduce.status", "fltheory.reproduce.store",
                    "fltheory.reproduce.summary")

#: Assertion helpers for tests: an AssertionError is their documented verdict (a bound or a contract
#: that does not hold), not a raw error; bad arguments must still give typed errors.
ASSERTION_HELPERS = frozenset({"fltheory.testing.check_bound"})

#: Callables that write files at a relative path they are given (a fuzzed "abc" is one): called with the
#: sandbox directory as working directory, so that no fuzzed call writes into the repository.
WRITES_FILES = frozenset({"fltheory.plotting.save_figure"})

#: CPU seconds (this process, all threads) one call may use before it counts as a hang.  CPU time, not
#: wall time, so that a loaded machine (other jobs on the cores) does not turn a slow call into a "hang";
#: :data:`WALL_LIMIT` bounds the wall time as well (a call blocked without computing).
TIME_LIMIT = 3.0
WALL_LIMIT = 60.0


class Outcome(str, enum.Enum):
    TYPED = "typed fltheory error"
    FINITE = "finite result"
    RAW = "raw exception"
    NONFINITE = "non-finite result"
    HANG = "hang (time limit)"


#: Outcome counts and the set of distinct inputs tried in this session.
TALLY: Counter[str] = Counter()
INPUTS: set[str] = set()


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_Hang` inside the block once it has used ``seconds`` of CPU time (ITIMER_PROF)
    or :data:`WALL_LIMIT` seconds of wall time (ITIMER_REAL), whichever comes first."""
    def _alarm(signum: int, frame: Any) -> None:
        raise _Hang
    previous_prof = signal.signal(signal.SIGPROF, _alarm)
    previous_real = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, WALL_LIMIT))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous_prof)
        signal.signal(signal.SIGALRM, previous_real)


def _is_data_container(obj: Any) -> bool:
    """Result / state records (NamedTuples, frozen result dataclasses, enums):
    they hold what routines computed and are not entry points."""
    if isinstance(obj, type):
        if issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return True
        if issubclass(obj, (enum.Enum, BaseException)):
            return True
        if dataclasses.is_dataclass(obj) and not _has_own_init_checks(obj):
            return True
    return False


def _has_own_init_checks(cls: type) -> bool:
    return "__post_init__" in vars(cls) or ("__init__" in vars(cls) and not dataclasses.is_dataclass(cls))


def not_an_entry_point(obj: Any) -> bool:
    """Callables the enumeration skips by rule: records (:func:`_is_data_container`: NamedTuples,
    dataclasses without their own checks, enums, exceptions), abstract classes (reached through
    their concrete subclasses), protocols and callables without a signature."""
    if _is_data_container(obj) or (isinstance(obj, type) and inspect.isabstract(obj)):
        return True
    if getattr(obj, "_is_protocol", False):
        return True
    try:
        inspect.signature(obj)
    except (TypeError, ValueError):
        return True
    return False


def public_callables() -> list[tuple[str, Callable[..., Any]]]:
    """(qualified name, callable) for every public function and concrete class."""
    seen: dict[int, str] = {}
    out: list[tuple[str, Callable[..., Any]]] = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not callable(obj) or id(obj) in seen or not_an_entry_point(obj):
                continue
            seen[id(obj)] = name
            out.append((f"{package}.{name}", obj))
    return out


def public_modules() -> list[str]:
    """Every importable fltheory module without a path component starting with "_"."""
    import pkgutil

    import fltheory
    return sorted(["fltheory"] + [info.name for info in pkgutil.walk_packages(fltheory.__path__, "fltheory.")
                                  if not any(part.startswith("_") for part in info.name.split("."))])


def unreached_callables() -> dict[str, list[str]]:
    """module -> names in its ``__all__`` of callables that are entry points (not skipped by
    :func:`not_an_entry_point`) but not reached by :func:`public_callables` (same object)."""
    reached = {id(obj) for _, obj in public_callables()}
    out: dict[str, list[str]] = {}
    for name in public_modules():
        module = importlib.import_module(name)
        missing = [n for n in getattr(module, "__all__", ())
                   if callable(getattr(module, n, None)) and id(getattr(module, n)) not in reached
                   and not not_an_entry_point(getattr(module, n))]
        if missing:
            out[name] = missing
    return out


# ---------------------------------------------------------------- arguments
def _quadratic() -> Any:
    from fltheory.problems import random_quadratic
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _logistic() -> Any:
    from fltheory.problems import LogisticFederation
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((6, 2)) for _ in range(3)]
    y = [np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]) for _ in range(3)]
    return LogisticFederation(A, y, reg=0.1)


def _algorithm() -> Any:
    from fltheory.algorithms import FedAvg
    return FedAvg(lr=0.1, local_steps=2)


def _affine_map() -> Any:
    from fltheory.theory import affine_round_map
    return affine_round_map(_algorithm(), _quadratic())


#: Plausible values by parameter name (factories, so every call gets fresh objects).
_PLAUSIBLE: dict[str, Callable[[], Any]] = {
    "problem": _quadratic, "fed": _quadratic, "federation": _quadratic,
    "algorithm": _algorithm, "amap": _affine_map,
    "rng": lambda: np.random.default_rng(0), "seed": lambda: 0,
    "x": lambda: np.zeros(2), "x0": lambda: np.zeros(2), "center": lambda: np.zeros(2),
    "X": lambda: np.zeros((3, 2)), "W": lambda: np.zeros((3, 2)),
    "H": lambda: np.stack([np.eye(2)] * 3), "e": lambda: np.zeros((3, 2)),
    "n_clients": lambda: 3, "dim": lambda: 2, "d": lambda: 2, "n": lambda: 6, "N": lambda: 3,
    "rounds": lambda: 2, "local_steps": lambda: 2, "K": lambda: 2, "tau": lambda: 2, "E": lambda: 2,
    "R": lambda: 10, "S": lambda: 2, "J": lambda: 2, "T": lambda: 2, "k": lambda: 1,
    "steps": lambda: np.array([1, 2, 1]), "size": lambda: 2, "units": lambda: 2,
    "lr": lambda: 0.1, "server_lr": lambda: 1.0, "eta_l": lambda: 0.1, "eta_g": lambda: 1.0,
    "mu": lambda: 0.5, "L": lambda: 1.0, "beta": lambda: 1.0, "gamma": lambda: 0.5,
    "heterogeneity": lambda: 0.5, "eps": lambda: 0.1, "sigma2": lambda: 0.1, "G": lambda: 1.0,
    "G2": lambda: 1.0, "B": lambda: 1.0, "D": lambda: 1.0, "zeta2": lambda: 0.1, "delta": lambda: 0.1,
    "theta": lambda: 1.5, "q": lambda: 0.5, "p": lambda: 0.5, "prob": lambda: 0.5,
    "constant": lambda: 1.0, "init_dist2": lambda: 1.0, "dist2": lambda: 1.0,
    "labels": lambda: np.array([0, 1, 0, 1, 0, 1]), "features": lambda: [np.ones((2, 2))] * 3,
    "input_shape": lambda: (2,), "input_dim": lambda: 2, "hidden": lambda: 2, "n_classes": lambda: 2,
    "weights": lambda: None, "n_samples": lambda: None, "participation": lambda: None,
    "V": lambda: np.ones((3, 2)), "values": lambda: np.ones(4), "bin_width": lambda: 0.1,
    "mean": lambda: 1.0, "sigma": lambda: 1.0, "concentration": lambda: 1.0,
    "layers": list, "method": lambda: "simulate", "constants": lambda: _quadratic().constants(),
    "diag": lambda: np.ones((3, 2)), "rank": lambda: 1,          # StructuredQuadraticFederation
    "copies": lambda: 2,                                           # Federation.lifted
}


def _scaffold_setup() -> tuple[Any, Any, Any]:
    """SCAFFOLD on 4 quadratic clients in d = 2 (state of 12 numbers): the smallest instance
    with closed-form block products whose powered Krylov space is used (``theory.powered_krylov``)."""
    from fltheory.algorithms import Scaffold
    from fltheory.problems import random_quadratic
    from fltheory.theory.round_maps import state_layout
    problem = random_quadratic(4, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)
    algorithm = Scaffold(lr=0.1, local_steps=2)
    layout = state_layout(algorithm.init(problem, np.zeros(2), np.random.default_rng(0)))
    return algorithm, problem, layout


def _closed_form_block_base() -> dict[str, Any]:
    algorithm, problem, layout = _scaffold_setup()
    return {"algorithm": algorithm, "problem": problem, "layout": layout,
            "frozen": np.zeros(layout.dim, dtype=bool)}


def _powered_map() -> dict[str, Any]:
    from fltheory.theory import affine_round_map
    algorithm, problem, _ = _scaffold_setup()
    return {"amap": affine_round_map(algorithm, problem, matrix_free=True)}


def _check_bound_base() -> dict[str, Any]:
    from fltheory.theory import BoundResult
    return {"measured": 0.5, "bound_result": BoundResult(value=1.0, assumptions=(), reference="EFL Theorem 1",
                                                         variant="printed")}


def _search_space() -> Any:
    from fltheory.search import Categorical, Real, Space
    return Space([Categorical("kind", ["a", "b"]), Real("x", 0.1, 1.0, when={"kind": ["a"]})])


def _search_row() -> dict[str, Any]:
    """A target and an evaluated row of it, as ``search`` stores them (a point of the EFL
    eq. (10) target, small enough to evaluate in milliseconds)."""
    import json

    from fltheory.search import get_target
    point = {"N": 3, "d": 2, "share": 1.0, "L": 2.0, "mu": 0.5, "heterogeneity": 1.0}
    row = {"point": json.dumps(point), "seed": 0, "index": 0, "phase": "explore", "measured": 0.5, "bound": 1.0,
           "ratio": 0.5, "hypotheses": "[]", "fltheory_version": "0"}
    return {"target": get_target("efl_eq10_depart"), "row": row}


@functools.cache
def _search_table_dir() -> str:
    """A directory holding a two-row ``results.parquet`` (made once per session); pyarrow's
    parquet and dataset modules are imported here, before any timed call (their first import
    takes seconds on a loaded machine and is not the call's cost)."""
    import atexit
    import shutil
    import tempfile

    import pyarrow as pa
    import pyarrow.dataset
    import pyarrow.parquet as pq
    out = tempfile.mkdtemp(prefix="fltheory-fuzz-table-")
    atexit.register(shutil.rmtree, out, True)
    pq.write_table(pa.Table.from_pylist([{"ratio": 0.5}, {"ratio": 0.25}]), f"{out}/results.parquet")
    return out


def _search_table() -> dict[str, Any]:
    try:
        return {"out": _search_table_dir()}
    except ImportError:          # pragma: no cover - pyarrow is in the test extras
        return {}


_SANDBOX: list[tempfile.TemporaryDirectory[str]] = []


def _sandbox() -> Path:
    """A temporary directory for the registry's file arguments (removed when the session ends), so that
    a fuzzed call never reads or writes a file of the repository."""
    if not _SANDBOX:
        _SANDBOX.append(tempfile.TemporaryDirectory(prefix="fltheory-fuzz-registry-"))
    return Path(_SANDBOX[0].name)


def _registry_item() -> Any:
    from fltheory.theory.registry import ITEMS
    return next(it for it in ITEMS if it.checks)


def _registry_results() -> Path:
    """A results directory holding one experiment check of :func:`_registry_item`."""
    it = _registry_item()
    experiment, theorem = it.checks[0].split(":")
    directory = _sandbox() / "results"
    directory.mkdir(exist_ok=True)
    (directory / f"{experiment}.json").write_text(json.dumps(
        {"checks": [{"theorem": theorem, "status": "holds", "ratio": 0.5, "detail": "fuzz base"}]}))
    return directory


def _registry_readme() -> dict[str, Any]:
    """A fresh stale README with the coverage markers in the sandbox (update_readme rewrites it)."""
    from fltheory.theory.registry.table import BEGIN, END
    readme = _sandbox() / "README.md"
    readme.write_text(f"# title\n{BEGIN}\nstale\n{END}\ntail\n")
    return {"path": readme}


def _figure_and_axes() -> tuple[Any, Any]:
    from fltheory.plotting import figure
    fig, axes = figure(1, 1)
    return fig, axes[0]


def _frame_base() -> dict[str, Any]:
    """A History for ``history_to_frame``; pandas is imported here, before any timed call (its first
    import takes seconds on a loaded machine and is not the call's cost)."""
    with contextlib.suppress(ImportError):        # without pandas the call's typed OptionalDependencyError
        import pandas  # noqa: F401
    return {"history": _history()}


def _experiment_document() -> dict[str, Any]:
    """A minimal document as ``fltheory reproduce`` writes it (``figures/NAME.json``)."""
    return {"experiment": {"name": "fuzz", "title": "a fuzz document"}, "key": {"mode": "quick"},
            "checks": [{"theorem": "EFL Theorem 1", "status": "holds", "ratio": 0.5, "detail": "d"}],
            "macros": {"fuzzRatio": "0.5"}, "data": {"x": [1.0, 2.0]}}


#: Working arguments of the display / plotting / nn entries added to the enumeration by issue 16
#: (items 3-5); merged into FUNCTION_BASES below.
DISPLAY_BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "fltheory.display.summary_text": lambda: {"title": "a title", "rows": [("name", "value")]},
    "fltheory.display.summary_html": lambda: {"title": "a title", "rows": [("name", "value")]},
    "fltheory.display.history_to_frame": _frame_base,
    "fltheory.display.plot_histories": lambda: {"histories": _history()},
    "fltheory.display.ExperimentReport": lambda: {"document": _experiment_document()},
    "fltheory.plotting.ratio_axis": lambda: {"ax": _figure_and_axes()[1]},
    "fltheory.plotting.save_figure": lambda: {"fig": _figure_and_axes()[0],
                                              "path_without_suffix": _sandbox() / "figure"},
    "fltheory.nn.trajectory_constants.power_iteration": lambda: {
        "matvec": lambda V: 2.0 * V, "v0": np.ones((3, 2)), "iters": 3, "tol": 1e-8},
}


#: Working arguments of single public functions where the plausible values by name do not fit
#: (qualified name -> factory of keyword arguments), used by the sweep and the property test.
FUNCTION_BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "fltheory.theory.closed_form_maps.closed_form_block": _closed_form_block_base,
    "fltheory.theory.closed_form_maps.closed_form_linear_part": lambda: {
        k: v for k, v in _closed_form_block_base().items() if k != "frozen"},
    "fltheory.theory.powered_krylov.powered_rate": _powered_map,
    "fltheory.theory.powered_krylov.powered_fixed_point": _powered_map,
    "fltheory.theory.powered_krylov.powered_applies": _powered_map,
    "fltheory.theory.powered_krylov.uses_powered_krylov": _powered_map,
    "fltheory.testing.check_bound": _check_bound_base,
    "fltheory.search.exploration_points": lambda: {"space": _search_space(), "n": 4, "seed": 0},
    "fltheory.search.Space": lambda: {"params": list(_search_space().params)},
    "fltheory.search.evaluate_point": lambda: {
        "name": "efl_eq10_depart", "point": _search_row()["row"]["point"], "seed": 0},
    "fltheory.search.instance_document": _search_row,
    "fltheory.search.counterexample_snippet": _search_row,
    "fltheory.search.read_table": _search_table,
    "fltheory.theory.registry.Item": lambda: {"key": "efl:fuzz", "paper": "efl", "number": "Theorem 1",
                                              "kind": "theorem", "statement": "a statement", "note": "partial"},
    "fltheory.theory.registry.Verdict": lambda: {"status": "holds", "ratio": 0.5, "detail": "d", "source": "tests"},
    "fltheory.theory.registry.coverage_counts": lambda: {"items": (_registry_item(),)},
    "fltheory.theory.registry.coverage_table": lambda: {"items": (_registry_item(),)},
    "fltheory.theory.registry.item": lambda: {"key": _registry_item().key},
    "fltheory.theory.registry.items": lambda: {"paper": "efl"},
    "fltheory.theory.registry.read_checks": lambda: {
        "results_dir": _registry_results(), "experiment": _registry_item().checks[0].split(":")[0]},
    "fltheory.theory.registry.update_readme": _registry_readme,
    "fltheory.theory.registry.verdict": lambda: {"it": _registry_item(), "results_dir": _registry_results()},
    "fltheory.theory.registry.verdicts": lambda: {"items": (_registry_item(),), "results_dir": _registry_results()},
    "fltheory.theory.registry.verdicts.item_checks": lambda: {"it": _registry_item()},
    **DISPLAY_BASES,
}


# ------------------------------------------------------- results store and reproduce framework
_TINY_EXPERIMENT = """
import numpy as np
from fltheory.reproduce import Check, Theorem

NAME = "fuzz_tiny"
TITLE = "Fuzz: the mean of two normals is below 10"
THEOREMS = [Theorem("mean", "fuzz suite", "Fake statement")]
QUICK = {"n": 2}
FULL = {"n": 3}
EXPECTED_AXES = 1

def run(config, rng):
    return {"mean": float(np.mean(rng.standard_normal(config["n"])))}

def checks(results):
    return [Check("mean", "holds", abs(results["mean"]) / 10.0)]

def macros(results):
    return {"mean": results["mean"]}

def plot(results):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(1, 1))
    fig.add_subplot(1, 1, 1).plot([0.0, results["mean"]])
    return fig
"""

#: Name of the throw-away experiment package (unique per session, so nothing is cached across sessions).
_TINY_PACKAGE = f"fltheory_fuzz_experiments_{os.getpid()}"


@functools.cache
def _tiny_root() -> Path:
    """A sandbox directory holding the package ``_TINY_PACKAGE`` with the one experiment
    ``fuzz_tiny`` (put on ``sys.path`` once), a JSON file, a config file and a stored result."""
    import sys
    root = _sandbox() / "reproduce"
    package = root / _TINY_PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "fuzz_tiny.py").write_text(_TINY_EXPERIMENT)
    sys.path.insert(0, str(root))
    (root / "config.json").write_text(json.dumps({"n": 3}))
    return root


def _tiny_experiment() -> Any:
    from fltheory.reproduce import load_experiment
    return load_experiment(f"{_TINY_PACKAGE}.fuzz_tiny", str(_tiny_root()))


def _tiny_record() -> Any:
    from fltheory.results import RunRecord
    return RunRecord(config={"n": 2}, seed=0, versions={"numpy": "1"}, python="3", git_commit="unknown",
                     git_dirty=None, timestamp="2026-01-01T00:00:00+00:00")


@functools.cache
def _tiny_results() -> Path:
    """A results directory where ``fuzz_tiny`` has been reproduced once (quick mode, seed 0)."""
    from fltheory.reproduce import reproduce
    out = _tiny_root() / "figures"
    outcomes = reproduce([_tiny_experiment()], out, show_progress=False)
    assert all(o.status == "holds" for o in outcomes), outcomes
    return out


def _tiny_stored() -> list[tuple[Any, Any]]:
    from fltheory.reproduce import read_stored
    return [(_tiny_experiment(), read_stored(_tiny_results(), "fuzz_tiny"))]


def _tiny_document() -> dict[str, Any]:
    return dict(json.loads((_tiny_results() / "fuzz_tiny.json").read_text()))


def _scratch(name: str) -> Path:
    """A fresh path in the sandbox (the fuzzed call may create it)."""
    directory = _tiny_root() / "scratch"
    directory.mkdir(exist_ok=True)
    return directory / name


def _reproduce_bases() -> dict[str, Callable[[], dict[str, Any]]]:
    experiment = lambda: {"experiment": _tiny_experiment()}
    key = lambda: {"fuzz_tiny": _tiny_document()["key"]}
    return {
        "fltheory.results.atomic_write": lambda: {"path": _scratch("atomic.txt")},
        "fltheory.results.git_commit": lambda: {"path": _tiny_root()},
        "fltheory.results.load_json": lambda: {"path": _tiny_root() / "config.json"},
        "fltheory.results.load_results": lambda: {"path": _tiny_results() / "fuzz_tiny.json"},
        "fltheory.results.save_json": lambda: {"path": _scratch("saved.json"), "obj": {"a": [1.0, 2.0]}},
        "fltheory.results.save_results": lambda: {"path": _scratch("results.json"), "data": {"x": np.ones(3)},
                                                  "record": _tiny_record()},
        "fltheory.results.to_jsonable": lambda: {"obj": {"a": np.ones(2), "b": [1, "c", None]}},
        "fltheory.reproduce.Check": lambda: {"theorem": "mean", "status": "holds", "ratio": 0.5},
        "fltheory.reproduce.apply_overrides": lambda: {"experiment": "fuzz_tiny", "config": {"n": 2},
                                                       "overrides": {"n": 3}},
        "fltheory.reproduce.discover": lambda: {"package": (_tiny_root(), _TINY_PACKAGE)[1]},
        "fltheory.reproduce.experiment_rng": lambda: {"seed": 0, "name": "fuzz_tiny"},
        "fltheory.reproduce.experiment_status": lambda: {"out": _tiny_results(), **experiment()},
        "fltheory.reproduce.format_macro_value": lambda: {"value": 0.5},
        "fltheory.reproduce.import_closure": experiment,
        "fltheory.reproduce.import_experiments_package": lambda: {"package": (_tiny_root(), _TINY_PACKAGE)[1]},
        "fltheory.reproduce.is_fresh": lambda: {"directory": _tiny_results(), "name": "fuzz_tiny",
                                                "key": _tiny_document()["key"]},
        "fltheory.reproduce.key_changes": lambda: {"stored": _tiny_document()["key"],
                                                   "current": _tiny_document()["key"]},
        "fltheory.reproduce.load_config_file": lambda: {"path": _tiny_root() / "config.json"},
        "fltheory.reproduce.load_experiment": lambda: {"module_name": f"{_TINY_PACKAGE}.fuzz_tiny",
                                                       "sys_path_entry": str(_tiny_root())},
        "fltheory.reproduce.macro_name": lambda: {"experiment": "fuzz_tiny", "key": "mean"},
        "fltheory.reproduce.overall_status": lambda: {"checks": _tiny_document()["checks"]},
        "fltheory.reproduce.parse_assignments": lambda: {"items": ["n=3", "name=abc"]},
        "fltheory.reproduce.read_stored": lambda: {"directory": _tiny_results(), "name": "fuzz_tiny"},
        "fltheory.reproduce.reproduce": lambda: {"experiments": [_tiny_experiment()], "out": _tiny_results(),
                                                 "show_progress": False},
        "fltheory.reproduce.result_dir": lambda: {"out": _tiny_results(), "mode": "quick"},
        "fltheory.reproduce.result_key": lambda: {**experiment(), "mode": "quick", "seed": 0},
        "fltheory.reproduce.results_directory": lambda: {"out": _tiny_results(), "mode": "quick"},
        "fltheory.reproduce.silent_progress": lambda: {"iterable": [1, 2]},
        "fltheory.reproduce.validate_module": lambda: {"module": _tiny_experiment().module},
        "fltheory.reproduce.keys.closure_sources": experiment,
        "fltheory.reproduce.keys.data_source": experiment,
        "fltheory.reproduce.keys.third_party_versions": experiment,
        "fltheory.reproduce.locks.exclusive": lambda: {"directory": _scratch("locks"), "stem": "fuzz_tiny"},
        "fltheory.reproduce.locks.lock_path": lambda: {"directory": _scratch("locks"), "stem": "fuzz_tiny"},
        "fltheory.reproduce.overrides.flatten_overrides": lambda: {"nested": {"n": 3}, "base": {"n": 2}},
        "fltheory.reproduce.progress.ProgressDisplay": lambda: {"n_experiments": 1, "enabled": False},
        "fltheory.reproduce.progress.reporting_progress": lambda: {"experiment": "fuzz_tiny", "send": print},
        "fltheory.reproduce.store.ensure_writable": lambda: {"directory": _tiny_results()},
        "fltheory.reproduce.store.is_disk_error": lambda: {"exc": OSError(28, "No space left on device")},
        "fltheory.reproduce.store.override_digest": lambda: {"overrides": {"n": 3}},
        "fltheory.reproduce.store.remove_stale_temporaries": lambda: {"directory": _scratch("temporaries"),
                                                                      "stem": "fuzz_tiny"},
        "fltheory.reproduce.store.validate_document": lambda: {"path": _tiny_results() / "fuzz_tiny.json",
                                                               "doc": _tiny_document()},
        "fltheory.reproduce.summary.macro_prefix": lambda: {"mode": "quick", "custom": False},
        "fltheory.reproduce.summary.summarise": lambda: {"directory": _tiny_results(),
                                                         "experiments": [_tiny_experiment()], "keys": key()},
        "fltheory.reproduce.summary.write_macros": lambda: {"directory": _scratch("macros"),
                                                            "stored": _tiny_stored()},
        "fltheory.reproduce.summary.write_summary": lambda: {"directory": _scratch("summary"),
                                                             "stored": _tiny_stored()},
    }


FUNCTION_BASES.update(_reproduce_bases())

def base_arguments(fn: Callable[..., Any]) -> tuple[dict[str, Any], list[str]]:
    """Keyword arguments for every required parameter of ``fn`` (plausible values
    by name, 1.0 when unknown) and the names of all parameters that can be fuzzed."""
    kwargs: dict[str, Any] = {}
    names: list[str] = []
    for name, par in inspect.signature(fn).parameters.items():
        if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD) or name == "self":
            continue
        if par.kind is par.POSITIONAL_ONLY:
            return {}, []          # not addressable by keyword: skipped
        names.append(name)
        if par.default is par.empty:
            kwargs[name] = _PLAUSIBLE.get(name, lambda: 1.0)()
    return kwargs, names


def _bad_values() -> list[tuple[str, Any]]:
    return [
        ("nan", float("nan")), ("inf", float("inf")), ("-inf", -float("inf")),
        ("negative", -1), ("negative float", -0.5), ("zero", 0), ("huge int", 10**12),
        ("huge float", 1e300), ("bool", True), ("string", "abc"), ("complex", 1j),
        ("object", object()), ("empty array", np.array([])),
        ("nan array", np.full((3, 2), np.nan)), ("wrong rank", np.ones((2, 2, 2, 2))),
        ("complex array", np.ones((3, 2), dtype=complex)), ("object array", np.array([1, "a"], dtype=object)),
        ("bool array", np.ones((3, 2), dtype=bool)), ("float32 nan", np.float32("nan")),
    ]


BAD_VALUES: list[tuple[str, Any]] = _bad_values()


def _nonfinite(value: Any, depth: int = 0) -> bool:
    """True when a numeric part of ``value`` (arrays, floats, containers, one
    level of record fields) is NaN or inf."""
    if depth > 3:
        return False
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return False
    if isinstance(value, (int, np.integer)):
        return False
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return not np.isfinite(value)
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.number):
            data = value.compressed() if isinstance(value, np.ma.MaskedArray) else value
            return not bool(np.all(np.isfinite(data)))
        return False
    if isinstance(value, (list, tuple)):
        return any(_nonfinite(v, depth + 1) for v in value[:64])
    if isinstance(value, dict):
        return any(_nonfinite(v, depth + 1) for v in list(value.values())[:64])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_nonfinite(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


@dataclasses.dataclass
class Call:
    """One fuzzed call and what happened."""

    target: str
    parameter: str
    kind: str
    outcome: Outcome
    detail: str = ""


@contextlib.contextmanager
def registries_restored() -> Iterator[None]:
    """Undo what a fuzzed call registers globally (``register_run_method``
    accepts any string name: a fuzzed "abc" must not outlive the call)."""
    run_module = importlib.import_module("fltheory.algorithms.run")
    saved = dict(run_module._METHODS)
    try:
        yield
    finally:
        run_module._METHODS.clear()
        run_module._METHODS.update(saved)


#: Packages whose callables take file-system paths: fuzzed with the sandbox as working directory too,
#: so that a relative path given as a bad value (the string "abc") never lands in the repository.
_PATH_TAKING_PREFIXES = ("fltheory.results.", "fltheory.reproduce.")


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    """``contextlib.chdir`` of Python 3.11, for the 3.10 the project supports."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def fuzz_call(target: str, fn: Callable[..., Any], parameter: str, kind: str, value: Any,
              base: Callable[[], dict[str, Any]] | None = None) -> Call:
    """Call ``fn`` with its base arguments (updated by ``base()`` when given: working
    values where the plausible ones by name do not fit) and ``parameter=value``; classify."""
    kwargs, _ = base_arguments(fn)
    if base is not None:
        kwargs.update(base())
    kwargs[parameter] = value
    INPUTS.add(f"{target}|{parameter}|{kind}")
    writes = target in WRITES_FILES or target.startswith(_PATH_TAKING_PREFIXES)
    workdir = _working_directory(_sandbox()) if writes else contextlib.nullcontext()
    try:
        with workdir, registries_restored(), time_limit(TIME_LIMIT), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                result = fn(**kwargs)
    except _Hang:
        outcome, detail = Outcome.HANG, f"more than {TIME_LIMIT} s of CPU or {WALL_LIMIT} s of wall time"
    except FLTheoryError as exc:
        outcome, detail = Outcome.TYPED, str(exc)[:120]
    except AssertionError as exc:
        if target in ASSERTION_HELPERS:
            outcome, detail = Outcome.TYPED, f"verdict (AssertionError): {str(exc)[:100]}"
        else:
            outcome, detail = Outcome.RAW, f"AssertionError: {str(exc)[:120]}"
    except Exception as exc:
        outcome, detail = Outcome.RAW, f"{type(exc).__name__}: {str(exc)[:120]}"
    else:
        outcome = Outcome.NONFINITE if _nonfinite(result) else Outcome.FINITE
        detail = "" if outcome is Outcome.FINITE else repr(result)[:120]
    TALLY[outcome.value] += 1
    return Call(target, parameter, kind, outcome, detail)


def sweep(target: str, fn: Callable[..., Any], kinds: list[tuple[str, Any]] | None = None,
          base: Callable[[], dict[str, Any]] | None = None) -> list[Call]:
    """Every fuzzable parameter of ``fn`` times every bad value (``base`` as in :func:`fuzz_call`)."""
    _, names = base_arguments(fn)
    calls = []
    for parameter in names:
        for kind, value in (BAD_VALUES if kinds is None else kinds):
            calls.append(fuzz_call(target, fn, parameter, kind, value, base))
    return calls


# ------------------------------------------------------------- public methods
# Public methods (no leading underscore) of the public classes of
# fltheory.problems and fltheory.algorithms, called on a small valid instance
# with one parameter at a time replaced by each of the BAD_VALUES.  A fresh
# instance is built for every call, so that no call sees what another left.

#: Packages whose public classes have their public methods fuzzed.
METHOD_PACKAGES = ("fltheory.problems", "fltheory.algorithms")

#: Methods left out on purpose, with the reason.
EXCLUDED_METHODS = {
    # The deliberately unchecked hot-path kernel: its caller validates the
    # clients once per round and then calls it every local step with
    # float64 (m, d) arrays it made itself; checks here would cost every step.
    "row_gradient": "hot-path kernel, validated once per round by its caller",
}


def _least_squares() -> Any:
    from fltheory.problems import random_least_squares
    return random_least_squares(3, 2, rows=4, seed=0)


def _structured() -> Any:
    from fltheory.problems import random_structured_quadratic
    return random_structured_quadratic(3, 2, rank=1, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _history() -> Any:
    from fltheory.algorithms import run
    return run(_algorithm(), _quadratic(), 2, seed=0)


def _algorithms() -> dict[str, Callable[[], Any]]:
    from fltheory import optim
    from fltheory.algorithms import (EFL, FedAvg, FedCurv, FedDyn, FedElasticNet, FedOpt, FedProx, Scaffold,
                                     TemporalEnsemble)
    return {
        "FedAvg": lambda: FedAvg(lr=0.1, local_steps=2),
        "FedProx": lambda: FedProx(lr=0.1, local_steps=2, mu=0.5),
        "FedCurv": lambda: FedCurv(lr=0.1, local_steps=2, alpha=0.1),
        "FedOpt": lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(1.0), local_steps=2),
        "Scaffold": lambda: Scaffold(lr=0.1, local_steps=2),
        "FedDyn": lambda: FedDyn(alpha=1.0),
        "FedElasticNet": lambda: FedElasticNet(lambda1=0.01, lambda2=0.01, solver="gd", lr=0.1, local_steps=2),
        "EFL": lambda: EFL(lr=0.1, local_steps=2, compression=None),
        "TemporalEnsemble": lambda: TemporalEnsemble(beta=0.5),
    }


def instance_factories() -> dict[str, Callable[[], Any]]:
    """A small valid instance of every public class with public methods, by class name."""
    return {"QuadraticFederation": _least_squares, "LogisticFederation": _logistic,
            "StructuredQuadraticFederation": _structured, "History": _history,
            "ProblemConstants": lambda: _quadratic().constants(), "RoundInfo": _round_info, **_algorithms()}


def _round_info() -> Any:
    """A round's diagnostics with a deferred communication (held_bytes takes no argument)."""
    from fltheory.algorithms.base import DeferredCommunication, RoundInfo
    return RoundInfo(np.arange(3), np.ones(3, dtype=np.int64), DeferredCommunication(np.ones((3, 2)), np.zeros(2)))


def _method_plausible(owner: Any) -> dict[str, Callable[[], Any]]:
    """Working values of method parameters (by name), on top of ``_PLAUSIBLE``;
    ``owner`` is the instance (its state / shapes are what a method expects)."""
    from fltheory.algorithms import Algorithm, TemporalEnsemble
    rows = lambda: np.zeros((3, 2))
    values: dict[str, Callable[[], Any]] = {
        "clients": lambda: np.arange(3), "idx": lambda: np.arange(3), "D": lambda: np.ones((3, 2)),
        "b": rows, "Y0": rows, "Y": rows, "W": rows, "X": rows, "V": lambda: np.ones((3, 2)),
        "start": lambda: 0, "stop": lambda: 2, "client": lambda: 0, "a": lambda: 0,
        "t": lambda: 0, "tau": lambda: 2, "threads": lambda: 1, "processes": lambda: 1, "batch_size": lambda: 2,
        "other": _quadratic, "shape": lambda: (3, 2), "G": rows, "fallback": lambda: np.zeros(2),
    }
    if isinstance(owner, TemporalEnsemble):
        values["state"] = lambda: owner.init((3, 2))
        values["fallback"] = rows
    elif isinstance(owner, Algorithm):
        values["state"] = lambda: owner.init(_quadratic(), np.zeros(2), np.random.default_rng(0))
    if hasattr(owner, "client_loss"):
        values["other"] = lambda: owner.without_client(0)
    if type(owner).__name__ == "LogisticFederation":
        values["other"] = _logistic
    try:
        import cvxpy as cp
        values["y"] = lambda: cp.Variable(2)
    except ImportError:          # pragma: no cover - cvxpy is a test dependency
        pass
    return values


#: Per-method working arguments where the by-name values do not fit.
_METHOD_BASES: dict[str, Callable[[], dict[str, Any]]] = {
    "from_least_squares": lambda: {"A": [np.eye(2)] * 3, "b": [np.ones(2)] * 3},
    "with_client": lambda: {"weight": 0.25},      # works whether or not the federations have sample counts
}


#: Per-method set-up of the instance (a method that needs a configured oracle).
_OWNER_SETUP: dict[str, Callable[[Any], Any]] = {
    "minibatch_variance": lambda owner: owner.with_minibatch(2),
}


def public_methods() -> list[tuple[str, Callable[[], Any], str]]:
    """(qualified name, instance factory, method name) for every public method of
    the public classes of :data:`METHOD_PACKAGES` (abstract bases are reached
    through their concrete subclasses; :data:`EXCLUDED_METHODS` left out).  A
    public class with public methods but no entry in :func:`instance_factories`
    makes :func:`test_every_public_method_is_enumerated` fail."""
    factories = instance_factories()
    out = []
    for package in METHOD_PACKAGES:
        module = importlib.import_module(package)
        for cls_name in getattr(module, "__all__", ()):
            cls = getattr(module, cls_name)
            if not isinstance(cls, type) or inspect.isabstract(cls) or cls_name not in factories:
                continue
            for name in sorted(dir(cls)):
                attr = inspect.getattr_static(cls, name)
                if name.startswith("_") or name in EXCLUDED_METHODS:
                    continue
                if inspect.isfunction(attr) or isinstance(attr, (classmethod, staticmethod)):
                    out.append((f"{package}.{cls_name}.{name}", factories[cls_name], name))
    return out


def unfuzzed_public_classes() -> list[str]:
    """Public concrete classes of METHOD_PACKAGES that have public methods but no instance factory."""
    factories = instance_factories()
    missing = []
    for package in METHOD_PACKAGES:
        module = importlib.import_module(package)
        for cls_name in getattr(module, "__all__", ()):
            cls = getattr(module, cls_name)
            if not isinstance(cls, type) or inspect.isabstract(cls) or cls_name in factories:
                continue
            if _is_data_container(cls) and not _own_public_methods(cls):
                continue
            if _own_public_methods(cls):
                missing.append(f"{package}.{cls_name}")
    return missing


def _own_public_methods(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_") and n not in EXCLUDED_METHODS
            and (inspect.isfunction(inspect.getattr_static(cls, n))
                 or isinstance(inspect.getattr_static(cls, n), (classmethod, staticmethod)))]


#: Count of fuzzed calls to public methods (a part of TALLY), for the printed summary.
METHOD_TALLY: Counter[str] = Counter()
METHODS_SWEPT: set[str] = set()


def method_base(factory: Callable[[], Any], method: str) -> tuple[Callable[..., Any], dict[str, Any], list[str]]:
    """A fresh bound ``method`` of a fresh instance, its working arguments and its fuzzable parameters."""
    owner = factory()
    if method in _OWNER_SETUP:
        owner = _OWNER_SETUP[method](owner)
    bound = getattr(owner, method)
    plausible = _method_plausible(owner)
    kwargs: dict[str, Any] = {}
    names: list[str] = []
    for name, par in inspect.signature(bound).parameters.items():
        if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
            continue
        names.append(name)
        if par.default is par.empty:
            kwargs[name] = plausible.get(name, _PLAUSIBLE.get(name, lambda: 1.0))()
    if method in _METHOD_BASES:
        kwargs.update(_METHOD_BASES[method]())
    return bound, kwargs, names


def sweep_method(target: str, factory: Callable[[], Any], method: str) -> list[Call]:
    """Every parameter of ``factory().method`` times every bad value, each call on a fresh instance."""
    _, _, names = method_base(factory, method)
    METHODS_SWEPT.add(target)
    calls = []
    for parameter in names:
        for kind, value in BAD_VALUES:
            bound, kwargs, _ = method_base(factory, method)
            call = fuzz_call(target, bound, parameter, kind, value, base=functools.partial(dict, kwargs))
            METHOD_TALLY[call.outcome.value] += 1
            calls.append(call)
    return calls
