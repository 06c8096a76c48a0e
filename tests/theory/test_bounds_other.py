"""SCAFFOLD/FedAvg complexities, EFL Table 1, FedElasticNet Theorem 3.1 and the seed-001
Theorem 1 recursion, evaluated against hand computations and their hypotheses."""

from types import SimpleNamespace

import numpy as np
import pytest

from fltheory.errors import AssumptionError, InvalidHyperparameterError
from fltheory.theory.bounds import (elasticnet_C0, elasticnet_constants, elasticnet_sign_term,
                                    elasticnet_theorem31, elasticnet_theorem31_from_constants,
                                    fedavg_lower_bound, fedavg_rounds, fedopt_theorem1,
                                    scaffold_quadratic_rounds, scaffold_rounds,
                                    scaffold_rounds_from_constants, scaffold_step_conditions,
                                    table1_rounds)


def test_scaffold_rounds_formula_and_slopes():
    kw = dict(sigma2=2.0, mu=0.5, K=10, S=5, N=20, eps=1e-2, beta=4.0)
    r = scaffold_rounds(**kw)
    assert r.value == pytest.approx(2.0 / (0.5 * 10 * 5 * 1e-2) + 4.0 / 0.5 + 20 / 5)
    assert scaffold_rounds(constant=3.0, **kw).value == pytest.approx(3 * r.value)
    half = scaffold_rounds(**dict(kw, eps=5e-3))
    assert half.terms["statistical"] == pytest.approx(2 * r.terms["statistical"])
    c = SimpleNamespace(sigma2=2.0, mu=0.5, L=4.0)
    assert scaffold_rounds_from_constants(c, K=10, S=5, N=20, eps=1e-2).value == pytest.approx(r.value)
    assert scaffold_rounds(**dict(kw, S=30)).value is None


def test_fedavg_rounds_and_lower_bound():
    r = fedavg_rounds(sigma2=1.0, mu=1.0, K=2, S=2, N=4, eps=0.25, G=3.0, B=1.0, beta=4.0)
    assert r.value == pytest.approx(1 / (1 * 2 * 2 * 0.25) + 0.5 * 9 / (2 * 0.25) + 2 * 3 / 0.5 + 4)
    lb = fedavg_lower_bound(G=3.0, mu=2.0, R=10, K=2)
    assert lb.value == pytest.approx(9 / (2 * 100))
    assert fedavg_lower_bound(G=3.0, mu=2.0, R=10, K=1).value is None
    assert fedavg_lower_bound(G=3.0, mu=2.0, R=10, K=2, sigma2=0.1).value is None
    q = scaffold_quadratic_rounds(beta=2.0, sigma2=1.0, mu=0.5, K=4, N=8, eps=0.1, delta=0.5)
    assert q.value == pytest.approx(2 / (0.5 * 4 * 8 * 0.1) + (2 + 0.5 * 4) / (0.5 * 4))
    # a mu-strongly convex beta-smooth function has mu <= beta
    assert scaffold_quadratic_rounds(beta=0.4, sigma2=1.0, mu=0.5, K=4, N=8, eps=0.1, delta=0.5).value is None
    assert fedavg_rounds(sigma2=1.0, mu=5.0, K=2, S=2, N=4, eps=0.25, G=3.0, B=1.0, beta=4.0).value is None


def test_scaffold_step_conditions():
    ok = scaffold_step_conditions(eta_l=1e-3, eta_g=1.0, beta=1.0, K=10, R=200, mu=1.0, N=10, S=5)
    # caps 1/(81 beta K eta_g) = 1/810 and S/(15 mu N K eta_g) = 5/1500 = 1/300
    assert ok.valid and ok.value == pytest.approx(1 / 810) and ok.terms["R_min"] == 162
    assert ok.terms["eta_l_max_sampling"] == pytest.approx(1 / 300)
    bad = scaffold_step_conditions(eta_l=1e-2, eta_g=1.0, beta=1.0, K=10, R=100, mu=1.0, N=100, S=5)
    assert {a.name for a in bad.violated} == {"eta_l <= 1/(81 beta K eta_g)", "eta_l <= S/(15 mu N K eta_g)",
                                              "R >= max(162 beta/mu, 30 N/S)"}
    # sampling cap binding: 1 of 100 clients, mu = beta: S/(15 mu N K) = 1/15000 < 1/810
    samp = scaffold_step_conditions(eta_l=1e-3, eta_g=1.0, beta=1.0, K=10, R=4000, mu=1.0, N=100, S=1)
    assert samp.value is None and samp.terms["eta_l_max"] == pytest.approx(1 / 15000)
    assert [a.name for a in samp.violated] == ["eta_l <= S/(15 mu N K eta_g)"]
    small_g = scaffold_step_conditions(eta_l=1e-4, eta_g=0.5, beta=1.0, K=10, R=200, mu=1.0, N=10, S=5)
    assert [a.name for a in small_g.violated] == ["eta_g >= 1"]
    for bad in (dict(beta=0.0), dict(mu=-1.0), dict(S=0), dict(eta_g="x")):
        with pytest.raises(InvalidHyperparameterError):
            scaffold_step_conditions(**dict(dict(eta_l=1e-3, eta_g=1.0, beta=1.0, K=10, R=200, mu=1.0,
                                                 N=10, S=5), **bad))
    with pytest.raises(AssumptionError, match="600"):
        scaffold_step_conditions(eta_l=1e-3, eta_g=1.0, beta=1.0, K=10, R=100, mu=1.0, N=100, S=5,
                                 strict=True)


