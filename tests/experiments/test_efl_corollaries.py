"""experiments/efl_corollaries.py: the fast exact moments against the general engine (which reads EFL's
own round), hand recursions and closed forms for each corollary, and the findings as strict xfails."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import efl_corollaries as exp
from experiments._efl_instances import RateSchedule, TableSteps, dist2_from_moments
from fltheory.algorithms import EFL
from fltheory.participation import FullParticipation, IncompleteSteps, Schedule, TimeVarying
from fltheory.problems import QuadraticFederation
from fltheory.problems.generators import random_quadratic
from fltheory.theory.bounds import efl_inactive_rate, efl_step_moments, efl_theorem1
from fltheory.theory.moments import AdditiveNoise, averaging_moments, exact_moments

CFG = {**exp.QUICK, "rounds": 8, "abandon_round": 3, "inactive_prob": [0.5], "mc_replicates": 0}


def _fed() -> tuple[QuadraticFederation, QuadraticFederation, AdditiveNoise, np.ndarray]:
    fed = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=11, constants="clients")
    noisy = fed.with_gradient_noise(0.5)
    return fed, noisy, AdditiveNoise(noisy.noise_sigma2, 3, 2), fed.optimum() + np.array([1.0, -0.5])


def test_chained_moments_equal_the_exact_engine_on_an_inactivity_schedule():
    fed, noisy, noise, x0 = _fed()
    T, E, a = 7, 2, 2
    y = exp.inactive_indicators("periodic", T)
    eta = 0.1 / (1 + np.arange(T) / 3)
    w = np.where(np.arange(E + 1)[None, :] > 0, fed.weights[:, None], 0.0)
    steps = np.full((T, 3), E)
    steps[y, a] = 0
    mean, second = exp.chained_moments(fed, eta, E, w, steps, noise, x0, np.outer(x0, x0))
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, compression=None, lr_schedule=RateSchedule(eta))
    part = IncompleteSteps(FullParticipation(), TimeVarying(exp.IndicatorSteps(y, a, 3, E)))
    ref = exact_moments(alg, noisy, T, participation=part, x0=x0)
    np.testing.assert_allclose(dist2_from_moments(fed.optimum(), mean, second), ref.dist2, rtol=1e-9)
    np.testing.assert_allclose(mean, ref.mean, rtol=1e-9, atol=1e-12)


def test_abandon_branch_equals_the_exact_engine_with_a_departure():
    """Random inactivity before tau0 (averaging_moments), then the departed system (chained maps), against
    exact_moments of EFL under Schedule(departures) + the same step law."""
    fed, noisy, noise, x0 = _fed()
    T, E, a, tau0, y = 7, 2, 2, 3, 0.4
    eta = 0.1 / (1 + np.arange(T) / 3)
    probs = np.zeros((3, E + 1))
    probs[:, E] = 1.0
    probs[a, 0], probs[a, E] = y, 1 - y
    w = np.where(np.arange(E + 1)[None, :] > 0, fed.weights[:, None], 0.0)
    keep = averaging_moments(fed, T, lr=eta, local_steps=E, weights=w, step_pmf=probs, noise=noise, x0=x0)
    steps = np.full((T - tau0, 3), E)
    steps[:, a] = 0
    mean, second = exp.chained_moments(fed, eta[tau0:], E, w, steps, noise, keep.mean[tau0], keep.second[tau0])
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, compression=None, lr_schedule=RateSchedule(eta))
    part = IncompleteSteps(Schedule(FullParticipation(), departures={a: tau0}), TableSteps(probs))
    ref = exact_moments(alg, noisy, T, participation=part, x0=x0)
    np.testing.assert_allclose(dist2_from_moments(fed.optimum(), mean, second), ref.dist2[tau0:], rtol=1e-9)


def test_periodic_inactivity_tends_to_the_activity_weighted_optimum_by_hand():
    """Two scalar clients f_k = h_k (x - c_k)^2 / 2, E = 1, constant rate eta, client 2 inactive in odd
    rounds.  By hand: an even round maps x -> x - eta sum_k p_k h_k (x - c_k), an odd one
    x -> x - eta p_1 h_1 (x - c_1); the fixed point of the two-round map tends to
    w_pi = (p_1 h_1 c_1 + p_2 h_2 c_2 / 2) / (p_1 h_1 + p_2 h_2 / 2) as eta -> 0, at distance O(eta)."""
    h, c, p = np.array([2.0, 1.0]), np.array([1.0, -3.0]), np.array([0.6, 0.4])
    fed = QuadraticFederation(h[:, None, None], (h * c)[:, None], weights=p)
    w_pi = (p[0] * h[0] * c[0] + p[1] * h[1] * c[1] / 2) / (p[0] * h[0] + p[1] * h[1] / 2)
    gaps = []
    for eta in (0.04, 0.02, 0.01):
        # two-round affine map x -> A x + b by hand, its fixed point b / (1 - A)
        a1, b1 = 1 - eta * p @ h, eta * p @ (h * c)
        a2, b2 = 1 - eta * p[0] * h[0], eta * p[0] * h[0] * c[0]
        A, b = a2 * a1, a2 * b1 + b2
        fp = b / (1 - A)
        T = 200
        steps = np.ones((T, 2), dtype=np.int64)
        steps[1::2, 1] = 0
        w = np.array([[0.0, p[0]], [0.0, p[1]]])
        mean, _ = exp.chained_moments(fed, np.full(T, eta), 1, w, steps, AdditiveNoise(np.zeros(2), 2, 1),
                                      np.zeros(1), np.zeros((1, 1)))
        x = 0.0
        for t in range(T):                                     # the same rounds as a scalar loop
            x = (a1 * x + b1) if t % 2 == 0 else (a2 * x + b2)
        assert mean[-1, 0] == pytest.approx(x, rel=1e-10)
        gaps.append(abs(fp - w_pi))
    assert gaps[1] / gaps[0] == pytest.approx(0.5, rel=0.05)    # O(eta)
    assert gaps[2] / gaps[1] == pytest.approx(0.5, rel=0.05)


def test_theorem1_second_term_is_the_inactive_rate():
    """With y_t = 1 in the rounds where client a is inactive, H_tau = sum_{t<tau} y_t and Theorem 1's second
    term is efl_inactive_rate(tau) (tau E + E^2) / (tau E + gamma)."""
    p, E, T = np.array([0.5, 0.3, 0.2]), 2, 9
    y = exp.inactive_indicators("sparse", T)
    probs = np.zeros((T, 3, E + 1))
    probs[:, :, E] = 1.0
    probs[y, 2, E], probs[y, 2, 0] = 0.0, 1.0
    mom = efl_step_moments(p, probs, E)
    for tau in (1, 4, 9):
        r = efl_theorem1(tau, E=E, theta=1.0, mu=0.5, L=3.0, sigma2=1.0, D=[0.3, 0.2, 0.5], G2=4.0, weights=p,
                         init_dist2=1.0, moments=mom)
        assert r.terms["H"] == int(y[:tau].sum()) == int(np.floor(np.log2(tau))) + 1
        rate = efl_inactive_rate(tau, y[:tau].astype(float), r.terms["J"], E)
        assert r.terms["second_term"] == pytest.approx(rate * (tau * E + E ** 2) / (tau * E + r.terms["gamma"]),
                                                       rel=1e-13)


def test_adaptive_weights_make_the_noise_term_proportional_to_mean_inverse_steps():
    """One client at its optimum (only noise moves it), adaptive weight E / s: by hand
    Var x_1 = sum_s P(s) (E/s)^2 eta^2 sum_{j<s} (1 - eta h)^{2j} sigma^2 -> eta^2 E^2 sigma^2 E[1/s] as
    eta -> 0: the E[1/s] factor of the sec. 4.2 rate's sigma term."""
    h, sigma2, E = 2.0, 0.7, 4
    fed = QuadraticFederation(np.array([[[h]]]), np.array([[h * 1.5]]))
    noise = AdditiveNoise(np.array([sigma2]), 1, 1)
    law = exp.step_law("mostly-one", E)
    s = np.arange(E + 1)
    w = np.where(s > 0, E / np.maximum(s, 1), 0.0)[None, :]
    inv = float(law[1:] @ (1 / s[1:]))
    for eta in (0.1, 0.001):
        ex = averaging_moments(fed, 1, lr=eta, local_steps=E, weights=w, step_pmf=law[None, :], noise=noise,
                               x0=np.array([1.5]))
        var = ex.second[1, 0, 0] - ex.mean[1, 0] ** 2
        hand = sum(law[k] * (E / k) ** 2 * eta ** 2 * sigma2 * sum((1 - eta * h) ** (2 * j) for j in range(k))
                   for k in range(1, E + 1))
        assert var == pytest.approx(hand, rel=1e-10)
    assert var / (eta ** 2 * E ** 2 * sigma2) == pytest.approx(inv, rel=1e-2)


