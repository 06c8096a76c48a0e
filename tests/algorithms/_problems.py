"""Small problem builders and a participation model shared by the algorithm tests."""

from __future__ import annotations

import numpy as np

from fltheory.participation import Participants, Participation
from fltheory.problems.logistic import LogisticFederation
from fltheory.problems.quadratic import QuadraticFederation


class RandomParticipation(Participation):
    """Each client takes part with probability 0.7 and completes U{0..E_i} steps."""

    def draw(self, rng, t, local_steps):
        E = np.asarray(local_steps)
        clients = np.flatnonzero(rng.random(E.shape[0]) < 0.7)
        steps = rng.integers(0, E[clients] + 1)
        return Participants(clients.astype(np.int64), np.asarray(steps, dtype=np.int64))


def spread_quadratic(seed: int, N: int = 4, d: int = 3, spread: float = 5.0,
                     weights=None) -> QuadraticFederation:
    """Clients with spectra in [1, 4] and optima ~ N(0, spread^2) apart."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((N, d, d)))[0]
    lam = rng.uniform(1.0, 4.0, (N, d))
    H = np.einsum("nij,nj,nkj->nik", Q, lam, Q)
    opt = spread * rng.standard_normal((N, d))
    return QuadraticFederation(H, np.einsum("nij,nj->ni", H, opt), weights=weights)


def shifted_logistic(seed: int, N: int = 4, f: int = 3, shift: float = 1.0) -> LogisticFederation:
    """Binary logistic clients (6-11 samples each, ridge 0.1); client i's features
    are shifted by shift * i, so the clients differ."""
    rng = np.random.default_rng(seed)
    feats, labels = [], []
    for i in range(N):
        n = int(rng.integers(6, 12))
        feats.append(rng.standard_normal((n, f)) + shift * i)
        labels.append(np.where(rng.random(n) < 0.5, -1.0, 1.0))
    return LogisticFederation(feats, labels, reg=0.1)


def sampled_incomplete(q: int):
    """q clients uniformly without replacement, each completing U{0..E_i} local
    steps (inactive and incomplete clients)."""
    from fltheory.participation import IncompleteSteps, UniformSampling, UniformSteps
    return IncompleteSteps(UniformSampling(q), UniformSteps())


def generated_quadratic(seed=0, N=5, d=4, het=1.0, **kw) -> QuadraticFederation:
    """random_quadratic with L = 4, mu = 0.5 and heterogeneity ``het``."""
    from fltheory.problems.generators import random_quadratic
    return random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=het, seed=seed, **kw)


def sized_logistic(seed=0, N=4, f=3, n=12) -> LogisticFederation:
    """Binary logistic clients of n, n+1, ... rows (ridge 0.05)."""
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((n + i, f)) for i in range(N)]
    y = [np.where(rng.random(n + i) < 0.5, -1.0, 1.0) for i in range(N)]
    return LogisticFederation(A, y, reg=0.05)
