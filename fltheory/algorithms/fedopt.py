"""FedOpt with local adaptivity and local / joint correction (LocalAdaptivity, sections 3 and 5;
docs/theory/index.md#algorithms).

Round t with participants S, each completing s_i local steps:

1. Client i runs ClientOpt from y^0 = x_t with the optimizer state chosen by
   ``client_state``:
   ``"restart"`` (LocalAdaptivity section 3: ``init`` again every round),
   ``"persist"`` (the client's own state from the last round it took part in),
   ``"synchronise"`` (the state shared by all clients: after every round the
   float fields of the participants' final states are averaged uniformly and
   stored for every client, and so is the step counter, as the participants'
   mean count rounded by ``np.rint`` (halves to even); other integer fields
   (client ids) stay per client; see :func:`synchronised_states`).  Each step,
   with the federation's configured oracle g_i,
       (u, state) = update(g_i(y^k), state, y^k),   y^{k+1} = y^k + s_i u,
   where s_i = ``client_lr_scale`` (so eta_i = s_i * the optimizer's rate).
2. Delta_i = y_i^{s_i} - x_t.
3. Local correction (LocalAdaptivity section 5, "Local Correction", eq. 11 and
   appendix F eq. 97 [derived in docs/theory/index.md]): the client keeps
   G_i = s_i sum_k m_k, m_k = ``precond`` after step k (AdaGrad: P^(k); SGD: I;
   momentum methods: the momentum-weighted sum the optimizer defines), and sends
       Delta~_i = G_i^{-1} Delta_i        (elementwise for diagonal m_k)
   and M_i = G_i^{-1}.  Scaling choice: G_i includes the per-client rate scale
   s_i (LocalAdaptivity: the correction "automatically avoids the invalid solution by
   dividing the client learning rate") but not the optimizer's base rate eta,
   which is common to all clients and does not move the fixed point; to first
   order Delta~_i = -eta g_i(x_t), so server SGD with rate 1 moves by
   -eta grad F.  A participant that completed no step sends Delta~_i = 0,
   M_i = 0.
4. Pseudo-gradient (weights w_i of ``aggregation``):
       ``"none"``:  g = -sum w_i Delta_i,
       ``"local"``: g = -sum w_i Delta~_i,
       ``"joint"``: g = -(sum w_i M_i)^{-1} sum w_i Delta~_i  (LocalAdaptivity
       section 5, "Global Correction"; entries/rows with sum w_i M_i = 0,
       i.e. nobody stepped, give g = 0).
5. ServerOpt: (u, server_state) = update(g, server_state, x_t);
   x_{t+1} = x_t + u (server state in the algorithm state, own step counter).

``client_optimizer=sgd(eta)``, ``server_optimizer=sgd(1.0)``,
``correction="none"`` is FedAvg exactly.  An empty round changes nothing but t.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, per_client
from ..errors import DivergenceError, InvalidHyperparameterError
from ..optim.base import Optimizer, mean_rows, put_rows, take_rows
from ..optim.first_order import sgd
from ..participation import Participation
from ..problems.base import Federation
from .base import (
    AGGREGATIONS,
    Algorithm,
    DeferredCommunication,
    RoundInfo,
    aggregation_weights,
    resolve_per_client,
)
from .fedavg import empty_round
from .local import local_descent
from .local.objective import _shared_rows
from ..aliases import Steps

__all__ = ["FedOpt", "FedOptState", "CORRECTIONS", "CLIENT_STATES", "synchronised_states",
           "corrected_changes", "joint_direction"]

CORRECTIONS = ("none", "local", "joint")
CLIENT_STATES = ("restart", "persist", "synchronise")


@dataclass(frozen=True)
class FedOptState:
    """x: server model; t: completed rounds; server: server optimizer state (one row);
    clients: (N, ...) client optimizer states (``persist`` / ``synchronise``) or None."""

    x: np.ndarray
    t: int
    server: Any
    clients: Any = None


#: Names of step-counter fields: an optimizer's ``count``, and a chain stage's (``s0_count``, ...).
_STEP_COUNTER = re.compile(r"(s[0-9]+_)*count")


def synchronised_states(full: Any, rows: np.ndarray, part: Any) -> Any:
    """Store the participants' averaged state for every client.

    Float fields: every one of the N rows becomes the uniform mean over the
    participants' rows of ``part``.  Step counters are shared too: every client
    gets the participants' mean count, rounded by ``np.rint`` (halves to even),
    so the averaged moments and the bias correction of Adam/Yogi (which divides
    by 1 - b^count) stay consistent for clients that never trained.  A step
    counter is the field ``count`` of an optimizer's state, also inside a
    :func:`~fltheory.optim.chain` (whose stage fields are renamed
    ``s{i}_count``, ``s{i}_s{j}_count`` for nested chains).  Other integer
    fields (client ids, row lengths) stay per client."""
    avg = mean_rows(part)
    fields = []
    for name, f, p, a in zip(type(full)._fields, full, part, avg):
        f = np.asarray(f)
        if _STEP_COUNTER.fullmatch(name):
            shared = int(np.rint(np.mean(np.asarray(p))))
            g = np.full_like(f, shared)
        elif np.issubdtype(f.dtype, np.integer):
            g = f.copy()
            g[rows] = p
        else:
            g = np.broadcast_to(np.asarray(a)[0], f.shape).copy()
        fields.append(g)
    return type(full)(*fields)


def corrected_changes(delta: np.ndarray, G: np.ndarray, stepped: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(Delta~, M): Delta~_i = G_i^{-1} Delta_i and M_i = G_i^{-1}; zero for rows that
    did not step.  ``G`` is (m, d) (diagonal) or (m, d, d) (full matrices).

    Raises :class:`DivergenceError` when a stepped row's G_i is not invertible
    (a diagonal entry <= 0 or non-finite, e.g. an AdaGrad accumulator that
    overflowed, or a singular matrix) instead of returning inf / NaN."""
    dt = np.zeros_like(delta)
    M = np.zeros_like(G)
    rows = np.flatnonzero(stepped)
    if rows.size == 0:
        return dt, M
    Gr = G[rows]
    if G.ndim == 2:
        bad = ~(np.isfinite(Gr) & (Gr > 0)).all(axis=1)
        if np.any(bad):
            r = int(rows[np.flatnonzero(bad)[0]])
            raise DivergenceError(
                f"local correction: the preconditioner sum G of row {r} must be finite and > 0 "
                f"entrywise, got min {float(np.min(G[r])):.3g}, max {float(np.max(G[r])):.3g}")
        M[rows] = 1.0 / Gr
        dt[rows] = delta[rows] / Gr
        return dt, M
    try:
        if not np.all(np.isfinite(Gr)):
            raise np.linalg.LinAlgError("non-finite entries")
        M[rows] = np.linalg.inv(Gr)
        dt[rows] = np.linalg.solve(Gr, delta[rows][:, :, None])[:, :, 0]
    except np.linalg.LinAlgError as exc:
        raise DivergenceError(
            f"local correction: a preconditioner sum G_i is not invertible ({exc})") from exc
    return dt, M


