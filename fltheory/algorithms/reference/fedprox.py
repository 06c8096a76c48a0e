"""FedProx (and FedProx-TE) one client at a time: proximal local steps or the
exact proximal solve around the server model (or its temporal ensemble).
"""

from __future__ import annotations

import numpy as np

from ..fedprox import FedProx
from .common import (
    aggregation,
    client_gradient,
    draw_members,
    per_client_value,
    register,
    solve_one,
    te_push,
    te_value,
)


@register(FedProx)
def _fedprox_reference(alg, problem, rounds, participation, rng, x0):
    beta = None if alg.target is None else float(alg.target.beta)
    hat, count = np.zeros_like(x0), 0
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_members(alg, problem, participation, rng, t)
        centre = x.copy() if (beta is None or count == 0) else te_value(beta, hat, count)
        if members:
            ys = {i: x.copy() for i, _ in members}
            if alg.solver == "exact":
                for i, s in members:
                    if s > 0:
                        ys[i] = solve_one(problem, i, np.full(x.shape, float(alg.mu)),
                                           float(alg.mu) * centre, x)
            else:
                for k in range(max(s for _, s in members)):
                    for i, s in members:
                        if s > k:
                            g = client_gradient(problem, i, ys[i], rng) + alg.mu * (ys[i] - centre)
                            ys[i] = ys[i] - per_client_value(alg.lr, i) * g
            w = aggregation(alg, problem, members)
            x = x + alg.server_lr * sum(w[i] * (ys[i] - x) for i, _ in members)
        if beta is not None:
            hat, count = te_push(beta, hat, count, x)
        xs.append(x.copy())
    return np.array(xs)
