"""EFL, Elastic Federated Learning (Ma et al.; EFL Alg. 1 and 2, eq. 2-6, sections 4.1-4.3).

State [x, x_client, R^G, R^k, u^k, v^k]: the server copy x of the global
model, the client copy x_client (what clients hold after applying the
compressed broadcasts), the server residual R^G (d,), the client residuals
R^k (N, d) and each client's latest reported u^k = diag(I_k), v^k = u^k * w^k
(N, d; zero until the client first reports).  U = sum_k u^k, V = sum_k v^k
over all N clients.

Round tau, participants P with completed steps s_k in {0..E_k}:

1. Local objective (eq. 2-3), with U, V from the reports of earlier rounds:
       F~_k(w) = f_k(w) + (lambda/2) w^T diag(U) w - lambda w^T V + const.
2. Client k with s_k > 0 starts at w = x_client and takes s_k steps (eq. 4)
       w <- w - eta_k (g_k(w) + lambda U * w - lambda V),
   forms Delta^k = R^k + (w_final - x_client), sends ST(Delta^k) and keeps
   R^k <- Delta^k - ST(Delta^k) (eq. 5); it reports u^k = diag(I_k(w_final))
   (``problem.fisher_diag``: the true Fisher on quadratic and logistic clients, the
   empirical one on neural clients, see ``fedcurv``) and v^k = u^k * w_final (Alg. 1,
   ClientUpdate).
3. Server (Alg. 1, eq. 6): Delta^G = R^G + sum_{k: s_k > 0} p_tau^k ST(Delta^k),
   x <- x + Delta^G (server copy, uncompressed), broadcast ST(Delta^G),
   R^G <- Delta^G - ST(Delta^G), x_client <- x_client + ST(Delta^G).

Conventions of this implementation:

* Alg. 1 prints the aggregation with the client's uncompressed Delta^k; the
  server only receives ST(Delta^k), so it aggregates ST(Delta^k) (docs/theory/index.md).
* Inactive clients (s_k = 0, or not drawn) cannot respond (section 4): they
  send nothing, keep R^k and their previous (u^k, v^k), and get no weight.
  The server step runs every round, also when nobody is active (then
  Delta^G = R^G: the server still flushes its residual, as Alg. 1 reads).
* One client copy x_client is shared by all clients: every client applies
  every broadcast ST(Delta^G) (Alg. 1's w^k_{tau E} = w^k_{(tau-1)E} + ST(Delta^G)).
  Conservation: x_client + R^G = x_0 + sum over rounds of sum_k p_tau^k ST(Delta^k).
* The server copy as printed (x <- x + Delta^G with Delta^G = R^G_old + ...)
  adds each server residual twice: once inside Delta^G of the round it was
  left over from, and again as R^G_old in the next round, so
  x - x_client = sum_{s <= tau} R^G_s (not R^G_tau).  ``server_update=
  "consistent"`` uses x <- x + Delta^G - R^G_old instead, which keeps
  x = x_client + R^G (every client contribution counted once).  Default
  ``"as_printed"``; with ``compression=None`` both coincide (R^G = 0).
* U = V = 0 before any report (round 1 is then plain local SGD).
* Aggregation weights p^k are the federation weights, *not* renormalised over
  the participants (eq. 6 sums p_tau^k Delta^k over all clients):
  ``weights="plain"``: p_tau^k = p^k; ``"adaptive"`` (section 4.2):
  p_tau^k = E_k p^k / s_k.  Assumption 5 bounds p_tau^k <= theta p^k; the
  adaptive rule satisfies it for theta >= max E_k, which is the default.
  The paper gives no rule for a weight above theta p^k:
  ``on_excess="raise"`` (default) raises AssumptionError, ``"clip"`` sets
  p_tau^k = theta p^k and records the clipped clients in ``RoundInfo.extra``.
* ``compression="st"`` is the ternary top-k of Alg. 2 with sparsity ``q``
  (k = max(floor(d q), 1)); ``compression=None`` transmits exactly (then the
  residuals stay 0 and x_client = x).  ST with q = 1 is still ternary (every
  entry becomes +-mean|T|), not the identity.
* Learning rate: eta_{k,tau} = lr_k * lr_schedule(tau) with tau = 0, 1, ...
  the number of completed rounds (the paper's eta_tau decays with tau, e.g.
  Theorem 1's 16E / (mu ((tau+1)E + gamma) E[sum p s])); constant when
  ``lr_schedule`` is None.

``RoundInfo.extra``: ``client_model`` (x_client after the round),
``weights`` (p_tau^k of the participants, 0 for inactive), ``weight_ratio``
(p_tau^k / p^k), ``clipped`` (clients whose weight was clipped), ``active``
(clients with s_k > 0), ``local_change`` (w_final - x_client of the active
clients), ``sent`` (their ST(Delta^k)) and ``broadcast`` (ST(Delta^G)).
ST keeps exactly k entries per message (``compression.st`` with
``ties="index"``; Alg. 2 as printed keeps every tie, which only differs when
magnitudes tie exactly).
Communication: ST(Delta^k) up as ternary plus (u^k, v^k) dense, ST(Delta^G)
down as ternary plus (U, V) dense, per active participant (the uplink entropy
mixes the ternary messages with the dense Fisher vectors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, in_unit_interval, integer, per_client, positive
from ..compression import Communication, st
from ..errors import AssumptionError, InvalidHyperparameterError
from ..participation import Participation
from ..problems.base import Federation
from .base import Algorithm, RoundInfo, resolve_per_client
from .invariants import LinearInvariant, difference
from .local import LocalObjective, local_descent
from ..aliases import Rate, Steps

__all__ = ["EFL", "EFLState", "EFL_WEIGHTS"]

EFL_WEIGHTS = ("plain", "adaptive")
_COMPRESSIONS = ("st", None)
_EXCESS = ("raise", "clip")
_SERVER_UPDATES = ("as_printed", "consistent")
_RATIO_TOL = 1e-12


@dataclass(frozen=True)
class EFLState:
    """x: server copy (d,); x_client: client copy (d,); residual_global: R^G (d,);
    residuals: R^k (N, d); u, v: latest reported u^k, v^k (N, d); t: completed rounds."""

    x: np.ndarray
    x_client: np.ndarray
    residual_global: np.ndarray
    residuals: np.ndarray
    u: np.ndarray
    v: np.ndarray
    t: int

    @property
    def U(self) -> np.ndarray:
        """U = sum_k u^k."""
        return self.u.sum(axis=0)

    @property
    def V(self) -> np.ndarray:
        """V = sum_k v^k."""
        return self.v.sum(axis=0)


@dataclass(frozen=True, kw_only=True, eq=False)
class EFL(Algorithm):
    """Elastic Federated Learning (see module docstring).

    Parameters
    ----------
    lr : float or (N,) array
        Local rate eta > 0.
    local_steps : int or (N,) array
        Maximum local steps E >= 1 per round.
    lam : float >= 0
        Elastic coefficient lambda of eq. 2.
    weights : {"plain", "adaptive"}
        p_tau^k = p^k, or E p^k / s_k (section 4.2).
    theta : float >= 1 or None
        Bound of Assumption 5, p_tau^k <= theta p^k; None means max_k E_k.
    on_excess : {"raise", "clip"}
        What to do when a weight exceeds theta p^k.
    compression : {"st", None}
        ST ternary top-k compression (Alg. 2), or none.
    error_feedback : bool
        Keep the residuals R^k and R^G and add them to the next message (Alg. 1,
        the default).  ``False`` sends ST(Delta^k) and ST(Delta^G) with the
        residuals discarded (R^k = R^G = 0): the ablation of EFL's
        error-feedback design.
    q : float in (0, 1]
        ST sparsity (fraction of entries kept).
    lr_schedule : callable(tau) -> float > 0, optional
        Round-dependent factor of the local rate (tau = completed rounds).
    server_update : {"as_printed", "consistent"}
        Server copy update: x <- x + Delta^G (Alg. 1 as printed) or
        x <- x + Delta^G - R^G_old (each client contribution counted once).
    """

    name: ClassVar[str] = "EFL"
    lr: Rate = 0.1
    local_steps: Steps = 10
    lam: float = 0.0
    weights: str = "plain"
    theta: float | None = None
    on_excess: str = "raise"
    compression: str | None = "st"
    error_feedback: bool = True
    q: float = 0.1
    server_update: str = "as_printed"
    lr_schedule: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        per_client("lr", self.lr, None)
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        positive("lam", self.lam, allow_zero=True)
        choice("weights", self.weights, EFL_WEIGHTS)
        choice("on_excess", self.on_excess, _EXCESS)
        choice("compression", self.compression, _COMPRESSIONS)
        choice("server_update", self.server_update, _SERVER_UPDATES)
        if not isinstance(self.error_feedback, (bool, np.bool_)):
            raise InvalidHyperparameterError(
                f"error_feedback must be True or False, got {self.error_feedback!r}")
        if self.lr_schedule is not None and not callable(self.lr_schedule):
            raise InvalidHyperparameterError(
                f"lr_schedule must be a callable tau -> factor or None, got {self.lr_schedule!r}")
        in_unit_interval("q", self.q)
        if self.theta is not None:
            th = positive("theta", self.theta)
            if th < 1.0:
                raise InvalidHyperparameterError(
                    f"theta (Assumption 5, p_tau^k <= theta p^k) must be >= 1, got {self.theta!r}")


    def averaging_version(self) -> EFL:
        """EFL itself: its server adds the weighted client changes at rate 1 already."""
        return self

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> EFLState:
        resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        x = np.array(x0, dtype=np.float64)
        N, d = problem.n_clients, problem.dim
        return EFLState(x=x, x_client=x.copy(), residual_global=np.zeros(d),
                        residuals=np.zeros((N, d)), u=np.zeros((N, d)), v=np.zeros((N, d)), t=0)

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor arguments for provenance; ``lr_schedule`` as its repr (JSON-safe)."""
        out = super().hyperparameters()
        if self.lr_schedule is not None:
            out["lr_schedule"] = repr(self.lr_schedule)
        return out

    def rate_factor(self, tau: int) -> float:
        """lr_schedule(tau), validated (1 without a schedule); ``tau`` is a round index >= 0."""
        integer("tau", tau, minimum=0, maximum=None)
        if self.lr_schedule is None:
            return 1.0
        return positive(f"lr_schedule({tau})", self.lr_schedule(tau))

    def _compress(self, T: np.ndarray) -> np.ndarray:
        return T.copy() if self.compression is None else st(T, self.q)

    def _aggregation(self, problem: Federation, clients: np.ndarray, steps: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(p_tau^k, p_tau^k / p^k, clipped clients) for participants with s_k > 0."""
        E_all = self.nominal_steps(problem)
        E = E_all[clients]
        p = problem.weights[clients]
        ratio = np.ones(clients.shape[0]) if self.weights == "plain" else E / steps
        theta = float(E_all.max()) if self.theta is None else float(self.theta)
        over = ratio > theta * (1.0 + _RATIO_TOL)
        clipped: list[int] = []
        if over.any():
            if self.on_excess == "raise":
                j = int(np.argmax(over))
                raise AssumptionError(
                    f"EFL Assumption 5 (p_tau^k <= theta p^k) fails: client {int(clients[j])} completed "
                    f"s = {int(steps[j])} of E = {int(E[j])} steps, weight ratio {ratio[j]:.6g} > "
                    f"theta = {theta:.6g}; pass on_excess='clip' to cap it")
            clipped = [int(c) for c in clients[over]]
            ratio = np.where(over, theta, ratio)
        return ratio * p, ratio, clipped

    def round(self, state: EFLState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[EFLState, RoundInfo]:
        part = self.participants(problem, participation, rng, state.t)
        d = problem.dim
        active = np.flatnonzero(part.steps > 0)
        clients, steps = part.clients[active], part.steps[active]
        m = clients.shape[0]
        lr = resolve_per_client("lr", self.lr, problem.n_clients)[clients] * self.rate_factor(state.t)
        W0 = np.broadcast_to(state.x_client, (m, d))
        U, V = state.U, state.V
        objective = LocalObjective.diagonal(np.broadcast_to(self.lam * U, (m, d)),
                                            np.broadcast_to(self.lam * V, (m, d)))
        Y = W0.copy()
        if m:
            Y, _ = local_descent(problem, W0, clients, steps, lr, rng, objective)
        ef = bool(self.error_feedback)
        T = (state.residuals[clients] + (Y - state.x_client)) if ef else (Y - state.x_client)
        sent = self._compress(T)
        residuals = state.residuals.copy()
        if ef:
            residuals[clients] = T - sent
        p_tau, ratio, clipped = self._aggregation(problem, clients, steps)
        delta_g = (state.residual_global + p_tau @ sent) if ef else p_tau @ sent
        broadcast = self._compress(delta_g[None, :])[0]
        u = state.u.copy()
        v = state.v.copy()
        if m:
            u[clients] = problem.fisher_diag(Y, clients)
            v[clients] = u[clients] * Y
        if self.server_update == "as_printed":
            x_new = state.x + delta_g                  # Alg. 1 / eq. 6: w^G += Delta^G
        else:
            x_new = state.x + (delta_g - state.residual_global)   # each contribution once
        new = EFLState(x=x_new, x_client=state.x_client + broadcast,
                       residual_global=(delta_g - broadcast) if ef else np.zeros(d),
                       residuals=residuals, u=u, v=v,
                       t=state.t + 1)
        kind = "dense" if self.compression is None else "ternary"
        comm = Communication.measure(sent, np.broadcast_to(broadcast, (m, d)),
                                     up_kind=kind, down_kind=kind) \
            + Communication.measure(np.hstack([u[clients], v[clients]]),
                                    np.broadcast_to(np.concatenate([U, V]), (m, 2 * d)))
        w_all = np.zeros(part.m)
        w_all[active] = p_tau
        r_all = np.zeros(part.m)
        r_all[active] = ratio
        extra = {"client_model": new.x_client.copy(), "weights": w_all, "weight_ratio": r_all,
                 "clipped": clipped, "active": clients, "local_change": Y - state.x_client,
                 "sent": sent, "broadcast": broadcast}
        return new, RoundInfo(part.clients, part.steps, comm, extra)

    # --- linear invariants (exact theory) --------------------------------------------------
    def linear_invariants(self, problem: Federation) -> tuple[LinearInvariant, ...]:
        """Conserved linear functionals of the EFL state (each family d or N d functionals).

        With Delta^G the server aggregate and B = compress(Delta^G) the broadcast,
        a round sets x_client^+ = x_client + B and (error feedback)
        R^G^+ = Delta^G - B, (no error feedback) R^G^+ = 0:

        * ``server_update="consistent"``: x^+ = x + Delta^G - R^G, hence
          x^+ - x_client^+ - R^G^+ = x - x_client - R^G when error feedback is on
          (any compression), and also without it when ``compression=None``
          (then B = Delta^G exactly);
        * ``server_update="as_printed"``, ``compression=None``: x^+ = x + Delta^G
          and B = Delta^G, hence x^+ - x_client^+ = x - x_client;
        * ``error_feedback=False``: the client residuals R^k are never written
          (they stay at their initial 0), so every entry of R^k is conserved.

        With ST compression and ``as_printed`` nothing in x - x_client is conserved
        (it accumulates the server residuals; the map is not affine anyway)."""
        out: list[LinearInvariant] = []
        exact = self.compression is None
        if self.server_update == "consistent" and (self.error_feedback or exact):
            out.append(LinearInvariant("x - x_client - R^G", {
                "x": np.ones((1, 1)), "x_client": -np.ones((1, 1)), "residual_global": -np.ones((1, 1))}))
        elif self.server_update == "as_printed" and exact:
            out.append(difference("x - x_client", "x", "x_client"))
        if not self.error_feedback:
            out.append(LinearInvariant("R^k (never written without error feedback)",
                                       {"residuals": np.eye(problem.n_clients)}))
        return tuple(out)
