"""Optimizers as pure (init, update) pairs with a leading client axis.

An :class:`Optimizer` acts on m rows at once (one row per participating
client; a server optimizer uses m = 1):

* ``init(params, clients=None) -> state``: params (m, d); ``clients`` (m,)
  are the client indices of the rows (used by per-client hyperparameters such
  as fixed preconditioners P_i); ``None`` means rows 0..m-1.
* ``update(grads, state, params) -> (updates, state)``: the caller applies
  ``params + updates``.  Updates are linear in the learning rate, so a
  per-client rate scale s_i may be applied to the rows of ``updates``.
* ``precond(state) -> (m, d) or (m, d, d)``: the preconditioner m_k applied at
  the last update, used by local correction (docs/theory/index.md#algorithms, FedOpt):
  the client sends Delta / sum_k m_k.  It excludes the learning rate, is 0
  before the first update, and for optimizers with memory (momentum, Adam,
  Yogi) is the weight that makes sum_k m_k equal the total weight of the
  gradients in Delta (see each optimizer's docstring).

Every state is a NamedTuple whose fields are arrays with the client axis
first, including its own step counter ``count`` (m,), so rows can be gathered
and scattered with :func:`take_rows` / :func:`put_rows` (persisting client
state across rounds) and averaged with :func:`mean_rows` (synchronising).
"""

from __future__ import annotations

import functools
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np

from .._validate import real_array
from ..errors import InvalidHyperparameterError

__all__ = ["Optimizer", "FusedSteps", "take_rows", "put_rows", "mean_rows"]


class FusedSteps(Protocol):
    """In-place optimizer steps over an owned copy of a state (see module doc, ``fused``)."""

    def step(self, grads: np.ndarray, params: np.ndarray, rate: float | np.ndarray) -> None:
        """params += rate * u with u the optimizer's update; the state advances in place."""

    def state(self) -> Any:
        """The current optimizer state."""


class KernelSteps(ABC):
    """Fused steps (the :class:`FusedSteps` interface) that can also hand out their step
    function for a caller's bare loop of steps (``fltheory.algorithms.local``).

    A nominal base class, not a structural protocol: the local loop calls ``kernel()`` only
    on instances of this class, so a user's fused object that merely has an attribute named
    ``kernel`` is stepped through its ``step``.  Subclasses implement :meth:`step` and
    :meth:`state` (abstract here: a subclass missing either cannot be instantiated);
    :meth:`kernel` defaults to the bound :meth:`step`."""

    @abstractmethod
    def step(self, grads: np.ndarray, params: np.ndarray, rate: float | np.ndarray) -> None:
        """params += rate * u with u the optimizer's update; the state advances in place."""

    @abstractmethod
    def state(self) -> Any:
        """The current optimizer state."""

    def kernel(self) -> Callable[[np.ndarray, np.ndarray, float | np.ndarray], None]:
        """A callable with the signature and effect of :meth:`step` (default: ``step`` itself)."""
        return self.step

    def run(self, grad: Callable[[np.ndarray, np.ndarray], np.ndarray], buf: np.ndarray, params: np.ndarray,
            rate: float | np.ndarray, steps: int) -> None:
        """``steps`` steps ``step(grad(params, buf), params, rate)`` in place: the oracle ``grad``
        writes the gradient at ``params`` into ``buf`` (and returns it).  The default calls
        :meth:`kernel`'s function every step; a subclass may run the loop itself with the same
        operations (the same numbers) and fewer Python calls per step."""
        step = self.kernel()
        for _ in range(steps):
            step(grad(params, buf), params, rate)


