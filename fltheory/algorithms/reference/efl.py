"""EFL (EFL Alg. 1 with Alg. 2 compression) one client at a time
(conventions: ``algorithms.efl``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...participation import Participation
from ...problems.base import Federation
from ..efl import EFL
from .common import client_gradient, draw_participants, per_client_value, reference_st, register


@register(EFL)
def _efl_loop(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
              rng: np.random.Generator, x0: np.ndarray) -> np.ndarray:
    """EFL Alg. 1 with Alg. 2 compression, per client (conventions: efl.py)."""
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
            x_server = x_server + delta_G              # EFL Alg. 1 / eq. 6
        else:
            x_server = x_server + (delta_G - R_G)      # R_G is still the previous residual here
        R_G = delta_G - broadcast if alg.error_feedback else np.zeros(d)
        x_client = x_client + broadcast
        xs.append(x_server.copy())
    return np.array(xs)
