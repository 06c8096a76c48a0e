"""Reference loops of the drift-correcting algorithms (SCAFFOLD, FedDyn,
FedElasticNet) and EFL; see ``reference.py`` for the conventions.

Each loop transcribes its paper's algorithm one client at a time (THEORY.md
section 2; seed 004 for SCAFFOLD, seed 003 Alg. 1-3, seed 000 Alg. 1-2), with
the conventions stated in the fast modules' docstrings (completed steps in
SCAFFOLD option II, inactive clients, the shared client copy of EFL).  Exact
local solves are written here independently of ``local.py``: a linear solve
for quadratic clients, a per-client damped Newton method for smooth clients,
and per-client proximal gradient for the l1 term.  Thresholding and ST
compression are transcribed from seed 003 section 3 and seed 000 Alg. 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..participation import FullParticipation, Participation
from ..problems.base import Federation
from .reference import client_gradient, draw_participants, per_client_value, register

__all__ = ["reference_st", "reference_threshold"]


# ----------------------------------------------------------------- helpers
def reference_threshold(v: np.ndarray, eps: float) -> np.ndarray:
    """Seed 003 section 3: entries with |v(j)| <= eps are sent as 0."""
    if eps <= 0:
        return v.copy()
    out = v.copy()
    for j in range(out.shape[0]):
        if abs(out[j]) <= eps:
            out[j] = 0.0
    return out


def reference_st(T: np.ndarray, q: float) -> np.ndarray:
    """Seed 000 Alg. 2 as printed: k = max(floor(n q), 1); e = the k-th largest |T|;
    mask = |T| >= e; mu = (1/k) sum |T * mask|; return mu sign(T * mask)."""
    n = T.shape[0]
    k = max(int(np.floor(n * q)), 1)
    e = sorted(np.abs(T), reverse=True)[k - 1]
    mask = np.abs(T) >= e
    masked = T * mask
    mu = np.sum(np.abs(masked)) / k
    return mu * np.sign(masked)


def _draw(alg: Any, problem: Federation, participation: Participation | None,
          rng: np.random.Generator, t: int, exact: bool) -> list[tuple[int, int]]:
    """Participants of round t; exact one-shot solvers have one nominal step."""
    if not exact:
        return draw_participants(alg, problem, participation, rng, t)
    part = participation if participation is not None else FullParticipation()
    drawn = part.draw(rng, t, np.ones(problem.n_clients, dtype=np.int64))
    return [(int(c), int(s)) for c, s in zip(drawn.clients, drawn.steps)]


def _local_objective_grad(problem: Federation, i: int, y: np.ndarray, D: np.ndarray,
                          b: np.ndarray) -> np.ndarray:
    """grad of f_i(y) + 1/2 y^T diag(D) y - b^T y (exact oracle)."""
    return problem.client_grad(y[None, :], np.array([i]))[0] + D * y - b


def _argmin_one(problem: Federation, i: int, D: np.ndarray, b: np.ndarray,
                l1: float = 0.0, z: np.ndarray | None = None, y0: np.ndarray | None = None) -> np.ndarray:
    """argmin_y f_i(y) + 1/2 y^T diag(D) y - b^T y + l1 ||y - z||_1 for one client."""
    from ..problems.quadratic import QuadraticFederation

    d = problem.dim
    y = np.zeros(d) if y0 is None else y0.copy()
    if l1 == 0.0:
        if isinstance(problem, QuadraticFederation):
            return np.linalg.solve(problem.H[i] + np.diag(D), problem.e[i] + b)
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
    if isinstance(problem, QuadraticFederation):
        L = np.linalg.eigvalsh(problem.H[i])[-1] + D.max()
    else:
        L = float(np.asarray(problem.client_L)[i]) + D.max()
    for _ in range(2_000_000):
        g = _local_objective_grad(problem, i, y, D, b)
        v = y - g / L - z
        y_new = z + np.sign(v) * np.maximum(np.abs(v) - l1 / L, 0.0)
        done = np.max(np.abs(y_new - y)) <= 1e-14 * max(1.0, float(np.max(np.abs(y_new))))
        y = y_new
        if done:
            break
    return y


# ----------------------------------------------------------------- SCAFFOLD
def _scaffold_loop(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
                   rng: np.random.Generator, x0: np.ndarray, *, lambda1: float = 0.0,
                   lambda2: float = 0.0, eps: float = 0.0) -> np.ndarray:
    """SCAFFOLD (THEORY.md section 2) / FedElasticNet Alg. 2 (seed 003 eq. 7), per client."""
    N, d = problem.n_clients, problem.dim
    x = x0.copy()
    c = np.zeros(d)
    c_i = [np.zeros(d) for _ in range(N)]
    xs = [x.copy()]
    for t in range(rounds):
        members = draw_participants(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ys = {i: x.copy() for i, _ in members}
        for k in range(max(s for _, s in members)):
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, ys[i], rng)
                    direction = g - c_i[i] + c + lambda2 * (ys[i] - x) + lambda1 * np.sign(ys[i] - x)
                    ys[i] = ys[i] - per_client_value(alg.lr, i) * direction
        new_c = {}
        for i, s in members:
            if s == 0:
                new_c[i] = c_i[i].copy()
            elif alg.option == "I":
                new_c[i] = client_gradient(problem, i, x, rng)
            else:
                new_c[i] = c_i[i] - c + (x - ys[i]) / (s * per_client_value(alg.lr, i))
        total_dx = np.zeros(d)
        total_dc = np.zeros(d)
        for i, _ in members:
            total_dx += reference_threshold(ys[i] - x, eps)
            total_dc += new_c[i] - c_i[i]
            c_i[i] = new_c[i]
        x = x + alg.server_lr / len(members) * total_dx
        c = c + total_dc / N
        xs.append(x.copy())
    return np.array(xs)


# ----------------------------------------------------------------- FedDyn
def _feddyn_loop(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
                 rng: np.random.Generator, x0: np.ndarray, *, alpha: float, solver: str, lr: Any,
                 local_steps: Any, lambda1: float = 0.0, eps: float = 0.0,
                 subgradient: str = "sign") -> np.ndarray:
    """FedDyn (THEORY.md section 2) / FedElasticNet Alg. 3 (seed 003), per client."""
    N, d = problem.n_clients, problem.dim
    x = x0.copy()
    h = np.zeros(d)
    grad_state = [np.zeros(d) for _ in range(N)]
    xs = [x.copy()]
    for t in range(rounds):
        members = _draw(alg, problem, participation, rng, t, exact=solver != "gd")
        if not members:
            xs.append(x.copy())
            continue
        thetas = {i: x.copy() for i, _ in members}
        if solver == "gd":
            for k in range(max(s for _, s in members)):
                for i, s in members:
                    if s > k:
                        y = thetas[i]
                        g = client_gradient(problem, i, y, rng)
                        g = g - grad_state[i] + alpha * (y - x) + lambda1 * np.sign(y - x)
                        thetas[i] = y - per_client_value(lr, i) * g
        else:
            for i, s in members:
                if s > 0:
                    thetas[i] = _argmin_one(problem, i, np.full(d, alpha), grad_state[i] + alpha * x,
                                            lambda1, x, y0=x)
        sum_sent = np.zeros(d)
        sum_sign = np.zeros(d)
        for i, s in members:
            delta = thetas[i] - x
            sent = reference_threshold(delta, eps)
            if lambda1 != 0.0 and subgradient == "kkt":
                # eq. 11: grad f_i(theta) - grad_state + alpha delta + lambda1 sub = 0
                new_grad = grad_state[i].copy() if s == 0 else \
                    problem.client_grad(thetas[i][None, :], np.array([i]))[0]
                sub = (grad_state[i] - new_grad - alpha * delta) / lambda1
                grad_state[i] = new_grad
                for j in range(d):
                    sum_sign[j] += sub[j] if sent[j] == 0 else np.sign(sent[j])
            else:
                grad_state[i] = grad_state[i] - alpha * delta - lambda1 * np.sign(delta)
                sum_sign += np.sign(sent)
            sum_sent += sent
        h = h - (alpha / N) * sum_sent - (lambda1 / N) * sum_sign
        received = [x + reference_threshold(thetas[i] - x, eps) for i, _ in members]
        x = np.mean(received, axis=0) - h / alpha
        xs.append(x.copy())
    return np.array(xs)


# ----------------------------------------------------------------- FedElasticNet Alg. 1
def _elasticnet_avg_loop(alg: Any, problem: Federation, rounds: int,
                         participation: Participation | None, rng: np.random.Generator,
                         x0: np.ndarray) -> np.ndarray:
    """Seed 003 Alg. 1: exact or gradient-step elastic-net local solve, weighted average."""
    d = problem.dim
    solver = alg.solver or "exact"
    x = x0.copy()
    xs = [x.copy()]
    for t in range(rounds):
        members = _draw(alg, problem, participation, rng, t, exact=solver != "gd")
        if not members:
            xs.append(x.copy())
            continue
        ys = {i: x.copy() for i, _ in members}
        if solver == "gd":
            for k in range(max(s for _, s in members)):
                for i, s in members:
                    if s > k:
                        y = ys[i]
                        g = client_gradient(problem, i, y, rng)
                        g = g + alg.lambda2 * (y - x) + alg.lambda1 * np.sign(y - x)
                        ys[i] = y - per_client_value(alg.lr, i) * g
        else:
            for i, s in members:
                if s > 0:
                    ys[i] = _argmin_one(problem, i, np.full(d, alg.lambda2), alg.lambda2 * x,
                                        alg.lambda1, x, y0=x)
        if alg.aggregation == "uniform":
            w = {i: 1.0 for i, _ in members}
        elif alg.aggregation == "samples":
            w = {i: float(problem.n_samples[i]) for i, _ in members}
        elif alg.aggregation == "as_printed" and problem.n_samples is not None:
            n = float(np.sum(problem.n_samples))          # Alg. 1 line 7: n_k / n
            w = {i: float(problem.n_samples[i]) / n for i, _ in members}
        else:
            w = {i: float(problem.weights[i]) for i, _ in members}
        total = 1.0 if alg.aggregation == "as_printed" else sum(w.values())
        step = np.zeros(d)
        for i, _ in members:
            step += (w[i] / total) * reference_threshold(ys[i] - x, alg.eps)
        x = x + alg.server_lr * step
        xs.append(x.copy())
    return np.array(xs)


# ----------------------------------------------------------------- EFL
def _efl_loop(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
              rng: np.random.Generator, x0: np.ndarray) -> np.ndarray:
    """Seed 000 Alg. 1 with Alg. 2 compression, per client (conventions: efl.py)."""
    N, d = problem.n_clients, problem.dim
    E = [int(per_client_value(alg.local_steps, i)) for i in range(N)]
    theta = float(max(E)) if alg.theta is None else float(alg.theta)

    def compress(T):
        return T.copy() if alg.compression is None else reference_st(T, alg.q)

    x_server = x0.copy()
    x_client = x0.copy()
    R_G = np.zeros(d)
    R = [np.zeros(d) for _ in range(N)]
    u = [np.zeros(d) for _ in range(N)]
    v = [np.zeros(d) for _ in range(N)]
    xs = [x_server.copy()]
    for t in range(rounds):
        members = [(i, s) for i, s in draw_participants(alg, problem, participation, rng, t) if s > 0]
        factor = 1.0 if alg.lr_schedule is None else float(alg.lr_schedule(t))
        U = np.sum(u, axis=0)
        V = np.sum(v, axis=0)
        w = {i: x_client.copy() for i, _ in members}
        for k in range(max([s for _, s in members], default=0)):
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, w[i], rng)
                    g = g + alg.lam * U * w[i] - alg.lam * V      # gradient of F~_k (eq. 3)
                    w[i] = w[i] - per_client_value(alg.lr, i) * factor * g
        delta_G = R_G.copy()
        for i, s in members:
            delta_k = R[i] + w[i] - x_client                   # eq. 5 input
            sent = compress(delta_k)
            R[i] = delta_k - sent if alg.error_feedback else np.zeros(d)
            p = float(problem.weights[i])
            p_tau = p if alg.weights == "plain" else E[i] * p / s
            if p_tau > theta * p * (1 + 1e-12):
                p_tau = theta * p                              # on_excess="clip" (tests use raise separately)
            delta_G = delta_G + p_tau * sent
            u[i] = problem.fisher_diag(w[i][None, :], np.array([i]))[0]
            v[i] = u[i] * w[i]
        broadcast = compress(delta_G)
        if alg.server_update == "as_printed":
            x_server = x_server + delta_G              # seed 000 Alg. 1 / eq. 6
        else:
            x_server = x_server + (delta_G - R_G)      # R_G is still the previous residual here
        R_G = delta_G - broadcast if alg.error_feedback else np.zeros(d)
        x_client = x_client + broadcast
        xs.append(x_server.copy())
    return np.array(xs)


def _register() -> None:
    from .efl import EFL
    from .elasticnet import FedElasticNet
    from .feddyn import FedDyn
    from .scaffold import Scaffold

    @register(Scaffold)
    def _scaffold(alg, problem, rounds, participation, rng, x0):
        return _scaffold_loop(alg, problem, rounds, participation, rng, x0)

    @register(FedDyn)
    def _feddyn(alg, problem, rounds, participation, rng, x0):
        return _feddyn_loop(alg, problem, rounds, participation, rng, x0, alpha=alg.alpha,
                            solver=alg.solver, lr=alg.lr, local_steps=alg.local_steps)

    @register(FedElasticNet)
    def _elasticnet(alg, problem, rounds, participation, rng, x0):
        if alg.base == "scaffold":
            return _scaffold_loop(alg, problem, rounds, participation, rng, x0,
                                  lambda1=alg.lambda1, lambda2=alg.lambda2, eps=alg.eps)
        if alg.base == "feddyn":
            return _feddyn_loop(alg, problem, rounds, participation, rng, x0, alpha=alg.lambda2,
                                solver=alg.solver or "exact", lr=alg.lr, local_steps=alg.local_steps,
                                lambda1=alg.lambda1, eps=alg.eps, subgradient=alg.subgradient)
        return _elasticnet_avg_loop(alg, problem, rounds, participation, rng, x0)

    register(EFL)(_efl_loop)


_register()
