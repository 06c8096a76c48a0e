"""Published bounds against exact expectations (fltheory.theory.moments).

* Seed 001 (Wang et al., Local Adaptivity in FL) Theorem 1 in its recursion form
  (``fedopt_theorem1_quadratic``) with gradient noise: the bound must lie above the exact
  E||x_t - x~||^2 of FedAvg / FedOpt-SGD at every round; the contraction experiment's own exact
  recursion (``exact_second_moment``) agrees with the general engine.
* SCAFFOLD (Karimireddy et al., arXiv:1910.06378v1, the theorems for the strongly convex case
  without and with client sampling): no heterogeneity term, checked in its exact form: the
  stationary E[F(x)] - F* under noise and sampling is the same for every heterogeneity and zero
  without noise (the experiment ``scaffold_drift`` reports it; here on an instance of its own).
"""

from __future__ import annotations

import numpy as np
import pytest

from experiments.contraction import exact_second_moment
from fltheory.algorithms import FedAvg, FedOpt, Scaffold
from fltheory.optim import sgd
from fltheory.participation import UniformSampling
from fltheory.problems import random_quadratic
from fltheory.theory.bounds import fedopt_theorem1_quadratic
from fltheory.theory.moments import exact_moments, moment_operator


def _dist2_to(ex, point):
    return np.einsum("tii->t", ex.second) - 2 * ex.mean @ point + point @ point


@pytest.mark.parametrize("form", ["squared", "paper"])
@pytest.mark.parametrize("server_lr", [1.0, 0.5])
def test_seed001_theorem1_recursion_lies_above_the_exact_expectation(form, server_lr):
    fed = random_quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=11, constants="clients")
    eta, tau, s2, R = 0.2, 3, 0.8, 25
    x0 = np.array([2.0, -1.0, 0.5])
    bound = fedopt_theorem1_quadratic(fed, R, lr=eta, local_steps=tau, sigma2=s2, server_lr=server_lr, x0=x0,
                                      form=form)
    assert bound.value is not None, bound
    x_fp = bound.terms["fixed_point"]
    alg = FedOpt(client_optimizer=sgd(eta), server_optimizer=sgd(server_lr), local_steps=tau)
    ex = exact_moments(alg, fed.with_gradient_noise(s2), R, x0=x0)
    exact = _dist2_to(ex, x_fp)
    per_round = np.asarray(bound.terms["per_round"])
    assert per_round.shape == (R + 1,) or per_round.shape == (R,)
    tail = exact[-per_round.shape[0]:]
    assert np.all(tail <= per_round * (1 + 1e-12)), (tail / per_round).max()
    # the contraction experiment's own exact recursion is the same expectation
    ref = exact_second_moment(fed, eta, tau, server_lr, s2, x0, x_fp, R)
    np.testing.assert_allclose(ref, exact, rtol=1e-10)


def test_scaffold_stationary_error_under_noise_and_sampling_has_no_heterogeneity_term():
    floors = []
    for h in (0.0, 0.5, 4.0):
        fed = random_quadratic(4, 2, L=2.0, mu=0.5, heterogeneity=h, seed=3, constants="clients")
        alg = Scaffold(lr=0.05, local_steps=3, option="II")
        op = moment_operator(alg, fed.with_gradient_noise(1.0), participation=UniformSampling(2), x0=[1.0, 1.0])
        floors.append(op.stationary(rtol=1e-12)[0])
        if h > 0:
            quiet = moment_operator(alg, fed, participation=UniformSampling(2), x0=[1.0, 1.0])
            assert abs(quiet.stationary(rtol=0.0, atol=1e-16)[0]) < 1e-10
    np.testing.assert_allclose(floors, floors[0], rtol=1e-8)
    # FedAvg under the same noise and sampling drifts: its floor grows with h
    fa = [moment_operator(FedAvg(lr=0.05, local_steps=3, aggregation="uniform"),
                          random_quadratic(4, 2, L=2.0, mu=0.5, heterogeneity=h, seed=3, constants="clients")
                          .with_gradient_noise(1.0), participation=UniformSampling(2), x0=[1.0, 1.0])
          .stationary(rtol=1e-12)[0] for h in (0.5, 4.0)]
    assert fa[1] > 10 * fa[0]