class Recipe:
    """How an optimizer was built: ``factory(*args, **kwargs)`` (a public factory of
    :mod:`fltheory.optim`), and the functions that call returned (``built``), so that an
    optimizer changed since (``_replace``) is recognised.  Compared and hashed by identity,
    like the closures beside it; pickles as the call alone."""

    __slots__ = ("args", "built", "factory", "kwargs")

    def __init__(self, factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 built: tuple[Any, ...] | None = None) -> None:
        self.factory, self.args, self.kwargs, self.built = factory, args, kwargs, built

    def __getstate__(self) -> tuple[Any, ...]:
        return self.factory, self.args, self.kwargs

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.factory, self.args, self.kwargs = state
        self.built = None


def _rebuild(recipe: Recipe) -> Optimizer:
    return recipe.factory(*recipe.args, **recipe.kwargs)


def _built(opt: Any) -> tuple[Any, ...]:
    return opt.init, opt.update, opt.precond, opt.name, opt.fused


class Optimizer(NamedTuple):
    """A pure optimizer: ``init``, ``update``, ``precond`` and optionally ``fused``
    (see module doc).  ``recipe``: set by the factories of :mod:`fltheory.optim`
    (:func:`rebuildable`), which makes the optimizer picklable (it is rebuilt from the
    same call, e.g. in a worker process of ``with_processes``); None for an optimizer
    assembled by hand, whose closures cannot be pickled, and ignored once a field has
    been replaced (``_replace``).  Copies (``copy.copy``, ``copy.deepcopy``) are the
    optimizer itself: it is an immutable value."""

    init: Callable[..., Any]
    update: Callable[[np.ndarray, Any, np.ndarray], tuple[np.ndarray, Any]]
    precond: Callable[[Any], np.ndarray]
    name: str = "optimizer"
    fused: Callable[[Any], FusedSteps] | None = None
    recipe: Recipe | None = None

    @property
    def picklable(self) -> bool:
        """True when the optimizer is what its recipe builds (so it pickles as that call)."""
        r = self.recipe
        return r is not None and r.built is not None and all(
            a is b or (isinstance(a, str) and a == b) for a, b in zip(_built(self), r.built, strict=True))

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.picklable:
            raise pickle.PicklingError(
                f"optimizer {self.name!r} is not what a factory of fltheory.optim built (no recipe, or a field "
                "replaced since): its closures cannot be pickled")
        assert self.recipe is not None
        return _rebuild, (self.recipe,)

    def __copy__(self) -> Optimizer:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Optimizer:
        return self


FactoryT = TypeVar("FactoryT", bound=Callable[..., Optimizer])


def rebuildable(factory: FactoryT) -> FactoryT:
    """Decorator of an optimizer factory: the optimizers it returns carry their
    :class:`Recipe` (this factory and the call's arguments), so they pickle."""
    @functools.wraps(factory)
    def build(*args: Any, **kwargs: Any) -> Optimizer:
        opt = factory(*args, **kwargs)
        return opt._replace(recipe=Recipe(build, args, kwargs, _built(opt)))
    return build  # type: ignore[return-value]


StateT = TypeVar("StateT", bound=tuple)   # an optimizer state: a NamedTuple of per-row arrays


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _state_fields(name: str, state: Any) -> list[np.ndarray]:
    """The fields of an optimizer state: a NamedTuple of real arrays, each with
    the row axis first and the same number of rows."""
    if not (isinstance(state, tuple) and hasattr(state, "_fields")):
        raise InvalidHyperparameterError(
            f"{name} must be an optimizer state (a NamedTuple of per-row arrays), got {_short(state)} "
            f"({type(state).__name__})")
    fields = []
    rows = None
    for field_name, value in zip(state._fields, state):
        arr = np.asarray(value)
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise InvalidHyperparameterError(
                f"{name}.{field_name} must be a real numeric array, got dtype {arr.dtype}")
        if arr.ndim == 0:
            raise InvalidHyperparameterError(
                f"{name}.{field_name} must have a leading row axis, got a scalar {_short(value)}")
        if rows is not None and arr.shape[0] != rows:
            raise InvalidHyperparameterError(
                f"{name}.{field_name} has {arr.shape[0]} rows, the state's first field has {rows}")
        rows = arr.shape[0]
        fields.append(arr)
    return fields


