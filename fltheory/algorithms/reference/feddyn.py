"""FedDyn one client at a time (gradient steps or the exact local solve),
also the loop of FedElasticNet's FedDyn base (FedElasticNet Alg. 3).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ...participation import Participation
from ...problems.base import Federation
from ..feddyn import FedDyn
from .common import argmin_one, draw, local_models, reference_threshold, register
from ...aliases import Rate, Steps
from ...algorithms.base import Algorithm


def feddyn_loop(alg: Algorithm, problem: Federation, rounds: int, participation: Participation | None,
                 rng: np.random.Generator, x0: np.ndarray, *, alpha: float, solver: str, lr: Rate,
                 local_steps: Steps, lambda1: float = 0.0, eps: float = 0.0,
                 subgradient: str = "sign") -> np.ndarray:
    """FedDyn (docs/theory/index.md#algorithms) / FedElasticNet Alg. 3 (FedElasticNet), per client."""
    N, d = problem.n_clients, problem.dim
    x = x0.copy()
    h = np.zeros(d)
    grad_state = [np.zeros(d) for _ in range(N)]
    xs = [x.copy()]

    def dyn_solve(i: int, *, x: np.ndarray) -> np.ndarray:
        return argmin_one(problem, i, np.full(d, alpha), grad_state[i] + alpha * x, lambda1, x, y0=x)

    def dyn_direction(i: int, y: np.ndarray, g: np.ndarray, *, x: np.ndarray) -> np.ndarray:
        return g - grad_state[i] + alpha * (y - x) + lambda1 * np.sign(y - x)

    for t in range(rounds):
        members = draw(alg, problem, participation, rng, t, exact=solver != "gd")
        if not members:
            xs.append(x.copy())
            continue
        thetas = local_models(problem, members, x, rng, lr, exact=solver != "gd", solve=partial(dyn_solve, x=x),
                              direction=partial(dyn_direction, x=x))
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


@register(FedDyn)
def _feddyn(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
            rng: np.random.Generator, x0: np.ndarray) -> np.ndarray:
    return feddyn_loop(alg, problem, rounds, participation, rng, x0, alpha=alg.alpha,
                       solver=alg.solver, lr=alg.lr, local_steps=alg.local_steps)
