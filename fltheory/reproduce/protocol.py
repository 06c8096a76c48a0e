"""The experiment protocol: what an experiment module declares, and its validation.

An experiment is a module defining these names at module level (see
``experiments/README.md`` in the repository for a complete example)::

    NAME: str                      # == the module's name, lowercase identifier
    TITLE: str                     # one line, shown by `fltheory list`
    THEOREMS: list[Theorem]        # what it checks: key, paper, theorem, equation
    QUICK: dict                    # JSON-able config, small enough for CI
    FULL: dict                     # JSON-able config for the paper figures
    EXPECTED_AXES: int             # len(fig.axes) of the figure plot() returns
    def run(config: dict, rng: numpy.random.Generator, progress: Progress) -> dict: ...
    def plot(results: dict) -> matplotlib.figure.Figure: ...
    def checks(results: dict) -> list[Check]: ...
    def macros(results: dict) -> dict[str, float]: ...

Optional: ``DATA_PACKAGES: tuple[str, ...]``, the distributions (e.g.
``("scikit-learn",)``) whose presence and version decide which data the
experiment reads; they enter its cache key (:mod:`fltheory.reproduce.keys`).
``run`` may omit the ``progress`` parameter; when it has one, the framework
passes the callback of :mod:`fltheory.reproduce.progress`.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np

from fltheory.errors import ExperimentDefinitionError
from fltheory.results import to_jsonable

from .progress import Progress, silent_progress

__all__ = ["STATUSES", "Check", "Experiment", "ExperimentDefinitionError", "Theorem", "validate_module"]

STATUSES: tuple[str, ...] = ("holds", "violated", "not checkable")

Status = Literal["holds", "violated", "not checkable"]


@dataclasses.dataclass(frozen=True)
class Theorem:
    """A reference to one checked statement.

    Attributes
    ----------
    key : str
        Short identifier used by :class:`Check` (e.g. ``"efl-t2-depart"``).
    paper : str
        Seed file and short name, e.g. ``"EFL (Ma et al.)"``.
    theorem : str
        e.g. ``"Theorem 2"``.
    equation : str
        e.g. ``"eq. 10"`` (``""`` if the statement has no number).
    """

    key: str
    paper: str
    theorem: str
    equation: str = ""

    def label(self) -> str:
        """``"Theorem 2, eq. 10 (EFL (EFL))"``."""
        eq = f", {self.equation}" if self.equation else ""
        return f"{self.theorem}{eq} ({self.paper})"


@dataclasses.dataclass(frozen=True)
class Check:
    """The verdict on one theorem (or one instance of it).

    Attributes
    ----------
    theorem : str
        Key of a :class:`Theorem` in the experiment's ``THEOREMS``.
    status : {"holds", "violated", "not checkable"}
        ``"holds"``: every measured value is within its bound;
        ``"violated"``: some measured value exceeds its bound on an instance
        meeting the hypotheses (a finding); ``"not checkable"``: the bound
        cannot be evaluated (hypotheses fail, constant unknown, ...).
    ratio : float | None
        Worst (largest) measured / bound over the instances: the tightness.
        ``None`` only when nothing could be measured.  A ratio > 1 is never
        ``"holds"``.
    detail : str
        For violations the instance (sizes, seed, constants, the offending
        value); for "not checkable" the reason; otherwise a short summary.
    """

    theorem: str
    status: Status
    ratio: float | None
    detail: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.status, str) or self.status not in STATUSES:
            raise ExperimentDefinitionError(
                f"Check.status must be one of {STATUSES}, got {self.status!r}")
        if not isinstance(self.theorem, str) or not self.theorem:
            raise ExperimentDefinitionError(f"Check.theorem must be a non-empty str, got {self.theorem!r}")
        if not isinstance(self.detail, str):
            raise ExperimentDefinitionError(f"Check.detail must be a str, got {type(self.detail).__name__}")
        if self.ratio is not None:
            if isinstance(self.ratio, bool) or not isinstance(
                    self.ratio, (int, float, np.floating, np.integer)):
                raise ExperimentDefinitionError(
                    f"Check.ratio must be a float or None, got {self.ratio!r}")
            ratio = float(self.ratio)
            if not math.isfinite(ratio) or ratio < 0:
                raise ExperimentDefinitionError(
                    f"Check.ratio must be finite and >= 0, got {ratio!r} (theorem {self.theorem!r})")
            object.__setattr__(self, "ratio", ratio)
            if self.status == "holds" and ratio > 1.0:
                raise ExperimentDefinitionError(
                    f"Check for {self.theorem!r} says 'holds' with measured/bound ratio {ratio!r} > 1")
        if self.status == "violated" and not self.detail.strip():
            raise ExperimentDefinitionError(
                f"a 'violated' Check for {self.theorem!r} must give the instance in detail")
        if self.status == "not checkable" and not self.detail.strip():
            raise ExperimentDefinitionError(
                f"a 'not checkable' Check for {self.theorem!r} must give the reason in detail")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_REQUIRED: dict[str, str] = {
    "NAME": "str equal to the module name",
    "TITLE": "non-empty one-line str",
    "THEOREMS": "non-empty list of Theorem",
    "QUICK": "JSON-able dict",
    "FULL": "JSON-able dict",
    "EXPECTED_AXES": "int >= 1",
    "run": "function run(config, rng) -> dict",
    "plot": "function plot(results) -> matplotlib Figure",
    "checks": "function checks(results) -> list[Check]",
    "macros": "function macros(results) -> dict[str, float]",
}


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A validated experiment module (built by :func:`validate_module`)."""

    name: str
    title: str
    theorems: tuple[Theorem, ...]
    quick: dict[str, Any]
    full: dict[str, Any]
    expected_axes: int
    module: ModuleType = dataclasses.field(repr=False, compare=False)
    data_packages: tuple[str, ...] = ()

    @property
    def module_name(self) -> str:
        return self.module.__name__

    @property
    def source_file(self) -> Path:
        return Path(self.module.__file__ or "").resolve()

    def config(self, mode: str) -> dict[str, Any]:
        """``QUICK`` for mode "quick", ``FULL`` for "full"."""
        if mode == "quick":
            return self.quick
        if mode == "full":
            return self.full
        raise ExperimentDefinitionError(f"mode must be 'quick' or 'full', got {mode!r}")

    def theorem(self, key: str) -> Theorem:
        for t in self.theorems:
            if t.key == key:
                return t
        raise ExperimentDefinitionError(
            f"experiment {self.name!r}: check refers to theorem {key!r}, "
            f"declared keys are {[t.key for t in self.theorems]}")

    # The four calls, with their outputs checked against the protocol.
    @property
    def accepts_progress(self) -> bool:
        """Whether ``module.run`` takes the ``progress`` callback."""
        try:
            return "progress" in inspect.signature(self.module.run).parameters
        except (TypeError, ValueError):
            return False

    def run(self, config: dict[str, Any], rng: np.random.Generator,
            progress: Progress | None = None) -> dict[str, Any]:
        """``module.run`` on a copy of ``config`` (with ``progress`` when it takes
        one); refuses results that are not a JSON-able dict and runs that drew
        from numpy's or Python's global RNG."""
        before = (_global_numpy_state(), random.getstate())
        if self.accepts_progress:
            results = self.module.run(dict(config), rng, progress=progress or silent_progress)
        else:
            results = self.module.run(dict(config), rng)
        if _global_numpy_state() != before[0] or random.getstate() != before[1]:
            raise ExperimentDefinitionError(
                f"{self.name}.run drew from a global random generator (numpy.random.* or random.*); "
                f"draw every random number from the rng argument")
        if not isinstance(results, dict):
            raise ExperimentDefinitionError(
                f"{self.name}.run must return a dict, got {type(results).__name__}")
        return to_jsonable(results, where=f"{self.name}.run(...)")

    def checks(self, results: dict[str, Any]) -> list[Check]:
        out = self.module.checks(results)
        if not isinstance(out, (list, tuple)) or not out or not all(isinstance(c, Check) for c in out):
            raise ExperimentDefinitionError(
                f"{self.name}.checks must return a non-empty list of Check, got {out!r:.200}")
        for c in out:
            self.theorem(c.theorem)
        return list(out)

    def macros(self, results: dict[str, Any]) -> dict[str, float]:
        out = self.module.macros(results)
        if not isinstance(out, dict):
            raise ExperimentDefinitionError(
                f"{self.name}.macros must return a dict[str, float], got {type(out).__name__}")
        clean: dict[str, float] = {}
        for key, value in out.items():
            if not isinstance(key, str) or not key or not any(ch.isalpha() for ch in key):
                raise ExperimentDefinitionError(
                    f"{self.name}.macros key {key!r} must be a str containing a letter")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ExperimentDefinitionError(
                    f"{self.name}.macros[{key!r}] must be a number, got {value!r}")
            number = to_jsonable(value, where=f"{self.name}.macros[{key!r}]")
            clean[key] = number
        return clean

    def plot(self, results: dict[str, Any]) -> Any:
        from matplotlib.figure import Figure
        fig = self.module.plot(results)
        if not isinstance(fig, Figure):
            raise ExperimentDefinitionError(
                f"{self.name}.plot must return a matplotlib Figure, got {type(fig).__name__}")
        if len(fig.axes) != self.expected_axes:
            raise ExperimentDefinitionError(
                f"{self.name}.plot drew {len(fig.axes)} axes, EXPECTED_AXES declares {self.expected_axes}")
        return fig


