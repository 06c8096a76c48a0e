"""Plain per-client reference loops, written for reading; test oracles only.

Every function here follows its algorithm's update rule literally, one client
at a time, with no vectorization.  Random numbers are drawn in the order the
fast path uses (``algorithms.base``): participation first, then for each local
step k, each active client in ascending index order calls the oracle for its
own row.  ``reference_run(algorithm, problem, rounds, ...)`` dispatches on the
algorithm's type through ``REFERENCES``; modules add their loops with
:func:`register`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..participation import FullParticipation, Participation
from ..problems.base import Federation

__all__ = ["reference_run", "register", "REFERENCES", "per_client_value", "draw_participants"]

REFERENCES: dict[type, Callable[..., np.ndarray]] = {}


def register(cls: type) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Decorator: the reference loop of algorithm class ``cls``.

    The loop has signature ``(alg, problem, rounds, participation, rng, x0) ->
    (rounds+1, d) array of server models``."""
    def deco(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        REFERENCES[cls] = fn
        return fn
    return deco


def per_client_value(value: Any, i: int) -> Any:
    """Client i's value of a scalar-or-per-client hyperparameter."""
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr[i].item()


def draw_participants(alg: Any, problem: Federation, participation: Participation | None,
                      rng: np.random.Generator, t: int) -> list[tuple[int, int]]:
    """[(client, completed steps), ...] of round t, drawn exactly as the fast path does."""
    part = participation if participation is not None else FullParticipation()
    E = np.array([per_client_value(getattr(alg, "local_steps", 1), i)
                  for i in range(problem.n_clients)], dtype=np.int64)
    drawn = part.draw(rng, t, E)
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps)]


def client_gradient(problem: Federation, i: int, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One oracle call for client i at y (the configured oracle, one row)."""
    return problem.stochastic_grad(y[None, :], np.array([i]), rng)[0]


def reference_run(alg: Any, problem: Federation, rounds: int, *,
                  participation: Participation | None = None, seed: int = 0,
                  x0: Any = None) -> np.ndarray:
    """Server models x_0..x_R of ``alg`` computed by its plain reference loop."""
    from . import reference_drift  # noqa: F401  (registers its loops)

    x0 = np.zeros(problem.dim) if x0 is None else np.array(x0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    for cls in type(alg).__mro__:
        if cls in REFERENCES:
            return REFERENCES[cls](alg, problem, rounds, participation, rng, x0)
    raise KeyError(f"no reference loop registered for {type(alg).__name__}")


# --------------------------------------------------------------------- FedAvg
def _fedavg_reference(alg, problem, rounds, participation, rng, x0):
    from .fedavg import FedAvg  # noqa: F401

    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_participants(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ys = {i: x.copy() for i, _ in members}
        longest = max(s for _, s in members)
        for k in range(longest):                 # step-major order: the RNG convention
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, ys[i], rng)
                    ys[i] = ys[i] - per_client_value(alg.lr, i) * g
        if alg.aggregation == "uniform":
            w = {i: 1.0 for i, _ in members}
        elif alg.aggregation == "samples":
            w = {i: float(problem.n_samples[i]) for i, _ in members}
        else:
            w = {i: float(problem.weights[i]) for i, _ in members}
        total = sum(w.values())
        step = np.zeros_like(x)
        for i, _ in members:
            step += (w[i] / total) * (ys[i] - x)
        x = x + alg.server_lr * step
        xs.append(x.copy())
    return np.array(xs)


def _register_builtin() -> None:
    from .fedavg import FedAvg
    register(FedAvg)(_fedavg_reference)


_register_builtin()


# ------------------------------------------------------ shared helpers (C)
def _members(alg, problem, participation, rng, t):
    """Participants drawn with the algorithm's nominal steps (1 for exact solvers)."""
    part = participation if participation is not None else FullParticipation()
    drawn = part.draw(rng, t, np.asarray(alg.nominal_steps(problem), dtype=np.int64))
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps)]


def _weights(alg, problem, members):
    if alg.aggregation == "uniform":
        w = {i: 1.0 for i, _ in members}
    elif alg.aggregation == "samples":
        w = {i: float(problem.n_samples[i]) for i, _ in members}
    else:
        w = {i: float(problem.weights[i]) for i, _ in members}
    total = sum(w.values())
    return {i: v / total for i, v in w.items()}


