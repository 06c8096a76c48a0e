"""Descent: the step-major loop of local steps on rows of Y (in place).

Step k of all rows still active (``steps[r] > k``) is one batched oracle call
in row order, then the plain step y <- y - lr_r (g + extra gradient) or the
optimizer step y <- y + lr_r u (FedOpt); see :func:`fltheory.algorithms.local.local_descent`.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

import numpy as np

from ...errors import DivergenceError
from ...optim.base import KernelSteps, Optimizer, put_rows, take_rows
from ...problems._process_shares import PerRow
from ...problems.base import Federation
from .objective import LocalObjective

__all__ = ["descend", "fused_steps_on_rows", "plain_steps_on_rows"]


def descend(problem: Federation, Y: np.ndarray, clients: np.ndarray, steps: np.ndarray,
            lr: np.ndarray, rng: np.random.Generator | None, objective: LocalObjective,
            optimizer: Optimizer | None, state: Any, record: bool,
            bounds: tuple[int, int] | None = None, keep_state: bool = True) -> tuple[Any, np.ndarray | None]:
    """The step-major loop on rows of Y (modified in place) -> (state, precond_sum).

    While every row is active (steps 0..min(steps)-1) the oracle is the
    federation's ``row_gradient`` bound to ``clients`` once (no argument checks
    per step; an overflow shows as a non-finite Y, which the caller reports),
    and plain steps reuse one gradient buffer and one buffer for the extra terms;
    the numbers are the same as with ``stochastic_grad`` and ``objective.grad``
    called every step.  A bound gradient that offers ``map_rows`` (shares of rows in
    worker processes, ``fltheory.problems._process_shares``) takes those steps instead,
    each share all of them at once (:func:`plain_steps_on_rows`, and
    :func:`fused_steps_on_rows` for an optimizer with fused steps that pickles).  Later
    steps (rows with more steps than others) call the checked ``stochastic_grad`` on the
    active rows.  ``bounds``: (min, max) of ``steps`` when
    the caller has them (not recomputed).  ``keep_state=False``: the caller discards the final
    optimizer state, which may then be returned as None (worker processes do not send theirs back)."""
    m = Y.shape[0]
    precond_sum = None
    if bounds is None:
        bounds = (int(steps.min()), int(steps.max())) if m else (0, 0)
    kmin, kmax = bounds                             # steps 0..kmin-1 involve every row
    if not (type(lr) is np.ndarray and lr.dtype == np.float64):
        lr = np.asarray(lr, dtype=np.float64)
    lr_col = lr[:, None]
    # one rate for every row: the scalar gives the same products as the column
    rate: float | np.ndarray = (float(lr[0]) if m and (lr.strides == (0,) or (lr == lr[0]).all())
                                else lr_col)
    unit_rate = isinstance(rate, float) and rate == 1.0
    extra = _NO_EXTRA if objective.D is None and objective.b is None and objective.l1 is None \
        else _ExtraGradient(objective, Y)
    grad = problem.row_gradient(clients, rng) if kmin > 0 else None
    # a bound gradient whose shares of rows run in worker processes (SharedRowGradient.map_rows)
    shares = getattr(grad, "map_rows", None)
    plain = optimizer is None and grad is not None and extra.kind in _INLINE
    make_fused = optimizer.fused if optimizer is not None and kmin > 0 else None
    # fused optimizer steps taken by the shares: all at once, each share building its own fused steps
    shared_fused = make_fused is not None and shares is not None and extra.kind == "none" and not record \
        and _shared_steps(optimizer, state)
    # otherwise an optimizer with fused steps (Optimizer.fused) takes them in place while every row is
    # active: the same numbers as update followed by y += rate * u; they only read G, so its buffer is
    # reused (later steps, rows with more steps than others, use the pure update)
    fused = make_fused(state) if make_fused is not None and not shared_fused else None
    G_buf = np.empty_like(Y) if (optimizer is None or fused is not None) and kmin > 0 \
        and not (plain and shares is not None) else None
    with np.errstate(over="ignore", invalid="ignore"):
        if plain and shares is not None:               # the oracle's shares run all their steps at once
            shares(plain_steps_on_rows, Y, (kmin, _per_row(rate, m), extra.kind,
                                            _per_row(getattr(extra, "D", None), m), _per_row(extra.b, m)))
            kdone = kmin
        elif plain:
            _plain_steps(grad, G_buf, Y, rate, extra, kmin)
            kdone = kmin
        elif shared_fused:
            assert optimizer is not None and shares is not None
            wanted = keep_state or kmax > kmin         # later steps of some rows read the state
            parts = shares(fused_steps_on_rows, Y, (kmin, _per_row(rate, m), optimizer, wanted,
                                                    type(state), *(PerRow(f) for f in state)))
            if wanted:
                fields = [np.empty(np.shape(f), dtype=np.asarray(f).dtype) for f in state]
                for rows, part in parts:
                    for f, p in zip(fields, part, strict=True):
                        f[rows] = p
                state = type(state)(*fields)
            else:
                state = None
            kdone = kmin
        elif fused is not None and grad is not None and extra.kind == "none" and not record:
            # fused steps, nothing added: the bare loop (the optimizer's own loop when it offers one)
            if isinstance(fused, KernelSteps):
                assert G_buf is not None
                fused.run(grad, G_buf, Y, rate, kmin)
            else:
                step = fused.step
                for _ in range(kmin):
                    step(grad(Y, G_buf), Y, rate)
            kdone = kmin
        else:
            kdone = 0
        for _ in range(kdone, kmin):
            assert grad is not None
            G = grad(Y, G_buf)
            extra.add_to(G, Y)
            if optimizer is None:
                G *= rate
                Y -= G
                continue
            if fused is not None:
                fused.step(G, Y, rate)                     # Y += rate * u in place, same numbers
                if record:
                    state = fused.state()
            else:
                U, state = optimizer.update(G, state, Y)
                if unit_rate:
                    pass                                   # 1.0 * u == u exactly: no pass
                elif _fresh(U, G, Y, state):
                    U *= rate                              # same products as lr_col * U, no temporary
                else:
                    U = rate * U
                Y += U
            if record:
                P = np.asarray(optimizer.precond(state))
                if precond_sum is None:
                    precond_sum = np.zeros((m, *P.shape[1:]))
                precond_sum += P
        if fused is not None:
            state = fused.state()
    if kmax > kmin and not np.all(np.isfinite(Y)):
        raise DivergenceError("local steps produced non-finite values")
    for k in range(kmin, kmax):
        rows = np.flatnonzero(steps > k)
        Ya = Y[rows]
        G = problem.stochastic_grad(Ya, clients[rows], rng)
        _add_extra_grad(G, objective.take(rows), Ya)
        if optimizer is None:
            G *= lr_col[rows]
            Y[rows] -= G
            continue
        sub = take_rows(state, rows)
        U, sub = optimizer.update(G, sub, Ya)
        scale = lr_col[rows]
        if _fresh(U, G, Ya, sub):
            U *= scale
        else:
            U = scale * U
        Y[rows] += U
        state = put_rows(state, rows, sub)
        if record:
            P = np.asarray(optimizer.precond(sub))
            if precond_sum is None:
                precond_sum = np.zeros((m, *P.shape[1:]))
            precond_sum[rows] += P
    return state, precond_sum


#: Extra-term kinds whose plain steps run in :func:`_plain_steps`.
_INLINE = ("none", "linear", "diagonal")


def _plain_steps(grad: Any, G_buf: np.ndarray | None, Y: np.ndarray, rate: float | np.ndarray,
                 extra: _ExtraGradient, steps: int) -> None:
    """``steps`` plain steps y <- y - rate (g(y) + extra gradient) on every row of Y, with the
    operations of ``_ExtraGradient.add_to`` written into the loop (the same numbers, no call
    per step): nothing added, a linear term (G -= b), or D * y - b (one reused buffer)."""
    kind = extra.kind
    if kind == "none":
        for _ in range(steps):                             # the bare loop
            G = grad(Y, G_buf)
            G *= rate
            Y -= G
    elif kind == "linear":
        b = extra.b
        for _ in range(steps):
            G = grad(Y, G_buf)
            G -= b
            G *= rate
            Y -= G
    else:                                                  # diagonal: G += D * y - b
        D, b, T = extra.D, extra.b, extra.buf
        for _ in range(steps):
            G = grad(Y, G_buf)
            np.multiply(D, Y, out=T)
            if b is not None:
                T -= b
            G += T
            G *= rate
            Y -= G


class _RowsExtra(NamedTuple):
    """The extra-term gradient of ``_plain_steps`` on some rows (what it reads of ``_ExtraGradient``)."""

    kind: str
    D: float | np.ndarray | None
    b: np.ndarray | None
    buf: np.ndarray | None


def plain_steps_on_rows(grad: Any, Y: np.ndarray, steps: int, rate: float | np.ndarray, kind: str,
                        D: float | np.ndarray | None, b: np.ndarray | None) -> None:
    """``_plain_steps`` on the rows Y of one share of a bound gradient that offers
    ``map_rows`` (e.g. ``LogisticFederation.with_processes``: a worker process runs it on
    its rows); ``rate``, ``D`` and ``b`` are the rows' own (or shared) values.  Rows are
    independent, so each row sees the operations of the step-major loop over all rows."""
    extra = _RowsExtra(kind, D, b, np.empty_like(Y) if kind == "diagonal" else None)
    with np.errstate(over="ignore", invalid="ignore"):
        _plain_steps(grad, np.empty_like(Y), Y, rate, extra, steps)   # type: ignore[arg-type]


def _per_row(value: Any, m: int) -> Any:
    """``value`` marked as one row per point (:class:`PerRow`) when it is an (m, ...) array
    of at least two axes (a rate column, D or b rows); numbers and shared 1-d rows unmarked."""
    if isinstance(value, np.ndarray) and value.ndim >= 2 and value.shape[0] == m:
        return PerRow(value)
    return value


def _shared_steps(optimizer: Optimizer | None, state: Any) -> bool:
    """True when the optimizer and its state type pickle (built by a factory of fltheory.optim
    and not changed since: ``Optimizer.picklable``), so that worker processes can take its
    fused steps."""
    return optimizer is not None and optimizer.picklable and _pickles(type(state))


#: class -> whether it pickles (:func:`_pickles`); at most 64 classes remembered
_PICKLES: dict[Any, bool] = {}


def _pickles(kind: Any) -> bool:
    """True when the class ``kind`` pickles (by reference: a class defined at module level);
    checked once per class."""
    known = _PICKLES.get(kind)
    if known is None:
        try:
            pickle.dumps(kind)
            known = True
        except (pickle.PicklingError, AttributeError, TypeError):
            known = False
        if len(_PICKLES) >= 64:
            _PICKLES.clear()
        _PICKLES[kind] = known
    return known


def fused_steps_on_rows(grad: Any, Y: np.ndarray, steps: int, rate: float | np.ndarray, optimizer: Optimizer,
                        wanted: bool, state_type: type, *fields: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """``steps`` fused optimizer steps (``optimizer.fused``) on the rows Y of one share of a
    bound gradient that offers ``map_rows``, from the rows' state ``state_type(*fields)``;
    returns the rows' final state fields when ``wanted``.  The same operations per row as the
    step-major loop over all rows (the updates are elementwise per row)."""
    assert optimizer.fused is not None
    fused = optimizer.fused(state_type(*fields))
    G = np.empty_like(Y)
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(fused, KernelSteps):
            fused.run(grad, G, Y, rate, steps)
        else:
            for _ in range(steps):
                fused.step(grad(Y, G), Y, rate)
    return tuple(np.asarray(f) for f in fused.state()) if wanted else None


#: Widest row for which a shared row b is written out as a full (m, d) array (see _ExtraGradient).
_FULL_ROW_MAX = 512


class _ExtraGradient:
    """Adds the gradient of the extra terms of ``objective`` (rows of Y) to G in place,
    with the floating-point operations of ``G += objective.grad(Y)``:

    * a linear term alone (the SCAFFOLD correction): G - b == G + (0 - b) exactly,
      subtracted directly;
    * D * y - b (proximal, FedDyn, elastic net l2, ...): into one reused buffer;
      a D stored as a broadcast view of one number (stride 0, ``LocalObjective.proximal``)
      is applied as that number (the same products); a b stored as a broadcast
      view of one row is written out once into an (m, d) array when rows are
      short (d <= ``_FULL_ROW_MAX``): numpy's row-broadcast subtraction runs one
      inner loop of d per row, 1.5-2.7x slower than the same-shape subtraction
      for d = 20-100 (the differences are the same numbers);
    * anything with an l1 term: ``objective.grad``.
    """

    def __init__(self, objective: LocalObjective, Y: np.ndarray) -> None:
        self.objective = objective
        self.kind = "none"
        D, b = objective.D, objective.b
        if objective.has_l1:
            self.kind = "general"
        elif D is None and b is not None:
            self.kind = "linear"
        elif D is not None:
            self.kind = "diagonal"
            self.D: float | np.ndarray = float(D[0, 0]) if D.size and D.strides == (0, 0) else D
            self.buf = np.empty_like(Y)
        if b is not None and b.ndim == 2 and b.shape[0] > 1 and b.strides[0] == 0:
            b = np.ascontiguousarray(b) if b.shape[1] <= _FULL_ROW_MAX else b[0]
        self.b = b

    def add_to(self, G: np.ndarray, Y: np.ndarray) -> None:
        kind = self.kind
        if kind == "none":
            return
        b = self.b
        if kind == "linear":
            G -= b
        elif kind == "diagonal":
            T = np.multiply(self.D, Y, out=self.buf)
            if b is not None:
                T -= b
            G += T
        else:
            _add_extra_grad(G, self.objective, Y)


_NO_EXTRA = _ExtraGradient(LocalObjective.zero(), np.zeros((0, 0)))   # kind "none": holds no buffer


def _add_extra_grad(G: np.ndarray, obj: LocalObjective, Y: np.ndarray) -> None:
    """G += gradient of the extra terms, in place (same floating-point result as
    ``G += obj.grad(Y)``; a linear term alone is subtracted directly)."""
    if obj.D is None and obj.b is not None and not obj.has_l1:
        G -= obj.b
        return
    extra = obj.grad(Y)
    if extra is not None:
        G += extra


def _fresh(U: np.ndarray, G: np.ndarray, Y: np.ndarray, state: Any) -> bool:
    """True when the optimizer's step U is a writable array sharing no memory with
    the gradient, the point or the new state (so scaling it in place is safe)."""
    if not isinstance(U, np.ndarray) or U.dtype != np.float64 or not U.flags.writeable \
            or U.base is not None:
        return False
    if np.may_share_memory(U, G) or np.may_share_memory(U, Y):
        return False
    return not any(isinstance(f, np.ndarray) and np.may_share_memory(U, f) for f in (state or ()))
