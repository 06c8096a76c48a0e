"""Helpers of experiments/fedopt_fixed_points.py: rounds from a predicted rate, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import fedopt_fixed_points as exp

CFG = {"safety": 10.0, "min_rounds": 5, "max_rounds": 1000}


def test_rounds_needed_reaches_tol_over_safety_at_the_predicted_rate():
    rate, tol, dist0 = 0.9, 1e-6, 2.0
    R = exp._rounds_needed(rate, tol, dist0, CFG)
    assert dist0 * rate ** R <= tol / CFG["safety"] < dist0 * rate ** (R - 1)
    assert exp._rounds_needed(1.0, tol, dist0, CFG) == CFG["max_rounds"]
    assert exp._rounds_needed(1e-9, tol, dist0, CFG) == CFG["min_rounds"]


def _fake():
    methods = list(exp.METHODS)
    return {"seed": 1, "weights": [0.5, 0.5], "x_star": np.zeros(2), "x0": np.ones(2), "tol": 1e-6,
            "methods": methods, "source": {k: exp.METHODS[k][3] for k in methods},
            "rounds": {k: 10 for k in methods}, "rate": {k: 0.5 for k in methods},
            "dist_to_fp": {k: 1e-8 for k in methods},
            "trajectory": {k: np.zeros((3, 2)) for k in methods},
            "fixed_point": {k: np.zeros(2) for k in methods},
            "bias": {k: (0.1 if k in exp.PAIRS else 0.5) for k in methods}}


def test_checks_hold_then_flag_an_unconverged_method_and_a_worse_correction():
    assert {c.status for c in exp.checks(_fake())} == {"holds"}
    res = _fake()
    res["dist_to_fp"]["adagrad_joint"] = 3e-6
    root = next(c for c in exp.checks(res) if c.theorem == "operator-root")
    assert root.status == "violated" and root.ratio == pytest.approx(3.0) and "adagrad_joint" in root.detail
    res = _fake()
    res["bias"]["precond_local"] = 0.6
    corr = next(c for c in exp.checks(res) if c.theorem == "correction")
    assert corr.status == "violated" and corr.ratio == pytest.approx(1.2)
