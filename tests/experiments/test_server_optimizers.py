"""Verdict logic of experiments/server_optimizers.py on fabricated trajectories."""

from __future__ import annotations

import numpy as np

from experiments import server_optimizers as exp


def _fake():
    d = 1e-8 * np.ones(5)
    servers = ["A", "B"]
    return {"seed": 1, "n_clients": 2, "dim": 2, "rounds": 4, "tol": 1e-6, "still_window": 2,
            "settings": ["quadratic/sgd", "quadratic/adagrad"], "servers": servers,
            "bias": {"quadratic/sgd": 0.2, "quadratic/adagrad": 0.3},
            "closed_vs_root_sgd": 1e-16, "fixed_point": {"quadratic/sgd": [0.0], "quadratic/adagrad": [0.0]},
            "jacobian_radius": {"quadratic/sgd": 0.5, "quadratic/adagrad": 0.6}, "fixed_point_note": {},
            "dist_fp": {c: {s: d for s in servers} for c in ("quadratic/sgd", "quadratic/adagrad")},
            "movement": {c: {s: 0.0 for s in servers} for c in ("quadratic/sgd", "quadratic/adagrad")}}


def test_converged_at_the_fixed_point_holds():
    assert [c.status for c in exp.checks(_fake())] == ["holds", "holds"]


def test_converged_elsewhere_is_a_violation_and_still_moving_is_not_checkable():
    res = _fake()
    res["dist_fp"]["quadratic/sgd"]["B"] = np.array([1.0, 0.1, 0.01, 0.01, 0.01])   # stopped away from x~
    res["movement"]["quadratic/adagrad"]["A"] = 1e-3                                 # still moving
    res["dist_fp"]["quadratic/adagrad"]["A"] = np.array([1.0, 0.5, 0.2, 0.1, 0.05])
    sgd, ada = exp.checks(res)
    assert sgd.status == "violated" and "B" in sgd.detail and sgd.ratio > 1
    assert ada.status == "not checkable" and "A" in ada.detail


def test_no_fixed_point_is_not_checkable():
    res = _fake()
    res["fixed_point"]["quadratic/adagrad"] = None
    res["fixed_point_note"]["quadratic/adagrad"] = "no fixed point found: solver message"
    sgd, ada = exp.checks(res)
    assert sgd.status == "holds"
    assert ada.status == "not checkable" and ada.ratio is None and "solver message" in ada.detail
