"""Exact E[x_t], E||x_t - x*||^2 and E[F(x_t)] - F* of stochastic runs on quadratic clients.

Model.  Round t draws an outcome xi_t (participants and completed local
steps) from the participation model, independently of the past, and each
stochastic-gradient call j adds noise eps_j with E[eps_j | past] = 0 and
E[eps_j eps_j^T | past] = C_j(y_j) (:mod:`.noise`).  Given xi the round is
S' = M_xi S + c_xi + G_xi eps and the query points are
y = P_xi S + q_xi + R_xi eps (:mod:`.conditional`, read off the algorithm's own
``round``).  Since eps_j is a martingale difference (uncorrelated with S and
with every other call's noise), with mu = E[S], Sigma = E[S S^T]:

    E[S']      = sum_xi p_xi (M_xi mu + c_xi),
    E[S' S'^T] = sum_xi p_xi (M_xi Sigma M_xi^T + M_xi mu c_xi^T + c_xi mu^T M_xi^T
                              + c_xi c_xi^T + sum_j G_xi,j Q_j G_xi,j^T),
    Q_j = E[C_j(y_j)],  E[y_j y_j^T] = P_j Sigma P_j^T + P_j mu q_j^T + q_j mu^T P_j^T
                                      + q_j q_j^T + sum_{l<j} R_jl Q_l R_jl^T.

Sigma is propagated as an (n, n) matrix through these products: the map
Sigma -> sum p M Sigma M^T is applied as an operator, never formed as an
(n^2, n^2) matrix.  (The structured fast path with inclusion probabilities
for FedAvg is :func:`fedavg_sampling_moments`.)

Expectation over the draws is exact: the support of xi is enumerated with its
probabilities (:func:`.support.participation_support`: closed-form laws of
every participation model of :mod:`fltheory.participation`), never sampled.

Mixtures.  Integer counters, boolean flags and *frozen* coordinates (state
entries that no free coordinate or noise influences, found by a probe round:
FedCurv's and EFL's Fisher diagonals on quadratic clients, EFL's residuals
without compression) are random only through the participation history.  The
state law is tracked as a finite mixture of components, one per value of
these, each with its weight, mean and second moment; the round is affine
inside a component.  The number of components is bounded by ``max_components``.

From the server block x of S (x* the minimiser of F, Hbar = sum p_i H_i):
    E||x_t - x*||^2 = tr E[x x^T] - 2 x*^T E[x] + ||x*||^2,
    E[F(x_t)] - F*  = 1/2 tr(Hbar E[(x - x*)(x - x*)^T]).
Both are clipped at 0 only against rounding (the clip size is reported).

Refused with a typed error: non-quadratic federations (InvalidProblemError),
algorithms whose round is not affine given the draws (NotAffineError: the
reason is named up front for the known cases -- FedOpt with an adaptive
optimizer, EFL with ST compression, FedElasticNet with lambda_1 > 0 -- and
otherwise detected by the affinity check of :mod:`.conditional`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._validate import flag, integer
from ...algorithms.base import Algorithm
from ...errors import InvalidHyperparameterError, NotAffineError
from ...participation import Participation
from ...problems.base import Federation
from ..round_maps import state_layout, state_to_vector, vector_to_state
from ._checks import (
    algorithm_of,
    constant_hessian_problem,
    finite_result,
    memory_guard,
    model_vector,
    participation_of,
    rounds_of,
    tolerance,
)
from .conditional import ConditionalMap, FixedDraw, evaluate_round, recover_round_map
from .noise import AdditiveNoise, NoiseModel, noise_of
from .support import support_of

__all__ = ["ExactMoments", "StateComponent", "exact_moments", "refuse_non_affine"]


def quadratic_errors(mean: np.ndarray, second: np.ndarray, x_star: np.ndarray, hess: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(E||x_t - x*||^2, E[F(x_t)] - F*) per round of a quadratic F with Hessian ``hess`` and minimiser
    ``x_star``, from the exact moments ``mean`` (T, d) = E[x_t] and ``second`` (T, d, d) = E[x_t x_t^T]:
    with D_t = E[(x_t - x*)(x_t - x*)^T] = E[x_t x_t^T] - E[x_t] x*^T - x* E[x_t]^T + x* x*^T, the distance
    is tr D_t and the gap 1/2 tr(H D_t).  Unclipped: rounding can leave tiny negative values."""
    dev = second - np.einsum("ti,j->tij", mean, x_star) - np.einsum("i,tj->tij", x_star, mean) \
        + np.outer(x_star, x_star)
    return np.einsum("tii->t", dev), 0.5 * np.einsum("ij,tji->t", hess, dev)


