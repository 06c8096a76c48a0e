"""Plain and momentum gradient steps as pure optimizers.

Conventions (see :mod:`fltheory.optim.base`): ``update`` returns the step u
with the caller applying y + u; u is linear in ``lr``.

``precond(state)`` returns m_k, the diagonal weight of the last update in the
local-correction sum G = sum_k m_k of LocalAdaptivity (section 5, "Local
Correction"; docs/theory/index.md#algorithms).  It is defined so that, for a round that
starts from a freshly initialised state and takes K steps,

    y_K - y_0 = -lr sum_j A^(j) g_j   with   sum_j A^(j) = sum_k m_k,

which is the normalisation that makes Delta / G a weighted average of the
gradients used (LocalAdaptivity, appendix F).  Before any update (count = 0) it is 0.
The weights are computed from the optimizer's own counter, so they stay exact
for a state persisted across rounds (Delta / G is then a weighted average of
every gradient still held in the buffers, earlier rounds' included); after
:func:`mean_rows` of rows with different counters they are approximate.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._validate import flag
from . import _checks
from .base import Optimizer, rebuildable

__all__ = ["SgdState", "MomentumState", "sgd", "momentum"]


class SgdState(NamedTuple):
    """count: (m,) steps taken; dim: (m,) the row length d (SGD keeps no other state)."""

    count: np.ndarray  # type: ignore[assignment]  # the step counter; shadows tuple.count on purpose
    dim: np.ndarray


class MomentumState(NamedTuple):
    """count: (m,) steps taken; trace: (m, d) momentum buffer b_k."""

    count: np.ndarray  # type: ignore[assignment]  # the step counter; shadows tuple.count on purpose
    trace: np.ndarray


def _started(count: np.ndarray) -> np.ndarray:
    return (count > 0)[:, None]


@rebuildable
def sgd(lr: float) -> Optimizer:
    r"""Gradient descent, y <- y - lr g.

    The ClientOpt with P = I of LocalAdaptivity (section 3, eq. 2 with P = I) and,
    as a server optimizer on the pseudo-gradient g = -sum p_i Delta_i with
    lr = 1, FedAvg (docs/theory/index.md#algorithms).

    Parameters
    ----------
    lr : float
        Learning rate > 0.

    Notes
    -----
    ``update``: u = -lr g.  ``precond``: m_k = 1 (ones (m, d)); 0 before the
    first update.
    """
    lr = _checks.learning_rate("sgd: lr", lr)

    def init(params: Any, clients: Any = None) -> SgdState:
        x = _checks.rows(params, "sgd.init")
        m, d = x.shape
        _checks.client_index(clients, m, "sgd.init")
        return SgdState(np.zeros(m, dtype=np.int64), np.full(m, d, dtype=np.int64))

    def update(grads: Any, state: SgdState, params: Any = None) -> tuple[np.ndarray, SgdState]:
        g = _checks.grads_like(grads, state.count.shape[0], "sgd.update")
        return -lr * g, SgdState(state.count + 1, state.dim)

    def precond(state: SgdState) -> np.ndarray:
        m = state.count.shape[0]
        d = int(state.dim[0]) if m else 0
        return np.where(_started(state.count), 1.0, 0.0) * np.ones((m, d))

    def fused(state: SgdState) -> _FusedSgd:
        return _FusedSgd(lr, state)

    return Optimizer(init, update, precond, f"sgd(lr={lr:g})", fused)


class _FusedSgd:
    """The steps of ``sgd``'s ``update`` in place (:class:`fltheory.optim.base.FusedSteps`):
    U = g * (-lr) (the product ``-lr * g`` of ``update``: multiplication is commutative
    in IEEE arithmetic), U *= rate unless rate is the float 1.0, y += U; the counter
    advances by one per step.  No argument checks (the caller's buffers are trusted)."""

    def __init__(self, lr: float, state: SgdState) -> None:
        self.neg_lr = -lr
        self.count = np.array(state.count, dtype=np.int64, copy=True)
        self.dim = state.dim
        self.pending = 0
        self.U: np.ndarray | None = None

    def step(self, grads: np.ndarray, params: np.ndarray, rate: float | np.ndarray) -> None:
        U = self.U
        if U is None or U.shape != grads.shape:
            U = self.U = np.empty(grads.shape)
        np.multiply(grads, self.neg_lr, out=U)
        if not (isinstance(rate, float) and rate == 1.0):
            U *= rate
        params += U
        self.pending += 1

    def state(self) -> SgdState:
        if self.pending:
            self.count += self.pending
            self.pending = 0
        return SgdState(self.count, self.dim)


@rebuildable
def momentum(lr: float, beta: float = 0.9, nesterov: bool = False) -> Optimizer:
    r"""SGD with heavy-ball or Nesterov momentum (buffer form, no dampening).

    Update rule (b_0 = 0):

        b_k = beta b_{k-1} + g_k
        heavy ball:  u_k = -lr b_k
        Nesterov:    u_k = -lr (g_k + beta b_k)

    Heavy ball is Polyak's y_{k+1} = y_k - lr g_k + beta (y_k - y_{k-1}).
    The Nesterov form (Sutskever et al. 2013, the buffer form of common deep
    learning libraries) evaluates every gradient at its own iterate, and its
    iterates are the look-ahead points z_k of the classical accelerated
    recursion theta_{k+1} = z_k - lr g(z_k),
    z_{k+1} = theta_{k+1} + beta (theta_{k+1} - theta_k), theta_0 = z_0 = y_0:
    y_k = z_k for every k and every (not only linear) gradient, with a first
    step y_1 = y_0 - lr (1 + beta) g_0.  (For quadratics, where g is affine,
    the y_k also satisfy y_{k+1} = w_k - lr g(w_k), w_k = y_k + beta (y_k -
    y_{k-1}); in general they do not.)  As a server optimizer on the
    pseudo-gradient this is FedAvgM (Reddi et al. 2021, section 2 / Hsu et al.
    2019).

    Parameters
    ----------
    lr : float
        Learning rate > 0.
    beta : float
        Momentum coefficient in [0, 1); beta = 0 is :func:`sgd`.
    nesterov : bool
        Nesterov's look-ahead form instead of heavy ball.

    Notes
    -----
    Local-correction weight (LocalAdaptivity section 5: for stateful optimizers the weight of
    each local gradient is a weighted sum of the steps' preconditioners, whose expression
    appendix A.3 leaves to each optimizer; docs/theory/index.md#algorithms).  Gradient g_j enters the
    buffers b_j, b_{j+1}, ... with weights beta^(k-j), so over K restarted
    steps Delta = -lr sum_j A^(j) g_j with
    A^(j) = sum_{k=j}^{K} beta^(k-j) (heavy ball).  The running sum of the
    A^(j) is accumulated by

        c_k = beta c_{k-1} + 1 = (1 - beta^k) / (1 - beta),   c_0 = 0,
        heavy ball: m_k = c_k,      Nesterov: m_k = 1 + beta c_k,

    (c_k is the momentum buffer of a constant unit gradient), so that
    sum_k m_k = sum_j A^(j) exactly.  ``precond`` returns m_k * ones(m, d)
    computed from the optimizer's own counter.
    """
    lr = _checks.learning_rate("momentum: lr", lr)
    beta = _checks.decay("momentum: beta", beta)
    nesterov = flag("momentum: nesterov", nesterov)

    def init(params: Any, clients: Any = None) -> MomentumState:
        x = _checks.rows(params, "momentum.init")
        _checks.client_index(clients, x.shape[0], "momentum.init")
        return MomentumState(np.zeros(x.shape[0], dtype=np.int64), np.zeros_like(x))

    def update(grads: Any, state: MomentumState, params: Any = None
               ) -> tuple[np.ndarray, MomentumState]:
        g = _checks.grads_like(grads, state.count.shape[0], "momentum.update")
        trace = beta * state.trace + g
        step = g + beta * trace if nesterov else trace
        return -lr * step, MomentumState(state.count + 1, trace)

    def precond(state: MomentumState) -> np.ndarray:
        k = state.count.astype(np.float64)[:, None]
        c = (1.0 - beta ** k) / (1.0 - beta)
        weight = 1.0 + beta * c if nesterov else c
        weight = np.where(_started(state.count), weight, 0.0)
        return weight * np.ones_like(state.trace)

    kind = "nesterov" if nesterov else "heavy_ball"
    return Optimizer(init, update, precond, f"momentum(lr={lr:g}, beta={beta:g}, {kind})")