def test_parts_run_and_the_inactive_identity_is_exact():
    fed, noisy, _, x0 = _fed()
    out = exp.inactive_part(fed, noisy, CFG, x0, np.array([], dtype=np.int64))
    for v in out.values():
        assert v["identity_rel_err"] < 1e-12
        assert np.all(np.asarray(v["bound"]) > 0)
    inc = exp.incomplete_part(fed, noisy, {**CFG, "laws": ["full", "uniform"]}, x0, np.array([1, 2, 3]))
    assert inc["full"]["inv_steps"] == pytest.approx(0.5) and inc["uniform"]["inv_steps"] == pytest.approx(0.75)
    assert np.isfinite(inc["uniform"]["mc_z"])


def test_decision_ratio_is_one_when_the_rule_picks_the_better_branch():
    rows = [{"y": 0.2, "d": False, "k": [1.0, 0.5], "a": [1.0, 0.7]},
            {"y": 0.8, "d": True, "k": [1.0, 0.5], "a": [1.0, 0.2]}]
    assert exp._decision_ratio(rows, "d", "k", "a") == (1.0, [])
    rows[0]["d"] = True
    worst, bad = exp._decision_ratio(rows, "d", "k", "a")
    assert worst == pytest.approx(0.7 / 0.5) and len(bad) == 1


