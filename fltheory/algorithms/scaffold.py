"""SCAFFOLD (Karimireddy et al.; SCAFFOLD-v1, equations restated in docs/theory/index.md#algorithms).

State [x, c, c_i]: server model x, global control c and client controls c_i
(N, d), with c = (1/N) sum_i c_i kept as an invariant (all start at 0).
Round t with participants S (|S| = m), client i completing s_i local steps:

    y_i^0 = x,   y_i^{k+1} = y_i^k - eta_i (g_i(y_i^k) + c - c_i),   k = 0..s_i - 1,
    option I :  c_i^+ = g_i(x)                                  (a fresh oracle call at x),
    option II:  c_i^+ = c_i - c + (x - y_i^{s_i}) / (s_i eta_i)  (= mean of the s_i
                                                               gradients used, exact oracle),
    x <- x + (eta_g / |S|) sum_{i in S} (y_i - x),
    c <- c + (1/N) sum_{i in S} (c_i^+ - c_i).

Conventions of this implementation (the paper assumes every sampled client
completes K steps):

* option II divides by the client's *completed* steps s_i (not the nominal K),
  so c_i^+ stays the mean of the gradients the client actually used;
* a participant with s_i = 0 sends y_i - x = 0 (it keeps its share 1/|S| of
  the average, as in FedAvg) and leaves its control unchanged, in both options;
* option I's oracle calls are drawn *after* all local steps of the round, one
  batched call over the participants with s_i > 0 in ascending client order
  (docs/theory/index.md RNG order: participation, local steps, algorithm draws).

Averaging is uniform (1/|S| and 1/N, as in the paper), so the fixed point is
the minimiser of the uniform average (1/N) sum_i f_i; it equals x* of
F = sum p_i f_i when the weights are equal.  Communication: 2d numbers up
(y_i - x, c_i^+ - c_i) and 2d down (x, c) per participant.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from .._validate import choice, per_client, positive
from ..compression import threshold
from ..errors import InvalidProblemError
from ..participation import Participants, Participation
from ..problems.base import Federation
from ._reductions import column_sums
from .base import Algorithm, DeferredCommunication, RoundInfo, resolve_per_client
from .fedavg import empty_round, model_change_rows
from .invariants import LinearInvariant, total_minus_sum
from .local.objective import _shared_rows
from .local import LocalObjective, local_descent
from .local.blocking import BlockFinish, BlockPrepare
from ..aliases import Rate, Steps

__all__ = ["Scaffold", "ScaffoldState", "SCAFFOLD_OPTIONS", "scaffold_round"]

SCAFFOLD_OPTIONS = ("I", "II")


@dataclass(frozen=True)
class ScaffoldState:
    """x: server model (d,); c: global control (d,); c_clients: client controls (N, d);
    t: completed rounds."""

    x: np.ndarray
    c: np.ndarray
    c_clients: np.ndarray
    t: int


def scaffold_init(problem: Federation, x0: np.ndarray) -> ScaffoldState:
    """All controls zero, so c = mean c_i holds from the start."""
    d = problem.dim
    return ScaffoldState(x=np.array(x0, dtype=np.float64), c=np.zeros(d),
                         c_clients=np.zeros((problem.n_clients, d)), t=0)


def scaffold_round(state: ScaffoldState, problem: Federation, part: Participants,
                   rng: np.random.Generator, *, lr: np.ndarray, server_lr: float, option: str,
                   lambda1: float = 0.0, lambda2: float = 0.0, eps: float = 0.0
                   ) -> tuple[ScaffoldState, RoundInfo]:
    """One SCAFFOLD round for drawn participants ``part`` (shared with FedElasticNet Alg. 2).

    ``lr`` is the (N,) array of client rates.  ``lambda2`` and ``lambda1`` add
    lambda2 (y - x) + lambda1 sign(y - x) to the corrected local gradient
    (FedElasticNet Alg. 2, eq. 7); ``eps > 0`` zeroes transmitted model-change
    entries with |Delta(j)| <= eps (FedElasticNet section 3; the control change
    c_i^+ - c_i is sent dense).  With all three zero this is SCAFFOLD.
    """
    d = problem.dim
    state = _checked_controls(state, problem.n_clients, d)
    if part.m == 0:
        return replace(state, t=state.t + 1), empty_round(d)
    clients, steps = part.clients, part.steps
    identity = part.m == problem.n_clients and (part.identity or _is_identity(clients))
    rates = lr if identity else lr[clients]
    x, c = state.x, state.c
    X0 = _shared_rows(x, part.m)
    ci = state.c_clients if identity else state.c_clients[clients]     # read only below
    # gradient shift +(c - c_i): LocalObjective.linear(b) adds -b to the gradient;
    # ci_minus_c is formed once per round (the local loop subtracts it in place).  Without
    # the l2 term (whose objective adds it to lambda2 x at once) its rows are formed in the
    # blocks of the local loop, before their steps (prepare)
    prepare: BlockPrepare | None = None
    if lambda2 == 0.0:
        ci_minus_c = np.empty_like(ci)                 # float64: the controls are checked above

        def prepare(rows: slice) -> None:
            np.subtract(ci[rows], c, out=ci_minus_c[rows])
    else:
        ci_minus_c = ci - c
    objective = LocalObjective(b=ci_minus_c)           # = LocalObjective.linear: already a float64 array
    if lambda2 != 0.0:
        objective = objective + LocalObjective.proximal(lambda2, X0)
    if lambda1 != 0.0:
        objective = objective + LocalObjective.l1_term(lambda1, X0)
    bounds = part.bounds
    if bounds is not None and bounds[0] > 0:          # known: every participant completed a step
        every, done = True, None
    else:
        done = steps > 0
        every = bool(done.all())
    # option II with every participant stepping: the controls are per-row functions of the
    # final iterate, formed in the blocks of the local loop (see _option_ii_rows)
    ci_new: np.ndarray | None = None
    dc: np.ndarray | None = None
    finish = model_change_rows(x)
    if option == "II" and every:
        ci_new, dc = np.empty_like(ci), np.empty_like(ci)
        finish = _option_ii_rows(x, ci, ci_minus_c, steps, rates, bounds, ci_new, dc)
    delta, _ = local_descent(problem, X0, clients, steps, rates, rng, objective, bounds=bounds,
                             finish=finish, prepare=prepare)
    if option == "I":
        done = steps > 0 if done is None else done
        ci_new = ci.copy()
        if done.any():
            ci_new[done] = problem.stochastic_grad(X0[done], clients[done], rng)
    elif not every:
        assert done is not None
        ci_new = ci.copy()
        ci_new[done] = ci_minus_c[done] - delta[done] / (steps[done] * rates[done])[:, None]
    assert ci_new is not None
    if dc is None:
        dc = ci_new - ci
    sent = threshold(delta, eps) if eps > 0 else delta
    x_new = x + (server_lr / part.m) * column_sums(sent)
    c_new = c + column_sums(dc) / problem.n_clients
    if identity and every:
        C = ci_new                                     # every row replaced: no copy + scatter
    else:
        C = state.c_clients.copy()
        C[clients] = ci_new
    # every participant receives (x, c): a broadcast view, measured like the stacked copy
    down = _shared_rows(np.concatenate([x, c]), part.m)
    # measured when read; up = [sent | dc] is stacked then
    comm = DeferredCommunication((sent, dc), down, up_kind="sparse" if eps > 0 else "dense")
    new = ScaffoldState(x=x_new, c=c_new, c_clients=C, t=state.t + 1)
    return new, RoundInfo(clients, steps, comm)


def _option_ii_rows(x: np.ndarray, ci: np.ndarray, ci_minus_c: np.ndarray, steps: np.ndarray,
                    rates: np.ndarray, bounds: tuple[int, int] | None, ci_new: np.ndarray,
                    dc: np.ndarray) -> BlockFinish:
    """Per-block finishing step of option II when every participant completed s_i >= 1 steps
    (SCAFFOLD-v1, eq. 6, option II, with the completed steps s_i): on the rows of a block,

        Delta_i = y_i - x                                    (in place of y_i),
        c_i^+  = (c_i - c) - Delta_i / (s_i eta_i)            (into ``ci_new``),
        c_i^+ - c_i                                           (into ``dc``).

    (c_i - c) + (x - y_i)/(s_i eta_i) equals (c_i - c) - (y_i - x)/(s_i eta_i) exactly (IEEE
    negation is exact), so the shift of the local loop and Delta_i are reused.  Every
    operation is elementwise per row, so the bits do not depend on the blocks."""
    if bounds is not None and bounds[0] == bounds[1] and rates.strides == (0,):
        # one step count k and one rate: float(k) * rate is each entry of steps * rates
        # (int64 * float64 converts k exactly), and dividing by it is dividing by the column
        per_row: float | None = float(bounds[0]) * float(rates[0])
    else:
        per_row = None

    def finish(rows: slice, Y: np.ndarray) -> None:
        np.subtract(Y, x, out=Y)
        out = ci_new[rows]
        if per_row is not None:
            np.divide(Y, per_row, out=out)
        else:
            np.divide(Y, (steps[rows] * rates[rows])[:, None], out=out)
        np.subtract(ci_minus_c[rows], out, out=out)
        np.subtract(out, ci[rows], out=dc[rows])
    return finish


def _checked_controls(state: ScaffoldState, n_clients: int, d: int) -> ScaffoldState:
    """``state`` with controls that fit the problem: c of shape (d,) and c_clients of shape
    (N, d), float64 (what ``init`` builds).  Integer or narrower float controls (a state
    built by hand) are converted to float64 (exact for floats and for integers below 2^53);
    other shapes or kinds (complex, object) raise an InvalidProblemError naming what was
    given and what is expected (they would else fail inside numpy, or, for option I, have
    their new rows cast to the old dtype)."""
    c, C = state.c, state.c_clients
    c_shape = getattr(c, "shape", None)
    C_shape = getattr(C, "shape", None)
    if c_shape != (d,) or C_shape != (n_clients, d):
        raise InvalidProblemError(
            f"state.c must have shape ({d},) and state.c_clients shape ({n_clients}, {d}) (N = {n_clients} "
            f"clients, d = {d}), got c of shape {c_shape} and c_clients of shape {C_shape}: the state "
            "belongs to another problem")
    if c.dtype == np.float64 and C.dtype == np.float64:
        return state
    for name, a in (("c", c), ("c_clients", C)):
        if a.dtype.kind not in "biuf" or not np.can_cast(a.dtype, np.float64, casting="safe"):
            raise InvalidProblemError(
                f"state.{name} must hold real numbers (float64 as init builds it, or an integer or "
                f"narrower float type, converted to float64), got dtype {a.dtype}")
    return replace(state, c=np.asarray(c, dtype=np.float64), c_clients=np.asarray(C, dtype=np.float64))


def _is_identity(clients: np.ndarray) -> bool:
    """True when the participants are 0, 1, ..., N-1 in order."""
    return bool(np.array_equal(clients, np.arange(clients.shape[0])))


@dataclass(frozen=True, kw_only=True, eq=False)
class Scaffold(Algorithm):
    """SCAFFOLD with options I and II and client sampling (see module docstring).

    Parameters
    ----------
    lr : float or (N,) array
        Local rates eta_l > 0.
    local_steps : int or (N,) array
        Nominal local steps K >= 1 (participation may complete fewer).
    server_lr : float
        Global rate eta_g > 0.
    option : {"I", "II"}
        Control update: fresh gradient at x (I) or from the local change (II).
    """

    name: ClassVar[str] = "SCAFFOLD"
    lr: Rate = 0.1
    local_steps: Steps = 10
    server_lr: float = 1.0
    option: str = "II"

    def __post_init__(self) -> None:
        per_client("lr", self.lr, None)
        per_client("local_steps", self.local_steps, None, integer=True, minimum=1, strict=False)
        positive("server_lr", self.server_lr)
        choice("option", self.option, SCAFFOLD_OPTIONS)


    def averaging_version(self) -> Scaffold:
        """The same algorithm with server rate ``server_lr = 1`` (the control variates stay in the state)."""
        return dataclasses.replace(self, server_lr=1.0)

    def init(self, problem: Federation, x0: np.ndarray, rng: np.random.Generator) -> ScaffoldState:
        resolve_per_client("lr", self.lr, problem.n_clients)
        self.nominal_steps(problem)
        return scaffold_init(problem, x0)

    def round(self, state: ScaffoldState, problem: Federation, participation: Participation | None,
              rng: np.random.Generator) -> tuple[ScaffoldState, RoundInfo]:
        plan = self._plan(problem) if participation is None else None
        if plan is not None and plan.lr is not None:      # full participation, cached arrays
            part, lr = plan.participants, plan.lr
        else:
            part = self.participants(problem, participation, rng, state.t)
            lr = resolve_per_client("lr", self.lr, problem.n_clients)
        return scaffold_round(state, problem, part, rng, lr=lr, server_lr=self.server_lr,
                              option=self.option)

    # --- linear invariants (exact theory) --------------------------------------------------
    def linear_invariants(self, problem: Federation) -> tuple[LinearInvariant, ...]:
        """N c - sum_i c_i (d functionals), conserved by every round, both options.

        Proof: a round replaces c_i by c_i^+ for i in S and sets
        c^+ = c + (1/N) sum_{i in S} (c_i^+ - c_i), so
        N c^+ - sum_i c_i^+ = N c + sum_{i in S} (c_i^+ - c_i) - sum_i c_i
        - sum_{i in S} (c_i^+ - c_i) = N c - sum_i c_i, whatever the local steps
        and the rule producing c_i^+ (option I or II).  The initial value is 0."""
        return (total_minus_sum("N c - sum_i c_i", "c", "c_clients", problem.n_clients),)
