"""The deterministic round map of an algorithm on its full state (docs/theory/fixed-points.md).

Under full participation and exact gradients one round of an algorithm is a
deterministic map of its *state* (server model x plus control variates, h,
client gradient states, previous local models, optimizer states, ...).
:func:`round_map` exposes that map on flat vectors S in R^n:

    S_{t+1} = Phi(S_t),   Phi(S) = vec(round(unvec(S)))

"General rule worth building on" in docs/theory/fixed-points.md: on quadratic clients
Phi is affine for every algorithm without sign/l1 terms, adaptive
preconditioners or compression; ``fltheory.theory.affine`` recovers it.

Flattening rule (:class:`StateLayout`)
--------------------------------------
A state is walked depth first in declaration order: fields of (frozen)
dataclasses, fields of NamedTuples (optimizer states), items of plain tuples
and lists.  Every floating-point array or Python float is a *leaf* and enters
S (row-major, ``ravel``).  Skipped, and copied unchanged from a template when
a vector is turned back into a state:

* the counters: fields named ``t`` or ``count`` (any dtype);
* integer arrays and scalars (step counters), boolean arrays (masks);
* ``None`` and every other object (callables, strings, hyperparameters).

The leaf named ``x`` at the top level is the server model; ``x_slice`` locates
it in S.  Leaf paths are dotted (``"opt.trace"``, ``"w[0]"``).

Warm-up
-------
Some algorithms behave differently in their first round: FedCurv has no
previous local models before round 1 (its ``seen`` mask is False), so its
first round carries no penalty.  The map is defined at a *template* state;
when the state after one round differs from the template in layout (leaf
paths and shapes), in a boolean field (such as ``seen``) or in the None-ness
of an optional field, the template is advanced by one ordinary round, at most
``max_warmup`` times, and the number of such rounds is recorded in
``RoundMap.warmup``.

Determinism
-----------
The map refuses a federation with a stochastic oracle (``is_stochastic``:
InvalidProblemError), participation other than full (NotAffineError: the map
is random), and an algorithm that draws random numbers during a full,
exact round (NotAffineError, detected by comparing the generator state before
and after the round).  Counters are taken from the template, so the map is the
round at the template's round number; ``affine_round_map`` checks that it
does not depend on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..algorithms.base import Algorithm, RoundInfo
from .._validate import _short, integer, real_array
from ..display import SummaryDisplay
from ..errors import DivergenceError, InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ..participation import FullParticipation, Participation
from ..problems.base import Federation
from . import _checks

__all__ = [
    "StateLayout", "RoundMap", "round_map", "state_layout", "state_to_vector",
    "vector_to_state", "check_deterministic_setting", "counters_of", "set_counters",
]

COUNTER_NAMES = frozenset({"t", "count"})
_ROUND_SEED = 0   # seed of the generator handed to every evaluated round (it must stay unused)


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _is_float_leaf(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return np.issubdtype(value.dtype, np.floating)
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(value, (float, np.floating))


def _children(obj: Any) -> list[tuple[str, Any]] | None:
    """(name, value) pairs of a container, or None for a non-container."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    if _is_namedtuple(obj):
        return list(zip(obj._fields, obj))
    if isinstance(obj, (tuple, list)):
        return [(f"[{k}]", v) for k, v in enumerate(obj)]
    return None


