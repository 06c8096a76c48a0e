"""EFL Theorem 1 (seed 000 eq. 7), corollaries (eq. 8-9) and section 4.2, evaluated
against hand computations of the printed formulas."""

from types import SimpleNamespace

import numpy as np
import pytest

from fltheory.errors import AssumptionError, InvalidHyperparameterError
from fltheory.testing import build_quadratic
from fltheory.theory.bounds import (efl_abandonment, efl_heterogeneity, efl_incomplete_rate,
                                    efl_inactive_rate, efl_step_moments, efl_theorem1,
                                    efl_theorem1_from_constants)

E = 4
P = np.array([0.2, 0.3, 0.5])


def _dist():
    q = np.zeros((3, E + 1))
    q[0, [0, 2, 4]] = [0.1, 0.3, 0.6]      # client 0: inactive w.p. 0.1, 2 or 4 steps
    q[1, 4] = 1.0                           # client 1: always complete
    q[2, [1, 4]] = [0.5, 0.5]               # client 2: 1 or 4 steps
    return q


def test_moments_plain_by_hand():
    m = efl_step_moments(P, _dist(), E, weighting="plain")
    np.testing.assert_allclose(m.ps[0], [0.2 * (0.3 * 2 + 0.6 * 4), 0.3 * 4, 0.5 * (0.5 * 1 + 0.5 * 4)])
    np.testing.assert_allclose(m.p[0], [0.2 * 0.9, 0.3, 0.5])
    np.testing.assert_allclose(m.p2s[0], [0.04 * (0.6 + 2.4), 0.09 * 4, 0.25 * 2.5])
    assert m.max_ratio == 1.0


def test_moments_adaptive_by_hand():
    # p_t^k = E p^k / s: p s = E p^k whenever s > 0
    m = efl_step_moments(P, _dist(), E, weighting="adaptive")
    np.testing.assert_allclose(m.ps[0], [E * 0.2 * 0.9, E * 0.3, E * 0.5])
    np.testing.assert_allclose(m.p[0], [0.2 * (0.3 * 2 + 0.6 * 1), 0.3, 0.5 * (0.5 * 4 + 0.5 * 1)])
    np.testing.assert_allclose(m.p2s[0], [0.04 * (0.3 * 16 / 2 + 0.6 * 4), 0.09 * 4, 0.25 * (0.5 * 16 + 0.5 * 4)])
    assert m.max_ratio == pytest.approx(E / 1)


def _kw(**over):
    kw = dict(E=E, theta=4.0, mu=0.5, L=3.0, sigma2=[1.0, 2.0, 0.5], D=[0.3, 0.1, 0.2], G2=2.0,
              weights=P, init_dist2=5.0, step_probs=_dist(), weighting="plain")
    kw.update(over)
    return kw


def test_theorem1_by_hand_corrected_and_as_printed():
    tau = 6
    m = efl_step_moments(P, _dist(), E)
    ps, pe, p2s = m.ps[0], m.p[0], m.p2s[0]
    S = ps.sum()
    theta, mu, L, G2 = 4.0, 0.5, 3.0, 2.0
    sig, D = np.array([1.0, 2.0, 0.5]), np.array([0.3, 0.1, 0.2])
    gamma = max(4 * E ** 2 * theta / S, 32 * E * (1 + theta) * L / (mu * S))
    common = p2s @ sig + 2 * (2 + theta) * L * (ps @ D) + 2 * E * G2 * np.sum(p2s / P)
    k = (2 + mu / (2 * (1 + theta) * L)) * E * (E - 1) * G2
    B_corr = common + k * (2 * S + theta * (pe.sum() - 2))
    B_print = common + k * (S + theta * (pe.sum() - 2) + E * pe.sum())
    J_corr = 32 * E / mu * (ps @ D) / S
    J_print = 32 * E * mu * S / ((P @ D) * S)
    for variant, B, J in (("corrected", B_corr, J_corr), ("as_printed", B_print, J_print)):
        C = max(gamma ** 2 * 5.0, (16 * E / mu) ** 2 * tau * B / S ** 2)
        # E[p s]/p^k differs across clients (client 0 is inactive sometimes): r_t = 1
        expected = C / (tau * E + gamma) ** 2 + tau * J / (tau * E + gamma)
        res = efl_theorem1(tau, variant=variant, **_kw())
        assert res.valid
        assert res.value == pytest.approx(expected, rel=1e-12)
        assert res.terms["H"] == tau
        np.testing.assert_allclose(res.terms["eta"],
                                   16 * E / (mu * ((np.arange(tau) + 1) * E + gamma) * S))


