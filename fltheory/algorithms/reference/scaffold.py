"""SCAFFOLD (Karimireddy et al., arXiv:1910.06378v1, Algorithm 1) one client at
a time, also the loop of FedElasticNet's SCAFFOLD base (FedElasticNet eq. 7).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...participation import Participation
from ...problems.base import Federation
from ..scaffold import Scaffold
from .common import client_gradient, draw_participants, per_client_value, reference_threshold, register


def scaffold_loop(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
                   rng: np.random.Generator, x0: np.ndarray, *, lambda1: float = 0.0,
                   lambda2: float = 0.0, eps: float = 0.0) -> np.ndarray:
    """SCAFFOLD (docs/theory/index.md#algorithms) / FedElasticNet Alg. 2 (FedElasticNet eq. 7), per client."""
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


@register(Scaffold)
def _scaffold(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
              rng: np.random.Generator, x0: np.ndarray) -> np.ndarray:
    return scaffold_loop(alg, problem, rounds, participation, rng, x0)
