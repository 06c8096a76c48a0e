"""experiments/efl_unbiased.py: the library's EFL aggregate against the closed form
sum_k w_k(s) (I - (I - eta H_k)^s)(x_k* - x), and the verdict logic."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import efl_unbiased as exp
from fltheory.problems.generators import random_quadratic


@pytest.mark.parametrize("weights", ["plain", "adaptive"])
@pytest.mark.parametrize("s", [1, 3, 4])
def test_aggregate_is_the_closed_form_of_local_gd(weights, s):
    fed = random_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=4, constants="clients")
    x, eta, E = np.array([0.7, -1.2]), 0.05, 4
    expected = np.zeros(2)
    for k in range(3):
        M = np.eye(2) - np.linalg.matrix_power(np.eye(2) - eta * fed.H[k], s)
        w = fed.weights[k] * (E / s if weights == "adaptive" else 1.0)
        expected += w * M @ (fed.client_optima()[k] - x)
    np.testing.assert_allclose(exp.aggregate(fed, x, eta, E, s, weights), expected, rtol=1e-12, atol=1e-15)


def test_plain_relative_bias_tends_to_one_minus_mean_steps_over_E():
    # to first order A(s) = -s eta sum p^k g_k, so E[A]/A_full -> E[s]/E = (E + 1)/(2E)
    fed = random_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=4, constants="clients")
    b = exp.relative_bias(fed, np.array([0.7, -1.2]), 1e-6, 5, "plain")
    assert b == pytest.approx(1 - 3 / 5, rel=1e-4)
    assert exp.relative_bias(fed, np.array([0.7, -1.2]), 1e-6, 5, "adaptive") < 1e-4


def test_checks_and_slope():
    eta = [0.1, 0.01, 0.001]
    assert exp.slope(eta, [2 * e for e in eta]) == pytest.approx(1.0)
    r = {"seed": 1, "N": 2, "d": 2, "E": 4, "eta": eta, "slope_tol": 0.1, "plain_limit": 0.375,
         "bias_adaptive": [0.3 * e for e in eta], "bias_plain": [0.3, 0.37, 0.375]}
    c = {x.theorem: x for x in exp.checks(r)}
    assert c["unbiased-first-order"].status == "holds" and c["plain-weights-biased"].status == "holds"
    r["bias_adaptive"] = [0.3, 0.3, 0.3]                # constant: not vanishing
    assert {x.theorem: x.status for x in exp.checks(r)}["unbiased-first-order"] == "violated"