def test_step_sizes_meet_the_smoothness_condition():
    res = efl_theorem1(50, **_kw())
    assert np.all(res.terms["eta"] <= res.terms["eta_max_allowed"])


def test_r_is_zero_when_ratios_are_equal():
    q = np.zeros((3, E + 1))
    q[:, E] = 1.0
    res = efl_theorem1(5, **_kw(step_probs=q))
    assert res.terms["H"] == 0
    assert res.value == pytest.approx(res.terms["first_term"])


def test_adaptive_weights_need_theta_at_least_E_over_min_steps():
    res = efl_theorem1(5, **_kw(weighting="adaptive", theta=2.0))
    assert res.value is None
    assert any("Assumption 5" in a.name for a in res.violated)
    with pytest.raises(AssumptionError, match=r"theta = 2.0"):
        efl_theorem1(5, strict=True, **_kw(weighting="adaptive", theta=2.0))
    assert efl_theorem1(5, **_kw(weighting="adaptive", theta=4.0)).valid


def test_never_active_federation_has_no_bound():
    q = np.zeros((3, E + 1))
    q[:, 0] = 1.0
    res = efl_theorem1(3, **_kw(step_probs=q))
    assert res.value is None


def test_from_constants_duck_typed():
    c = SimpleNamespace(mu=0.5, L=3.0, sigma2=[1.0, 2.0, 0.5], D_k=[0.3, 0.1, 0.2], G2=2.0)
    kw = _kw()
    for k in ("mu", "L", "sigma2", "D", "G2"):
        kw.pop(k)
    a = efl_theorem1_from_constants(c, 4, **kw)
    # Assumption 4 bounds E||g||^2 = ||grad||^2 + sigma^2: G2 + max sigma_k^2 = 4
    b = efl_theorem1(4, **_kw(G2=4.0))
    assert a.value == pytest.approx(b.value)
    np.testing.assert_allclose(a.terms["B"], b.terms["B"])
    assert not np.allclose(a.terms["B"], efl_theorem1(4, **_kw()).terms["B"])


def test_from_problem_constants_uses_uniform_client_constants():
    fed = build_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 2, 3], seed=0)
    fed = fed.with_gradient_noise([0.5, 1.0, 0.0])
    c = fed.constants(radius=3.0)
    kw = _kw()
    for k in ("mu", "L", "sigma2", "D", "G2"):
        kw.pop(k)
    a = efl_theorem1_from_constants(c, 4, **kw)
    b = efl_theorem1(4, **_kw(mu=float(fed.client_mu.min()), L=float(fed.client_L.max()),
                              sigma2=[0.5, 1.0, 0.0], D=efl_heterogeneity(fed),
                              G2=c.G2_max + 1.0))
    assert a.value == pytest.approx(b.value, rel=1e-12)
    np.testing.assert_allclose(a.terms["B"], b.terms["B"], rtol=1e-12)


def test_heterogeneity_with_lambda_zero():
    fed = build_quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 2, 3], seed=0)
    D = efl_heterogeneity(fed)
    direct = fed.client_loss(fed.optimum()) - fed.client_loss(fed.client_optima())
    np.testing.assert_allclose(D, direct, rtol=1e-10)


def test_corollaries_by_hand():
    assert efl_inactive_rate(3, [1, 0, 1], J=2.0, E=4) == pytest.approx(2 * 2.0 / (12 + 16))
    r = efl_abandonment(0.5, J=2.0, C=3.0, T=10, E=4, tau0=2, gamma=5.0)
    assert r.value == pytest.approx(10 * 3.0 / (4 * 8 + 5.0) ** 2)
    assert r.terms["abandon"] == (1.0 > r.value)
    assert r.terms["eq9_threshold"] == pytest.approx(1.5 / 40)
    assert efl_abandonment(1.5, J=2.0, C=3.0, T=10, E=4, tau0=2, gamma=5.0).value is None
    rate = efl_incomplete_rate(2, 4, P, [1.0, 4.0, 0.0], [1.0, 0.5, 0.25])
    inv = np.array([1.0, 0.5, 0.25])
    num = 2 * (4 ** 5 * (P @ inv) + 4 ** 2 * ((P ** 2 * np.array([1.0, 4.0, 0.0])) @ inv))
    assert rate == pytest.approx(num / (8 + 16) ** 2)