def joint_direction(w: np.ndarray, dt: np.ndarray, M: np.ndarray) -> np.ndarray:
    """-(sum w_i M_i)^{-1} sum w_i Delta~_i (zero where sum w_i M_i vanishes)."""
    s = w @ dt
    A = np.tensordot(w, M, axes=(0, 0))
    if A.ndim == 1:
        safe = A > 0
        return -np.where(safe, s / np.where(safe, A, 1.0), 0.0)
    if not np.any(A):
        return np.zeros_like(s)
    return -np.linalg.solve(A, s)


@dataclass(frozen=True, kw_only=True, eq=False)
class FedOpt(Algorithm):
    """FedOpt with any client and server optimizer (module docstring).

    Parameters
    ----------
    client_optimizer : Optimizer
        ClientOpt (``fltheory.optim``: sgd, momentum, adagrad, adam, yogi,
        preconditioned, chain).
    server_optimizer : Optimizer
        ServerOpt applied to the pseudo-gradient (``optim.sgd(1.0)`` averages).
    local_steps : int or (N,) array
        Nominal local steps tau_i >= 1.
    client_lr_scale : float or (N,) array
        Per-client scale s_i > 0 of the client optimizer's rate.
    correction : {"none", "local", "joint"}
    client_state : {"restart", "persist", "synchronise"}
    aggregation : {"weights", "samples", "uniform"}
    """

    name: ClassVar[str] = "FedOpt"
    client_optimizer: Optimizer
    server_optimizer: Optimizer
    local_steps: Steps = 10
    client_lr_scale: Any = 1.0
    correction: str = "none"
    client_state: str = "restart"
    aggregation: str = "weights"

    def __post_init__(self) -> None:
        for label, opt in (("client_optimizer", self.client_optimizer),
                           ("server_optimizer", self.server_optimizer)):
            if not isinstance(opt, Optimizer):
                raise InvalidHyperparameterError(
                    f"{label} must be an fltheory.optim Optimizer, got {type(opt).__name__}")
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        per_client("client_lr_scale", self.client_lr_scale, None)
        choice("correction", self.correction, CORRECTIONS)
        choice("client_state", self.client_state, CLIENT_STATES)
        choice("aggregation", self.aggregation, AGGREGATIONS)


    def averaging_version(self) -> FedOpt:
        """The same algorithm with server optimizer ``sgd(1.0)`` (plain averaging of
        the client models); InvalidHyperparameterError unless ``client_state='restart'``
        (persisted client state makes a round depend on more than x)."""
        if self.client_state != "restart":
            raise InvalidHyperparameterError(
                f"the operator T of LocalAdaptivity needs client_state='restart', got "
                f"{self.client_state!r}: with persisted client state a round is not a function of x")
        return dataclasses.replace(self, server_optimizer=sgd(1.0))

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["client_optimizer"] = self.client_optimizer.name
        out["server_optimizer"] = self.server_optimizer.name
        return out

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> FedOptState:
        resolve_per_client("client_lr_scale", self.client_lr_scale, problem.n_clients)
        self.nominal_steps(problem)
        x = np.array(x0, dtype=np.float64)
        server = self.server_optimizer.init(x[None, :])
        clients = None
        if self.client_state != "restart":
            N = problem.n_clients
            clients = self.client_optimizer.init(np.broadcast_to(x, (N, x.shape[0])).copy(),
                                                 np.arange(N))
        return FedOptState(x=x, t=0, server=server, clients=clients)

    def round(self, state: FedOptState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[FedOptState, RoundInfo]:
        plan = self._plan(problem) if participation is None else None
        scale = None if plan is None else plan.scalar_rows("client_lr_scale", self.client_lr_scale)
        if plan is not None and scale is not None:         # full participation, cached arrays
            part = plan.participants
            w = plan.weights(problem, self.aggregation)
        else:
            part = self.participants(problem, participation, rng, state.t)
            if part.m == 0:
                return (FedOptState(x=state.x, t=state.t + 1, server=state.server, clients=state.clients),
                        empty_round(problem.dim))
            scale = resolve_per_client("client_lr_scale", self.client_lr_scale, problem.n_clients)[part.clients]
            w = aggregation_weights(problem, part.clients, self.aggregation)
        X0 = _shared_rows(state.x, part.m)              # np.broadcast_to(x, (m, d)), built directly
        start = None if state.clients is None else take_rows(state.clients, part.clients)
        correct = self.correction != "none"
        Y, info = local_descent(problem, X0, part.clients, part.steps, scale, rng,
                                optimizer=self.client_optimizer, opt_state=start,
                                record_precond=correct, keep_opt_state=self.client_state != "restart",
                                bounds=part.bounds)
        delta = np.subtract(Y, state.x, out=Y)            # Y - x in place: Y is this round's own array
        if not correct:
            g = -(w @ delta)
            up = delta
        else:
            psum = info["precond_sum"]
            if psum is None:       # nobody stepped
                psum = np.zeros_like(delta)
            G = scale.reshape((-1,) + (1,) * (psum.ndim - 1)) * psum
            dt, M = corrected_changes(delta, G, part.steps > 0)
            if self.correction == "local":
                g = -(w @ dt)
                up = dt
            else:
                g = joint_direction(w, dt, M)
                up = np.hstack([dt, M.reshape(part.m, -1)])
        u, server = self.server_optimizer.update(g[None, :], state.server, state.x[None, :])
        x = state.x + u[0]
        clients = state.clients
        down = X0
        if self.client_state == "persist":
            clients = put_rows(state.clients, part.clients, info["opt_state"])
        elif self.client_state == "synchronise":
            clients = synchronised_states(state.clients, part.clients, info["opt_state"])
            sent = _float_fields(info["opt_state"])
            up = np.hstack([up, sent])
            down = np.hstack([X0, sent])
        comm = DeferredCommunication(up, down)           # measured when read
        return (FedOptState(x=x, t=state.t + 1, server=server, clients=clients),
                RoundInfo(part.clients, part.steps, comm))


def _float_fields(state: Any) -> np.ndarray:
    """The float fields of an optimizer state, flattened per row -> (m, k)."""
    cols = [np.asarray(f).reshape(np.asarray(f).shape[0], -1) for f in state
            if not np.issubdtype(np.asarray(f).dtype, np.integer)]
    m = np.asarray(state[0]).shape[0]
    return np.hstack(cols) if cols else np.zeros((m, 0))
