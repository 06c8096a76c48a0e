"""FedAvg one client at a time: local steps y <- y - lr_i g_i(y), then
x <- x + server_lr sum_i w_i (y_i - x) over the participants.
"""

from __future__ import annotations

import numpy as np

from ..fedavg import FedAvg
from .common import aggregation, draw_participants, local_models, register


def _plain_gradient(i: int, y: np.ndarray, g: np.ndarray) -> np.ndarray:
    return g


def _no_solve(i: int) -> np.ndarray:
    raise AssertionError("FedAvg has no exact local solve")


@register(FedAvg)
def _fedavg_reference(alg, problem, rounds, participation, rng, x0):
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_participants(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ys = local_models(problem, members, x, rng, alg.lr, exact=False, solve=_no_solve,
                          direction=_plain_gradient)
        w = aggregation(alg, problem, members)
        step = np.zeros_like(x)
        for i, _ in members:
            step += w[i] * (ys[i] - x)
        x = x + alg.server_lr * step
        xs.append(x.copy())
    return np.array(xs)
