"""Exact moments against Monte Carlo: every algorithm x noise x participation kind, 4 standard errors.

Two kinds of Monte Carlo:

* ``monte_carlo`` (tests/theory/_moments_mc.py): 20,000 replicas at once, each round the
  conditional affine map of a sampled outcome with sampled noise -- checks the moment algebra
  over a covering grid of algorithm x noise x participation (every algorithm meets several
  noise kinds and participation kinds; every noise and participation kind meets many algorithms);
* real runs (``fltheory.algorithms.run`` with the federation's own stochastic oracle and the
  real participation draws): end to end, fewer runs, on a few combinations.

Instances: N <= 4 clients, d = 2, 3-4 rounds.  The slow-marked variant repeats the grid with
200,000 replicas and runs only with FLTHEORY_THOROUGH=1.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedDyn,
    FedOpt,
    FedProx,
    FedProxTE,
    Scaffold,
    run,
)
from fltheory.optim import momentum, preconditioned, sgd
from fltheory.participation import (
    Bernoulli,
    BinomialSteps,
    FullParticipation,
    IncompleteSteps,
    Schedule,
    UniformSampling,
    UniformSteps,
)
from fltheory.problems import QuadraticFederation
from fltheory.theory.moments import AdditiveNoise, MinibatchNoise, exact_moments

from ._moments_mc import monte_carlo


def lsq_fed(seed: int = 0, N: int = 3, d: int = 2) -> QuadraticFederation:
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((5, d)) * np.sqrt(1 + i) for i in range(N)]
    b = [rng.standard_normal(5) + 2 * i for i in range(N)]
    return QuadraticFederation.from_least_squares(A, b)


def noise_for(kind: str, fed: QuadraticFederation):
    N, d = fed.n_clients, fed.dim
    if kind == "iso":
        return AdditiveNoise(np.linspace(20.0, 80.0, N), N, d)
    if kind == "diag":
        return AdditiveNoise(np.linspace(10.0, 50.0, N * d).reshape(N, d), N, d)
    if kind == "full":
        rng = np.random.default_rng(5)
        B = rng.standard_normal((N, d, d)) * 5.0
        return AdditiveNoise(B @ np.swapaxes(B, 1, 2), N, d)
    if kind == "mb-with":
        return MinibatchNoise.of(fed, 2, replace=True)
    if kind == "mb-without":
        return MinibatchNoise.of(fed, 2, replace=False)
    raise ValueError(kind)


PARTICIPATION = {
    "full": lambda: FullParticipation(),
    "uniform": lambda: UniformSampling(2),
    "bernoulli": lambda: Bernoulli([0.3, 0.7, 0.5]),
    "steps": lambda: IncompleteSteps(FullParticipation(), UniformSteps(), inactive_prob=0.2),
    "binomial": lambda: IncompleteSteps(UniformSampling(2), BinomialSteps(0.6)),
    "schedule": lambda: Schedule(UniformSampling(2), departures={0: 2}, arrivals={2: 1}),
}

ALGORITHMS = {
    "fedavg": lambda: FedAvg(lr=0.1, local_steps=2, server_lr=0.9),
    "fedprox-gd": lambda: FedProx(lr=0.1, local_steps=2, mu=0.5),
    "fedprox-exact": lambda: FedProx(mu=0.5, solver="exact"),
    "fedcurv": lambda: FedCurv(lr=0.1, local_steps=2, alpha=0.2),
    "scaffold-I": lambda: Scaffold(lr=0.1, local_steps=2, option="I"),
    "scaffold-II": lambda: Scaffold(lr=0.1, local_steps=2, option="II", server_lr=0.8),
    "feddyn": lambda: FedDyn(alpha=0.5, lr=0.05, local_steps=2, solver="gd"),
    "fedopt-momentum": lambda: FedOpt(client_optimizer=momentum(0.05, beta=0.5),
                                      server_optimizer=momentum(1.0, beta=0.3), local_steps=2),
    "fedopt-precond": lambda: FedOpt(client_optimizer=preconditioned(0.1, np.array([1.0, 0.5])),
                                     server_optimizer=sgd(0.8), local_steps=2),
    "efl-lam": lambda: EFL(lr=0.1, local_steps=2, lam=0.3, compression=None),
    "fedprox-te": lambda: FedProxTE(beta=0.4, lr=0.1, local_steps=2, mu=0.3),
}

# covering grid: (algorithm, noise, participation)
GRID = [
    ("fedavg", "iso", "uniform"), ("fedavg", "mb-without", "steps"), ("fedavg", "full", "schedule"),
    ("fedprox-gd", "diag", "bernoulli"), ("fedprox-gd", "mb-with", "uniform"),
    ("fedprox-exact", "iso", "bernoulli"),
    ("fedcurv", "full", "bernoulli"), ("fedcurv", "mb-with", "full"),
    ("scaffold-I", "iso", "uniform"), ("scaffold-I", "mb-without", "bernoulli"),
    ("scaffold-II", "diag", "steps"), ("scaffold-II", "full", "uniform"), ("scaffold-II", "mb-with", "schedule"),
    ("feddyn", "iso", "uniform"), ("feddyn", "mb-without", "full"),
    ("fedopt-momentum", "full", "steps"), ("fedopt-momentum", "iso", "bernoulli"),
    ("fedopt-precond", "diag", "uniform"), ("fedopt-precond", "mb-with", "binomial"),
    ("efl-lam", "iso", "steps"), ("efl-lam", "diag", "uniform"), ("efl-lam", "mb-without", "schedule"),
    ("fedprox-te", "full", "uniform"), ("fedprox-te", "mb-with", "steps"),
    # noise alone (full participation): the spread statistic then sees only the noise terms
    ("scaffold-I", "diag", "full"), ("fedopt-momentum", "mb-with", "full"), ("efl-lam", "mb-without", "full"),
    ("fedavg", "iso", "full"), ("fedprox-gd", "full", "full"),
]


def _check(alg_name: str, noise_kind: str, part_name: str, replicas: int) -> None:
    fed = lsq_fed()
    alg = ALGORITHMS[alg_name]()
    noise = noise_for(noise_kind, fed)
    part = PARTICIPATION[part_name]()
    x0 = np.array([1.0, -1.0])
    rounds = 3
    ex = exact_moments(alg, fed, rounds, participation=part, noise=noise, x0=x0)
    seed = sum(ord(ch) for ch in alg_name + noise_kind + part_name)
    mean, se = monte_carlo(alg, fed, rounds, participation=part, noise=noise, x0=x0, replicas=replicas,
                           seed=seed, center=ex.mean)
    exact_vals = np.hstack([ex.mean, ex.dist2[:, None], ex.variance[:, None]])
    z = np.abs(mean - exact_vals)[1:] / np.maximum(se[1:], 1e-12)
    assert np.all(z < 4), f"{alg_name} x {noise_kind} x {part_name}: max z = {z.max():.2f}\n{z}"
    assert np.all(se[1:, -1] > 0), "the instance must actually be random"


@pytest.mark.parametrize("alg_name, noise_kind, part_name", GRID, ids=["-".join(g) for g in GRID])
def test_exact_moments_match_vectorized_monte_carlo(alg_name, noise_kind, part_name):
    _check(alg_name, noise_kind, part_name, replicas=20_000)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FLTHEORY_THOROUGH") != "1",
                    reason="thorough variant (200,000 replicas per cell): set FLTHEORY_THOROUGH=1")
@pytest.mark.parametrize("alg_name, noise_kind, part_name", GRID, ids=["-".join(g) for g in GRID])
def test_exact_moments_match_vectorized_monte_carlo_thorough(alg_name, noise_kind, part_name):
    _check(alg_name, noise_kind, part_name, replicas=200_000)


def test_grid_covers_every_algorithm_noise_and_participation():
    assert {g[0] for g in GRID} == set(ALGORITHMS)
    assert {g[1] for g in GRID} == {"iso", "diag", "full", "mb-with", "mb-without"}
    assert {g[2] for g in GRID} == set(PARTICIPATION)


REAL = [
    ("fedavg", "uniform", "iso"), ("scaffold-II", "bernoulli", "iso"), ("efl-lam", "steps", "iso"),
    ("fedcurv", "uniform", "mb"), ("feddyn", "schedule", "iso"),
]


@pytest.mark.parametrize("alg_name, part_name, oracle", REAL, ids=["-".join(r) for r in REAL])
def test_exact_moments_match_real_runs(alg_name, part_name, oracle):
    """End to end: the federation's own oracle, the real participation draws, ``run``."""
    base = lsq_fed(seed=2)
    fed = base.with_gradient_noise([0.5, 1.0, 0.3]) if oracle == "iso" else base.with_minibatch(2)
    alg = ALGORITHMS[alg_name]()
    part = PARTICIPATION[part_name]()
    x0 = np.array([0.5, 0.5])
    R, M = 3, 300
    ex = exact_moments(alg, fed, R, participation=part, x0=x0)
    vals = np.empty((M, R + 1, 3))
    for r in range(M):
        h = run(alg, fed, R, participation=part, seed=r, x0=x0)
        vals[r, :, :2], vals[r, :, 2] = h.x, h.dist2
    mean, se = vals.mean(axis=0), vals.std(axis=0, ddof=1) / np.sqrt(M)
    z = np.abs(mean - np.hstack([ex.mean, ex.dist2[:, None]]))[1:] / se[1:]
    assert np.all(z < 4), f"{alg_name} {part_name} {oracle}: z = {z}"
