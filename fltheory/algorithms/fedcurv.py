"""FedCurv (Shoham et al.; BetterObjects eq. 2), FedCL (BetterObjects section 2.1) and their
temporal-ensembling variants (BetterObjects Alg. 2); docs/theory/index.md#algorithms.

**FedCurv** (``fisher="client"``).  Participant s of round t minimises

    h_s(y) = f_s(y) + alpha sum_{j in S_t \\ s} (y - w_j)^T diag(I_j) (y - w_j)   (BetterObjects eq. 2)

where w_j is the local model client j obtained the last time it trained and
I_j the Fisher diagonal at w_j (the federation's ``fisher_diag``: for
quadratic clients the true Fisher diag(H_j) of the unit-noise Gaussian model,
for logistic clients whatever ``LogisticFederation.fisher_diag`` documents, for
neural clients the *empirical* Fisher (1/n_j) sum of squared per-sample gradients,
the usual estimate for networks; the two differ, e.g. the empirical one vanishes
where a network fits its data exactly).
Only clients that have trained before contribute (round 1 has no penalty: no
previous local models exist); with full participation w_j, I_j are exactly
those of the previous round.  The server needs only the sums
U = sum_{j in S} I_j, V = sum_{j in S} I_j * w_j; client s uses
U - I_s and V - I_s * w_s (computed here as sums over j != s,
:func:`sum_of_others`, to avoid cancellation), i.e. the diagonal quadratic term
D = 2 alpha (U - u_s), b = 2 alpha (V - v_s) of
:class:`~fltheory.algorithms.local.LocalObjective`.  After training, each
participant stores w_s = y_s and I_s = fisher_diag(y_s) (a participant that
completed no step stores the received model).

**FedCL** (``fisher="proxy"``).  BetterObjects: FedCL "keeps a proxy dataset at the
central node so that the calculation of the Fisher information matrix can be
completed in the center".  The server computes I_P = Fisher diagonal of the
proxy at the global model it sends, and every participant minimises

    h_s(y) = f_s(y) + alpha (y - c)^T diag(I_P) (y - c),   c = x_t,

the single-term form of eq. 2 centred at the global model (as in Yao and
Sun's FedCL, the paper BetterObjects cites; BetterObjects prints no FedCL formula, so
the weight is eq. 2's alpha with one Fisher term).  ``proxy`` is a Federation
(I_P = sum_i p_i fisher_diag_i(x_t) over its clients) or a callable
x -> (d,) Fisher diagonal.

**TE** (``target=TemporalEnsemble(beta)``): see :mod:`.targets`.  With
``of="global"`` every centre (w_j, or c for FedCL) becomes the ensemble T of
the global models; with ``of="local"`` (client Fisher only) each w_j becomes
the ensemble of client j's own past local models.

Local steps: y^{k+1} = y^k - eta_s grad h_s(y^k) (``solver="gd"``) or the
exact minimiser (``solver="exact"``); then x_{t+1} = x_t + eta_g sum w_i Delta_i.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, known_keywords, per_client, positive
from ..compression import Communication
from ..errors import InvalidHyperparameterError, InvalidProblemError
from ..participation import Participation
from ..problems.base import Federation
from .base import AGGREGATIONS, Algorithm, RoundInfo, aggregation_weights, resolve_per_client
from .fedavg import empty_round
from .fedprox import SOLVERS, check_target, penalised_local_models
from .local import LocalObjective
from .targets import EnsembleState, TemporalEnsemble, require_ensemble
from ..aliases import Rate, Steps

__all__ = ["FedCurv", "FedCurvState", "FedCurvTE", "FedCL", "FISHERS", "proxy_fisher",
           "sum_of_others"]

FISHERS = ("client", "proxy")


def proxy_fisher(proxy: Federation | Callable[[np.ndarray], Any], x: np.ndarray) -> np.ndarray:
    """I_P(x): the proxy's Fisher diagonal at the server model x -> (d,).

    Federation proxy: sum_i p_i fisher_diag_i(x) (its weighted clients pooled);
    callable: ``proxy(x)``, which must return a finite non-negative (d,) array.
    """
    d = x.shape[0]
    if isinstance(proxy, Federation):
        if proxy.dim != d:
            raise InvalidProblemError(f"proxy federation has dim {proxy.dim}, the problem has dim {d}")
        return proxy.weights @ proxy.fisher_diag(np.broadcast_to(x, (proxy.n_clients, d)))
    out = np.asarray(proxy(x.copy()), dtype=np.float64)
    if out.shape != (d,) or not np.all(np.isfinite(out)) or np.any(out < 0):
        raise InvalidProblemError(
            f"proxy Fisher callable must return a finite non-negative array of shape ({d},), "
            f"got shape {out.shape}")
    return out


def sum_of_others(a: np.ndarray) -> np.ndarray:
    """Row r of the result is sum_{j != r} a_j (a: (m, d)), as a sum before r plus
    a sum after r (cumulative sums, O(m d)).

    Mathematically U - a_r with U = sum_j a_j, which is what a client computes
    from the server's broadcast U; the subtraction, however, cancels
    catastrophically when a_r dominates (|a_r| = 1e6, the others 1e-10: the
    difference is pure rounding), so the sum over j in S \\ s of BetterObjects eq. 2
    is formed without it."""
    m = a.shape[0]
    out = np.zeros_like(a)
    if m > 1:
        out[1:] = np.cumsum(a[:-1], axis=0)                       # sum_{j < r}
        out[:-1] += np.cumsum(a[:0:-1], axis=0)[::-1]             # sum_{j > r}
    return out


@dataclass(frozen=True)
class FedCurvState:
    """x: server model; t: completed rounds; W, I: (N, d) last local model and its
    Fisher diagonal per client; seen: (N,) has the client trained; target: TE state."""

    x: np.ndarray
    t: int
    W: np.ndarray
    I: np.ndarray
    seen: np.ndarray
    target: EnsembleState | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class FedCurv(Algorithm):
    """FedCurv / FedCL with an optional temporal-ensembling target (module docstring).

    Parameters
    ----------
    lr : float or (N,) array
        Client rates eta_i > 0.
    local_steps : int or (N,) array
        Nominal local steps E_i >= 1 (the exact solver uses 1).
    alpha : float >= 0
        Penalty weight of BetterObjects eq. 2.
    fisher : {"client", "proxy"}
        FedCurv (client Fisher at the previous local models) or FedCL (proxy
        Fisher at the server model).
    proxy : Federation or callable, required for ``fisher="proxy"``.
    solver : {"gd", "exact"}
    aggregation : {"weights", "samples", "uniform"}
    server_lr : float > 0
    target : TemporalEnsemble or None
    """

    name: ClassVar[str] = "FedCurv"
    lr: Rate = 0.1
    local_steps: Steps = 10
    alpha: float = 0.1
    fisher: str = "client"
    proxy: Any = None
    solver: str = "gd"
    aggregation: str = "weights"
    server_lr: float = 1.0
    target: TemporalEnsemble | None = None

    def __post_init__(self) -> None:
        per_client("lr", self.lr, None)
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        positive("alpha", self.alpha, allow_zero=True)
        choice("fisher", self.fisher, FISHERS)
        choice("solver", self.solver, SOLVERS)
        choice("aggregation", self.aggregation, AGGREGATIONS)
        positive("server_lr", self.server_lr)
        if self.fisher == "proxy":
            if self.proxy is None or not (isinstance(self.proxy, Federation) or callable(self.proxy)):
                raise InvalidHyperparameterError(
                    f"fisher='proxy' (FedCL) needs proxy= a Federation or a callable x -> (d,) "
                    f"Fisher diagonal, got {self.proxy!r}")
        elif self.proxy is not None:
            raise InvalidHyperparameterError("proxy= is used only with fisher='proxy' (FedCL)")
        check_target(self.target, allow_local=self.fisher == "client")

    def hyperparameters(self) -> dict[str, Any]:
        out = super().hyperparameters()
        out["target"] = None if self.target is None else self.target.describe()
        if self.proxy is not None:
            out["proxy"] = repr(self.proxy) if isinstance(self.proxy, Federation) \
                else getattr(self.proxy, "__name__", type(self.proxy).__name__)
        return out

    def nominal_steps(self, problem: Federation) -> np.ndarray:
        if self.solver == "exact":
            return np.ones(problem.n_clients, dtype=np.int64)
        return super().nominal_steps(problem)


    def averaging_version(self) -> FedCurv:
        """The same algorithm with server rate ``server_lr = 1``; InvalidHyperparameterError with a
        temporal-ensembling target."""
        if self.target is not None:
            raise InvalidHyperparameterError(
                f"{self.name} with a temporal-ensembling target depends on past models, "
                "not on x alone: no operator T(x)")
        return dataclasses.replace(self, server_lr=1.0)

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> FedCurvState:
        resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        N, d = problem.n_clients, problem.dim
        if isinstance(self.proxy, Federation) and self.proxy.dim != d:
            raise InvalidProblemError(f"proxy federation has dim {self.proxy.dim}, the problem has dim {d}")
        te = None
        if self.target is not None:
            te = self.target.init((N, d) if self.target.of == "local" else (d,))
        return FedCurvState(x=np.array(x0, dtype=np.float64), t=0, W=np.zeros((N, d)),
                            I=np.zeros((N, d)), seen=np.zeros(N, dtype=bool), target=te)

    # ------------------------------------------------------------------ penalty
    def _objective(self, state: FedCurvState, clients: np.ndarray) -> tuple[LocalObjective, np.ndarray]:
        """The round's penalty as (D, b) rows, and what the server sends beyond x."""
        m, d = clients.shape[0], state.x.shape[0]
        a2 = 2.0 * float(self.alpha)
        if self.fisher == "proxy":
            Ip = proxy_fisher(self.proxy, state.x)
            c = state.x if self.target is None else self.target.centre(require_ensemble(state.target), state.x)
            D = np.broadcast_to(a2 * Ip, (m, d))
            b = np.broadcast_to(a2 * Ip * c, (m, d))
            return LocalObjective.diagonal(D, b), Ip[None, :]
        centres = state.W[clients]
        if self.target is not None:
            ensemble = require_ensemble(state.target)
            if self.target.of == "local":
                centres = self.target.centre(
                    EnsembleState(ensemble.hat[clients], ensemble.count[clients]), centres)
            elif int(ensemble.count) > 0:
                centres = np.broadcast_to(self.target.centre(require_ensemble(state.target), state.x), (m, d))
        u = np.where(state.seen[clients][:, None], state.I[clients], 0.0)
        v = u * centres
        D = a2 * sum_of_others(u)
        b = a2 * sum_of_others(v)
        return LocalObjective.diagonal(D, b), np.hstack([D, b])

    def round(self, state: FedCurvState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[FedCurvState, RoundInfo]:
        part = self.participants(problem, participation, rng, state.t)
        te_global = self.target is not None and self.target.of == "global"
        if part.m == 0:
            te = (self.target.update(require_ensemble(state.target), state.x)
                  if te_global and self.target is not None else state.target)
            return (FedCurvState(x=state.x, t=state.t + 1, W=state.W, I=state.I, seen=state.seen,
                                 target=te), empty_round(problem.dim))
        d = problem.dim
        X0 = np.broadcast_to(state.x, (part.m, d))
        objective, sent = self._objective(state, part.clients)
        Y = penalised_local_models(problem, part.clients, part.steps, X0, objective, self.solver,
                                   self.lr, rng)
        delta = Y - state.x
        w = aggregation_weights(problem, part.clients, self.aggregation)
        x = state.x + self.server_lr * (w @ delta)
        W, I, seen, te = state.W, state.I, state.seen, state.target
        if self.fisher == "client":
            W = W.copy()
            I = I.copy()
            seen = seen.copy()
            W[part.clients] = Y
            I_new = problem.fisher_diag(Y, part.clients)
            I[part.clients] = I_new
            seen[part.clients] = True
            up = np.hstack([delta, I_new])
            if self.target is not None and self.target.of == "local":
                te = self.target.update(require_ensemble(state.target), Y, rows=part.clients)
        else:
            up = delta
        if te_global and self.target is not None:
            te = self.target.update(require_ensemble(state.target), x)
        down = np.hstack([X0, np.broadcast_to(sent, (part.m, sent.shape[1]))])
        comm = Communication.measure(up, down)
        return (FedCurvState(x=x, t=state.t + 1, W=W, I=I, seen=seen, target=te),
                RoundInfo(part.clients, part.steps, comm))


def FedCL(*, proxy: Any, **kwargs: Any) -> FedCurv:
    """FedCL: ``FedCurv(fisher="proxy", proxy=proxy, **kwargs)`` (server-side proxy Fisher)."""
    return FedCurv(fisher="proxy", proxy=proxy,
                   **known_keywords("FedCL", kwargs, FedCurv, exclude=("fisher", "proxy")))


def FedCurvTE(*, beta: float, of: str | None = None, **kwargs: Any) -> FedCurv:
    """FedCurv-TE / FedCL-TE (BetterObjects Alg. 2):
    ``FedCurv(target=TemporalEnsemble(beta=beta, of=of), **kwargs)``.

    ``of`` defaults to the reading under which beta = 0 is the base algorithm
    exactly: ``"local"`` for client Fisher (FedCurv centres each penalty at the
    previous local model w_j, so those are ensembled) and ``"global"`` for the
    proxy Fisher (FedCL centres at the global model: Alg. 2 as printed, the
    variant BetterObjects evaluates).  Pass ``of="global"`` with client Fisher for
    Alg. 2's literal replacement of every w_j by T (then beta = 0 is not
    FedCurv)."""
    if "target" in kwargs:
        raise InvalidHyperparameterError("FedCurvTE sets target itself; pass beta (and of) only")
    if of is None:
        of = "global" if kwargs.get("fisher", "client") == "proxy" else "local"
    return FedCurv(target=TemporalEnsemble(beta=beta, of=of),
                   **known_keywords("FedCurvTE", kwargs, FedCurv, exclude=("target",)))