def _join(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return prefix + name if name.startswith("[") else f"{prefix}.{name}"


def _walk(obj: Any, prefix: str, leaves: list[tuple[str, Any]], counters: list[tuple[str, Any]],
          flags: list[tuple[str, Any]] | None = None, depth: int = 0) -> None:
    if depth > 32:
        raise InvalidProblemError(f"state nesting deeper than 32 levels at {prefix!r}")
    for name, value in _children(obj) or []:
        path = _join(prefix, name)
        if name in COUNTER_NAMES:
            counters.append((path, value))
            continue
        if _is_float_leaf(value):
            leaves.append((path, value))
        elif isinstance(value, (np.ndarray, int, np.integer, bool, np.bool_)):
            kind = np.asarray(value).dtype
            if np.issubdtype(kind, np.integer):
                counters.append((path, value))
            elif flags is not None:
                flags.append((path, np.asarray(value).tobytes()))
        elif _children(value) is not None:
            _walk(value, path, leaves, counters, flags, depth + 1)
        elif flags is not None:
            flags.append((path, None if value is None else type(value).__name__))


def _signature(state: Any) -> tuple[Any, ...]:
    """Layout plus the values of boolean flags and the None-ness of optional
    fields: what must stay fixed for a round map to be time-invariant."""
    leaves: list[tuple[str, Any]] = []
    flags: list[tuple[str, Any]] = []
    _walk(state, "", leaves, [], flags)
    return tuple((p, np.shape(v)) for p, v in leaves), tuple(flags)


@dataclass(frozen=True)
class StateLayout:
    """Where each float leaf of a state sits in the flat vector S.

    Attributes
    ----------
    paths : tuple of str
        Leaf paths in flattening order.
    shapes : tuple of tuple of int
        Shape of each leaf (``()`` for Python floats).
    slices : dict str -> slice
        Slice of S holding each leaf.
    dim : int
        n = dim(S).
    counter_paths : tuple of str
        Paths of the skipped integer leaves and counters (t, count).
    """

    paths: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    slices: dict[str, slice]
    dim: int
    counter_paths: tuple[str, ...]

    @property
    def x_slice(self) -> slice:
        """Slice of the server model x in S."""
        if "x" not in self.slices:
            raise InvalidProblemError(
                f"the state has no floating-point field 'x' (leaves: {list(self.paths)})")
        return self.slices["x"]

    def describe(self) -> str:
        """One line per leaf: path, shape, slice."""
        return "; ".join(f"{p} {s} -> [{self.slices[p].start}:{self.slices[p].stop}]"
                         for p, s in zip(self.paths, self.shapes))

    def same_as(self, other: StateLayout) -> bool:
        return self.paths == other.paths and self.shapes == other.shapes


def state_layout(state: Any) -> StateLayout:
    """The :class:`StateLayout` of ``state`` (see the module docstring for the rule)."""
    if _children(state) is None:
        raise InvalidProblemError(
            f"an algorithm state must be a dataclass or NamedTuple, got {type(state).__name__}")
    leaves: list[tuple[str, Any]] = []
    counters: list[tuple[str, Any]] = []
    _walk(state, "", leaves, counters)
    slices, shapes, start = {}, [], 0
    for path, value in leaves:
        shape = tuple(np.shape(value))
        size = int(np.prod(shape, dtype=np.int64))
        slices[path] = slice(start, start + size)
        shapes.append(shape)
        start += size
    return StateLayout(paths=tuple(p for p, _ in leaves), shapes=tuple(shapes), slices=slices,
                       dim=start, counter_paths=tuple(p for p, _ in counters))


def state_to_vector(state: Any, layout: StateLayout | None = None) -> np.ndarray:
    """Concatenate the float leaves of ``state`` into S (float64, shape (n,)).

    With ``layout`` given, the state must have exactly that layout
    (InvalidProblemError otherwise)."""
    own = state_layout(state)
    if layout is not None and not isinstance(layout, StateLayout):
        raise InvalidHyperparameterError(
            f"layout must be a StateLayout (from state_layout(state)) or None, got {_short(layout)} "
            f"({type(layout).__name__})")
    if layout is not None and not own.same_as(layout):
        raise InvalidProblemError(
            "state layout differs from the expected one: got " + own.describe()
            + " ; expected " + layout.describe())
    leaves: list[tuple[str, Any]] = []
    _walk(state, "", leaves, [])
    if not leaves:
        return np.zeros(0)
    return np.concatenate([np.asarray(v, dtype=np.float64).ravel() for _, v in leaves])


def _rebuild(obj: Any, prefix: str, values: dict[str, Any]) -> Any:
    kids = _children(obj)
    if kids is None:
        return obj
    new: dict[str, Any] = {}
    for name, value in kids:
        path = _join(prefix, name)
        if path in values:
            new[name] = values[path]
        elif name not in COUNTER_NAMES and _children(value) is not None:
            new[name] = _rebuild(value, path, values)
        else:
            new[name] = value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {k: v for k, v in new.items() if v is not getattr(obj, k)}
        return dataclasses.replace(obj, **changed) if changed else obj
    if _is_namedtuple(obj):
        return obj._replace(**new)
    items = [new[f"[{k}]"] for k in range(len(obj))]
    return type(obj)(items)


def vector_to_state(S: Any, template: Any, layout: StateLayout | None = None) -> Any:
    """The state with the float leaves of ``template`` replaced by the entries of S.

    Counters and non-float fields are copied from ``template``; Python-float
    leaves come back as Python floats, array leaves (0-d included) as float64
    arrays of the template's shape."""
    if layout is not None and not isinstance(layout, StateLayout):
        raise InvalidHyperparameterError(
            f"layout must be a StateLayout (from state_layout(template)) or None, got {_short(layout)} "
            f"({type(layout).__name__})")
    layout = state_layout(template) if layout is None else layout
    S = real_array("S", S, InvalidProblemError).astype(np.float64)   # a reshaping: NaN stays NaN
    if S.shape != (layout.dim,):
        raise InvalidProblemError(f"state vector must have shape ({layout.dim},), got {S.shape}")
    leaves: list[tuple[str, Any]] = []
    _walk(template, "", leaves, [])
    is_array = {p: isinstance(v, np.ndarray) for p, v in leaves}
    values: dict[str, Any] = {}
    for path, shape in zip(layout.paths, layout.shapes):
        block = S[layout.slices[path]]
        values[path] = block.reshape(shape).copy() if is_array.get(path, True) else float(block[0])
    return _rebuild(template, "", values)


def counters_of(state: Any) -> dict[str, np.ndarray]:
    """The skipped integer leaves and counters of ``state`` by path."""
    counters: list[tuple[str, Any]] = []
    _walk(state, "", [], counters)
    return {p: np.asarray(v) for p, v in counters}


def set_counters(state: Any, values: dict[str, Any]) -> Any:
    """``state`` with the counters at ``values`` (paths from :func:`counters_of`)."""
    out = {}
    for path, v in values.items():
        v = np.asarray(v)
        out[path] = int(v) if v.ndim == 0 else v.astype(np.int64)
    return _rebuild(state, "", out)


def check_deterministic_setting(problem: Federation, participation: Participation | None) -> None:
    """Refuse what makes a round random: a stochastic oracle or partial participation."""
    if problem.is_stochastic:
        raise InvalidProblemError(
            f"the round map needs exact gradients, but {problem!r} has a stochastic oracle "
            f"(batch_size={problem.batch_size}, gradient noise="
            f"{'yes' if problem.noise_sigma2 is not None else 'no'}); use problem.exact()")
    if participation is not None and type(participation) is not FullParticipation:
        raise NotAffineError(
            f"the round map is deterministic only under full participation with all local steps; "
            f"got participation {participation!r}")


class RoundMap(SummaryDisplay):
    """Phi: R^n -> R^n, one full-participation exact round on the flat state.

    Call it on a vector (``rm(S)``) or use :meth:`step` on a state object.

    Attributes
    ----------
    algorithm, problem
    template : the state whose layout, counters and non-float fields are used
    layout : StateLayout of ``template``
    warmup : ordinary rounds run from the initial state to reach ``template``
    initial : the state returned by ``algorithm.init``
    last_info : RoundInfo of the most recent evaluation
    """

    def __init__(self, algorithm: Algorithm, problem: Federation, template: Any, *,
                 warmup: int = 0, initial: Any = None) -> None:
        self.algorithm = algorithm
        self.problem = problem
        self.template = template
        self.layout = state_layout(template)
        _ = self.layout.x_slice  # evaluated for its check: raises when the state has no x
        self.warmup = warmup
        self.initial = template if initial is None else initial
        self.last_info: RoundInfo | None = None
        self.evaluations = 0

    @property
    def dim(self) -> int:
        """n = dim(S)."""
        return self.layout.dim

    @property
    def x_slice(self) -> slice:
        return self.layout.x_slice

    def to_vector(self, state: Any) -> np.ndarray:
        """S of a state with the template's layout."""
        return state_to_vector(state, self.layout)

    def to_state(self, S: Any) -> Any:
        """The state of vector S (counters of the template)."""
        return vector_to_state(S, self.template, self.layout)

    def step(self, state: Any) -> tuple[Any, RoundInfo]:
        """One ordinary round of ``state`` with full participation and a generator
        that must stay unused (NotAffineError when the algorithm draws)."""
        if type(state) is not type(self.template):
            raise InvalidProblemError(
                f"state must be a state of {self.algorithm.name} (a {type(self.template).__name__}), got "
                f"{_short(state)} ({type(state).__name__})")
        return _deterministic_round(self.algorithm, self.problem, state)

    def __call__(self, S: Any) -> np.ndarray:
        state = self.to_state(S)
        new, info = self.step(state)
        self.last_info = info
        self.evaluations += 1
        try:
            return state_to_vector(new, self.layout)
        except InvalidProblemError as exc:
            raise InvalidProblemError(
                f"{self.algorithm.name}: the round changed the state layout after warm-up: {exc}") from None

    def with_template(self, template: Any) -> RoundMap:
        """The same map at another template (same layout; e.g. advanced counters)."""
        out = RoundMap(self.algorithm, self.problem, template, warmup=self.warmup, initial=self.initial)
        if not out.layout.same_as(self.layout):
            raise InvalidProblemError("with_template: the new template has a different layout")
        return out


def _deterministic_round(algorithm: Algorithm, problem: Federation, state: Any) -> tuple[Any, RoundInfo]:
    rng = np.random.default_rng(_ROUND_SEED)
    before = rng.bit_generator.state
    try:
        new, info = algorithm.round(state, problem, FullParticipation(), rng)
    except DivergenceError as exc:
        # a probe state outside the round's domain (e.g. a negative second-moment estimate)
        # gives non-finite values, which a round refuses: the map is not affine on the state space
        raise NotAffineError(
            f"{algorithm.name} is not affine on this problem: a round from a probed state gives non-finite "
            f"values (the round is not defined on the whole state space, e.g. a negative second-moment "
            f"estimate): {exc}") from exc
    if rng.bit_generator.state != before:
        raise NotAffineError(
            f"{algorithm.name} draws random numbers in a full-participation round with exact "
            "gradients: its round map is not deterministic")
    return new, info


def _check_start_state(algorithm: Algorithm, problem: Federation, state: Any) -> None:
    """``state`` None, or a state of ``algorithm`` (the type ``algorithm.init`` returns)
    whose floating-point entries are all finite (typed errors otherwise)."""
    if state is None:
        return
    reference = algorithm.init(problem, np.zeros(problem.dim), np.random.default_rng(_ROUND_SEED))
    if type(state) is not type(reference):
        raise InvalidProblemError(
            f"state must be a state of {algorithm.name} (a {type(reference).__name__}, as "
            f"algorithm.init returns), got {_short(state)} ({type(state).__name__})")
    S = state_to_vector(state)
    if not np.all(np.isfinite(S)):
        bad = int(np.flatnonzero(~np.isfinite(S))[0])
        raise InvalidProblemError(f"state must have finite entries; entry {bad} of its flat vector is {S[bad]!r}")


def round_map(algorithm: Algorithm, problem: Federation, *, x0: ArrayLike | None = None, state: Any = None,
              participation: Participation | None = None, max_warmup: int = 3) -> RoundMap:
    """The deterministic round map of ``algorithm`` on ``problem`` (module docstring).

    Parameters
    ----------
    algorithm : Algorithm
    problem : Federation
        Must have an exact oracle (``is_stochastic`` False).
    x0 : array (d,), optional
        Initial server model for ``algorithm.init`` (zeros by default).
    state : optional
        Use this state as the template instead of ``algorithm.init(problem, x0)``.
    participation : None or FullParticipation
        Anything else raises NotAffineError (the round would be random).
    max_warmup : int
        Most ordinary rounds run to reach a stable state layout.

    Returns
    -------
    RoundMap
        Callable S -> S on flat state vectors.
    """
    _checks.algorithm_and_problem(algorithm, problem)
    max_warmup = integer("max_warmup", max_warmup, minimum=0, maximum=1000)
    check_deterministic_setting(problem, participation)
    _check_start_state(algorithm, problem, state)
    if state is None:
        x0 = np.zeros(problem.dim) if x0 is None else _checks.server_model("x0", x0, problem.dim)
        state = algorithm.init(problem, x0, np.random.default_rng(_ROUND_SEED))
    initial = state
    template = state
    for warm in range(max_warmup + 1):
        nxt, _ = _deterministic_round(algorithm, problem, template)
        if _signature(nxt) == _signature(template):
            return RoundMap(algorithm, problem, template, warmup=warm, initial=initial)
        template = nxt
    raise InvalidProblemError(
        f"{algorithm.name}: the state layout still changes after {max_warmup} warm-up rounds "
        f"({state_layout(template).describe()}); no fixed state space for a round map")