@dataclass(frozen=True)
class ExactMoments:
    """Exact moments of a stochastic run, rounds t = 0..R.

    mean : (R+1, d) E[x_t];  dist2 : (R+1,) E||x_t - x*||^2;  loss_gap : (R+1,) E[F(x_t)] - F*;
    second : (R+1, d, d) E[x_t x_t^T];  x_star : (d,);
    state_mean, state_second : E[S_R], E[S_R S_R^T] of the whole final state;
    components : (R+1,) number of mixture components per round;
    clip : largest negative rounding residue clipped to 0 in dist2 / loss_gap;
    info : what was computed how (participation support sizes, noise model, seconds).
    states : with ``keep_states=True``, for t = 0..R the mixture components of the whole state law
        at the start of round t (:class:`StateComponent`); None otherwise.
    """

    mean: np.ndarray
    dist2: np.ndarray
    loss_gap: np.ndarray
    second: np.ndarray
    x_star: np.ndarray
    state_mean: np.ndarray
    state_second: np.ndarray
    components: np.ndarray
    clip: float
    info: dict[str, Any] = field(default_factory=dict)
    states: tuple[tuple[StateComponent, ...], ...] | None = None

    @property
    def variance(self) -> np.ndarray:
        """(R+1,) E||x_t - E x_t||^2."""
        return np.einsum("tii->t", self.second) - np.einsum("ti,ti->t", self.mean, self.mean)

    def __repr__(self) -> str:
        R = self.dist2.shape[0] - 1
        return (f"ExactMoments(rounds={R}, dim={self.mean.shape[1]}, E||x_R - x*||^2={self.dist2[-1]:.6g}, "
                f"E[F(x_R)] - F*={self.loss_gap[-1]:.6g})")


def refuse_non_affine(algorithm: Algorithm) -> None:
    """Raise NotAffineError for the configurations known not to be affine, saying why."""
    name = type(algorithm).__name__
    if name == "FedOpt":
        for role in ("client_optimizer", "server_optimizer"):
            opt = getattr(algorithm, role, None)
            oname = str(getattr(opt, "name", "")).lower()
            if any(a in oname for a in ("adagrad", "adam", "yogi", "rmsprop")):
                raise NotAffineError(
                    f"FedOpt with {role}={oname!r}: adaptive optimizers divide by a running average of "
                    "squared gradients, so the round is not affine in the state and noise; exact moments "
                    "need SGD, momentum or a fixed preconditioner")
    if name == "EFL" and getattr(algorithm, "compression", None) is not None:
        raise NotAffineError(
            f"EFL with compression={algorithm.compression!r}: ST ternary top-k keeps the largest entries "  # type: ignore[attr-defined]
            "and quantises them, a piecewise map of the state; exact moments need compression=None")
    if name == "FedElasticNet" and float(getattr(algorithm, "lambda1", 0.0)) != 0.0:
        raise NotAffineError(
            f"FedElasticNet with lambda1={algorithm.lambda1!r}: the l1 term makes the local solution a "  # type: ignore[attr-defined]
            "soft-thresholding, piecewise affine with draw-dependent pieces; exact moments need lambda1=0 "
            "(the l1 case stays Monte Carlo)")


@dataclass(frozen=True)
class StateComponent:
    """One mixture component of the law of the whole state S_t.

    weight : its probability;  state : the state with the component's counters, flags and frozen
    coordinates (exact) and its mean in the free coordinates;  mean : (n,) E[S | component];
    second : (n, n) E[S S^T | component];  layout : where each state field sits in S.
    """

    weight: float
    state: Any
    mean: np.ndarray
    second: np.ndarray
    layout: Any


@dataclass
class _Component:
    weight: float
    template: Any
    mu: np.ndarray
    second: np.ndarray


