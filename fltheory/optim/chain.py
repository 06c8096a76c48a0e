"""Composition of optimizers: the step of one stage is the gradient of the next.

``chain(t_1, ..., t_n)`` feeds the gradient g to t_1 and, for i > 1, feeds
t_i the *negated* step of t_{i-1}, g_i = -u_{i-1} (every stage returns a step
u = -lr (...), so -u is again gradient-like); the chain's step is u_n.  Example:
``chain(preconditioned(1.0, P), momentum(0.1, 0.9))`` is heavy-ball momentum
on the preconditioned gradient P g.  The overall step is linear in every
stage's learning rate (their product scales it).

State: one flat NamedTuple (so :func:`take_rows`, :func:`put_rows` and
:func:`mean_rows` work unchanged) with the chain's own ``count`` first and the
fields of stage i renamed ``s{i}_{field}``.

Preconditioner composition: ``precond`` returns the product of the stages'
m_k in application order, m = m_n ... m_1 (elementwise for diagonals, a matrix
product when any stage is a full (m, d, d) matrix; diagonals are then promoted
to diagonal matrices).  The learning rates are not included (as for every
optimizer).  The product gives the exact local-correction sum
sum_k m_k = sum_j A^(j) when at most one stage carries memory (momentum, Adam,
Yogi) and every stage applied *before* it has a step-independent
preconditioner (sgd, preconditioned); stages after the memory stage may be
adaptive.  Otherwise it is the first-order (frozen-preconditioner) reading
of LocalAdaptivity section 5.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..errors import InvalidHyperparameterError
from .base import Optimizer, rebuildable

__all__ = ["chain"]

_STATE_TYPES: dict[tuple[str, ...], type] = {}


def _state_type(fields: tuple[str, ...]) -> type:
    """One NamedTuple class per field layout (reused, so states of the same
    chain always have the same type)."""
    if fields not in _STATE_TYPES:
        _STATE_TYPES[fields] = namedtuple("ChainState", fields)
    return _STATE_TYPES[fields]


def _compose(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """outer @ inner for rows of diagonals (m, d) or matrices (m, d, d)."""
    if outer.ndim == 2 and inner.ndim == 2:
        return outer * inner
    if outer.ndim == 2:
        return outer[:, :, None] * inner
    if inner.ndim == 2:
        return outer * inner[:, None, :]
    return outer @ inner


@rebuildable
def chain(*transforms: Optimizer) -> Optimizer:
    r"""Compose optimizers: g_1 = g, g_{i+1} = -u_i, step u_n (see module doc).

    Parameters
    ----------
    *transforms : Optimizer
        At least one optimizer, in application order.

    Returns
    -------
    Optimizer
        ``init(params, clients)`` initialises every stage on the same rows;
        ``update`` runs the stages in order; ``precond`` is the product
        m_n ... m_1 of the stages' preconditioners (module doc).
    """
    if len(transforms) == 0:
        raise InvalidHyperparameterError("chain: needs at least one optimizer, got none")
    for i, t in enumerate(transforms):
        if not isinstance(t, Optimizer):
            raise InvalidHyperparameterError(
                f"chain: argument {i} must be an Optimizer, got {type(t).__name__}")
    stages = tuple(transforms)

    def _split(state: Any) -> list[Any]:
        """The stage states, rebuilt from the ``s{i}_`` prefixed fields (as
        NamedTuples with the stage's own field names)."""
        parts = []
        for i in range(len(stages)):
            prefix = f"s{i}_"
            names = tuple(f[len(prefix):] for f in state._fields if f.startswith(prefix))
            values = [getattr(state, prefix + f) for f in names]
            parts.append(_state_type(names)(*values))
        return parts

    def init(params: Any, clients: Any = None) -> Any:
        subs = [t.init(params, clients) for t in stages]
        names = ["count"]
        values = [np.zeros(np.asarray(subs[0][0]).shape[0], dtype=np.int64)]
        for i, s in enumerate(subs):
            names += [f"s{i}_{f}" for f in s._fields]
            values += list(s)
        return _state_type(tuple(names))(*values)

    def update(grads: Any, state: Any, params: Any = None) -> tuple[np.ndarray, Any]:
        parts = _split(state)
        g = np.asarray(grads, dtype=np.float64)
        new_parts = []
        u = g
        for t, s in zip(stages, parts):
            u, s = t.update(g, s, params)
            new_parts.append(s)
            g = -u
        values = [state.count + 1]
        for s in new_parts:
            values += list(s)
        return u, type(state)(*values)

    def precond(state: Any) -> np.ndarray:
        parts = _split(state)
        m = stages[0].precond(parts[0])
        for t, s in zip(stages[1:], parts[1:]):
            m = _compose(t.precond(s), m)
        return m

    name = "chain(" + ", ".join(t.name for t in stages) + ")"
    return Optimizer(init, update, precond, name)