# The quick configuration's instance (reproduce seed 0): random_quadratic seed 2010586844, x0 recorded.
_SEED, _X0 = 2010586844, np.array([0.7169965146607958, -1.9560441513094653])


def _quick_row(y: float) -> dict:
    c = exp.QUICK
    fed = random_quadratic(c["n_clients"], c["dim"], L=c["L"], mu=c["mu"], heterogeneity=c["heterogeneity"],
                           seed=_SEED, constants="clients")
    out = exp.abandonment_part(fed, fed.with_gradient_noise(c["sigma2"]), {**c, "inactive_prob": [y]}, _X0,
                               np.array([], dtype=np.int64))
    return out["rows"][0]


@pytest.mark.xfail(strict=True, reason="FINDING: eq. 8 abandons client 2 at y^a = 0.8 (y^a J = 116.9 > "
                   "f_1(T) = 97.7) but the exact expected training loss E[F(w_T)] - F* is 0.1327 when kept and "
                   "0.4441 when abandoned at round 12 (quick instance, T = 48, E = 2, sigma2 = 0.5; T E = 96 is "
                   "short of gamma = 549: Corollary 1's premise f_0(T) ~ y^a J holds only to 16% here, f_0 = "
                   "100.7; the rule is judged as printed at this T)")
def test_finding_eq8_abandons_when_keeping_has_the_smaller_loss():
    row = _quick_row(0.8)
    assert row["rule_abandon"]
    assert not row["rule_abandon"] or float(row["loss_abandon"][-1]) <= float(row["loss_keep"][-1])


@pytest.mark.xfail(strict=True, reason="FINDING: at y^a = 0.2 eq. 8 keeps client 2 (y^a J = 23.3 < f_1(T) = 132) "
                   "while the exact Theorem 1 bounds say abandon (f_0(T) = 131 > f_1(T) = 15.7): the "
                   "approximations C_tau ~ tau C, gamma~ = gamma of eq. 8 overstate f_1 by 8x, and Corollary 1's "
                   "premise f_0(T) ~ y^a J does not hold either (131 vs 23.3; quick instance, T E = 96 < gamma)")
def test_finding_eq8_disagrees_with_the_exact_bounds():
    row = _quick_row(0.2)
    assert row["bounds_abandon"] and not row["rule_abandon"]
    assert row["rule_abandon"] == row["bounds_abandon"]


