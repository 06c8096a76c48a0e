"""experiments/elasticnet_lemmas.py: the enumerated expectation against closed forms, Lemma B.3 in the
corrected reading, the kurtosis helper, the verdict logic, and the as-printed Lemma B.3 finding."""

from __future__ import annotations

import copy
from itertools import combinations

import numpy as np
import pytest

from experiments import elasticnet_lemmas as exp
from fltheory.reproduce import experiment_rng
from fltheory.algorithms import FedElasticNet
from fltheory.algorithms import run as run_rounds
from fltheory.participation import UniformSampling
from fltheory.problems.generators import random_quadratic


def _instance(m=5, d=4, seed=3):
    fed = random_quadratic(m, d, L=1.0, mu=0.2, heterogeneity=1.0, seed=seed, constants="clients")
    return fed, fed.optimum() + np.linspace(1.0, -1.0, d)


def test_enumerated_expectation_is_the_mean_closed_form_change_for_feddyn():
    # lambda_1 = 0 (FedDyn): theta~_k solves (H_k + lambda_2 I) theta = e_k + g_k + lambda_2 x, and
    # sampling P of m uniformly gives E[mean_{k in S} Delta_k] = (1/m) sum_k Delta~_k exactly
    fed, x0 = _instance()
    cfg = dict(exp.QUICK, sampled=2, lambda1=0.0, lambda2=1.5, warmup=3)
    lam2, m, d = cfg["lambda2"], fed.n_clients, fed.dim
    alg = FedElasticNet(base="feddyn", lambda1=0.0, lambda2=lam2)
    state = run_rounds(alg, fed, 3, x0=x0, participation=UniformSampling(2), seed=11).state
    theta = np.stack([np.linalg.solve(fed.H[k] + lam2 * np.eye(d), fed.e[k] + state.grads[k] + lam2 * state.x)
                      for k in range(m)])
    expected = (theta - state.x).mean(axis=0) + state.x - (state.x + state.h / lam2)
    gammas = []
    for S in combinations(range(m), 2):
        new, _ = alg.round(state, fed, exp.FixedSubset(S), np.random.default_rng(0))
        gammas.append(new.x + new.h / lam2)
    np.testing.assert_allclose(np.mean(gammas, axis=0) - (state.x + state.h / lam2), expected,
                               rtol=1e-9, atol=1e-12)
    # ... which is Lemma B.3's right-hand side with lambda_1 = 0 (Lemma B.2: h = mean g_k)
    G = np.stack([fed.H[k] @ theta[k] - fed.e[k] for k in range(m)])
    np.testing.assert_allclose(expected, -G.sum(axis=0) / (lam2 * m), rtol=1e-9, atol=1e-12)


def test_lemma_b3_holds_with_the_kkt_subgradient():
    fed, x0 = _instance()
    cfg = dict(exp.QUICK, sampled=2, lambda1=0.05, lambda2=1.0, warmup=3)
    res = exp.lemma_b3(fed, x0, cfg, "kkt", np.random.default_rng(1))
    assert res["subsets"] == 10 and res["rel_err_kkt"] < 1e-8


def test_excess_kurtosis_of_gaussian_and_laplace_samples():
    rng = np.random.default_rng(0)
    assert abs(exp.excess_kurtosis(rng.standard_normal(400_000))) < 0.05
    assert exp.excess_kurtosis(rng.laplace(size=400_000)) == pytest.approx(3.0, abs=0.15)
    assert exp.excess_kurtosis(np.ones(5)) == 0.0


def _fake():
    b = {"subsets": 10, "rel_err_kkt": 1e-12, "rel_err_sign": 1e-12, "pinned": 0, "lemma_b2_gap": 0.0}
    proof = {"eq27": {"lhs": 1.0, "rhs": 2.0}, "lemma_b5": {"lhs": 0.1, "rhs": 0.4}}
    return {"seed": 1, "m": 5, "P": 2, "d": 3, "lambda1": 0.1, "lambda2": 1.0, "tol": 1e-6, "hist_rounds": 4,
            "proof": proof, "proof_lambda2": 30.0,
            "b3_kkt": dict(b), "b3_sign": dict(b),
            "feddyn": {"entropy_delta": 2.0, "entropy_theta": 4.0, "nonzero_fraction": 1.0, "kurtosis": 0.1},
            "alg3": {"entropy_delta": 1.0, "entropy_theta": 4.0, "nonzero_fraction": 0.25, "kurtosis": 3.0}}