def test_table1_rows():
    kw = dict(eps=0.01, S=4, G=2.0, mu=0.5, L=3.0, delta=1.0, N=10, sigma2=2.0)
    assert table1_rounds("SCAFFOLD", **kw).value == pytest.approx(4 / (0.5 * 4 * 0.01) + 2 / (0.5 * 0.1) + 6)
    assert table1_rounds("MIME", **kw).value == pytest.approx(4 / (0.5 * 4 * 0.01) + 2)
    assert table1_rounds("VRL-SGD", **kw).value == pytest.approx(10 * 2 / (4 * 1e-4) + 1000)
    assert table1_rounds("FedAMP", **kw).value == pytest.approx(4 / (3 * 4 * 0.01) + 2 / 1e-3 + 9 / 0.1)
    assert table1_rounds("EFL", **kw).value == pytest.approx(4 / (0.5 * 4 * 0.01) + 3 / (0.5 * 0.1))
    with pytest.raises(InvalidHyperparameterError):
        table1_rounds("FedNova", **kw)
    with pytest.raises(InvalidHyperparameterError):
        table1_rounds("MIME", eps=0.1, S=2, mu=1.0)


def test_elasticnet_constants_and_identity():
    k = elasticnet_constants(beta=1.0, lambda2=30.0, m=10, P=4)
    assert k["kappa"] == pytest.approx(25 / 30 * 31 / (900 - 25))
    assert k["kappa_0"] == pytest.approx(2 / 30 * (900 - 750 - 50) / 875)
    assert k["kappa_prime"] == pytest.approx(k["kappa"] * 4 / 20)


def test_elasticnet_theorem31():
    kw = dict(beta=1.0, lambda1=0.01, lambda2=30.0, m=10, P=4, d=5, init_dist2=2.0, C0=3.0)
    k = elasticnet_constants(1.0, 30.0, 10, 4)
    r = elasticnet_theorem31(10, sign_term=-0.5, **kw)
    expected = (1 / 10) / k["kappa_0"] * (2 + k["kappa"] * 3) + k["kappa_prime"] / k["kappa_0"] * 1e-4 * 5 - 0.5
    assert r.value == pytest.approx(expected)
    missing = elasticnet_theorem31(10, **kw)
    assert missing.value is None
    assert elasticnet_theorem31(10, **dict(kw, lambda1=0.0)).valid
    low = elasticnet_theorem31(10, sign_term=0.0, **dict(kw, lambda2=27.0))
    assert low.value is None and low.violated[0].name == "lambda_2 > 27 beta"
    with pytest.raises(AssumptionError, match="27 beta"):
        elasticnet_theorem31(10, sign_term=0.0, strict=True, **dict(kw, lambda2=20.0))
    skewed = elasticnet_theorem31(10, sign_term=-0.5, uniform_sampling=False, **kw)
    assert skewed.value is None and "uniformly" in skewed.violated[0].name
    assert elasticnet_theorem31(10, sign_term=-0.5, uniform_sampling=False,
                                **dict(kw, P=10)).value == pytest.approx(
        (1 / 10) / k["kappa_0"] * (2 + k["kappa"] * 3 * 4 / 10) + k["kappa_prime"] / k["kappa_0"] * 1e-4 * 5 - 0.5)
    c = SimpleNamespace(L=1.0)
    kw.pop("beta")
    assert elasticnet_theorem31_from_constants(c, 10, sign_term=-0.5, **kw).value == pytest.approx(expected)


def test_elasticnet_C0_variants_and_sign_term():
    g0 = np.array([[3.0, 4.0], [0.0, 1.0]])
    gs = np.zeros((2, 2))
    assert elasticnet_C0(g0, gs, variant="as_printed") == pytest.approx((5 + 1) / 2)
    assert elasticnet_C0(g0, gs, variant="corrected") == pytest.approx((25 + 1) / 2)
    gam = np.array([[1.0, 2.0], [0.0, 1.0], [2.0, 2.0]])
    th = np.array([1.0, 1.0])
    s = np.array([[0.5, -1.0], [1.0, 0.0], [0.0, 0.2]])
    loop = sum(float((gam[t] - th) @ s[t]) for t in range(3))
    assert elasticnet_sign_term(gam, th, s, lambda1=0.1, lambda2=2.0) == pytest.approx(-(0.2 / 2) * loop / 3)
    with pytest.raises(InvalidHyperparameterError):
        elasticnet_sign_term(gam, th, 2 * s, lambda1=0.1, lambda2=2.0)
    for l1, l2 in ((0.1, 0.0), (-0.1, 2.0), ("x", 2.0)):
        with pytest.raises(InvalidHyperparameterError):
            elasticnet_sign_term(gam, th, s, lambda1=l1, lambda2=l2)


