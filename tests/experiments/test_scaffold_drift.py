"""experiments/scaffold_drift.py: the drift numbers it reports, held to the closed form
of THEORY.md section 3 (FedAvg with K local GD steps at rate eta on quadratic clients):

    B_i = I - (I - eta H_i)^K,   x~ = (sum p_i B_i)^{-1} sum p_i B_i x_i*,

and the slope helper to exact power laws.
"""

from __future__ import annotations

import numpy as np
import pytest

from experiments import scaffold_drift as exp
from fltheory.problems.generators import random_quadratic

CFG = dict(exp.QUICK, n_clients=3, dim=2, heterogeneity=[0.0, 0.5, 2.0], max_rounds=700,
           lower_bound_rounds=[10, 100], tuned_grid=3, tuned_rounds=200,
           rounds={**exp.QUICK["rounds"], "eps": [1e-1, 1e-2], "grid": 2, "heterogeneity": [0.0, 1.0]})


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


def test_step_condition_names_match_the_bounds_module():
    from fltheory.theory.bounds import scaffold_step_conditions

    res = scaffold_step_conditions(eta_l=1e-3, eta_g=1.0, beta=4.0, K=5, R=1000, mu=1.0, N=6, S=6)
    assert tuple(a.name for a in res.assumptions) == exp.STEP_CONDITIONS
    assert set(exp.UNVERIFIED_CONSTANTS) <= set(exp.STEP_CONDITIONS)


def test_every_step_condition_status_is_reported():
    # beta = 4, mu = 1, K = 5, N = 6: caps 1/(81*4*5) = 1/1620 and S/(15*1*6*5) = S/450, R_min = max(648, 180/S)
    ok = exp._step_conditions(eta_l=1 / 1620, eta_g=1.0, beta=4.0, K=5, R=700, mu=1.0, N=6, S=6)
    assert ok["eta_l_max_smoothness"] == pytest.approx(1 / 1620, rel=1e-14)
    assert ok["eta_l_max_sampling"] == pytest.approx(6 / 450, rel=1e-14)
    chk = exp._step_check(ok)
    assert chk.status == "holds" and chk.ratio == pytest.approx(1.0, rel=1e-12)
    for name in exp.STEP_CONDITIONS:
        assert f"{name}: held" in chk.detail
    assert "unverified" in chk.detail
    # beta = mu = 1, K = 5, N = 6, S = 1, eta_g = 0.5: caps 1/(81*5*0.5) = 1/202.5 and 1/(15*6*5*0.5) = 1/225,
    # R_min = max(162, 30*6) = 180: eta_l = 0.0047 breaks only the sampling cap; R = 100 and eta_g fail too
    bad = exp._step_conditions(eta_l=0.0047, eta_g=0.5, beta=1.0, K=5, R=100, mu=1.0, N=6, S=1)
    assert bad["eta_l_max_sampling"] == pytest.approx(1 / 225, rel=1e-14)
    assert bad["R_min"] == pytest.approx(180, rel=1e-14)
    chk = exp._step_check(bad)
    assert chk.status == "not checkable" and chk.ratio == pytest.approx(0.0047 * 225, rel=1e-12)
    for name in ("eta_g >= 1", "eta_l <= S/(15 mu N K eta_g)", "R >= max(162 beta/mu, 30 N/S)"):
        assert f"{name}: FAILS" in chk.detail
    for name in ("1 <= S <= N", "eta_l <= 1/(81 beta K eta_g)", "eta_l > 0"):
        assert f"{name}: held" in chk.detail


def _noise_results(floors, quiet):
    rows = [{"h": h, "init_gap": 1.0, "SCAFFOLD": {"floor": f, "floor_no_noise": q}, "FedAvg": {"floor": 2 * f}}
            for h, f, q in zip([0.0, 1.0, 10.0], floors, quiet)]
    return {"per_h": rows, "sigma2": 1.0, "S": 2, "N": 4, "K": 5, "eta_l": 1e-3, "heterogeneity": [0.0, 1.0, 10.0],
            "floor_rtol": 1e-6, "zero_noise_tol": 1e-9}


