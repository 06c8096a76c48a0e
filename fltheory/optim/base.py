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

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ..errors import InvalidHyperparameterError

__all__ = ["Optimizer", "take_rows", "put_rows", "mean_rows"]


class Optimizer(NamedTuple):
    """A pure optimizer: ``init``, ``update`` and ``precond`` (see module doc)."""

    init: Callable[..., Any]
    update: Callable[[np.ndarray, Any, np.ndarray], tuple[np.ndarray, Any]]
    precond: Callable[[Any], np.ndarray]
    name: str = "optimizer"


StateT = TypeVar("StateT", bound=tuple)   # an optimizer state: a NamedTuple of per-row arrays


def take_rows(state: StateT, rows: np.ndarray | slice) -> StateT:
    """The state restricted to ``rows`` (every field indexed on axis 0)."""
    return type(state)(*(np.asarray(f)[rows] for f in state))


def put_rows(full: StateT, rows: np.ndarray | slice, part: StateT) -> StateT:
    """A copy of ``full`` with ``rows`` replaced by the rows of ``part``."""
    fields = []
    for f, p in zip(full, part):
        g = np.array(f, copy=True)
        g[rows] = p
        fields.append(g)
    return type(full)(*fields)


def mean_rows(state: StateT, weights: np.ndarray | None = None) -> StateT:
    """Every row replaced by the (weighted) mean over rows: synchronised state.
    Integer fields (step counters) are kept as they are."""
    fields = []
    for f in state:
        f = np.asarray(f)
        if np.issubdtype(f.dtype, np.integer):
            fields.append(f.copy())
            continue
        if weights is None:
            w = np.full(f.shape[0], 1.0 / f.shape[0])
        else:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (f.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise InvalidHyperparameterError(
                    f"mean_rows: weights must be ({f.shape[0]},) non-negative with a positive sum, "
                    f"got {weights!r}")
            w = w / w.sum()
        avg = np.tensordot(w, f, axes=(0, 0))
        fields.append(np.broadcast_to(avg, f.shape).copy())
    return type(state)(*fields)
