"""FedElasticNet (FedElasticNet, Alg. 1-3; docs/theory/index.md#algorithms): elastic-net local penalties
lambda_2/2 ||theta - x||^2 + lambda_1 ||theta - x||_1 and eps-thresholding of transmitted
changes, on top of FedAvg/FedProx, SCAFFOLD or FedDyn.

One class, :class:`FedElasticNet`, with ``base`` selecting the algorithm:

``base="fedprox"`` (alias ``"fedavg"``; FedElasticNet Alg. 1, eq. 4)
    theta_k = argmin_theta f_k(theta) + lambda_2/2 ||theta - x||^2 + lambda_1 ||theta - x||_1,
    x <- x + eta_g sum_{k in P} w_k Delta~_k.
    The argmin is exact (``solver="exact"``: accelerated proximal gradient
    with soft-thresholding around x, :func:`accelerated_l1_solve`, or
    closed form / Newton when lambda_1 = 0;
    ``solver="cvxpy"``: a cross-check for small problems) or replaced by
    ``local_steps`` (sub)gradient steps (``solver="gd"``) with
    gradient g_k + lambda_2 (theta - x) + lambda_1 sign(theta - x).  Alg. 1
    prints the weights n_k/n summed over P without renormalising
    (``aggregation="as_printed"``: w_k = n_k/n with n the samples of all
    clients, or p_k when the federation has no sample counts); the default is the package's
    w_k = p_k / sum_P p_j, and both coincide under full participation
    with p_k = n_k/n.  FedElasticNet treats "FedAvg + elastic net"
    and "FedProx + elastic net" as the same algorithm (lambda_2 is FedProx's
    mu); both names select it.

``base="scaffold"`` (FedElasticNet Alg. 2, eq. 7)
    SCAFFOLD (see ``scaffold.py``) whose local step adds
    lambda_2 (theta - x) + lambda_1 sign(theta - x) to the corrected gradient;
    the control update is option II of Alg. 2 (or option I on request).

``base="feddyn"`` (FedElasticNet Alg. 3, eq. 10)
    FedDyn (see ``feddyn.py``) with alpha = lambda_2 and the l1 term in the
    local objective; grad_k <- grad_k - lambda_2 Delta_k - lambda_1 sign(Delta_k),
    h <- h - (lambda_2/m) sum Delta~_k - (lambda_1/m) sum sign(Delta~_k),
    x <- mean_P theta_k - h / lambda_2, with sign(0) = 0 as printed
    (``subgradient="sign"``).  Where the l1 term pins a coordinate
    (Delta_k(j) = 0) the printed update leaves grad_k != grad f_k(theta_k), so
    eq. 11 and Lemma B.2 (h = (1/m) sum_k grad f_k(theta_k)) fail and the
    iteration need not converge to the minimiser of (1/m) sum f_k;
    ``subgradient="kkt"`` uses the subgradient certified by the exact solve
    instead (grad_k <- grad f_k(theta_k), exact solvers only; the client then
    also sends that subgradient on its pinned coordinates), which restores
    both (see ``feddyn.feddyn_round``).

Thresholding (FedElasticNet section 3): the transmitted change is
Delta~_k(j) = 0 where |Delta_k(j)| <= eps, else Delta_k(j); the server uses
Delta~_k.  Communication is measured with ``up_kind="sparse"`` when eps > 0
(non-zeros, entropy at bin width 0.01, bits) on the transmitted values.
With lambda_1 = 0 and eps = 0 each variant is its base algorithm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from .._validate import choice, positive
from ..compression import Communication, threshold
from ..errors import DivergenceError, InvalidHyperparameterError
from ..participation import Participation
from ..problems.base import Federation
from .base import AGGREGATIONS, Algorithm, RoundInfo, aggregation_weights, resolve_per_client
from .fedavg import FedAvgState, empty_round
from .invariants import LinearInvariant, total_minus_sum
from .feddyn import FedDynState, check_solver_settings, feddyn_init, feddyn_round, solve_local
from .local import LocalObjective, accelerated_l1_solve
from .scaffold import SCAFFOLD_OPTIONS, ScaffoldState, scaffold_init, scaffold_round
from ..aliases import Rate, Steps

__all__ = ["FedElasticNet", "ELASTICNET_BASES", "cvxpy_local_solve", "accelerated_l1_solve",
           "printed_weights"]

ELASTICNET_BASES = ("fedavg", "fedprox", "scaffold", "feddyn")
SUBGRADIENTS = ("sign", "kkt")
_SOLVERS = {"fedavg": ("exact", "cvxpy", "gd"), "fedprox": ("exact", "cvxpy", "gd"),
            "feddyn": ("exact", "cvxpy", "gd"), "scaffold": ("gd",)}


def printed_weights(problem: Federation, clients: np.ndarray) -> np.ndarray:
    """FedElasticNet Alg. 1 line 7 weights n_k / n (n = sum over *all* clients), not
    renormalised over the participants; the federation weights p_k when it
    has no sample counts."""
    if problem.n_samples is not None:
        n = np.asarray(problem.n_samples, dtype=np.float64)
        return n[clients] / n.sum()
    return problem.weights[clients]


def cvxpy_local_solve(problem: Federation, clients: np.ndarray, objective: LocalObjective,
                      Y0: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 with cvxpy, one row at a time.

    A cross-check of :func:`~fltheory.algorithms.local.exact_local_solve` for small
    problems (it loops over the rows: one conic program per client).  Supports
    every federation with the hook ``Federation.cvxpy_client_loss`` (quadratic
    and binary logistic clients ship one); ``tol``/``max_iter`` are
    accepted for signature compatibility.  CLARABEL runs with gap and
    feasibility tolerances 1e-10; the exponential cone of the logistic loss
    still limits the accuracy to about 1e-6.
    """
    import cvxpy as cp

    m, d = Y0.shape
    D = np.zeros((m, d)) if objective.D is None else objective.D
    b = np.zeros((m, d)) if objective.b is None else objective.b
    out = np.empty((m, d))
    for r in range(m):                      # one convex program per row (cross-check only)
        i = int(clients[r])
        y = cp.Variable(d)
        f = problem.cvxpy_client_loss(i, y)
        expr = f + 0.5 * cp.sum(cp.multiply(D[r], cp.square(y))) - b[r] @ y
        if objective.has_l1 and objective.l1 is not None and objective.z is not None:
            expr = expr + float(objective.l1[r]) * cp.norm1(y - objective.z[r])
        prob = cp.Problem(cp.Minimize(expr))
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10,
                   tol_ktratio=1e-10, max_iter=500)
        if y.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
            raise DivergenceError(f"cvxpy local solve failed for client {i}: status {prob.status}")
        out[r] = y.value
    return out