def _row_index(rows: Any, n_rows: int) -> np.ndarray | slice:
    """``rows`` as a slice, or an integer index array into range(n_rows) (a boolean
    mask of length n_rows is accepted too)."""
    if isinstance(rows, slice):
        return rows
    if isinstance(rows, (str, bytes)):
        raise InvalidHyperparameterError(f"rows must be a slice or integer row indices, got {_short(rows)}")
    try:
        idx = np.asarray(rows)
    except (TypeError, ValueError) as exc:
        raise InvalidHyperparameterError(f"rows must be a slice or integer row indices, got {_short(rows)}") \
            from exc
    if idx.dtype == np.bool_ and idx.shape == (n_rows,):
        return idx
    if idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
        raise InvalidHyperparameterError(
            f"rows must be a slice, a 1-D integer index array or a boolean mask of length {n_rows}, "
            f"got {_short(rows)}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size and (idx.min() < -n_rows or idx.max() >= n_rows):
        raise InvalidHyperparameterError(f"rows must index the state's {n_rows} rows, got {_short(rows)}")
    return idx


def take_rows(state: StateT, rows: np.ndarray | slice) -> StateT:
    """The state restricted to ``rows`` (every field indexed on axis 0).

    ``state`` is an optimizer state (NamedTuple of arrays with the same number
    of rows); ``rows`` a slice, an integer index array or a boolean mask."""
    fields = _state_fields("state", state)
    idx = _row_index(rows, fields[0].shape[0] if fields else 0)
    return type(state)(*(f[idx] for f in fields))


def put_rows(full: StateT, rows: np.ndarray | slice, part: StateT) -> StateT:
    """A copy of ``full`` with ``rows`` replaced by the rows of ``part``
    (a state of the same type whose fields have the selected rows' shapes)."""
    fields = _state_fields("full", full)
    parts = _state_fields("part", part)
    if type(part) is not type(full):
        raise InvalidHyperparameterError(
            f"part must be a state of the same type as full ({type(full).__name__}), got {type(part).__name__}")
    idx = _row_index(rows, fields[0].shape[0] if fields else 0)
    out = []
    for field_name, f, p in zip(full._fields, fields, parts):  # type: ignore[attr-defined]
        g = f.copy()
        target_shape = g[idx].shape
        if p.shape != target_shape:
            raise InvalidHyperparameterError(
                f"part.{field_name} has shape {p.shape}, the selected rows of full have {target_shape}")
        g[idx] = p
        out.append(g)
    return type(full)(*out)


def mean_rows(state: StateT, weights: np.ndarray | None = None) -> StateT:
    """Every row replaced by the (weighted) mean over rows: synchronised state.
    Integer fields (step counters) are kept as they are.  ``weights``: None
    (uniform) or (m,) finite, non-negative with a positive sum."""
    fields = []
    checked = _state_fields("state", state)
    n_rows = checked[0].shape[0] if checked else 0
    if n_rows == 0:
        raise InvalidHyperparameterError("mean_rows: state has no rows to average")
    w = None
    if weights is not None:
        w = real_array("mean_rows: weights", weights, InvalidHyperparameterError).astype(np.float64)
        if w.shape != (n_rows,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise InvalidHyperparameterError(
                f"mean_rows: weights must be ({n_rows},) finite, non-negative with a positive sum, "
                f"got {_short(weights)}")
        w = w / w.sum()
    for f in checked:
        if np.issubdtype(f.dtype, np.integer):
            fields.append(f.copy())
            continue
        ww = np.full(n_rows, 1.0 / n_rows) if w is None else w
        avg = np.tensordot(ww, f, axes=(0, 0))
        fields.append(np.broadcast_to(avg, f.shape).copy())
    return type(state)(*fields)
