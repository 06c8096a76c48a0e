"""FedProx (and FedProx-TE) one client at a time: proximal local steps or the
exact proximal solve around the server model (or its temporal ensemble).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..fedprox import FedProx
from .common import aggregation, draw_members, local_models, register, solve_one, te_push, te_value


@register(FedProx)
def _fedprox_reference(alg, problem, rounds, participation, rng, x0):
    beta = None if alg.target is None else float(alg.target.beta)
    hat, count = np.zeros_like(x0), 0
    xs = [x0.copy()]
    x = x0.copy()

    def prox_solve(i, *, centre, x):
        return solve_one(problem, i, np.full(x.shape, float(alg.mu)), float(alg.mu) * centre, x)

    def prox_direction(i, y, g, *, centre):
        return g + alg.mu * (y - centre)

    for t in range(rounds):
        members = draw_members(alg, problem, participation, rng, t)
        centre = x.copy() if (beta is None or count == 0) else te_value(beta, hat, count)
        if members:
            ys = local_models(problem, members, x, rng, alg.lr, exact=alg.solver == "exact",
                              solve=partial(prox_solve, centre=centre, x=x),
                              direction=partial(prox_direction, centre=centre))
            w = aggregation(alg, problem, members)
            x = x + alg.server_lr * sum(w[i] * (ys[i] - x) for i, _ in members)
        if beta is not None:
            hat, count = te_push(beta, hat, count, x)
        xs.append(x.copy())
    return np.array(xs)
