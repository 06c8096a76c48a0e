"""FedElasticNet (FedElasticNet Alg. 1-3) one client at a time; the SCAFFOLD and
FedDyn bases reuse those algorithms' loops with the elastic-net terms.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ...errors import InvalidHyperparameterError
from ...participation import Participation
from ...problems.base import Federation
from ..elasticnet import FedElasticNet
from .common import argmin_one, draw, local_models, reference_threshold, register
from .feddyn import feddyn_loop
from .scaffold import scaffold_loop


def _elasticnet_avg_loop(alg: Any, problem: Federation, rounds: int,
                         participation: Participation | None, rng: np.random.Generator,
                         x0: np.ndarray) -> np.ndarray:
    """FedElasticNet Alg. 1: exact or gradient-step elastic-net local solve, weighted average."""
    d = problem.dim
    solver = alg.solver or "exact"
    x = x0.copy()
    xs = [x.copy()]

    def elastic_solve(i: int, *, x: np.ndarray) -> np.ndarray:
        return argmin_one(problem, i, np.full(d, alg.lambda2), alg.lambda2 * x, alg.lambda1, x, y0=x)

    def elastic_direction(i: int, y: np.ndarray, g: np.ndarray, *, x: np.ndarray) -> np.ndarray:
        return g + alg.lambda2 * (y - x) + alg.lambda1 * np.sign(y - x)

    for t in range(rounds):
        members = draw(alg, problem, participation, rng, t, exact=solver != "gd")
        if not members:
            xs.append(x.copy())
            continue
        ys = local_models(problem, members, x, rng, alg.lr, exact=solver != "gd",
                          solve=partial(elastic_solve, x=x), direction=partial(elastic_direction, x=x))
        if alg.aggregation == "uniform":
            w = {i: 1.0 for i, _ in members}
        elif alg.aggregation == "samples":
            if problem.n_samples is None:
                raise InvalidHyperparameterError("aggregation='samples' needs a federation with n_samples")
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


@register(FedElasticNet)
def _elasticnet(alg: Any, problem: Federation, rounds: int, participation: Participation | None,
                rng: np.random.Generator, x0: np.ndarray) -> np.ndarray:
    if alg.base == "scaffold":
        return scaffold_loop(alg, problem, rounds, participation, rng, x0,
                             lambda1=alg.lambda1, lambda2=alg.lambda2, eps=alg.eps)
    if alg.base == "feddyn":
        return feddyn_loop(alg, problem, rounds, participation, rng, x0, alpha=alg.lambda2,
                           solver=alg.solver or "exact", lr=alg.lr, local_steps=alg.local_steps,
                           lambda1=alg.lambda1, eps=alg.eps, subgradient=alg.subgradient)
    return _elasticnet_avg_loop(alg, problem, rounds, participation, rng, x0)