def test_checks_hold_then_flag():
    c = {x.theorem: x for x in exp.checks(_fake())}
    assert {k: v.status for k, v in c.items()} == dict.fromkeys(
        ("lemma-b3", "lemma-b3-as-printed", "feddyn-delta-entropy", "alg3-sparser", "proof-inequalities"),
        "holds")
    assert c["proof-inequalities"].ratio == pytest.approx(0.5)
    assert c["feddyn-delta-entropy"].ratio == pytest.approx(0.5)
    assert c["alg3-sparser"].ratio == pytest.approx(0.25)
    bad = copy.deepcopy(_fake())
    bad["b3_sign"]["rel_err_sign"] = 0.2
    bad["alg3"]["nonzero_fraction"] = 1.0
    bad["feddyn"]["nonzero_fraction"] = 0.5
    c = {x.theorem: x for x in exp.checks(bad)}
    assert c["lemma-b3-as-printed"].status == "violated"
    assert c["lemma-b3-as-printed"].ratio == pytest.approx(2e5)
    assert c["alg3-sparser"].status == "violated"
    bad["proof"]["lemma_b5"] = {"lhs": 0.5, "rhs": 0.4}
    c = {x.theorem: x for x in exp.checks(bad)}
    assert c["proof-inequalities"].status == "violated"
    assert c["proof-inequalities"].ratio == pytest.approx(1.25)


_FINDING = ("FINDING: Lemma B.3 as printed (Algorithm 3 with sign(0) = 0, and sign in the formula) is off by "
            "19% (relative) on the quick instance (experiment seed 0: random_quadratic(6, 8, L=1, mu=0.1, "
            "heterogeneity=1, seed=720521640), P = 3, lambda_1 = 0.05, lambda_2 = 1, state after 4 rounds): "
            "the proof's eq. 11 needs the l1 subgradient on the pinned coordinates, where sign(0) = 0")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=_FINDING)
def test_finding_lemma_b3_as_printed_fails_where_the_l1_term_pins_coordinates():
    rng = experiment_rng(0, exp.NAME)
    cfg = exp.QUICK
    seed = int(rng.integers(0, 2**31 - 1))
    assert seed == 720521640
    fed = random_quadratic(cfg["n_clients"], cfg["dim"], L=cfg["L"], mu=cfg["mu"],
                           heterogeneity=cfg["heterogeneity"], seed=seed, constants="clients")
    u = rng.standard_normal(cfg["dim"])
    x0 = fed.optimum() + cfg["init_distance"] * u / np.linalg.norm(u)
    exp.lemma_b3(fed, x0, cfg, "kkt", rng)              # the experiment draws the kkt run first
    res = exp.lemma_b3(fed, x0, cfg, "sign", rng)
    assert res["rel_err_sign"] <= cfg["tol"]


def test_proof_inequalities_hold_and_the_enumeration_matches_sampling_without_replacement():
    fed, x0 = _instance(m=5, d=4, seed=6)
    cfg = dict(exp.QUICK, sampled=2, lambda1=0.05, warmup=3)
    res = exp.proof_inequalities(fed, x0, cfg, np.random.default_rng(2))
    assert res["eq29"]["lhs"] == pytest.approx(res["eq29"]["closed_form"], rel=1e-9)
    for name, v in res.items():
        assert v["lhs"] <= v["rhs"] * (1 + 1e-12), name
    # eq. 27 is Jensen's inequality with h^t = mean g_k (Lemma B.2) and mean grad L_k(theta*) = 0
    assert res["eq27"]["lhs"] <= res["eq27"]["rhs"]
