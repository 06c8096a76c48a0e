"""FedProx (Li et al.; BetterObjects eq. 1; docs/theory/index.md#algorithms) and FedProx-TE (BetterObjects Alg. 2).

Round t with participants S, each completing s_i local steps, centre c (the
received model x_t, or the temporal-ensembling target T of
:mod:`~fltheory.algorithms.targets`):

    h_i(y) = f_i(y) + (mu/2) ||y - c||^2,

* ``solver="gd"``: y^0 = x_t, y^{k+1} = y^k - eta_i (g_i(y^k) + mu (y^k - c)),
  k = 0..s_i - 1 (g_i the federation's configured oracle);
* ``solver="exact"``: y = argmin h_i (closed form (H_i + mu I)^{-1}(e_i + mu c)
  on quadratic clients, batched Newton otherwise); a participant with s_i = 0
  does not solve and sends Delta_i = 0 (nominal steps are 1 in this mode);

then Delta_i = y_i - x_t and x_{t+1} = x_t + eta_g sum_{i in S} w_i Delta_i with
the weights of :func:`~fltheory.algorithms.base.aggregation_weights`.

BetterObjects eq. 1 writes the penalty alpha ||w - w_g||^2, i.e. mu = 2 alpha.
With mu = 0 and ``solver="gd"`` this is FedAvg exactly.  On quadratic clients
with the exact solver and full participation the fixed point is
(sum p_i (H_i + mu I)^{-1} H_i)^{-1} sum p_i (H_i + mu I)^{-1} e_i
(docs/theory/fixed-points.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, known_keywords, per_client, positive
from ..errors import InvalidHyperparameterError, InvalidProblemError
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
from .fedavg import _server_step, empty_round, model_change_rows
from .local.objective import _shared_rows
from .local import LocalObjective, exact_local_solve, local_descent
from .targets import EnsembleState, TemporalEnsemble, require_ensemble
from ..aliases import Rate, Steps

__all__ = ["FedProx", "FedProxState", "FedProxTE", "SOLVERS", "check_target",
           "penalised_local_models"]

SOLVERS = ("gd", "exact")


def check_target(target: Any, *, allow_local: bool) -> None:
    """``target`` is None or a TemporalEnsemble whose ``of`` the algorithm supports."""
    if target is None:
        return
    if not isinstance(target, TemporalEnsemble):
        raise InvalidHyperparameterError(
            f"target must be None or a TemporalEnsemble, got {type(target).__name__}")
    if target.of == "local" and not allow_local:
        raise InvalidHyperparameterError(
            "TemporalEnsemble(of='local') ensembles per-client centres and applies to FedCurv "
            "with client Fisher only; this algorithm has one centre, use of='global'")


def penalised_local_models(problem: Federation, clients: np.ndarray, steps: np.ndarray,
                           X0: np.ndarray, objective: LocalObjective, solver: str, lr: Rate,
                           rng: np.random.Generator) -> np.ndarray:
    """The participants' local models for f_i plus a smooth penalty ``objective``.

    ``solver="gd"``: ``steps[r]`` steps y <- y - eta_i (g_i(y) + grad penalty(y)) from
    X0 (eta_i = row r of the per-client ``lr`` resolved for the federation);
    ``solver="exact"``: the exact minimiser for rows with ``steps > 0``, X0 for
    rows that completed no step (they send Delta = 0).  Shared by FedProx and FedCurv."""
    if solver == "gd":
        rates = resolve_per_client("lr", lr, problem.n_clients)[clients]
        Y, _ = local_descent(problem, X0, clients, steps, rates, rng, objective)
        return Y
    Y = np.array(X0, copy=True)
    act = np.flatnonzero(steps > 0)
    if act.size:
        Y[act] = exact_local_solve(problem, clients[act], objective.take(act), X0[act])
    return Y


@dataclass(frozen=True)
class FedProxState:
    """x: server model; t: completed rounds; target: temporal-ensemble state or None."""

    x: np.ndarray
    t: int
    target: EnsembleState | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class FedProx(Algorithm):
    """FedProx: local objective f_i(y) + (mu/2)||y - c||^2 (see module docstring).

    Parameters
    ----------
    lr : float or (N,) array
        Client rates eta_i > 0 (used by ``solver="gd"``).
    local_steps : int or (N,) array
        Nominal local steps E_i >= 1 (``solver="gd"``; the exact solver uses 1).
    mu : float >= 0
        Proximal coefficient (BetterObjects eq. 1: mu = 2 alpha).
    solver : {"gd", "exact"}
    aggregation : {"weights", "samples", "uniform"}
    server_lr : float > 0
    target : TemporalEnsemble or None
        Centre the penalty at the temporal-ensembling target (FedProx-TE).
    """

    name: ClassVar[str] = "FedProx"
    lr: Rate = 0.1
    local_steps: Steps = 10
    mu: float = 0.1
    solver: str = "gd"
    aggregation: str = "weights"
    server_lr: float = 1.0
    target: TemporalEnsemble | None = None

    def __post_init__(self) -> None:
        per_client("lr", self.lr, None)
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        positive("mu", self.mu, allow_zero=True)
        choice("solver", self.solver, SOLVERS)
        choice("aggregation", self.aggregation, AGGREGATIONS)
        positive("server_lr", self.server_lr)
        check_target(self.target, allow_local=False)

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["target"] = None if self.target is None else self.target.describe()
        return out

    _constant_nominal_steps: ClassVar[bool] = True      # a function of solver, local_steps and N

    def nominal_steps(self, problem: Federation) -> np.ndarray:
        if self.solver == "exact":
            return np.ones(problem.n_clients, dtype=np.int64)
        return super().nominal_steps(problem)


    def averaging_version(self) -> FedProx:
        """The same algorithm with server rate ``server_lr = 1``; InvalidHyperparameterError with a
        temporal-ensembling target."""
        if self.target is not None:
            raise InvalidHyperparameterError(
                f"{self.name} with a temporal-ensembling target depends on past models, "
                "not on x alone: no operator T(x)")
        return dataclasses.replace(self, server_lr=1.0)

    def linear_part_is_symmetric(self, problem: Federation) -> bool:
        """True without a temporal-ensembling target.  On quadratic clients a gradient step
        is y <- A_i y + eta_i mu x + eta_i e_i with A_i = I - eta_i (H_i + mu I), so
        y^{s} = (A_i^{s} + eta_i mu sum_{k<s} A_i^k) x + const; the exact solver gives
        y = (H_i + mu I)^{-1} (mu x + e_i).  Either linear part is a rational function of
        the symmetric H_i, and x <- (1 - eta_g) x + eta_g sum_i w_i y_i keeps it symmetric.
        With a target the state also carries the ensemble, whose update is not symmetric."""
        return self.target is None

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> FedProxState:
        resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        x = np.array(x0, dtype=np.float64)
        te = None if self.target is None else self.target.init((problem.dim,))
        return FedProxState(x=x, t=0, target=te)

    def centre(self, state: FedProxState) -> np.ndarray:
        """The penalty centre: x_t, or the TE target once a global model has been ensembled."""
        if not isinstance(state, FedProxState):
            raise InvalidProblemError(
                f"state must be a FedProxState (from FedProx.init), got {state!r:.80} ({type(state).__name__})")
        if self.target is None:
            return state.x
        return self.target.centre(require_ensemble(state.target), state.x)

    def round(self, state: FedProxState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[FedProxState, RoundInfo]:
        plan = self._plan(problem) if participation is None else None
        part = plan.participants if plan is not None else self.participants(problem, participation, rng, state.t)
        if part.m == 0:   # G_t = G_{t-1} still enters the ensemble (Alg. 2 runs every round)
            te = state.target if self.target is None else self.target.update(require_ensemble(state.target), state.x)
            return FedProxState(x=state.x, t=state.t + 1, target=te), empty_round(problem.dim)
        X0 = _shared_rows(state.x, part.m)
        C = X0 if self.target is None else _shared_rows(self.centre(state), part.m)
        objective = LocalObjective.proximal(float(self.mu), C)
        if plan is not None and plan.lr is not None and self.solver == "gd":   # full participation, cached
            # y - x formed in place by the local loop, in its blocks (model_change_rows)
            delta, _ = local_descent(problem, X0, part.clients, part.steps, plan.lr, rng, objective,
                                     bounds=part.bounds, finish=model_change_rows(state.x))
        else:
            Y = penalised_local_models(problem, part.clients, part.steps, X0, objective, self.solver,
                                       self.lr, rng)
            delta = np.subtract(Y, state.x, out=Y)        # Y - x in place: Y is this round's own array
        w = (plan.weights(problem, self.aggregation) if plan is not None
             else aggregation_weights(problem, part.clients, self.aggregation))
        x = state.x + _server_step(self.server_lr, w @ delta)
        te = state.target if self.target is None else self.target.update(require_ensemble(state.target), x)
        comm = DeferredCommunication(delta, X0)          # measured when read
        return FedProxState(x=x, t=state.t + 1, target=te), RoundInfo(part.clients, part.steps, comm)


def FedProxTE(*, beta: float, **kwargs: Any) -> FedProx:
    """FedProx-TE (BetterObjects Alg. 2): ``FedProx(target=TemporalEnsemble(beta=beta), **kwargs)``."""
    if "target" in kwargs:
        raise InvalidHyperparameterError("FedProxTE sets target itself; pass beta only")
    return FedProx(target=TemporalEnsemble(beta=beta),
                   **known_keywords("FedProxTE", kwargs, FedProx, exclude=("target",)))