def test_fedopt_theorem1_recursion_unrolled():
    p = np.array([0.25, 0.75])
    rho, phi = np.array([0.5, 0.9]), np.array([1.0, 2.0])
    r = fedopt_theorem1(5, rho=rho, phi=phi, weights=p, server_lr=0.5, init_dist2=4.0)
    a = 1 - 0.5 * (1 - p @ rho)
    V = 0.25 * (p ** 2 @ phi)
    e = 4.0
    for _t in range(5):
        e = a * e + V                              # the recursion itself
    assert r.value == pytest.approx(e)
    assert r.terms["floor"] == pytest.approx(V / (1 - a))
    assert fedopt_theorem1(5, rho=[1.0, 1.0], phi=phi, weights=p, server_lr=0.5, init_dist2=1.0).value is None
    assert fedopt_theorem1(5, rho=rho, phi=phi, weights=p, server_lr=1.5, init_dist2=1.0).value is None


def test_from_problem_constants_conveniences():
    import math

    from fltheory.testing import build_quadratic
    from fltheory.theory.bounds import (fedavg_rounds_from_constants, fedopt_theorem1_from_constants,
                                        fedopt_theorem1_quadratic, table1_rounds_from_constants)
    fed = build_quadratic(3, 2, L=3.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 2, 3], seed=2)
    fed = fed.with_gradient_noise(0.5)
    c = fed.constants(radius=2.0)
    a = fedavg_rounds_from_constants(c, K=4, S=2, N=3, eps=0.1)
    assert fed.client_mu.min() < fed.mu            # the per-client constant differs from F's
    b = fedavg_rounds(sigma2=0.5, mu=float(fed.client_mu.min()), beta=float(fed.client_L.max()),
                      G=math.sqrt(c.scaffold_G2),
                      B=math.sqrt(c.scaffold_B2), K=4, S=2, N=3, eps=0.1)
    assert a.value == pytest.approx(b.value, rel=1e-12)
    t = table1_rounds_from_constants(c, "EFL", eps=0.1, S=2)
    mu_min = float(fed.client_mu.min())
    # Table 1's G bounds the stochastic gradient (EFL Assumption 4): G^2 = G2_max + max_i sigma_i^2
    assert np.max(c.sigma2_clients) == 0.5
    assert t.value == pytest.approx((c.G2_max + 0.5) / (mu_min * 2 * 0.1)
                                    + fed.client_L.max() / (mu_min * math.sqrt(0.1)), rel=1e-12)
    from fltheory.theory.bounds import scaffold_rounds_from_constants as srfc
    assert srfc(c, K=4, S=2, N=3, eps=0.1).value == pytest.approx(
        scaffold_rounds(sigma2=0.5, mu=mu_min, beta=float(fed.client_L.max()), K=4, S=2, N=3, eps=0.1).value)
    x0 = np.ones(2)
    q = fedopt_theorem1_quadratic(fed, 7, lr=0.1, local_steps=3, sigma2=0.5, server_lr=0.5, x0=x0)
    r = fedopt_theorem1_from_constants(c, 7, lr=0.1, local_steps=3, weights=fed.weights, server_lr=0.5,
                                       init_dist2=float(np.sum((x0 - q.terms["fixed_point"]) ** 2)))
    assert r.value == pytest.approx(q.value, rel=1e-12)


def test_elasticnet_C0_uses_algorithm3_zero_gradient_states():
    """Lemma B.2 of seed 003 (h^t = (1/m) sum_k grad L_k(theta_k^t)) holds for the stored
    gradient states of Algorithm 3 started, as specified, from h^0 = 0 and zero states, and
    those states are the 'grad L_k(theta_k^0)' of C_0: with grads_init=None C_0 is
    (1/m) sum_k ||grad L_k(theta*)||(^2), not a function of the initial model."""
    from fltheory.algorithms import FedElasticNet
    from fltheory.algorithms import run as run_algorithm
    from fltheory.testing import build_quadratic
    fed = build_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=2.0, n_samples=None, seed=4)
    seen = []
    alg = FedElasticNet(base="feddyn", lambda1=0.01, lambda2=60.0, eps=0.0)
    run_algorithm(alg, fed, 3, x0=np.ones(2), callback=lambda t, s, i: seen.append((s.h.copy(), s.grads.copy())))
    for h, grads in seen:
        np.testing.assert_allclose(h, grads.mean(axis=0), rtol=1e-12, atol=1e-14)
    gs = fed.client_grad(np.broadcast_to(fed.optimum(), (3, 2)))
    norms = np.linalg.norm(gs, axis=1)
    assert elasticnet_C0(None, gs, variant="corrected") == pytest.approx(np.mean(norms ** 2), rel=1e-12)
    assert elasticnet_C0(None, gs, variant="as_printed") == pytest.approx(np.mean(norms), rel=1e-12)
