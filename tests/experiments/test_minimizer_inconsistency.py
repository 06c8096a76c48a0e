"""Helpers of experiments/minimizer_inconsistency.py: the slope fit and the verdicts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments import minimizer_inconsistency as exp


@given(power=st.floats(-1.0, 3.0), scale=st.floats(1e-3, 1e3))
def test_slope_recovers_the_exponent_of_a_power_law(power, scale):
    rates = np.geomspace(1e-5, 1e-1, 7)
    assert exp.slope(rates, scale * rates ** power, 3) == pytest.approx(power, abs=1e-9)


def test_slope_uses_only_the_smallest_rates():
    rates = np.array([1e-1, 1e-4, 1e-2, 1e-3])                     # unsorted on purpose
    values = np.where(rates < 5e-2, rates, 1.0)                   # slope 1 below 0.05, flat above
    assert exp.slope(rates, values, 3) == pytest.approx(1.0, abs=1e-12)


def _fake(bias_slope_hetero=0.0, corrected_slope=1.0):
    r = np.geomspace(1e-4, 1e-2, 4)
    pts = {"gd_equal": r, "gd_hetero": 0.4 * r ** bias_slope_hetero, "gd_hetero_local": r ** corrected_slope,
           "adagrad_equal": 0.1 + 0 * r, "adagrad_hetero": 0.5 + 0 * r, "adagrad_hetero_local": r}
    return {"seed": 1, "n_clients": 2, "dim": 2, "L": 1.0, "mu": 0.5, "fit_points": 3, "slope_tol": 0.1,
            "agree_tol": 1e-7, "cases": list(exp.CASES), "rates": {c: r for c in exp.CASES},
            "points": pts, "closed_at_points": {c: 1e-12 * np.ones(4) for c in exp.CASES if c.startswith("gd")},
            "eq8_limit_bias": 0.4, "dist_to_limit": r, "first_order_remainder": r ** 2, "failures": {}}


def test_checks_pass_on_the_predicted_slopes_and_fail_otherwise():
    assert {c.status for c in exp.checks(_fake())} == {"holds"}
    vanishing = [c for c in exp.checks(_fake(bias_slope_hetero=1.0)) if c.theorem == "eq8-limit"]
    assert vanishing[0].status == "violated" and vanishing[0].ratio == pytest.approx(10.0)
    half = [c for c in exp.checks(_fake(corrected_slope=0.5)) if c.theorem == "correction-O(eta)"]
    assert half[0].status == "violated" and half[0].ratio == pytest.approx(5.0)
    far = _fake()
    far["closed_at_points"]["gd_hetero"] = np.array([0, 0, 0, 1e-5])
    c = next(c for c in exp.checks(far) if c.theorem == "closed-vs-root")
    assert c.status == "violated" and c.ratio == pytest.approx(100.0)


def test_missing_fixed_points_make_the_slope_not_checkable():
    res = _fake()
    res["points"]["adagrad_hetero_local"] = [None, None, 1e-2, 1e-1]
    res["failures"]["adagrad_hetero_local"] = ["eta = 1e-4: root solver message"]
    assert exp.slope(res["rates"]["adagrad_hetero_local"], res["points"]["adagrad_hetero_local"], 3) is None
    c = [c for c in exp.checks(res) if c.theorem == "correction-O(eta)"][1]
    assert c.status == "not checkable" and "root solver message" in c.detail
