"""FedDyn (Acar et al., 2021; docs/theory/index.md#algorithms; FedElasticNet eq. 8-9 and Alg. 3 with lambda_1 = 0).

State [x, h, grad_k]: server model x, server correction h (d,) and the
client gradient states grad_k (N, d), all corrections starting at 0.
Round t with participants P, m = N the total number of clients:

    theta_k = argmin_theta f_k(theta) - <grad_k, theta> + (alpha/2) ||theta - x||^2,   k in P,
    grad_k <- grad_k - alpha (theta_k - x),
    h      <- h - (alpha/m) sum_{k in P} (theta_k - x),
    x      <- (1/|P|) sum_{k in P} theta_k - h / alpha.

Clients outside P keep theta_k and grad_k (FedElasticNet Alg. 3 lines 8-9).  With
the exact solver grad_k becomes grad f_k(theta_k) (the first-order condition,
FedElasticNet eq. 9).  ``solver="gd"`` replaces the argmin by ``local_steps``
gradient steps of rate ``lr`` from theta = x on the same local objective;
``solver="exact"`` solves it exactly (closed form on quadratics, Newton
otherwise; ``algorithms.local.exact_local_solve``).

Participation: the exact solver has one nominal step, so a participation
model that completes s_k = 0 steps marks the client inactive; a participant
with s_k = 0 returns theta_k = x (it changes neither grad_k nor h, and is
counted in the average over P).

Fixed point: the minimiser of the *uniform* average (1/m) sum_k f_k (at a
fixed point theta_k = x, so h = 0, while h = (1/m) sum_k grad_k and
grad_k = grad f_k(x)).  It equals x* of F = sum p_k f_k only when the
weights are equal.  Communication: d numbers up (theta_k - x) and d down (x).
``RoundInfo.extra``: ``local_change`` (theta_k - x of the participants, 0 for
s_k = 0) and ``sent`` (the transmitted, possibly thresholded, change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from .._validate import choice, per_client, positive
from ._reductions import column_sums
from ..compression import Communication, threshold
from ..errors import InvalidHyperparameterError
from ..participation import Participants, Participation
from ..problems.base import Federation
from .base import Algorithm, RoundInfo, resolve_per_client
from .fedavg import empty_round
from .invariants import LinearInvariant, total_minus_sum
from .local import LocalObjective, exact_local_solve, local_descent
from ..aliases import Rate, Steps

__all__ = ["FedDyn", "FedDynState", "FEDDYN_SOLVERS", "feddyn_round", "feddyn_init",
           "check_solver_settings"]

FEDDYN_SOLVERS = ("exact", "gd")


@dataclass(frozen=True)
class FedDynState:
    """x: server model (d,); h: server correction (d,); grads: client states grad_k (N, d);
    t: completed rounds."""

    x: np.ndarray
    h: np.ndarray
    grads: np.ndarray
    t: int


def feddyn_init(problem: Federation, x0: np.ndarray) -> FedDynState:
    """h = 0 and grad_k = 0 (FedElasticNet Alg. 3 input)."""
    d = problem.dim
    return FedDynState(x=np.array(x0, dtype=np.float64), h=np.zeros(d),
                       grads=np.zeros((problem.n_clients, d)), t=0)


def check_solver_settings(solver: str, lr: Rate | None, local_steps: Steps | None, solvers: tuple[str, ...]) -> None:
    """``solver="gd"`` needs ``lr`` and ``local_steps``; the exact solvers take neither."""
    choice("solver", solver, solvers)
    if solver == "gd":
        if lr is None or local_steps is None:
            raise InvalidHyperparameterError(
                f"solver='gd' needs lr and local_steps, got lr={lr!r}, local_steps={local_steps!r}")
        per_client("lr", lr, None)
        per_client("local_steps", local_steps, None, integer=True, minimum=1, strict=False)
    elif lr is not None or local_steps is not None:
        raise InvalidHyperparameterError(
            f"solver={solver!r} solves the local problem exactly and takes no lr/local_steps, "
            f"got lr={lr!r}, local_steps={local_steps!r}")


def solve_local(problem: Federation, part: Participants, objective: LocalObjective, X0: np.ndarray,
                rng: np.random.Generator, *, solver: str, lr: Rate | None,
                exact: Callable[..., np.ndarray] = exact_local_solve) -> np.ndarray:
    """Local models of the participants: exact argmin (rows with s_k > 0) or s_k gradient steps."""
    if solver == "gd":
        rates = resolve_per_client("lr", lr, problem.n_clients)[part.clients]
        Y, _ = local_descent(problem, X0, part.clients, part.steps, rates, rng, objective)
        return Y
    Y = np.array(X0, dtype=np.float64, copy=True)
    active = np.flatnonzero(part.steps > 0)
    if active.size:
        Y[active] = exact(problem, part.clients[active], objective.take(active), Y[active])
    return Y


def feddyn_round(state: FedDynState, problem: Federation, part: Participants,
                 rng: np.random.Generator, *, alpha: float, solver: str, lr: Rate | None,
                 lambda1: float = 0.0, eps: float = 0.0, subgradient: str = "sign",
                 exact: Callable[..., np.ndarray] = exact_local_solve
                 ) -> tuple[FedDynState, RoundInfo]:
    """One FedDyn round (shared with FedElasticNet Alg. 3, where alpha = lambda_2).

    With ``lambda1 > 0`` the local objective gains lambda1 ||theta - x||_1 and
    (FedElasticNet Alg. 3 lines 5 and 11)
        grad_k <- grad_k - alpha Delta_k - lambda1 s_k,
        h <- h - (alpha/m) sum Delta~_k - (lambda1/m) sum s~_k,
    with Delta_k = theta_k - x.  ``eps > 0`` thresholds the transmitted change
    (Delta~_k(j) = 0 where |Delta_k(j)| <= eps); the server only sees Delta~_k,
    the client updates grad_k with its own Delta_k.

    ``subgradient="sign"`` (as printed): s_k = sign(Delta_k), s~_k = sign(Delta~_k),
    sign(0) = 0.  On coordinates the l1 term pins (Delta_k(j) = 0) this breaks
    the first-order condition eq. 11 that Lemma B.2 relies on: grad_k is then
    *not* grad f_k(theta_k) there, and the iteration need not reach the
    minimiser of (1/m) sum f_k (see the tests).  ``subgradient="kkt"``
    (corrected reading, exact solvers only): s_k is the subgradient of
    ||.||_1 at Delta_k that eq. 11 certifies,
        s_k = (grad_k - grad f_k(theta_k) - alpha Delta_k) / lambda1,
    so grad_k <- grad f_k(theta_k) exactly (the left-hand side of line 5);
    s_k = sign(Delta_k) wherever Delta_k(j) != 0 (up to the solver's
    accuracy).  The server needs s_k where the received Delta~_k(j) = 0, so the
    client also sends those entries (counted in the uplink); elsewhere the
    server uses sign(Delta~_k).
    """
    d, N = problem.dim, problem.n_clients
    if part.m == 0:
        return replace(state, t=state.t + 1), empty_round(d)
    clients = part.clients
    x = state.x
    X0 = np.broadcast_to(x, (part.m, d))
    # f_k - <grad_k, theta> + alpha/2 ||theta - x||^2  ==  D = alpha, b = grad_k + alpha x
    objective = LocalObjective.diagonal(np.full((part.m, d), alpha), state.grads[clients] + alpha * X0)
    if lambda1 != 0.0:
        objective = objective + LocalObjective.l1_term(lambda1, X0)
    theta = solve_local(problem, part, objective, X0, rng, solver=solver, lr=lr, exact=exact)
    delta = theta - x
    grads = state.grads.copy()
    grads[clients] = state.grads[clients] - alpha * delta
    sent = threshold(delta, eps) if eps > 0 else delta
    total = column_sums(sent)                          # sum over P of Delta~_k (once: h and the mean)
    h = state.h - (alpha / N) * total
    up = sent
    if lambda1 != 0.0:
        if subgradient == "kkt":
            active = part.steps > 0
            G = state.grads[clients].copy()             # inactive rows: theta = x, unchanged
            G[active] = problem.client_grad(theta[active], clients[active])
            s = (state.grads[clients] - G - alpha * delta) / lambda1
            grads[clients] = G
            extra_up = np.where(sent == 0, s, 0.0)       # entries the server cannot infer
            h = h - (lambda1 / N) * column_sums(np.sign(sent) + extra_up)
            up = np.hstack([sent, extra_up])
        else:
            grads[clients] -= lambda1 * np.sign(delta)
            h = h - (lambda1 / N) * column_sums(np.sign(sent))
    x_new = x + total / part.m - h / alpha                # total / m: the bits of sent.mean(axis=0)
    comm = Communication.measure(up, X0, up_kind="sparse" if eps > 0 or up is not sent else "dense")
    info = RoundInfo(clients, part.steps, comm, {"local_change": delta, "sent": sent})
    return FedDynState(x=x_new, h=h, grads=grads, t=state.t + 1), info


@dataclass(frozen=True, kw_only=True, eq=False)
class FedDyn(Algorithm):
    """FedDyn with exact or gradient-step local solves (see module docstring).

    Parameters
    ----------
    alpha : float
        Dynamic regularisation alpha > 0.
    solver : {"exact", "gd"}
        Exact argmin of the local objective, or ``local_steps`` gradient steps.
    lr : float or (N,) array, only with ``solver="gd"``
    local_steps : int or (N,) array, only with ``solver="gd"``
    """

    name: ClassVar[str] = "FedDyn"
    alpha: float = 1.0
    solver: str = "exact"
    lr: Rate | None = None
    local_steps: Steps | None = None

    def __post_init__(self) -> None:
        positive("alpha", self.alpha)
        check_solver_settings(self.solver, self.lr, self.local_steps, FEDDYN_SOLVERS)

    def nominal_steps(self, problem: Federation) -> np.ndarray:
        """(N,) nominal local steps: ``local_steps`` for gd, 1 for the exact solver."""
        if self.solver == "gd":
            return super().nominal_steps(problem)
        return np.ones(problem.n_clients, dtype=np.int64)


    def averaging_version(self) -> FedDyn:
        """FedDyn itself: its server step x = mean(theta_i) - h/alpha has no rate to
        set to 1 (its round map carries h, so it is no operator on x alone)."""
        return self

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> FedDynState:
        if self.solver == "gd":
            resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        return feddyn_init(problem, x0)

    def round(self, state: FedDynState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[FedDynState, RoundInfo]:
        part = self.participants(problem, participation, rng, state.t)
        return feddyn_round(state, problem, part, rng, alpha=self.alpha, solver=self.solver,
                            lr=self.lr)

    # --- linear invariants (exact theory) --------------------------------------------------
    def linear_invariants(self, problem: Federation) -> tuple[LinearInvariant, ...]:
        """N h - sum_k grad_k (d functionals), conserved by every round.

        Proof: with Delta_k = theta_k - x, a round sets grad_k^+ = grad_k - alpha Delta_k
        for k in P and h^+ = h - (alpha/N) sum_{k in P} Delta_k, so
        N h^+ - sum_k grad_k^+ = N h - alpha sum_P Delta_k - sum_k grad_k
        + alpha sum_P Delta_k = N h - sum_k grad_k, whatever the local solver.
        The initial value is 0 (h = 0, grad_k = 0)."""
        return (total_minus_sum("N h - sum_k grad_k", "h", "grads", problem.n_clients),)
