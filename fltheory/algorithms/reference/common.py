"""Shared pieces of the reference loops: the registrar and per-client helpers.

Every reference loop follows its algorithm's update rule literally, one client
at a time, with no vectorization.  Random numbers are drawn in the order the
fast path uses (``algorithms.base``): participation first, then for each local
step k, each active client in ascending index order calls the oracle for its
own row.  Exact local solves are written here independently of
``algorithms.local``: a linear solve for clients with constant Hessians, a
per-client damped Newton method for smooth clients, and per-client proximal
gradient for the l1 term.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...participation import FullParticipation, Participation
from ...problems.base import Federation
from ...algorithms.base import Algorithm

__all__ = [
    "REFERENCES",
    "aggregation",
    "argmin_one",
    "client_gradient",
    "draw",
    "draw_members",
    "draw_participants",
    "local_models",
    "per_client_value",
    "reference_st",
    "reference_threshold",
    "register",
    "solve_one",
    "te_push",
    "te_value",
]

ReferenceLoop = Callable[..., np.ndarray]
REFERENCES: dict[type, ReferenceLoop] = {}


def register(cls: type) -> Callable[[ReferenceLoop], ReferenceLoop]:
    """Decorator: the reference loop of algorithm class ``cls`` (the one registrar).

    The loop has signature ``(alg, problem, rounds, participation, rng, x0) ->
    (rounds+1, d) array of server models``; subclasses without a loop of their
    own use their nearest registered base class's."""
    def deco(fn: ReferenceLoop) -> ReferenceLoop:
        REFERENCES[cls] = fn
        return fn
    return deco


def per_client_value(value: Any, i: int) -> Any:
    """Client i's value of a scalar-or-per-client hyperparameter."""
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr[i].item()


def draw_participants(alg: Algorithm, problem: Federation, participation: Participation | None,
                      rng: np.random.Generator, t: int) -> list[tuple[int, int]]:
    """[(client, completed steps), ...] of round t, drawn exactly as the fast path does."""
    part = participation if participation is not None else FullParticipation()
    E = np.array([per_client_value(getattr(alg, "local_steps", 1), i)
                  for i in range(problem.n_clients)], dtype=np.int64)
    drawn = part.draw(rng, t, E)
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps, strict=True)]


def client_gradient(problem: Federation, i: int, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One oracle call for client i at y (the configured oracle, one row)."""
    return problem.stochastic_grad(y[None, :], np.array([i]), rng)[0]


def local_models(problem: Federation, members: list[tuple[int, int]], x: np.ndarray, rng: np.random.Generator,
                 lr: Any, *, exact: bool, solve: Callable[[int], np.ndarray],
                 direction: Callable[[int, np.ndarray, np.ndarray], np.ndarray]) -> dict[int, np.ndarray]:
    """The local models of one round, one client at a time, every client starting at x.

    ``exact``: ``solve(i)`` for each member with s_i > 0.  Otherwise s_i steps
    y <- y - lr_i direction(i, y, g_i(y)), step k of every active member (in the
    drawn order) before step k + 1, as the fast path calls the oracle; the
    algorithm's ``direction`` adds its penalty and correction terms to the oracle
    gradient g.  Members with s_i = 0 keep y = x."""
    ys = {i: x.copy() for i, _ in members}
    if exact:
        for i, s in members:
            if s > 0:
                ys[i] = solve(i)
        return ys
    for k in range(max((s for _, s in members), default=0)):
        for i, s in members:
            if s > k:
                y = ys[i]
                ys[i] = y - per_client_value(lr, i) * direction(i, y, client_gradient(problem, i, y, rng))
    return ys


def draw_members(alg, problem, participation, rng, t):
    """Participants drawn with the algorithm's nominal steps (1 for exact solvers)."""
    part = participation if participation is not None else FullParticipation()
    drawn = part.draw(rng, t, np.asarray(alg.nominal_steps(problem), dtype=np.int64))
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps, strict=True)]


def aggregation(alg, problem, members):
    if alg.aggregation == "uniform":
        w = {i: 1.0 for i, _ in members}
    elif alg.aggregation == "samples":
        w = {i: float(problem.n_samples[i]) for i, _ in members}
    else:
        w = {i: float(problem.weights[i]) for i, _ in members}
    total = sum(w.values())
    return {i: v / total for i, v in w.items()}