@pytest.mark.parametrize("over", [dict(weights=[0.5, 0.6, -0.1]), dict(step_probs=np.ones((3, 3))),
                                  dict(E=0), dict(mu=-1.0), dict(variant="literal")])
def test_bad_inputs(over):
    with pytest.raises(InvalidHyperparameterError):
        efl_theorem1(3, **_kw(**over))


def test_gamma_uses_the_whole_schedule_not_only_rounds_before_tau():
    """gamma = max{..} / min_tau E[sum p s] is a constant of the run (eta_t depends on it):
    a later round with fewer expected steps lowers min_tau S for every tau."""
    full = np.zeros((3, E + 1))
    full[:, E] = 1.0
    late = np.zeros((3, E + 1))
    late[:, 1] = 1.0                          # round 1: every client completes 1 step only
    sched = np.stack([full, late])
    res = efl_theorem1(1, **_kw(step_probs=sched))
    theta, mu, L = 4.0, 0.5, 3.0
    S_min = 1.0                               # sum_k p^k * 1
    gamma = max(4 * E ** 2 * theta / S_min, 32 * E * (1 + theta) * L / (mu * S_min))
    assert res.terms["gamma"] == pytest.approx(gamma, rel=1e-12)
    np.testing.assert_allclose(res.terms["eta"], [16 * E / (mu * (E + gamma) * E)], rtol=1e-12)
    # a schedule whose later round has no expected step violates the hypothesis at any tau
    idle = np.zeros((3, E + 1))
    idle[:, 0] = 1.0
    assert efl_theorem1(1, **_kw(step_probs=np.stack([full, idle]))).value is None


def test_theta_must_be_a_positive_number():
    for bad in ("a", -1.0, float("nan")):
        with pytest.raises(InvalidHyperparameterError, match="theta"):
            efl_theorem1(3, **_kw(theta=bad))


def _two_client_exact_errors(a, y, E, taus, eta):
    """Exact E||w_tau - w*||^2 of EFL (lambda = 0, no compression, plain weights) for
    f_1 = (x - a)^2/2, f_2 = (x + a)^2/2, p = (1/2, 1/2), each client inactive w.p. y
    (independently, every round), else E exact gradient steps: a readable loop over
    every participation pattern (4^tau of them, probabilities multiplied).
    Returns the errors and the largest ||grad f_k||^2 met at any local iterate."""
    import itertools
    opt = np.array([a, -a])
    errs, g2 = [], a ** 2
    for tau in taus:
        total = 0.0
        for pattern in itertools.product([(0, 0), (0, 1), (1, 0), (1, 1)], repeat=tau):
            w, prob = 0.0, 1.0
            for t, act in enumerate(pattern):
                new = w
                for k in range(2):
                    prob *= (1 - y) if act[k] else y
                    if act[k]:
                        yk = w
                        for _ in range(E):
                            g2 = max(g2, (yk - opt[k]) ** 2)
                            yk -= eta[t] * (yk - opt[k])
                        new += 0.5 * (yk - w)
                w = new
            total += prob * w ** 2
        errs.append(total)
    return np.array(errs), g2


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: EFL Theorem 1 (eq. 7) as printed fails under low participation.  The factor "
    "sum p s + theta (sum p - 2) + sum p s of the E(E-1) G^2 term of B_t is negative when "
    "clients are often inactive, and it outweighs the positive terms: E[B_t] < 0 for every "
    "admissible G^2, so C_tau = max{gamma^2 ||w_0 - w*||^2, negative} = 0 from w_0 = w*, "
    "H_tau = 0 (symmetric participation: E[p s]/p^k equal), and the bound is 0 while the "
    "error is positive.  Instance: f_1 = (x - 1)^2/2, f_2 = (x + 1)^2/2 (L = mu = 1), "
    "p = (1/2, 1/2), each client inactive w.p. 0.8 else E = 2 exact gradient steps, plain "
    "weights, theta = 1, sigma_k = 0, w_0 = w* = 0, the theorem's step size: E[B_t] = "
    "1.2 - 2.9 G^2 < 0 (G^2 >= 1), bound 0 in both readings, exact E||w_1||^2 = 0.01515."))
