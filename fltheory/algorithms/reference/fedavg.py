"""FedAvg one client at a time: local steps y <- y - lr_i g_i(y), then
x <- x + server_lr sum_i w_i (y_i - x) over the participants.
"""

from __future__ import annotations

import numpy as np

from ..fedavg import FedAvg
from .common import client_gradient, draw_participants, per_client_value, register


@register(FedAvg)
def _fedavg_reference(alg, problem, rounds, participation, rng, x0):
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