def solve_one(problem, i, D, b, y0):
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y for one client: a linear solve on
    quadratic clients, plain Newton with step halving otherwise."""
    idx = np.array([i])
    if problem.has_constant_hessians:       # f_i(y) = 1/2 y^T H_i y - e_i^T y + c_i, e_i = -grad f_i(0)
        return _quadratic_solve(problem, i, D, b)

    def value(y):
        return float(problem.client_loss(y[None, :], idx)[0] + 0.5 * y @ (D * y) - b @ y)

    def grad(y):
        return problem.client_grad(y[None, :], idx)[0] + D * y - b

    y = y0.copy()
    for _ in range(200):
        g = grad(y)
        if np.linalg.norm(g) <= 1e-14:
            break
        Hm = problem.client_hess(y[None, :], idx)[0] + np.diag(D)
        step = np.linalg.solve(Hm, g)
        t = 1.0     # halve until the value or (near the optimum, where values tie) the gradient drops
        while (value(y - t * step) > value(y) - 1e-4 * t * (g @ step)
               and np.linalg.norm(grad(y - t * step)) >= np.linalg.norm(g) and t > 1e-12):
            t /= 2
        y_new = y - t * step
        if np.linalg.norm(grad(y_new)) >= np.linalg.norm(g) and t < 1:
            break                       # no further progress possible in floating point
        y = y_new
    return y


def te_push(beta, hat, count, G):
    """BetterObjects Alg. 2: T_hat <- (1 - beta) G + beta T_hat; returns (hat, count + 1)."""
    return (1.0 - beta) * G + beta * hat, count + 1


def te_value(beta, hat, count):
    """T = T_hat / (1 - beta^count)."""
    return hat / (1.0 - beta ** count)


def reference_threshold(v: np.ndarray, eps: float) -> np.ndarray:
    """FedElasticNet section 3: entries with |v(j)| <= eps are sent as 0."""
    if eps <= 0:
        return v.copy()
    out = v.copy()
    for j in range(out.shape[0]):
        if abs(out[j]) <= eps:
            out[j] = 0.0
    return out


def reference_st(T: np.ndarray, q: float) -> np.ndarray:
    """EFL Alg. 2 as printed: k = max(floor(n q), 1); e = the k-th largest |T|;
    mask = |T| >= e; mu = (1/k) sum |T * mask|; return mu sign(T * mask)."""
    n = T.shape[0]
    k = max(int(np.floor(n * q)), 1)
    e = sorted(np.abs(T), reverse=True)[k - 1]
    mask = np.abs(T) >= e
    masked = T * mask
    mu = np.sum(np.abs(masked)) / k
    return mu * np.sign(masked)


def draw(alg: Algorithm, problem: Federation, participation: Participation | None,
          rng: np.random.Generator, t: int, exact: bool) -> list[tuple[int, int]]:
    """Participants of round t; exact one-shot solvers have one nominal step."""
    if not exact:
        return draw_participants(alg, problem, participation, rng, t)
    part = participation if participation is not None else FullParticipation()
    drawn = part.draw(rng, t, np.ones(problem.n_clients, dtype=np.int64))
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps, strict=True)]


def _local_objective_grad(problem: Federation, i: int, y: np.ndarray, D: np.ndarray,
                          b: np.ndarray) -> np.ndarray:
    """grad of f_i(y) + 1/2 y^T diag(D) y - b^T y (exact oracle)."""
    return problem.client_grad(y[None, :], np.array([i]))[0] + D * y - b


def argmin_one(problem: Federation, i: int, D: np.ndarray, b: np.ndarray,
                l1: float = 0.0, z: np.ndarray | None = None, y0: np.ndarray | None = None) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 for one client."""
    d = problem.dim
    y = np.zeros(d) if y0 is None else y0.copy()
    if l1 == 0.0:
        if problem.has_constant_hessians:
            return _quadratic_solve(problem, i, D, b)
        for _ in range(100):                        # damped Newton
            g = _local_objective_grad(problem, i, y, D, b)
            if np.linalg.norm(g) <= 1e-13:
                break
            Hm = problem.client_hess(y[None, :], np.array([i]))[0] + np.diag(D)
            step = np.linalg.solve(Hm, g)

            def value(w):
                return problem.client_loss(w[None, :], np.array([i]))[0] + 0.5 * np.sum(D * w * w) - b @ w
            t, f0 = 1.0, value(y)
            full_ok = np.linalg.norm(_local_objective_grad(problem, i, y - step, D, b)) < np.linalg.norm(g)
            # Armijo backtracking far from the solution; near it (where rounding hides the
            # decrease in value) the full step, accepted when it shrinks the gradient
            while not full_ok and value(y - t * step) > f0 - 1e-4 * t * (g @ step) and t > 1e-10:
                t *= 0.5
            y = y - t * step
        return y
    # proximal gradient with step 1/L, L = lambda_max of the local Hessian bound
    if problem.has_constant_hessians:
        L = np.linalg.eigvalsh(problem.client_hess(np.zeros((1, d)), np.array([i]))[0])[-1] + D.max()
    else:
        L = float(problem.smoothness_bounds(np.array([i]), y[None, :])[0]) + D.max()
    for _ in range(2_000_000):
        g = _local_objective_grad(problem, i, y, D, b)
        v = y - g / L - z
        y_new = z + np.sign(v) * np.maximum(np.abs(v) - l1 / L, 0.0)
        done = np.max(np.abs(y_new - y)) <= 1e-14 * max(1.0, float(np.max(np.abs(y_new))))
        y = y_new
        if done:
            break
    return y


def _quadratic_solve(problem: Federation, i: int, D: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin_y 1/2 y^T (H_i + diag(D)) y - (e_i + b)^T y for a client with a constant
    Hessian H_i and e_i = -grad f_i(0): the linear system (H_i + diag(D)) y = e_i + b."""
    zero = np.zeros((1, problem.dim))
    idx = np.array([i])
    H = problem.client_hess(zero, idx)[0]
    e = -problem.client_grad(zero, idx)[0]
    return np.linalg.solve(H + np.diag(D), e + b)