def test_theorem1_counterexample_low_participation():
    E, y, a = 2, 0.8, 1.0
    q = np.array([[y, 0.0, 1 - y]] * 2)
    p = np.array([0.5, 0.5])
    D = np.array([a ** 2 / 2] * 2)                       # F_k(w*) - F_k*, w* = 0
    taus = [1, 2, 3]
    first = efl_theorem1(3, E=E, theta=1.0, mu=1.0, L=1.0, sigma2=0.0, D=D, G2=a ** 2,
                         weights=p, init_dist2=0.0, step_probs=q)
    errs, g2 = _two_client_exact_errors(a, y, E, taus, first.terms["eta"])
    assert np.all(errs > 0)
    for variant in ("corrected", "as_printed"):
        for tau, err in zip(taus, errs):
            res = efl_theorem1(tau, E=E, theta=1.0, mu=1.0, L=1.0, sigma2=0.0, D=D, G2=g2,
                               weights=p, init_dist2=0.0, step_probs=q, variant=variant)
            assert res.valid, str(res)                   # every hypothesis holds
            assert res.terms["H"] == 0 and np.all(res.terms["B"] < 0)
            assert np.all(res.terms["B"] == pytest.approx(1.2 * a ** 2 - 2.9 * g2))
            assert err <= res.value, f"{variant}, tau = {tau}: exact error {err!r} > bound {res.value!r}"


@pytest.mark.parametrize("call", [
    lambda: efl_incomplete_rate(2, 4, P, [1.0, 4.0, 0.0], [1.0, 0.5, 0.1]),   # E[1/s] < 1/E
    lambda: efl_incomplete_rate(2, 4, P, [1.0, 4.0, 0.0], [np.inf, 0.5, 0.25]),  # inactive client
    lambda: efl_incomplete_rate(2, 4, P, [-1.0, 4.0, 0.0], [1.0, 0.5, 0.25]),
    lambda: efl_incomplete_rate(2, 4, [0.5, 0.6, -0.1], 0.0, [1.0, 0.5, 0.25]),
    lambda: efl_incomplete_rate(0, 4, P, 0.0, [1.0, 0.5, 0.25]),
    lambda: efl_inactive_rate(3, [1, 0, 2], J=2.0, E=4),
    lambda: efl_inactive_rate(3, [1, 0, 1], J=2.0, E=0),
])
def test_corollary_inputs_are_validated(call):
    with pytest.raises(InvalidHyperparameterError):
        call()


def _departed_client_instance(G2):
    """f_1 = (x - 4)^2/2, f_2 = (x + 4)^2/2, p = (1/2, 1/2) (w* = 0, D_k = 8); client 2 has
    left (always inactive, section 4.3), client 1 always completes E = 1 exact step; plain
    weights, theta = 1, w_0 = 2.  gamma = max(8, 128) = 128, eta_0 = 16/(129 * 0.5), and
    the exact w_1 = w_0 + (1/2) eta_0 (4 - w_0): no randomness at all."""
    q = np.array([[0.0, 1.0], [1.0, 0.0]])
    kw = dict(E=1, theta=1.0, mu=1.0, L=1.0, sigma2=0.0, D=[8.0, 8.0], G2=G2,
              weights=[0.5, 0.5], init_dist2=4.0, step_probs=q)
    eta0 = 16 / (129 * 0.5)
    w1 = 2.0 + 0.5 * eta0 * (4.0 - 2.0)
    return kw, w1 ** 2