def _solve_one(problem, i, D, b, y0):
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y for one client: a linear solve on
    quadratic clients, plain Newton with step halving otherwise."""
    from ..problems.quadratic import QuadraticFederation

    if isinstance(problem, QuadraticFederation):
        return np.linalg.solve(problem.H[i] + np.diag(D), problem.e[i] + b)
    idx = np.array([i])

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


def _te_push(beta, hat, count, G):
    """Seed 002 Alg. 2: T_hat <- (1 - beta) G + beta T_hat; returns (hat, count + 1)."""
    return (1.0 - beta) * G + beta * hat, count + 1


def _te_value(beta, hat, count):
    """T = T_hat / (1 - beta^count)."""
    return hat / (1.0 - beta ** count)


# ------------------------------------------------------------------ FedProx
def _fedprox_reference(alg, problem, rounds, participation, rng, x0):
    beta = None if alg.target is None else float(alg.target.beta)
    hat, count = np.zeros_like(x0), 0
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = _members(alg, problem, participation, rng, t)
        centre = x.copy() if (beta is None or count == 0) else _te_value(beta, hat, count)
        if members:
            ys = {i: x.copy() for i, _ in members}
            if alg.solver == "exact":
                for i, s in members:
                    if s > 0:
                        ys[i] = _solve_one(problem, i, np.full(x.shape, float(alg.mu)),
                                           float(alg.mu) * centre, x)
            else:
                for k in range(max(s for _, s in members)):
                    for i, s in members:
                        if s > k:
                            g = client_gradient(problem, i, ys[i], rng) + alg.mu * (ys[i] - centre)
                            ys[i] = ys[i] - per_client_value(alg.lr, i) * g
            w = _weights(alg, problem, members)
            x = x + alg.server_lr * sum(w[i] * (ys[i] - x) for i, _ in members)
        if beta is not None:
            hat, count = _te_push(beta, hat, count, x)
        xs.append(x.copy())
    return np.array(xs)


# ------------------------------------------------------------------ FedCurv
def _fedcurv_reference(alg, problem, rounds, participation, rng, x0):
    from .fedcurv import proxy_fisher

    te = alg.target
    beta = None if te is None else float(te.beta)
    ghat, gcount = np.zeros_like(x0), 0                 # ensemble of global models
    lhat, lcount = {}, {}                               # per-client ensembles (of="local")
    W, I = {}, {}                                       # last local model / Fisher per client
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = _members(alg, problem, participation, rng, t)
        if members:
            ids = [i for i, _ in members]
            # penalty gradient of client s: 2 alpha sum_j I_j * (y - c_j)
            if alg.fisher == "proxy":
                Ip = proxy_fisher(alg.proxy, x)
                c = x if (te is None or gcount == 0) else _te_value(beta, ghat, gcount)
                terms = {s: [(Ip, c)] for s in ids}
            else:
                def centre(j):
                    if te is None:
                        return W[j]
                    if te.of == "local":
                        return _te_value(beta, lhat[j], lcount[j]) if lcount.get(j, 0) > 0 else W[j]
                    return _te_value(beta, ghat, gcount) if gcount > 0 else W[j]
                terms = {s: [(I[j], centre(j)) for j in ids if j != s and j in W] for s in ids}

            def penalty(s, y):
                out = np.zeros_like(y)
                for Ij, cj in terms[s]:
                    out += 2.0 * alg.alpha * Ij * (y - cj)
                return out

            ys = {i: x.copy() for i in ids}
            if alg.solver == "exact":
                for i, s in members:
                    if s > 0:
                        D = sum((2.0 * alg.alpha * Ij for Ij, _ in terms[i]), np.zeros_like(x))
                        b = sum((2.0 * alg.alpha * Ij * cj for Ij, cj in terms[i]), np.zeros_like(x))
                        ys[i] = _solve_one(problem, i, D, b, x)
            else:
                for k in range(max(s for _, s in members)):
                    for i, s in members:
                        if s > k:
                            g = client_gradient(problem, i, ys[i], rng) + penalty(i, ys[i])
                            ys[i] = ys[i] - per_client_value(alg.lr, i) * g
            w = _weights(alg, problem, members)
            x = x + alg.server_lr * sum(w[i] * (ys[i] - x) for i in ids)
            if alg.fisher == "client":
                for i in ids:
                    W[i] = ys[i].copy()
                    I[i] = problem.fisher_diag(ys[i][None, :], np.array([i]))[0]
                    if te is not None and te.of == "local":
                        lhat[i], lcount[i] = _te_push(beta, lhat.get(i, np.zeros_like(x)),
                                                      lcount.get(i, 0), ys[i])
        if te is not None and te.of == "global":
            ghat, gcount = _te_push(beta, ghat, gcount, x)
        xs.append(x.copy())
    return np.array(xs)


# ------------------------------------------------------------------- FedOpt
def _fedopt_reference(alg, problem, rounds, participation, rng, x0):
    copt, sopt = alg.client_optimizer, alg.server_optimizer
    server = sopt.init(x0[None, :])
    N = problem.n_clients
    saved = {i: copt.init(x0[None, :].copy(), np.array([i])) for i in range(N)}
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = _members(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ids = [i for i, _ in members]
        ys = {i: x.copy() for i in ids}
        st = {i: (copt.init(x[None, :].copy(), np.array([i])) if alg.client_state == "restart"
                  else saved[i]) for i in ids}
        G = {i: 0.0 for i in ids}
        for k in range(max(s for _, s in members)):
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, ys[i], rng)
                    u, st[i] = copt.update(g[None, :], st[i], ys[i][None, :])
                    scale = per_client_value(alg.client_lr_scale, i)
                    ys[i] = ys[i] + scale * u[0]
                    G[i] = G[i] + scale * np.asarray(copt.precond(st[i]))[0]
        w = _weights(alg, problem, members)
        if alg.correction == "none":
            pseudo = -sum(w[i] * (ys[i] - x) for i in ids)
        else:
            sent, corr = {}, {}
            for i, s in members:
                Gi = np.asarray(G[i])
                if s == 0:               # no step: sends nothing, carries no correction
                    sent[i] = np.zeros_like(x)
                    corr[i] = np.zeros_like(np.asarray(copt.precond(st[i]))[0])
                elif Gi.ndim == 1:
                    sent[i], corr[i] = (ys[i] - x) / Gi, 1.0 / Gi
                else:
                    sent[i], corr[i] = np.linalg.solve(Gi, ys[i] - x), np.linalg.inv(Gi)
            total = sum(w[i] * sent[i] for i in ids)
            if alg.correction == "local":
                pseudo = -total
            else:
                A = sum(w[i] * corr[i] for i in ids)
                if A.ndim == 1:
                    pseudo = -np.array([total[j] / A[j] if A[j] > 0 else 0.0 for j in range(len(A))])
                else:
                    pseudo = -np.linalg.solve(A, total) if np.any(A) else np.zeros_like(x)
        u, server = sopt.update(pseudo[None, :], server, x[None, :])
        x = x + u[0]
        if alg.client_state == "persist":
            for i in ids:
                saved[i] = st[i]
        elif alg.client_state == "synchronise":
            fields = []
            names = type(st[ids[0]])._fields
            for f_idx, f0 in enumerate(st[ids[0]]):
                if names[f_idx] == "count":          # shared: the participants' mean step count
                    mean_count = sum(int(np.asarray(st[i][f_idx]).reshape(-1)[0]) for i in ids) / len(ids)
                    fields.append(np.full_like(np.asarray(f0), int(np.rint(mean_count))))
                elif np.issubdtype(np.asarray(f0).dtype, np.integer):
                    fields.append(None)
                else:
                    fields.append(sum(np.asarray(st[i][f_idx]) for i in ids) / len(ids))
            for j in range(N):
                own = st[j] if j in st else saved[j]
                saved[j] = type(own)(*(np.asarray(f) if avg is None else avg.copy()
                                       for f, avg in zip(own, fields)))
        xs.append(x.copy())
    return np.array(xs)


def _register_c() -> None:
    from .fedcurv import FedCurv
    from .fedopt import FedOpt
    from .fedprox import FedProx
    register(FedProx)(_fedprox_reference)
    register(FedCurv)(_fedcurv_reference)
    register(FedOpt)(_fedopt_reference)


_register_c()
