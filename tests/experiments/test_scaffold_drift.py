"""experiments/scaffold_drift.py: the drift numbers it reports, held to the closed form
of THEORY.md section 3 (FedAvg with K local GD steps at rate eta on quadratic clients):

    B_i = I - (I - eta H_i)^K,   x~ = (sum p_i B_i)^{-1} sum p_i B_i x_i*,

and the slope helper to exact power laws.
"""

from __future__ import annotations

import numpy as np

from experiments import scaffold_drift as exp
from fltheory.problems.generators import random_quadratic

CFG = dict(exp.QUICK, n_clients=3, dim=2, heterogeneity=[0.0, 0.5, 2.0], max_rounds=700,
           lower_bound_rounds=[10, 100], tuned_grid=3, tuned_rounds=200)


def test_fedavg_fixed_point_matches_closed_form():
    res = exp.run(dict(CFG), np.random.default_rng(3))
    eta, K = res["eta_l"], res["K"]
    for row in res["per_h"]:
        fed = random_quadratic(CFG["n_clients"], CFG["dim"], L=CFG["L"], mu=CFG["mu"], heterogeneity=row["h"],
                               seed=res["seed"], constants="clients")
        p, I = fed.weights, np.eye(CFG["dim"])
        B = np.array([I - np.linalg.matrix_power(I - eta * H, K) for H in fed.H])
        opt = np.array([np.linalg.solve(H, e) for H, e in zip(fed.H, fed.e)])
        x_fp = np.linalg.solve(np.einsum("i,ijk->jk", p, B), np.einsum("i,ijk,ik->j", p, B, opt))
        expected = float(np.sum((x_fp - fed.optimum()) ** 2))
        np.testing.assert_allclose(row["FedAvg"]["fp_dist2"], expected, rtol=1e-6, atol=1e-20)
        assert row["SCAFFOLD"]["fp_dist2"] <= 1e-20 * (1.0 + row["init_dist2"])
    assert res["per_h"][-1]["FedAvg"]["fp_dist2"] > 0.0


def test_slope_of_exact_power_law():
    h = [0.1, 1.0, 10.0]
    assert abs(exp._slope(h, [3.0 * x ** 2 for x in h]) - 2.0) < 1e-12
    assert exp._slope([0.0, 1.0], [0.0, 1.0]) is None           # fewer than two positive points
    assert exp._first_below(np.array([3.0, 2.0, 0.5, 0.1]), 1.0) == 2
    assert exp._first_below(np.array([3.0, 2.0]), 1.0) is None