def _global_numpy_state() -> bytes:
    state: Any = np.random.get_state(legacy=True)  # noqa: NPY002 - detects use of the global generator
    return state[1].tobytes() + repr(state[2:]).encode()


def validate_module(module: ModuleType) -> Experiment:
    """Check a module's declarations; return the :class:`Experiment` or raise
    :class:`ExperimentDefinitionError` listing every problem (also when ``module`` is not a module)."""
    if not isinstance(module, ModuleType):
        raise ExperimentDefinitionError(f"module must be a Python module (types.ModuleType), got "
                                        f"{repr(module)[:80]} ({type(module).__name__})")
    short = module.__name__.rsplit(".", 1)[-1]
    problems: list[str] = []
    for attr, expected in _REQUIRED.items():
        if not hasattr(module, attr):
            problems.append(f"missing {attr} (expected {expected})")
    def get(attr: str) -> Any:
        return getattr(module, attr, None)
    name = get("NAME")
    if hasattr(module, "NAME") and name != short:
        problems.append(f"NAME is {name!r}, expected the module name {short!r}")
    if not (short.isidentifier() and short == short.lower() and not keyword.iskeyword(short)):
        problems.append(f"module name {short!r} must be a lowercase Python identifier")
    title = get("TITLE")
    if hasattr(module, "TITLE") and (not isinstance(title, str) or not title.strip() or "\n" in title):
        problems.append(f"TITLE must be a non-empty one-line str, got {title!r}")
    theorems = get("THEOREMS")
    if hasattr(module, "THEOREMS"):
        if (not isinstance(theorems, (list, tuple)) or not theorems
                or not all(isinstance(t, Theorem) for t in theorems)):
            problems.append(f"THEOREMS must be a non-empty list of Theorem, got {theorems!r:.200}")
        else:
            keys = [t.key for t in theorems]
            if len(set(keys)) != len(keys):
                problems.append(f"THEOREMS keys must be unique, got {keys}")
            for t in theorems:
                if not all(isinstance(v, str) for v in (t.key, t.paper, t.theorem, t.equation)) \
                        or not (t.key and t.paper and t.theorem):
                    problems.append(f"Theorem needs non-empty str key, paper and theorem, got {t!r}")
    for attr in ("QUICK", "FULL"):
        cfg = get(attr)
        if not hasattr(module, attr):
            continue
        if not isinstance(cfg, dict):
            problems.append(f"{attr} must be a dict, got {type(cfg).__name__}")
            continue
        try:
            to_jsonable(cfg, where=attr)
        except (ValueError, ArithmeticError) as exc:
            problems.append(f"{attr} is not JSON-able: {exc}")
    data_packages = get("DATA_PACKAGES") if hasattr(module, "DATA_PACKAGES") else ()
    if (not isinstance(data_packages, (list, tuple))
            or not all(isinstance(p, str) and p.strip() for p in data_packages)):
        problems.append(f"DATA_PACKAGES must be a tuple of distribution names, got {data_packages!r:.200}")
        data_packages = ()
    axes = get("EXPECTED_AXES")
    if hasattr(module, "EXPECTED_AXES") and (isinstance(axes, bool) or not isinstance(axes, int) or axes < 1):
        problems.append(f"EXPECTED_AXES must be an int >= 1, got {axes!r}")
    for attr in ("run", "plot", "checks", "macros"):
        if hasattr(module, attr) and not callable(get(attr)):
            problems.append(f"{attr} must be a function, got {type(get(attr)).__name__}")
    if problems:
        raise ExperimentDefinitionError(
            f"experiment module {module.__name__} ({getattr(module, '__file__', '?')}):\n  - "
            + "\n  - ".join(problems))
    return Experiment(name=name, title=title, theorems=tuple(theorems),
                      quick=dict(get("QUICK")), full=dict(get("FULL")),
                      expected_axes=axes, module=module, data_packages=tuple(data_packages))
