"""experiments/local_adaptivity_rates.py: the exact error propagation by hand on a scalar client, the quick
run's checks, and the verdict logic flagging a bound that fails."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from experiments import local_adaptivity_rates as exp
from fltheory.problems import QuadraticFederation


def test_fedopt_sgd_errors_by_hand_on_one_scalar_client():
    # f = h x^2 / 2 - e x, x~ = x* = e / h; tau = 2 steps of rate eta: e' = (1 - g + g (1 - eta h)^2) e + noise,
    # noise variance g^2 eta^2 sigma2 (1 + (1 - eta h)^2)
    h, eta, s2, g = 2.0, 0.1, 3.0, 0.5
    fed = QuadraticFederation(np.array([[[h]]]), np.array([[1.0]]))
    out = exp.fedopt_sgd_errors(fed, np.array([eta]), np.array([2]), np.array([s2]), np.array([g, g]),
                                np.array([1.5]), np.array([0.5]))
    a = 1 - g + g * (1 - eta * h) ** 2
    n = g * g * eta * eta * s2 * (1 + (1 - eta * h) ** 2)
    np.testing.assert_allclose(out, [1.0, a * a + n, a * a * (a * a + n) + n], rtol=1e-13)


def test_sgd_errors_by_hand():
    fed = QuadraticFederation(np.full((2, 1, 1), 2.0), np.full((2, 1), 2.0))   # x* = 1, two clients
    out = exp.sgd_errors(fed, np.array([0.25]), 4.0, np.array([3.0]))
    np.testing.assert_allclose(out, [4.0, 0.25 * 4.0 + 0.0625 * 4.0 / 2], rtol=1e-14)


@pytest.fixture(scope="module")
def quick():
    cfg = dict(exp.QUICK, rounds=[2, 20, 200], sgd_rounds=300)
    return exp.run(cfg, np.random.default_rng(2))


def test_quick_checks_hold(quick):
    verdicts = {c.theorem: c for c in exp.checks(quick)}
    assert {k: v.status for k, v in verdicts.items()} == {"eq7-rate": "holds", "eq77-rate": "holds"}
    n_t = [s["N_t_error"] for s in quick["sgd"]]
    np.testing.assert_allclose(n_t, n_t[0], rtol=0.05)          # the 1/(N t) rate


def test_a_failing_bound_is_flagged_with_its_instance(quick):
    broken = copy.deepcopy(quick)
    broken["eq7"][1]["bound"] = broken["eq7"][1]["exact"] / 2
    check = {c.theorem: c for c in exp.checks(broken)}["eq7-rate"]
    assert check.status == "violated" and check.ratio == pytest.approx(2.0) and "random_quadratic" in check.detail