def test_noise_check_flags_a_heterogeneity_dependent_floor_and_a_nonzero_noiseless_floor():
    ok = exp._noise_check(_noise_results([1e-4, 1e-4 * (1 + 1e-9), 1e-4], [0.0, 1e-12, 0.0]))
    assert ok.status == "holds" and ok.ratio < 1
    drift = exp._noise_check(_noise_results([1e-4, 1.1e-4, 1e-4], [0.0, 0.0, 0.0]))
    assert drift.status == "violated" and drift.detail.startswith("FINDING")
    stuck = exp._noise_check(_noise_results([1e-4, 1e-4, 1e-4], [0.0, 1e-6, 0.0]))
    assert stuck.status == "violated"


def test_noise_rounds_are_the_first_round_below_eps_of_the_exact_moments():
    """The best rounds per eps are the first t with exact E[F(x_t)] - F* <= eps (read off
    scaffold_sampling_moments, an independent recursion on the blocks) minimised over the grid, and the
    formula is sigma^2/(mu K S eps) + beta/mu + N/S."""
    from fltheory.algorithms import Scaffold
    from fltheory.participation import UniformSampling
    from fltheory.theory.moments import scaffold_sampling_moments

    cfg = dict(exp.QUICK, noise={**exp.QUICK["noise"], "n_clients": 3, "S": 2},
               rounds={**exp.QUICK["rounds"], "eps": [1e-1, 1e-2], "grid": 2, "max_rounds": 2000,
                       "heterogeneity": [0.0, 1.0]})
    direction = np.array([0.6, 0.8])
    nr = exp._noise_rounds(cfg, 7, direction)
    beta, mu, K = cfg["L"], cfg["mu"], cfg["K"]
    for label, S in (("all clients", 3), ("sampled", 2)):
        st = nr["settings"][label]
        np.testing.assert_allclose(st["formula"], [1.0 / (mu * K * S * e) + beta / mu + 3 / S for e in (1e-1, 1e-2)])
        row = st["per_h"][1]
        base = random_quadratic(3, 2, L=beta, mu=mu, heterogeneity=1.0, seed=7, constants="clients")
        x0 = base.optimum() + cfg["init_distance"] * direction
        firsts = []
        for c in nr["grid_c"]:
            gap = scaffold_sampling_moments(Scaffold(lr=c / (beta * K), local_steps=K, option="II"),
                                            base.with_gradient_noise(1.0), 2000, participation=UniformSampling(S),
                                            x0=x0).loss_gap
            firsts.append([int(np.flatnonzero(gap <= e)[0]) if np.any(gap <= e) else np.inf for e in (1e-1, 1e-2)])
        np.testing.assert_array_equal(row["rounds"], np.min(firsts, axis=0))


def _rounds_results(rounds_h0, rounds_h1):
    st = {"S": 2, "theorem": "Theorem 6", "formula": [16.0, 106.0, 1006.0],
          "per_h": [{"h": 0.0, "rounds": rounds_h0, "c": [0.01] * 3}, {"h": 1.0, "rounds": rounds_h1, "c": [0.01] * 3}]}
    return {"eps": [1e-2, 1e-3, 1e-4], "grid_c": [1e-4, 1 / 81], "K": 5, "N": 4, "d": 2, "sigma2": 1.0,
            "max_rounds": 100, "order_tol": 0.25, "rounds_factor": 1.1, "heterogeneity": [0.0, 1.0],
            "settings": {"sampled": st}}


def test_noise_rounds_check_flags_a_wrong_order_a_heterogeneity_term_and_unreached_eps():
    ok = exp._noise_rounds_check(_rounds_results([400, 700, 2500], [400, 700, 2500]))
    assert ok.status == "holds" and ok.ratio <= 1
    steep = exp._noise_rounds_check(_rounds_results([10, 1000, 100000], [10, 1000, 100000]))   # slope 2
    assert steep.status == "violated" and steep.detail.startswith("FINDING")
    drift = exp._noise_rounds_check(_rounds_results([400, 700, 2500], [800, 1400, 5000]))
    assert drift.status == "violated"
    unreached = exp._noise_rounds_check(_rounds_results([400, 700, float("nan")], [400, 700, 2500]))
    assert unreached.status == "not checkable"
