"""Helpers of experiments/contraction.py: the exact second-moment recursion,
the measured-rate fit, the verdict logic, and the A1 finding for AdaGrad."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from experiments import contraction as exp
from fltheory import optim
from fltheory.algorithms import run
from fltheory.algorithms.fedavg import FedAvg
from fltheory.algorithms.fedopt import FedOpt
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory.operators import fedopt_operator


@given(h=st.floats(0.5, 4.0), eta=st.floats(0.01, 0.2), tau=st.integers(1, 6),
       eta_s=st.floats(0.1, 1.0), sigma2=st.floats(0.0, 2.0))
def test_exact_second_moment_matches_the_scalar_closed_form(h, eta, tau, eta_s, sigma2):
    # one client, d = 1: x_{t+1} - x~ = a (x_t - x~) + eta_s xi_t with
    # a = 1 - eta_s + eta_s s^tau, s = 1 - eta h, Var xi = eta^2 sigma2 sum_{j<tau} s^(2j)
    fed = QuadraticFederation(np.array([[[h]]]), np.array([[h * 0.3]]))
    s = 1 - eta * h
    a = 1 - eta_s + eta_s * s ** tau
    V = eta_s ** 2 * eta ** 2 * sigma2 * sum(s ** (2 * j) for j in range(tau))
    x0, xfp = np.array([2.0]), np.array([0.3])
    t = np.arange(8)
    expected = np.array([a ** (2 * k) * 1.7 ** 2 + V * sum(a ** (2 * j) for j in range(k)) for k in t])
    got = exp.exact_second_moment(fed, eta, tau, eta_s, sigma2, x0, xfp, 7)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


def test_exact_second_moment_without_noise_is_the_deterministic_run():
    fed = random_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=1.0, seed=4, constants="clients")
    from fltheory.theory import fedopt_quadratic_fixed_point
    fp = fedopt_quadratic_fixed_point(fed, 0.2, 3)
    x0 = fed.optimum() + np.array([1.0, -0.5])
    xs = run(FedAvg(lr=0.2, local_steps=3, server_lr=0.7), fed, 12, x0=x0).x
    got = exp.exact_second_moment(fed, 0.2, 3, 0.7, 0.0, x0, fp.x, 12)
    np.testing.assert_allclose(got, np.sum((xs - fp.x) ** 2, axis=1), rtol=1e-9, atol=1e-20)


def test_measured_rate_recovers_a_geometric_decay_and_refuses_too_few_points():
    r = 0.83
    assert exp.measured_rate(5.0 * r ** np.arange(200)) == pytest.approx(r, rel=1e-12)
    assert exp.measured_rate(np.array([1.0, 0.5, 0.25])) is None


def _fake_results():
    taus = [1, 2]
    bound = np.array([[0.9, 0.8], [0.81, 0.64]])
    meas = bound * 0.95
    th = {"mc_mean": np.array([4.0, 2.0, 1.0]), "mc_half_width": np.array([0.0, 0.1, 0.1]),
          "exact": np.array([4.0, 2.0, 1.0]), "mc_seeds_first": 1}
    for form in ("squared", "paper"):
        th[f"bound_{form}"] = np.array([4.0, 3.0, 2.0])
        th[f"unmet_{form}"] = []
        th[f"rho_bar_{form}"] = 0.5
    e = 0.5 ** np.arange(20)
    return {"seed": 1, "eta": 0.1, "n_clients": 2, "dim": 2, "local_steps": 2, "server_lr": 1.0,
            "sigma2": 1.0, "rate_rel_tol": 0.05, "mc_runs": 10, "straddle_half_width": 1e-6,
            "a1": {"taus": taus, "bound": bound, "measured": {"sgd": meas, "adagrad": 0.9 * np.ones((2, 2)),
                                                               "adam": 0.9 * np.ones((2, 2))},
                   "ratio_unsquared": meas / bound, "ratio_squared": meas ** 2 / bound,
                   "straddle": {"adagrad": 0.9, "adam": 0.9}},
            "a2": {"mc": np.array([0.5, 0.6]), "mc_half_width": np.array([0.01, 0.01]),
                   "exact": np.array([0.5, 0.6]), "phi": np.array([1.0, 1.0]), "samples": 100},
            "mann": {"rho_sgd": 0.5, "err_sgd": e, "rho_adagrad": 0.5, "err_adagrad": e, "rounds": 19},
            "theorem1": th,
            "a1_tight": {"factors": [0.5, 1.5], "eta": [0.1, 0.3],
                         "bound": np.array([[0.9, 0.8], [0.7, 0.6]]),
                         "exact": np.array([[0.9, 0.8], [0.7, 0.6]]),
                         "sampled": np.array([[0.8, 0.7], [0.6, 0.5]]),
                         "beyond_one_over_L": [0, 2]},
            "a1_sweep": {"adagrad": {"parameter": "initial accumulator", "values": [0.0, 0.1],
                                     "straddle": [50.0, 0.4], "random": [1.01, 0.9]},
                         "adam": {"parameter": "eps", "values": [1e-8, 0.1], "straddle": [900.0, 0.3],
                                  "random": [1.0, 0.95]}}}


def test_checks_hold_on_consistent_numbers_and_flag_violations():
    res = _fake_results()
    assert {c.status for c in exp.checks(res) if "A1 fails" not in c.detail} == {"holds"}
    bad = copy.deepcopy(res)
    bad["theorem1"]["exact"] = np.array([4.0, 3.5, 1.0])          # above the bound at t = 1
    bad["theorem1"]["mc_mean"] = np.array([4.0, 3.5, 1.0])
    t1 = [c for c in exp.checks(bad) if c.theorem == "theorem1"]
    assert all(c.status == "violated" and c.ratio == pytest.approx(3.5 / 3.0) for c in t1)
    bad = copy.deepcopy(res)
    bad["mann"]["err_sgd"] = 0.6 ** np.arange(20)                 # slower than rho = 0.5
    assert next(c.status for c in exp.checks(bad) if c.theorem == "mann-rate") == "violated"
    bad = copy.deepcopy(res)
    bad["a1"]["measured"]["adam"] = 1.2 * np.ones((2, 2))
    adam = next(c for c in exp.checks(bad) if c.theorem == "a1-adaptive" and "adam" in c.detail)
    assert adam.status == "violated" and adam.ratio == pytest.approx(1.2)   # App. B.4 claims A1 for Adam


def _adagrad_client_map(fed, i, x, lr, tau, eps=1e-8):
    """Readable restarted AdaGrad: tau steps from x on client i."""
    y, nu = x.copy(), np.zeros_like(x)
    for _ in range(tau):
        g = fed.H[i] @ y - fed.e[i]
        nu = nu + g * g
        y = y - lr * g / (np.sqrt(nu) + eps)
    return y


def test_finding_restarted_adagrad_client_maps_are_not_contractions():
    # Assumption 1 of seed 001 (rho_i < 1) fails for restarted AdaGrad clients:
    # the readable per-client loop finds a pair with ||O_i(x) - O_i(y)|| > ||x - y||,
    # and the library's client maps (used by lipschitz_ratios) give the same images.
    fed = random_quadratic(4, 3, L=4.0, mu=0.5, heterogeneity=1.0, seed=44782178, constants="clients")
    lr, tau = 0.05, 8
    rng = np.random.default_rng(1)
    c = fed.optimum()
    best = (0.0, None)
    for _ in range(300):
        x, y = c + rng.standard_normal(3), c + rng.standard_normal(3)
        for j in range(4):
            r = np.linalg.norm(_adagrad_client_map(fed, j, x, lr, tau)
                               - _adagrad_client_map(fed, j, y, lr, tau)) / np.linalg.norm(x - y)
            if r > best[0]:
                best = (r, (j, x, y))
    ratio, (j, x, y) = best
    assert ratio > 1.05
    T = fedopt_operator(FedOpt(client_optimizer=optim.adagrad(lr), server_optimizer=optim.sgd(1.0),
                               local_steps=tau), fed)
    Ox = T.client_maps(x[None, :], [j])[0]
    Oy = T.client_maps(y[None, :], [j])[0]
    np.testing.assert_allclose(Ox, _adagrad_client_map(fed, j, x, lr, tau), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(Oy, _adagrad_client_map(fed, j, y, lr, tau), rtol=1e-12, atol=1e-13)
    assert np.linalg.norm(Ox - Oy) / np.linalg.norm(x - y) == pytest.approx(ratio, rel=1e-9)


def test_finding_straddling_pairs_make_the_adagrad_ratio_grow_like_one_over_the_gap():
    # restarted AdaGrad's first step eta g/(|g| + eps) jumps by ~2 eta across g = 0:
    # the ratio over a pair x_c +- h e_0 grows like 1/h (no Lipschitz constant).
    fed = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=9, constants="clients")
    alg = FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.sgd(1.0), local_steps=4)
    wide, narrow = exp.straddle_ratio(fed, alg, 1e-4), exp.straddle_ratio(fed, alg, 1e-6)
    assert narrow > 1e3
    assert narrow / wide == pytest.approx(100.0, rel=0.05)
    # the same pair for local GD has ratio <= 1 (a contraction)
    gd = FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.sgd(1.0), local_steps=4)
    assert exp.straddle_ratio(fed, gd, 1e-6) <= 1.0


def test_noise_variance_is_the_trace_of_the_summed_matrix_powers():
    fed = random_quadratic(3, 4, L=3.0, mu=0.3, heterogeneity=1.0, seed=2, constants="clients")
    eta, tau, s2 = 0.2, 5, 0.7
    expected = []
    for H in fed.H:                                   # readable per-client loop
        S = np.eye(4) - eta * H
        expected.append(eta ** 2 * s2 / 4 * sum(np.trace(np.linalg.matrix_power(S, 2 * j)) for j in range(tau)))
    np.testing.assert_allclose(exp.noise_variance(fed, eta, tau, s2), expected, rtol=1e-12)
    # below phi = tau eta^2 sigma^2 since every eigenvalue of (I - eta H)^2 is < 1
    assert np.all(exp.noise_variance(fed, eta, tau, s2) < tau * eta ** 2 * s2)


def test_a2_violation_is_flagged():
    res = _fake_results()
    res["a2"]["exact"] = np.array([0.5, 1.3])
    res["a2"]["mc"] = np.array([0.5, 1.3])
    c = next(c for c in exp.checks(res) if c.theorem == "a2-sgd")
    assert c.status == "violated" and c.ratio == pytest.approx(1.3)


def test_exact_gd_map_norm_is_the_spectral_norm_of_the_matrix_power():
    fed = random_quadratic(3, 4, L=3.0, mu=0.3, heterogeneity=1.0, seed=5, constants="clients")
    for eta in (0.2, 0.5, 0.6):                      # 0.6 L = 1.8: beyond 1/L, below 2/L
        expected = [np.linalg.norm(np.linalg.matrix_power(np.eye(4) - eta * H, 3), 2) for H in fed.H]
        np.testing.assert_allclose(exp.exact_gd_map_norm(fed, eta, 3), expected, rtol=1e-12)


def test_tight_and_sweep_checks_report_each_setting():
    res = _fake_results()
    tight = [c for c in exp.checks(res) if c.theorem == "a1-sgd-tight"]
    assert [c.status for c in tight] == ["holds"] and tight[0].ratio == pytest.approx(1.0)
    sweep = [c for c in exp.checks(res) if c.theorem == "a1-adaptive" and "A1 " in c.detail]
    assert [c.status for c in sweep] == ["violated", "holds", "violated", "holds"]
    assert sweep[0].ratio == pytest.approx(50.0) and sweep[3].ratio == pytest.approx(0.95)
    bad = copy.deepcopy(res)
    bad["a1_tight"]["sampled"][1, 0] = 0.75           # above the constant 0.7
    c = next(c for c in exp.checks(bad) if c.theorem == "a1-sgd-tight")
    assert c.status == "violated" and c.ratio == pytest.approx(0.75 / 0.7)


@pytest.mark.parametrize("v0", [1e-4, 4e-2, 1e-1, 1.0])
def test_adagrad_straddle_ratio_is_the_slope_of_the_first_step_at_zero_gradient(v0):
    # one client, d = 1, tau = 1: O(x) = x - eta g / (sqrt(v0 + g^2) + eps), g = h (x - c);
    # across g = 0 the ratio tends to |1 - eta h / (sqrt(v0) + eps)|: finite iff v0 + eps > 0
    h, eta, eps = 2.0, 0.05, 1e-8
    fed = QuadraticFederation(np.array([[[h]]]), np.array([[0.7 * h]]))
    alg = FedOpt(client_optimizer=optim.adagrad(eta, initial_accumulator=v0),
                 server_optimizer=optim.sgd(1.0), local_steps=1)
    expected = abs(1 - eta * h / (np.sqrt(v0) + eps))
    assert exp.straddle_ratio(fed, alg, 1e-7) == pytest.approx(expected, rel=1e-6)