def _discrete(obj: Any) -> Any:
    """Hashable value of everything in a state that is not a float leaf."""
    import dataclasses as dc

    if dc.is_dataclass(obj) and not isinstance(obj, type):
        return tuple(_discrete(getattr(obj, f.name)) for f in dc.fields(obj))
    if isinstance(obj, (tuple, list)):
        return tuple(_discrete(v) for v in obj)
    if isinstance(obj, np.ndarray):
        if np.issubdtype(obj.dtype, np.floating):
            return ("f", obj.shape)
        return (obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, (float, np.floating)) and not isinstance(obj, bool):
        return "f"
    if isinstance(obj, (int, np.integer, bool, np.bool_, str)) or obj is None:
        return obj
    return type(obj).__name__


def _frozen_mask(algorithm: Algorithm, problem: Federation, state: Any, layout: Any,
                 rng: np.random.Generator) -> np.ndarray:
    """Coordinates whose output does not depend on the input or the noise (full participation)."""
    E = algorithm.nominal_steps(problem)
    draw = FixedDraw(np.arange(problem.n_clients), E)
    outs = []
    _, orc = evaluate_round(algorithm, problem, state, draw, None)
    J = orc.used
    n = layout.dim
    for _ in range(2):
        S = rng.standard_normal(n) * (1.0 + np.abs(state_to_vector(state, layout)))
        eps = rng.standard_normal((J, problem.dim))
        new, _ = evaluate_round(algorithm, problem, vector_to_state(S, state, layout), draw, eps)
        outs.append(state_to_vector(new, layout))
    return np.asarray(outs[0] == outs[1])


def _noise_second(cm: ConditionalMap, noise: NoiseModel | None, mu: np.ndarray, second: np.ndarray,
                  d: int) -> np.ndarray:
    """sum_j G_j Q_j G_j^T for one outcome (Q_j = expected conditional noise covariance)."""
    n = cm.M.shape[0]
    J = cm.row_clients.shape[0]
    if noise is None or J == 0:
        return np.zeros((n, n))
    G = cm.G.reshape(n, J, d)
    if isinstance(noise, AdditiveNoise):
        Q = noise.cov[cm.row_clients]                                    # (J, d, d)
        return np.einsum("njd,jde,mje->nm", G, Q, G, optimize=True)
    P = cm.P.reshape(J, d, n)
    q = cm.q.reshape(J, d)
    R = cm.R.reshape(J, d, J, d)
    Qs = np.zeros((J, d, d))
    for j in range(J):
        Pj, qj = P[j], q[j]
        Ey = Pj @ mu + qj
        PmQ = np.outer(Pj @ mu, qj)
        Eyy = Pj @ second @ Pj.T + PmQ + PmQ.T + np.outer(qj, qj)
        if j:
            Rj = R[j, :, :j, :]                                          # (d, j, d)
            Eyy = Eyy + np.einsum("alb,lbc,elc->ae", Rj, Qs[:j], Rj, optimize=True)
        W = np.empty((d + 1, d + 1))
        W[:d, :d], W[:d, d], W[d, :d], W[d, d] = Eyy, Ey, Ey, 1.0
        Qs[j] = noise.expected_cov(int(cm.row_clients[j]), W)
    return np.einsum("njd,jde,mje->nm", G, Qs, G, optimize=True)


def _revalidated(cm: ConditionalMap, algorithm: Algorithm, problem: Federation, template: Any, layout: Any,
                 outcome: Any, frozen: np.ndarray, d: int, rtol: float, rng: np.random.Generator
                 ) -> ConditionalMap | None:
    """A cached conditional map checked against the round at ``template`` (this round's counters):
    one real round at a random free point and random noise against the map's prediction.  Returns
    the map with this round's output state (counters, flags, frozen values), or None if it fails."""
    S0 = state_to_vector(template, layout)
    h = max(1.0, float(np.abs(S0).max()) if S0.size else 1.0)
    S = S0.copy()
    S[~frozen] += h * rng.standard_normal(int((~frozen).sum()))
    J = cm.row_clients.shape[0]
    eps = h * rng.standard_normal(J * d)
    try:
        new, orc = evaluate_round(algorithm, problem, vector_to_state(S, template, layout),
                                  FixedDraw(outcome.clients, outcome.steps), eps.reshape(J, d))
    except NotAffineError:
        return None
    if orc.used != J or not np.array_equal(orc.row_clients, cm.row_clients):
        return None
    F, Y = state_to_vector(new, layout), orc.stacked_points
    pred_F, pred_Y = cm.M @ S + cm.c + cm.G @ eps, cm.P @ S + cm.q + cm.R @ eps
    scale = max(float(np.abs(F).max(initial=0.0)), float(np.abs(pred_F).max(initial=0.0)), h, 1.0)
    res = max(float(np.abs(F - pred_F).max(initial=0.0)), float(np.abs(Y - pred_Y).max(initial=0.0))) / scale
    return dataclasses.replace(cm, next_state=new) if res <= rtol else None


