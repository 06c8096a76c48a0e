"""Small federations and composed local objectives shared by the tests of algorithms.local."""

from __future__ import annotations

import numpy as np

from fltheory.algorithms.local import LocalObjective
from fltheory.problems.generators import random_quadratic
from fltheory.problems.logistic import LogisticFederation


def quadratic(seed=0, N=4, d=3):
    return random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed)


def logistic(seed=0, N=3, f=3, n=15):
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((n + i, f)) for i in range(N)]
    y = [np.where(rng.random(n + i) < 0.5, -1.0, 1.0) for i in range(N)]
    return LogisticFederation(A, y, reg=0.05)


def composed(m, d, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((m, d))
    return (LocalObjective.proximal(np.linspace(0.2, 0.8, m), C)
            + LocalObjective.diagonal(rng.random((m, d)), rng.standard_normal((m, d)))
            + LocalObjective.linear(rng.standard_normal((m, d))))
