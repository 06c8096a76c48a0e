"""experiments/fedavg_hard_instance.py: the slope fit and the verdict logic."""

from __future__ import annotations

import pytest

from experiments import fedavg_hard_instance as exp


def _res(errs2):
    R = [10, 100, 1000]
    return {"R": R, "K": [2], "G": 1.0, "mu": 1.0, "x0": 1.0, "slope_tol": 0.05,
            "errors": {"1": [1e-20, 1e-40, 0.0], "2": errs2}, "etas": {}}


def test_slope_and_checks():
    assert exp.fitted_slope([10, 100, 1000], [1e-2, 1e-4, 1e-6]) == pytest.approx(-2.0)
    c = exp.checks(_res([1e-2, 1.5e-4, 2.5e-6]))[0]
    assert c.status == "holds" and c.ratio < 1
    c = exp.checks(_res([1e-2, 1e-5, 1e-8]))[0]          # 1/R^3: faster than the lower bound allows
    assert c.status == "violated" and c.ratio == pytest.approx(1.5)