@np.errstate(over="ignore", invalid="ignore")     # an overflow ends in OutOfRangeError
def exact_moments(algorithm: Algorithm, problem: Federation, rounds: int, *,
                  participation: Participation | None = None, noise: Any = None, x0: Any = None,
                  max_components: int = 256, max_outcomes: int = 20_000, rtol: float = 1e-8,
                  keep_states: bool = False) -> ExactMoments:
    """Exact first and second moments of ``run(algorithm, problem, rounds, participation=...)``.

    Parameters
    ----------
    algorithm : Algorithm
        Any algorithm whose round is affine in its state and gradient noise given
        the draws (module docstring); others raise NotAffineError.
    problem : QuadraticFederation
        Its configured oracle sets the noise unless ``noise`` is given.
    rounds : int >= 0
    participation : Participation or None (full)
    noise : AdditiveNoise, MinibatchNoise, a covariance (scalar, (N,), (N, d), (N, d, d)) or None
        None: the federation's own oracle (``with_gradient_noise``: isotropic sigma_i^2/d I;
        ``with_minibatch(b)``: b rows with replacement; exact: no noise).
    x0 : (d,) initial model (zeros by default)
    max_components, max_outcomes : limits of the exact mixture and of the enumerated support.
    rtol : tolerance of the affinity check of every recovered conditional map.
    keep_states : also return the mixture components of the whole state law at every round
        (``ExactMoments.states``; e.g. the moments of EFL's reported models for its D_k).

    Returns
    -------
    ExactMoments
    """
    t_start = time.perf_counter()
    algorithm_of(algorithm)
    constant_hessian_problem(problem)
    R = rounds_of(rounds, problem.dim)
    participation_of(participation)
    max_components = integer("max_components", max_components, minimum=1, maximum=None)
    max_outcomes = integer("max_outcomes", max_outcomes, minimum=1, maximum=None)
    rtol = tolerance("rtol", rtol)
    keep_states = flag("keep_states", keep_states)
    refuse_non_affine(algorithm)
    model = noise_of(problem, noise)
    d = problem.dim
    x0v = model_vector("x0", x0, d)
    exact = problem.exact()
    rng = np.random.default_rng(0)
    state0 = algorithm.init(exact, x0v, rng)
    layout = state_layout(state0)
    xs = layout.x_slice
    if keep_states:
        memory_guard(f"keep_states=True for {R} rounds (a ({layout.dim}, {layout.dim}) second moment of the "
                     "whole state per mixture component per round)", (R + 1) * layout.dim * (layout.dim + 1))
    frozen = _frozen_mask(algorithm, exact, state0, layout, np.random.default_rng(1))
    S0 = state_to_vector(state0, layout)
    comps = {(_discrete(state0), S0[frozen].tobytes()): _Component(1.0, state0, S0, np.outer(S0, S0))}
    kept: list[tuple[StateComponent, ...]] = []

    def snapshot() -> None:
        if keep_states:
            kept.append(tuple(StateComponent(c.weight, vector_to_state(c.mu, c.template, layout), c.mu.copy(),
                                             c.second.copy(), layout) for c in comps.values()))

    snapshot()
    E = algorithm.nominal_steps(exact)
    means, seconds, ncomp = [S0[xs]], [np.outer(S0[xs], S0[xs])], [1]
    n_outcomes = []
    check_rng = np.random.default_rng(2)
    cache: dict[Any, ConditionalMap] = {}
    recoveries = 0

    def S_frozen_bytes(state: Any) -> bytes:
        return state_to_vector(state, layout)[frozen].tobytes()

    for t in range(R):
        outcomes = support_of(participation, t, E, max_outcomes)
        n_outcomes.append(len(outcomes))
        new: dict[Any, _Component] = {}
        for comp in comps.values():
            template = vector_to_state(comp.mu, comp.template, layout)
            for o in outcomes:
                ckey = (S_frozen_bytes(template), o.key)
                cached = cache.get(ckey)
                cm = None if cached is None else _revalidated(cached, algorithm, exact, template, layout, o,
                                                              frozen, d, rtol, check_rng)
                if cm is None:
                    cm = recover_round_map(algorithm, exact, template, layout, o.clients, o.steps,
                                           frozen, rtol, check_rng)
                    cache[ckey] = cm
                    recoveries += 1
                dep = np.any(cm.M[frozen][:, ~frozen] != 0, axis=1) | np.any(cm.G[frozen] != 0, axis=1)
                if np.any(dep):
                    k = int(np.flatnonzero(frozen)[np.argmax(dep)])
                    raise NotAffineError(
                        f"{algorithm.name}: state coordinate {k} is a deterministic function of the draws "
                        "under full participation but depends on the random state under outcome clients="
                        f"{o.clients.tolist()}, steps={o.steps.tolist()}; the law is not a finite mixture "
                        "of affine images")
                mu = cm.M @ comp.mu + cm.c
                Mm = cm.M @ comp.mu
                sec = cm.M @ comp.second @ cm.M.T + np.outer(Mm, cm.c) + np.outer(cm.c, Mm) \
                    + np.outer(cm.c, cm.c) + _noise_second(cm, model, comp.mu, comp.second, d)
                S_next = state_to_vector(cm.next_state, layout)
                key = (_discrete(cm.next_state), S_next[frozen].tobytes())
                w = comp.weight * o.prob
                if key in new:
                    c = new[key]
                    c.weight += w
                    c.mu = c.mu + w * mu
                    c.second = c.second + w * sec
                else:
                    new[key] = _Component(w, cm.next_state, w * mu, w * sec)
                    if len(new) > max_components:
                        raise InvalidHyperparameterError(
                            f"exact moments: more than max_components = {max_components} mixture components "
                            f"in round {t + 1} (discrete state values x frozen coordinates); raise the limit "
                            "or use fewer clients")
        for c in new.values():
            c.mu = c.mu / c.weight
            c.second = c.second / c.weight
            c.mu[frozen] = state_to_vector(c.template, layout)[frozen]   # exact, not a weighted mean
        comps = new
        mu_all = sum(c.weight * c.mu for c in comps.values())
        sec_all = sum(c.weight * c.second for c in comps.values())
        if not np.all(np.isfinite(sec_all)):      # O(n^2) against the round's O(n^3): stop at the first overflow
            finite_result(f"exact_moments (round {t + 1})", {"E[S_t S_t^T]": np.asarray(sec_all)})
        means.append(np.asarray(mu_all)[xs])
        seconds.append(np.asarray(sec_all)[xs, xs])
        ncomp.append(len(comps))
        snapshot()
    mu_all = sum(c.weight * c.mu for c in comps.values())
    sec_all = sum(c.weight * c.second for c in comps.values())
    mean = np.array(means)
    second = np.array(seconds)
    second = 0.5 * (second + np.swapaxes(second, 1, 2))
    finite_result("exact_moments", {"E[x_t]": mean, "E[x_t x_t^T]": second})
    x_star = problem.optimum()
    Hbar = problem.hess(x_star)                       # constant Hessians: the same at every point
    dist2, gap = quadratic_errors(mean, second, x_star, Hbar)
    clip = float(max(0.0, -dist2.min(), -gap.min()))
    info = {"noise": type(model).__name__ if model is not None else "none",
            "participation": repr(participation) if participation is not None else "full",
            "outcomes_per_round": n_outcomes, "map_recoveries": recoveries, "frozen_coordinates": int(frozen.sum()),
            "state_dim": layout.dim, "seconds": time.perf_counter() - t_start,
            "method": "enumerated outcomes x conditional affine maps read off the round"}
    return ExactMoments(mean=mean, dist2=np.maximum(dist2, 0.0), loss_gap=np.maximum(gap, 0.0),
                        second=second, x_star=x_star, state_mean=np.asarray(mu_all),
                        state_second=np.asarray(sec_all), components=np.array(ncomp), clip=clip, info=info,
                        states=tuple(kept) if keep_states else None)
