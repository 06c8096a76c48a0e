"""FedAvg (McMahan et al.; BetterObjects Alg. 1; docs/theory/index.md#algorithms).

Round t with participants S (from the participation model), each completing
s_i local steps:

    y_i^0 = x_t,   y_i^{k+1} = y_i^k - eta_i g_i(y_i^k),   k = 0..s_i - 1,
    Delta_i = y_i^{s_i} - x_t,
    x_{t+1} = x_t + eta_g sum_{i in S} w_i Delta_i,

with w_i = p_i / sum_{j in S} p_j (``aggregation="weights"``), n_i / n_S
(``"samples"``, BetterObjects Alg. 1) or 1/|S| (``"uniform"``).  g_i is the
federation's configured oracle (exact or stochastic).  A participant with
s_i = 0 sends Delta_i = 0 and keeps its weight.  An empty round leaves x.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from .._validate import choice, per_client, positive
from ..compression import Communication
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
from .local.objective import _shared_rows
from .local import local_descent
from .local.blocking import BlockFinish
from ..aliases import Rate, Steps

__all__ = ["FedAvg", "FedAvgState", "empty_round"]


@dataclass(frozen=True)
class FedAvgState:
    """x: server model; t: completed rounds."""

    x: np.ndarray
    t: int


def empty_round(d: int) -> RoundInfo:
    """RoundInfo of a round nobody took part in."""
    z = np.zeros((0, d))
    return RoundInfo(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                     Communication.measure(z, z))


def model_change_rows(x: np.ndarray) -> BlockFinish:
    """Finishing step for ``local_descent``: on each block of rows, the final iterates y_i
    become the model changes Delta_i = y_i - x in place (elementwise per row, so the same
    bits in any partition of the rows; run in the local loop's worker threads)."""
    def finish(rows: slice, Y: np.ndarray) -> None:
        np.subtract(Y, x, out=Y)
    return finish


def _server_step(server_lr: float, average: np.ndarray) -> np.ndarray:
    """``server_lr * average``; the average itself when ``server_lr`` is 1 (1.0 * v == v exactly
    in IEEE arithmetic, signed zeros, infinities and NaNs included: no pass over it)."""
    return average if server_lr == 1.0 else server_lr * average


@dataclass(frozen=True, kw_only=True, eq=False)
class FedAvg(Algorithm):
    """FedAvg with local SGD.

    Parameters
    ----------
    lr : float or (N,) array
        Client learning rates eta_i > 0.
    local_steps : int or (N,) array
        Nominal local steps E_i >= 1 (participation may complete fewer).
    server_lr : float
        Server learning rate eta_g > 0 (1 is plain averaging).
    aggregation : {"weights", "samples", "uniform"}
    """

    name: ClassVar[str] = "FedAvg"
    lr: Rate = 0.1
    local_steps: Steps = 10
    server_lr: float = 1.0
    aggregation: str = "weights"

    def __post_init__(self) -> None:
        per_client("lr", self.lr, None)
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        positive("server_lr", self.server_lr)
        choice("aggregation", self.aggregation, AGGREGATIONS)


    def averaging_version(self) -> FedAvg:
        """The same algorithm with server rate ``server_lr = 1``."""
        return dataclasses.replace(self, server_lr=1.0)

    def linear_part_is_symmetric(self, problem: Federation) -> bool:
        """True: on quadratic clients (Hessians H_i, full participation, exact gradients)
        one local step is y <- (I - eta_i H_i) y + eta_i e_i, so the state x maps to
        x + eta_g sum_i w_i ((I - eta_i H_i)^{s_i} - I) x + const, whose linear part
        (1 - eta_g) I + eta_g sum_i w_i (I - eta_i H_i)^{s_i} is a sum of polynomials in
        the symmetric H_i with real scalar coefficients: symmetric."""
        return True

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> FedAvgState:
        resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        return FedAvgState(x=np.array(x0, dtype=np.float64), t=0)

    def round(self, state: FedAvgState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[FedAvgState, RoundInfo]:
        plan = self._plan(problem) if participation is None else None
        if plan is not None and plan.lr is not None:      # full participation, cached arrays
            part, lr = plan.participants, plan.lr
            w = plan.weights(problem, self.aggregation)
        else:
            part = self.participants(problem, participation, rng, state.t)
            if part.m == 0:
                return replace(state, t=state.t + 1), empty_round(problem.dim)
            lr = resolve_per_client("lr", self.lr, problem.n_clients)[part.clients]
            w = aggregation_weights(problem, part.clients, self.aggregation)
        X0 = _shared_rows(state.x, part.m)
        # the model changes y_i - x are formed in place of y_i by the local loop, block by
        # block in its threads (model_change_rows)
        delta, _ = local_descent(problem, X0, part.clients, part.steps, lr, rng, bounds=part.bounds,
                                 finish=model_change_rows(state.x))
        x = state.x + _server_step(self.server_lr, w @ delta)
        comm = DeferredCommunication(delta, X0)          # measured when read
        return FedAvgState(x=x, t=state.t + 1), RoundInfo(part.clients, part.steps, comm)
