"""The round of an algorithm given its random draws, as an affine map read off the real round.

Fix round t's participation outcome xi (who takes part, how many local steps
each completes).  On quadratic clients every algorithm handled here computes
its new state from the old state S and from the oracle answers
g_j = grad f_{i_j}(y_j) + eps_j of its stochastic gradient calls j = 1..J
(one row per client per local step, in the order the round makes them) by
affine operations only, so

    S' = M S + c + G eps,          y = P S + q + R eps,

with eps = (eps_1, ..., eps_J) stacked, y the stacked query points, and R
strictly block lower triangular (a point depends only on earlier noise).
:func:`conditional_round_map` recovers M, c, G, P, q, R by evaluating the
algorithm's own ``round`` -- with a participation model that returns xi and
a federation whose ``stochastic_grad`` answers the exact gradient plus an
injected eps and records y -- at the base state and at one unit perturbation
per free state coordinate and per noise coordinate (an affine map has no
truncation error).  The recovered map is then checked at a random point; a
residual above ``rtol`` raises :class:`~fltheory.errors.NotAffineError`.
So the moments can never disagree with the implementation: they are built
from it.

Frozen coordinates.  Some state entries are deterministic functions of the
participation history only (FedCurv's and EFL's Fisher diagonals on quadratic
clients are diag(H_i) once the client has reported; EFL's residuals are zero
without compression).  The round is bilinear in such entries and the others,
so it is affine only with them held fixed: the caller passes a ``frozen``
mask; frozen inputs are not perturbed (their columns of M are zero and their
contribution sits in c), and the recovered map is exact for states with the
template's frozen values.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...algorithms.base import Algorithm
from ..._validate import _short, generator
from ...errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError, NotAffineError
from ...participation import Participants, Participation
from ...problems.base import Federation
from ..round_maps import StateLayout, state_to_vector, vector_to_state
from ._checks import algorithm_of, constant_hessian_problem, step_counts, tolerance

__all__ = [
    "ConditionalMap",
    "FixedDraw",
    "NoiseInjectingOracle",
    "conditional_round_map",
    "evaluate_round",
    "instrumented",
    "recover_round_map",
]

_SEED = 0


class FixedDraw(Participation):
    """A participation model that returns the same outcome every round (draws nothing)."""

    def __init__(self, clients: np.ndarray, steps: np.ndarray) -> None:
        self.clients = np.asarray(clients, dtype=np.int64)
        self.steps = np.asarray(steps, dtype=np.int64)

    def draw(self, rng: np.random.Generator, t: int, local_steps: np.ndarray) -> Participants:
        return Participants(self.clients.copy(), self.steps.copy())

    def draw_among(self, rng: np.random.Generator, t: int, local_steps: np.ndarray,
                   candidates: np.ndarray) -> Participants:
        return self.draw(rng, t, local_steps)


class NoiseInjectingOracle:
    """Replacement ``stochastic_grad``: exact gradient plus the next rows of ``noise``;
    records the query points and the clients of every call."""

    def __init__(self, problem: Federation, noise: np.ndarray | None) -> None:
        self.problem = problem
        self.noise = noise
        self.points: list[np.ndarray] = []
        self.clients: list[np.ndarray] = []
        self.used = 0

    def __call__(self, X: Any, clients: Any = None, rng: Any = None) -> np.ndarray:
        idx = np.arange(self.problem.n_clients) if clients is None else np.asarray(clients, dtype=np.int64)
        X = np.asarray(X, dtype=np.float64)
        G = self.problem.client_grad(X, idx)
        m = G.shape[0]
        self.points.append(np.array(X, copy=True).reshape(m, -1))
        self.clients.append(idx.copy())
        if self.noise is not None:
            if self.used + m > self.noise.shape[0]:
                raise NotAffineError("the round made more stochastic-gradient calls than at its base state")
            G = G + self.noise[self.used:self.used + m]
        self.used += m
        return G

    @property
    def row_clients(self) -> np.ndarray:
        return np.concatenate(self.clients) if self.clients else np.zeros(0, dtype=np.int64)

    @property
    def stacked_points(self) -> np.ndarray:
        return np.concatenate(self.points).ravel() if self.points else np.zeros(0)


def instrumented(problem: Federation, oracle: NoiseInjectingOracle) -> Federation:
    """A copy of ``problem`` whose stochastic oracle is ``oracle``."""
    fed = copy.copy(problem.exact())
    fed._noise_sigma2 = np.zeros(problem.n_clients)     # is_stochastic: the step-major local loop
    object.__setattr__(fed, "stochastic_grad", oracle)
    return fed


def evaluate_round(algorithm: Algorithm, problem: Federation, state: Any, draw: FixedDraw,
                   noise: np.ndarray | None) -> tuple[Any, NoiseInjectingOracle]:
    """One real round of ``algorithm`` at ``state`` with outcome ``draw`` and injected noise."""
    oracle = NoiseInjectingOracle(problem, noise)
    rng = np.random.default_rng(_SEED)
    before = rng.bit_generator.state
    new, _ = algorithm.round(state, instrumented(problem, oracle), draw, rng)
    if rng.bit_generator.state != before:
        raise NotAffineError(
            f"{algorithm.name} draws random numbers of its own in a round with fixed participation and "
            "given gradient noise: its round is not a function of the state and the draws")
    return new, oracle


@dataclass(frozen=True)
class ConditionalMap:
    """S' = M S + c + G eps and y = P S + q + R eps for one participation outcome.

    Attributes
    ----------
    M : (n, n);  c : (n,);  G : (n, J d)
    P : (J d, n);  q : (J d,);  R : (J d, J d)
    row_clients : (J,) the client of each oracle row, in call order
    next_state : the round's output at the template with zero noise (its
        counters, flags and frozen values are those of every output)
    """

    M: np.ndarray
    c: np.ndarray
    G: np.ndarray
    P: np.ndarray
    q: np.ndarray
    R: np.ndarray
    row_clients: np.ndarray
    next_state: Any


def _structure(oracle: NoiseInjectingOracle) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(c.tolist()) for c in oracle.clients)


def conditional_round_map(algorithm: Algorithm, problem: Federation, template: Any, layout: StateLayout,
                          clients: np.ndarray, steps: np.ndarray, frozen: np.ndarray, *,
                          rtol: float = 1e-8, check_rng: np.random.Generator | None = None
                          ) -> ConditionalMap:
    """Recover the :class:`ConditionalMap` of one outcome from the real round (module docstring).

    Every argument is checked here, once; :func:`recover_round_map` (the engines' entry) is the
    same recovery without the checks.

    Parameters
    ----------
    algorithm : Algorithm
    problem : Federation of quadratic clients
    template : a state of ``algorithm`` (its counters, flags and frozen coordinates are kept)
    layout : StateLayout of ``template`` (:func:`fltheory.theory.round_maps.state_layout`)
    clients : (m,) int array
        The participants, distinct, in [0, N).
    steps : (m,) int array
        The local steps each completes, >= 0.
    frozen : (n,) bool array
        The coordinates held at the template's values.  Free coordinates are perturbed by
        h = max(1, ||S||_inf).
    rtol : float in (0, 1)
        Tolerance of the affinity check at a random point.
    check_rng : numpy.random.Generator or None
        Draws that random point (a fixed generator when None).
    """
    algorithm = algorithm_of(algorithm)
    problem = constant_hessian_problem(problem)
    if not isinstance(layout, StateLayout):
        raise InvalidHyperparameterError(
            f"layout must be a StateLayout (from state_layout(template)), got {type(layout).__name__}")
    try:
        n = state_to_vector(template, layout).shape[0]
    except FLTheoryError as exc:
        raise InvalidProblemError(f"template must be a state of the algorithm with this layout: {exc}") from None
    N = problem.n_clients
    cl = step_counts("clients", clients, minimum=0)
    if cl.size and cl.max() >= N:
        raise InvalidHyperparameterError(f"clients must be client indices in [0, {N}), got {cl!r}")
    if np.any(np.diff(cl) <= 0):
        raise InvalidHyperparameterError(f"clients must be distinct and in increasing order, got {cl!r}")
    st = step_counts("steps", steps, length=cl.shape[0], minimum=0)
    if not (isinstance(frozen, np.ndarray) and frozen.dtype == np.bool_ and frozen.shape == (n,)):
        raise InvalidHyperparameterError(
            f"frozen must be a boolean array of shape ({n},) (one flag per state coordinate), got "
            f"{_short(frozen)} ({type(frozen).__name__})")
    rtol = tolerance("rtol", rtol)
    if check_rng is not None:
        generator("check_rng", check_rng)
    return recover_round_map(algorithm, problem, template, layout, cl, st, frozen, rtol, check_rng)


def recover_round_map(algorithm: Algorithm, problem: Federation, template: Any, layout: StateLayout,
                      clients: np.ndarray, steps: np.ndarray, frozen: np.ndarray, rtol: float,
                      check_rng: np.random.Generator | None) -> ConditionalMap:
    """:func:`conditional_round_map` on checked arguments (the engines call it once per outcome)."""
    draw = FixedDraw(clients, steps)
    S0 = state_to_vector(template, layout)
    n, d = S0.shape[0], problem.dim
    base_state, oracle0 = evaluate_round(algorithm, problem, template, draw, None)
    F0 = state_to_vector(base_state, layout)
    Y0 = oracle0.stacked_points
    shape0 = _structure(oracle0)
    J = oracle0.used
    h = max(1.0, float(np.abs(S0).max()) if n else 1.0)
    free = np.flatnonzero(~frozen)
    M = np.zeros((n, n))
    P = np.zeros((J * d, n))
    zero_noise = np.zeros((J, d))

    def run(S: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        new, orc = evaluate_round(algorithm, problem, vector_to_state(S, template, layout), draw, eps)
        if _structure(orc) != shape0:
            raise NotAffineError(
                f"{algorithm.name}: the pattern of stochastic-gradient calls depends on the state "
                f"(outcome clients={clients.tolist()}, steps={steps.tolist()}); the round is not affine")
        return state_to_vector(new, layout), orc.stacked_points

    for k in free:
        S = S0.copy()
        S[k] += h
        F, Y = run(S, zero_noise)
        M[:, k] = (F - F0) / h
        P[:, k] = (Y - Y0) / h
    G = np.zeros((n, J * d))
    R = np.zeros((J * d, J * d))
    for j in range(J * d):
        eps = np.zeros(J * d)
        eps[j] = h
        F, Y = run(S0, eps.reshape(J, d))
        G[:, j] = (F - F0) / h
        R[:, j] = (Y - Y0) / h
    c = F0 - M @ S0
    q = Y0 - P @ S0
    _check_causal(R, oracle0, d, algorithm)
    rng = check_rng if check_rng is not None else np.random.default_rng(12345)
    S = S0.copy()
    S[free] += h * rng.standard_normal(free.shape[0])
    eps = h * rng.standard_normal(J * d)
    F, Y = run(S, eps.reshape(J, d))
    pred_F, pred_Y = M @ S + c + G @ eps, P @ S + q + R @ eps
    scale = max(float(np.abs(F).max(initial=0.0)), float(np.abs(pred_F).max(initial=0.0)), h, 1.0)
    res = max(float(np.abs(F - pred_F).max(initial=0.0)), float(np.abs(Y - pred_Y).max(initial=0.0))) / scale
    if not res <= rtol:
        raise NotAffineError(
            f"{algorithm.name} is not affine in its state and gradient noise for the outcome clients="
            f"{clients.tolist()}, steps={steps.tolist()}: relative residual {res:.3e} > {rtol:g} at a "
            "random point (non-linear local updates such as adaptive preconditioners, l1 terms or "
            "compression, or non-quadratic clients)")
    return ConditionalMap(M=M, c=c, G=G, P=P, q=q, R=R, row_clients=oracle0.row_clients,
                          next_state=base_state)


def _check_causal(R: np.ndarray, oracle: NoiseInjectingOracle, d: int, algorithm: Algorithm) -> None:
    """A query point may depend only on the noise of earlier calls (martingale structure)."""
    start = 0
    for pts in oracle.points:
        m = pts.shape[0]
        block = R[start * d:(start + m) * d, start * d:]
        if np.any(block != 0):
            raise NotAffineError(
                f"{algorithm.name}: a stochastic-gradient query point depends on the noise of the same or a "
                "later call; the exact-moment recursion needs each call's noise to act only afterwards")
        start += m