def test_departed_client_corrected_reading_holds():
    kw, err = _departed_client_instance(G2=36.0)     # G^2 bounds both clients' gradients on [2, 4]
    res = efl_theorem1(1, variant="corrected", **kw)
    assert res.valid and res.terms["H"] == 1
    assert res.terms["eta"][0] == pytest.approx(16 / (129 * 0.5), rel=1e-12)
    assert res.terms["J"] == pytest.approx(32 * 0.5 * 8 / 0.5, rel=1e-12)
    assert err <= res.value


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: EFL Theorem 1 with J as printed (32 E sum E[p s] / (D_k / mu E[sum p s]), units "
    "inverted; D_k read as D = sum p^k D_k) fails after a client departure: J = 32 E mu / D "
    "= 4 shrinks as the heterogeneity grows, so H J / (tau E + gamma) cannot cover the drift "
    "toward the remaining client.  Instance (_departed_client_instance, deterministic): exact "
    "||w_1 - w*||^2 = 2.24806^2 = 5.0538 > bound 3.969 (any G^2 up to 36; the corrected J = 256 "
    "gives 5.92 and holds)."))
def test_departed_client_as_printed_J_counterexample():
    kw, err = _departed_client_instance(G2=36.0)
    res = efl_theorem1(1, variant="as_printed", **kw)
    assert res.valid, str(res)
    assert res.terms["J"] == pytest.approx(32 * 1.0 / 8.0, rel=1e-12)
    assert err <= res.value, f"exact error {err!r} > bound {res.value!r}"


def test_step_moments_validate_weights():
    for bad in ([0.5, 0.6, -0.1], [0.2, 0.3, 0.4], [[0.2, 0.3, 0.5]]):
        with pytest.raises(InvalidHyperparameterError, match="weights"):
            efl_step_moments(bad, _dist(), E)


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: EFL Theorem 1 (eq. 7) fails at tau = 1 with E[B_t] >= 0, in a regime where "
    "neither printed defect plays a role (E = 1: no s^K term; D_k = 0: J = 0).  C_tau is a "
    "max, not a sum: when gamma^2 ||w_0 - w*||^2 is the larger branch the bound is "
    "||w_0 - w*||^2 gamma^2/(E + gamma)^2 < ||w_0 - w*||^2, but the gradient noise of the "
    "first round can raise the error above ||w_0 - w*||^2.  Instance: f_1 = x^2 (departed: "
    "always inactive), f_2 = x^2/2 with gradient noise of variance 40, p = (1/2, 1/2), E = 1, "
    "plain weights, theta = 1, mu = 1, L = 2, w_0 = 1, w* = 0, G^2 = 41 (exact E||g||^2 at "
    "the only local step): gamma = 256, eta_0 = 32/257, exact E w_1^2 = (1 - eta_0/2)^2 + "
    "eta_0^2 40/4 = 1.0344 > bound 65536/257^2 = 0.9922 (fails for every G^2 in [41, 56.7))."))
def test_theorem1_counterexample_noise_in_the_first_round():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    sigma2, w0 = 40.0, 1.0
    res = efl_theorem1(1, E=1, theta=1.0, mu=1.0, L=2.0, sigma2=[0.0, sigma2], D=[0.0, 0.0],
                       G2=1.0 * w0 ** 2 + sigma2, weights=[0.5, 0.5], init_dist2=w0 ** 2,
                       step_probs=q)
    assert res.valid and not np.any(res.terms["B_negative"])
    gamma = max(4 * 1 * 1.0 / 0.5, 32 * 1 * 2 * 2.0 / (1.0 * 0.5))
    assert res.terms["gamma"] == pytest.approx(gamma) and gamma == pytest.approx(256)
    eta0 = 16 / (1.0 * (1 + gamma) * 0.5)
    assert res.terms["eta"][0] == pytest.approx(eta0, rel=1e-12)
    # w_1 = w_0 + (1/2)(y - w_0), y = w_0 - eta0 (w_0 + xi), E xi = 0, E xi^2 = 40
    exact = (1 - eta0 / 2) ** 2 * w0 ** 2 + (eta0 / 2) ** 2 * sigma2
    assert res.value == pytest.approx(gamma ** 2 * w0 ** 2 / (1 + gamma) ** 2, rel=1e-12)
    assert exact <= res.value, f"exact E w_1^2 = {exact!r} > bound {res.value!r}"