def test_quick_instance_numbers_behind_the_findings():
    """The measured numbers the two strict xfails above rest on (so that they fail for that reason)."""
    high, low = _quick_row(0.8), _quick_row(0.2)
    assert high["rule_abandon"] and low["bounds_abandon"] and not low["rule_abandon"]
    assert float(high["loss_keep"][-1]) == pytest.approx(0.1327, rel=1e-3)
    assert float(high["loss_abandon"][-1]) == pytest.approx(0.4441, rel=1e-3)
    assert (low["f0"], low["f1"], low["f1_rule"]) == pytest.approx((131.0, 15.7, 132.0), rel=1e-2)
    # Corollary 1's premise f_0(T) ~ y^a J fails on this short run: abandon-rule-bounds judges no row
    for row, f0, yJ in ((high, 100.7, 116.9), (low, 131.0, 23.27)):
        assert (row["f0"], row["y"] * row["J"]) == pytest.approx((f0, yJ), rel=1e-3)
        assert abs(row["f0"] - row["y"] * row["J"]) > exp.PREMISE_TOL * row["f0"]


@pytest.mark.xfail(strict=True, reason="FINDING: the remark after Corollary 1 ('the more epochs, the more sensitive "
                   "to in-activeness') fails on the quick instance: E[F(w_48)] - F* with client 2 inactive w.p. 0.5 "
                   "over the complete run is 14.6 (E = 1), 8.05 (E = 2), 7.31 (E = 4); eq. 9's threshold (C/J)/(T E) "
                   "with Theorem 1's C and J grows with E (46.8, 91.1, 227) instead of shrinking")
def test_finding_more_local_epochs_are_not_more_sensitive_to_inactivity():
    c = exp.QUICK
    fed = random_quadratic(c["n_clients"], c["dim"], L=c["L"], mu=c["mu"], heterogeneity=c["heterogeneity"],
                           seed=_SEED, constants="clients")
    out = exp.epochs_part(fed, fed.with_gradient_noise(c["sigma2"]), c, _X0, np.array([], dtype=np.int64))
    assert out["sensitivity"] == pytest.approx([14.62, 8.055, 7.314], rel=1e-3)
    assert out["eq9_threshold"] == pytest.approx([46.8, 91.1, 227.0], rel=1e-2)
    assert np.all(np.diff(out["sensitivity"]) > 0) or np.all(np.diff(out["eq9_threshold"]) < 0)


def test_abandonment_checks_judge_only_rows_meeting_corollary_1s_premise():
    """Corollary 1 rests on f_0(T) ~ y^a J (enough steps): the comparison with the exact bounds judges
    only rows within PREMISE_TOL ("not checkable" when none is), while the rules as printed are judged
    on every row, their detail naming where the premise fails."""
    base = {"seed": 1, "N": 3, "d": 2, "E": 2, "T": 48, "sigma2": 0.5}
    def row(y, f0, J, rule, keep, ab):
        return {"y": y, "J": J, "f0": f0, "f1": 10.0, "f1_rule": 20.0, "rule_abandon": rule, "eq9_abandon": False,
                "bounds_abandon": True, "eq9_threshold": 0.1, "loss_keep": [keep], "loss_abandon": [ab],
                "loss_hat_keep": [keep], "loss_hat_abandon": [ab]}
    far = row(0.5, 100.0, 40.0, True, 0.1, 0.4)                 # y J = 20, far from f_0 = 100
    results = {**base, "abandon": {"rows": [far], "client": 2, "p_a": 0.3, "abandon_round": 12}}
    got = {c.theorem: c for c in exp._abandon_checks(results)}
    assert {k: c.status for k, c in got.items()} == {
        "abandon-rule-runs": "violated", "abandon-eq9": "holds", "abandon-rule-bounds": "not checkable"}
    assert got["abandon-rule-runs"].ratio == pytest.approx(4.0)
    assert "premise f_0(T) ~ y^a J (within 10%) fails at y^a = 0.5: f_0(T) = 100 vs y^a J = 20" in \
        got["abandon-rule-runs"].detail
    assert "f_0(T) = 100 vs y^a J = 20" in got["abandon-rule-bounds"].detail
    near = row(0.5, 100.0, 190.0, True, 0.1, 0.4)               # y J = 95, within 10 % of f_0
    results["abandon"]["rows"] = [far, near]
    got = {c.theorem: c for c in exp._abandon_checks(results)}
    assert got["abandon-rule-runs"].status == "violated" and got["abandon-rule-runs"].ratio == pytest.approx(4.0)
    assert got["abandon-eq9"].status == "holds"
    bounds = got["abandon-rule-bounds"]
    assert bounds.status == "holds"
    assert "not judged, Corollary 1's premise f_0(T) ~ y^a J failing beyond 10%: y^a = 0.5: f_0(T) = 100" \
        in bounds.detail
