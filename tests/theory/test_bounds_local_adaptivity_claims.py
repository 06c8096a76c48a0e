"""Seed 001 section 4, "better client optimizers can accelerate the global convergence": the Theorem 1
bound grows with rho_bar, and on quadratics the exact Mann rate of FedOpt with GD clients falls as the
local progress improves (more local steps: smaller contraction constant)."""

from __future__ import annotations

import numpy as np

from fltheory.problems.generators import random_quadratic
from fltheory.theory import fedopt_quadratic_fixed_point, mann_rate
from fltheory.theory.bounds import fedopt_theorem1, sgd_operator_constants


def test_theorem1_bound_increases_with_the_contraction_constant():
    p = np.array([0.3, 0.7])
    rhos = np.linspace(0.05, 0.95, 19)
    values = [fedopt_theorem1(30, rho=r, phi=0.01, weights=p, server_lr=0.5, init_dist2=4.0).value
              for r in rhos]
    assert np.all(np.diff(values) > 0)
    # and for every round of the unrolled recursion, not only the last one
    lo = fedopt_theorem1(30, rho=0.2, phi=0.01, weights=p, server_lr=0.5, init_dist2=4.0).terms["per_round"]
    hi = fedopt_theorem1(30, rho=0.8, phi=0.01, weights=p, server_lr=0.5, init_dist2=4.0).terms["per_round"]
    assert np.all(lo[1:] < hi[1:]) and lo[0] == hi[0]


def test_more_local_progress_gives_a_smaller_constant_and_a_faster_exact_rate():
    fed = random_quadratic(4, 3, L=4.0, mu=0.5, heterogeneity=1.0, seed=8, constants="clients")
    eta = 0.5 / float(fed.client_L.max())
    taus = [1, 2, 4, 8]
    rho_bar = [float(fed.weights @ sgd_operator_constants(eta, t, fed.client_mu, fed.client_L, 0.0)[0])
               for t in taus]
    rates = [mann_rate(fedopt_quadratic_fixed_point(fed, eta, t), 1.0) for t in taus]
    assert np.all(np.diff(rho_bar) < 0) and np.all(np.diff(rates) < 0)
    # the exact rate never exceeds the square root of Theorem 1's contraction 1 - eta_s (1 - rho_bar)
    assert all(r <= np.sqrt(rb) + 1e-12 for r, rb in zip(rates, rho_bar, strict=True))