@dataclass(frozen=True, kw_only=True, eq=False)
class FedElasticNet(Algorithm):
    """FedElasticNet on a chosen base algorithm (see module docstring).

    Parameters
    ----------
    base : {"fedprox", "fedavg", "scaffold", "feddyn"}
    lambda1 : float >= 0
        l1 coefficient lambda_1 of ||theta - x||_1.
    lambda2 : float >= 0
        l2 coefficient lambda_2 (> 0 for ``base="feddyn"``, where it is FedDyn's alpha).
    eps : float >= 0
        Threshold: transmitted entries with |Delta(j)| <= eps are zeroed (0 keeps all).
    solver : {"exact", "cvxpy", "gd"}
        Local solve for Alg. 1 and 3; Alg. 2 (SCAFFOLD) always takes gradient steps.
    lr, local_steps : float / int or (N,) arrays
        Local rate and nominal steps, for ``solver="gd"`` (and always for SCAFFOLD).
    server_lr : float
        eta_g for Alg. 1 and 2 (Alg. 3 has no server rate: must be 1).
    option : {"I", "II"}
        SCAFFOLD control update (Alg. 2 prints option II).
    subgradient : {"sign", "kkt"}
        l1 subgradient in Alg. 3 lines 5 and 11 (``base="feddyn"``): sign(Delta)
        with sign(0) = 0 as printed, or the one certified by the exact local
        solve (needs ``solver`` "exact" or "cvxpy").
    aggregation : {"weights", "samples", "uniform", "as_printed"}
        Alg. 1 server weights; "as_printed" is line 7 literally, w_k = n_k/n
        (p_k without sample counts) summed over P without renormalisation.
    """

    name: ClassVar[str] = "FedElasticNet"
    base: str = "fedprox"
    lambda1: float = 0.0
    lambda2: float = 0.0
    eps: float = 0.0
    solver: str | None = None
    lr: Rate | None = None
    local_steps: Steps | None = None
    server_lr: float = 1.0
    option: str = "II"
    aggregation: str = "weights"
    subgradient: str = "sign"

    def __post_init__(self) -> None:
        choice("base", self.base, ELASTICNET_BASES)
        positive("lambda1", self.lambda1, allow_zero=True)
        positive("lambda2", self.lambda2, allow_zero=self.base != "feddyn")
        positive("eps", self.eps, allow_zero=True)
        positive("server_lr", self.server_lr)
        choice("option", self.option, SCAFFOLD_OPTIONS)
        choice("aggregation", self.aggregation, AGGREGATIONS + ("as_printed",))
        if self.base == "feddyn" and self.server_lr != 1.0:
            raise InvalidHyperparameterError(
                f"base='feddyn' (FedElasticNet Alg. 3) has no server rate; got server_lr={self.server_lr!r}, "
                "expected 1.0")
        check_solver_settings(self._solver, self.lr, self.local_steps, _SOLVERS[self.base])
        choice("subgradient", self.subgradient, SUBGRADIENTS)
        if self.subgradient == "kkt" and (self.base != "feddyn" or self._solver == "gd"):
            raise InvalidHyperparameterError(
                "subgradient='kkt' (the subgradient certified by an exact local solve) needs "
                f"base='feddyn' with solver 'exact' or 'cvxpy', got base={self.base!r}, "
                f"solver={self._solver!r}")

    @property
    def _solver(self) -> str:
        if self.solver is not None:
            return self.solver
        return "gd" if self.base == "scaffold" else "exact"

    @property
    def _exact(self):
        return cvxpy_local_solve if self._solver == "cvxpy" else accelerated_l1_solve

    def nominal_steps(self, problem: Federation) -> np.ndarray:
        """(N,) nominal local steps: ``local_steps`` for gradient steps, 1 for exact solves."""
        if self._solver == "gd":
            return super().nominal_steps(problem)
        return np.ones(problem.n_clients, dtype=np.int64)


    def averaging_version(self) -> FedElasticNet:
        """The same algorithm with server rate ``server_lr = 1``."""
        return dataclasses.replace(self, server_lr=1.0)

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> Any:
        if self._solver == "gd":
            resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        if self.base == "scaffold":
            return scaffold_init(problem, x0)
        if self.base == "feddyn":
            return feddyn_init(problem, x0)
        return FedAvgState(x=np.array(x0, dtype=np.float64), t=0)

    def round(self, state: Any, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[Any, RoundInfo]:
        part = self.participants(problem, participation, rng, state.t)
        if self.base == "scaffold":
            assert isinstance(state, ScaffoldState)
            lr = resolve_per_client("lr", self.lr, problem.n_clients)
            return scaffold_round(state, problem, part, rng, lr=lr, server_lr=self.server_lr,
                                  option=self.option, lambda1=self.lambda1, lambda2=self.lambda2,
                                  eps=self.eps)
        if self.base == "feddyn":
            assert isinstance(state, FedDynState)
            return feddyn_round(state, problem, part, rng, alpha=self.lambda2, solver=self._solver,
                                lr=self.lr, lambda1=self.lambda1, eps=self.eps,
                                subgradient=self.subgradient, exact=self._exact)
        # Alg. 1: FedAvg / FedProx + elastic net
        d = problem.dim
        if part.m == 0:
            return replace(state, t=state.t + 1), empty_round(d)
        X0 = np.broadcast_to(state.x, (part.m, d))
        objective = LocalObjective.zero()
        if self.lambda2 != 0.0:
            objective = objective + LocalObjective.proximal(self.lambda2, X0)
        if self.lambda1 != 0.0:
            objective = objective + LocalObjective.l1_term(self.lambda1, X0)
        Y = solve_local(problem, part, objective, X0, rng, solver=self._solver, lr=self.lr,
                        exact=self._exact)
        delta = Y - state.x
        sent = threshold(delta, self.eps) if self.eps > 0 else delta
        if self.aggregation == "as_printed":
            w = printed_weights(problem, part.clients)   # Alg. 1 line 7: n_k/n, not renormalised
        else:
            w = aggregation_weights(problem, part.clients, self.aggregation)
        x = state.x + self.server_lr * (w @ sent)
        comm = Communication.measure(sent, X0, up_kind="sparse" if self.eps > 0 else "dense")
        return FedAvgState(x=x, t=state.t + 1), RoundInfo(part.clients, part.steps, comm)

    # --- linear invariants (exact theory) --------------------------------------------------
    def linear_invariants(self, problem: Federation) -> tuple[LinearInvariant, ...]:
        """The base algorithm's conserved functionals, where they survive the elastic net.

        * ``base="scaffold"``: N c - sum_i c_i, as for SCAFFOLD (the l1/l2 terms only
          change the local steps, thresholding only the model change; the control
          update is SCAFFOLD's, so the proof of ``Scaffold.linear_invariants`` holds).
        * ``base="feddyn"`` with ``eps = 0`` and (``lambda1 = 0`` or
          ``subgradient="sign"``): N h - sum_k grad_k.  Proof: grad_k^+ = grad_k
          - lambda2 Delta_k - lambda1 sign(Delta_k) and h^+ = h - (lambda2/N)
          sum Delta_k - (lambda1/N) sum sign(Delta_k) use the same Delta_k (no
          thresholding), so N h - sum grad_k does not change.  With ``eps > 0`` the
          server sees the thresholded change while the client uses its own, and with
          ``subgradient="kkt"`` the server's sign(Delta_k) equals the client's
          certified subgradient only to the solver's accuracy: nothing is declared,
          and an eigenvalue 1 of the map is then reported as unclassified.
        * ``base="fedprox"``: none (the state is x alone)."""
        if self.base == "scaffold":
            return (total_minus_sum("N c - sum_i c_i", "c", "c_clients", problem.n_clients),)
        if self.base == "feddyn" and self.eps == 0.0 and (self.lambda1 == 0.0 or self.subgradient == "sign"):
            return (total_minus_sum("N h - sum_k grad_k", "h", "grads", problem.n_clients),)
        return ()
