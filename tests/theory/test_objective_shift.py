"""EFL Theorem 2 (objective shift): exact shifts, constants and hypotheses."""

import numpy as np
import pytest

from fltheory.errors import AssumptionError, InvalidHyperparameterError, InvalidProblemError
from fltheory.problems import QuadraticFederation
from fltheory.testing import build_quadratic
from fltheory.theory import objective_shift


def _scalar(curv, opt, n):
    curv, opt = np.asarray(curv, float), np.asarray(opt, float)
    return QuadraticFederation(curv[:, None, None], (curv * opt)[:, None], n_samples=n)


def test_departure_on_scalar_quadratics_by_hand():
    # f_k = h_k (x - c_k)^2 / 2; optimum = sum n_k h_k c_k / sum n_k h_k
    fed = _scalar([1.0, 2.0, 4.0], [0.0, 1.0, -2.0], [3, 5, 2])
    res = objective_shift(fed, 2, kind="depart")
    w_star = (3 * 0 + 5 * 2 * 1 + 2 * 4 * -2) / (3 + 10 + 8)
    w_hat = (5 * 2 * 1) / (3 + 10)
    assert res.measured == pytest.approx((w_star - w_hat) ** 2, rel=1e-12)
    D_hat = 4 * (w_hat + 2) ** 2 / 2
    assert res.terms["D_hat"] == pytest.approx(D_hat, rel=1e-12)
    mu = min((3 + 10 + 8) / 10, 13 / 8)          # both objectives' curvatures
    assert res.terms["mu"] == pytest.approx(mu, rel=1e-12)
    assert res.value == pytest.approx(8 * 4 * (2 / 10) ** 2 * D_hat / mu ** 2, rel=1e-12)
    assert res.holds and 0 < res.ratio < 1


def test_join_direction_definitions():
    fed = _scalar([1.0, 1.0], [0.0, 1.0], [2, 2])
    new = _scalar([1.0], [3.0], [4])
    res = objective_shift(fed, kind="join", other=new)
    w_old, w_new = 0.5, (0 + 2 + 12) / 8
    np.testing.assert_allclose(res.terms["w_star"], [w_old])
    np.testing.assert_allclose(res.terms["w_hat"], [w_new])
    assert res.terms["D_hat"] == pytest.approx((w_new - 3) ** 2 / 2)        # at the new optimum
    assert res.terms["D_old_optimum"] == pytest.approx((w_old - 3) ** 2 / 2)
    assert res.terms["share"] == pytest.approx(4 / 8)                       # n_a / (n + n_a)
    assert res.terms["n_a_over_n"] == pytest.approx(4 / 4)


def test_derived_join_bound_is_tight_for_equal_scalar_curvatures():
    fed = _scalar([1.0], [0.0], [1])
    new = _scalar([1.0], [1.0], [3])
    res = objective_shift(fed, kind="join", other=new, variant="derived")
    assert res.ratio == pytest.approx(1.0, rel=1e-12)


def test_matches_direct_optimum_difference():
    fed = build_quadratic(5, 3, L=10.0, mu=0.1, heterogeneity=5.0, n_samples=[1, 2, 3, 4, 50], seed=7)
    res = objective_shift(fed, 4, kind="depart")
    diff = fed.optimum() - fed.without_client(4).optimum()
    assert res.measured == pytest.approx(float(diff @ diff), rel=1e-12)
    assert res.terms["L"] == pytest.approx(fed.client_L.max())


def test_logistic_departure():
    from fltheory.problems.logistic import LogisticFederation
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((n, 2)) + m for n, m in ((8, 0.0), (12, 1.0), (5, -2.0))]
    labels = [np.where(rng.random(len(a)) < 0.5, 1.0, -1.0) for a in feats]
    fed = LogisticFederation(feats, labels, reg=0.1)
    res = objective_shift(fed, 1, kind="depart")
    assert res.terms["mu"] == pytest.approx(0.1)
    diff = fed.optimum() - fed.without_client(1).optimum()
    assert res.measured == pytest.approx(float(diff @ diff), rel=1e-9)
    assert res.holds


def test_violated_hypothesis_gives_no_value_and_strict_raises():
    fed = _scalar([1.0, 2.0], [0.0, 1.0], [1, 1])
    res = objective_shift(fed, 0, kind="depart", mu=0.0)
    assert res.value is None and not res.valid
    assert any("strongly convex" in a.name for a in res.violated)
    with pytest.raises(AssumptionError, match=r"mu = 0.0"):
        objective_shift(fed, 0, kind="depart", mu=0.0, strict=True)


def test_bad_arguments():
    fed = _scalar([1.0, 2.0], [0.0, 1.0], [1, 1])
    with pytest.raises(InvalidHyperparameterError):
        objective_shift(fed, 0, kind="leave")
    with pytest.raises(InvalidProblemError):
        objective_shift(fed, kind="depart")
    with pytest.raises(InvalidProblemError):
        objective_shift(fed, kind="join")
    with pytest.raises(InvalidProblemError):
        objective_shift(fed, kind="join", other=fed)       # two clients


def test_departure_eq10_constant_8_is_four_times_the_attained_constant_2():
    """Equal scalar curvatures h: w* = w^* + q (c_a - w^*) with q = n_a/n, so
    ||w* - w^*||^2 = q^2 (c_a - w^*)^2 = 2 q^2 D^_a / h exactly: the derived bound
    2 L q^2 D^_a / mu^2 is attained (ratio 1), eq. (10) with 8 gives ratio 1/4."""
    for h, n in ((1.0, [3, 1]), (2.5, [1, 7])):
        fed = _scalar([h, h], [0.0, 1.0], n)
        printed = objective_shift(fed, 1, kind="depart", variant="as_printed")
        derived = objective_shift(fed, 1, kind="depart", variant="derived")
        q = n[1] / sum(n)
        assert printed.measured == pytest.approx(q ** 2, rel=1e-12)
        assert printed.ratio == pytest.approx(0.25, rel=1e-12)
        assert derived.ratio == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("n,n_a", [(1, 1), (5, 5), (3, 1), (2, 3)])
def test_join_eq11_as_printed_ratio_on_equal_curvatures(n, n_a):
    """Re-derivation of the eq. (11) finding: f = (x - 0)^2/2 (n samples), f_a = (x - 1)^2/2
    (n_a samples), L = mu = 1, q = n_a/(n + n_a): measured q^2, D^_a = (1 - q)^2/2, bound
    4 q^2 (1 - q)^2, ratio 1/(4 (1 - q)^2): exactly 1 at n_a = n (the edge is attained),
    > 1 for every n_a > n."""
    fed = _scalar([1.0], [0.0], [n])
    new = _scalar([1.0], [1.0], [n_a])
    res = objective_shift(fed, kind="join", other=new, variant="as_printed")
    q = n_a / (n + n_a)
    assert res.valid
    assert res.measured == pytest.approx(q ** 2, rel=1e-12)
    assert res.value == pytest.approx(4 * q ** 2 * (1 - q) ** 2, rel=1e-12)
    assert res.ratio == pytest.approx(1 / (4 * (1 - q) ** 2), rel=1e-12)
    assert (res.ratio > 1 + 1e-9) == (n_a > n)


def test_suboptimality_gaps_overflow_is_a_typed_error_not_inf():
    """Quadratic gaps 1/2 (w - x_k*)^T H_k (w - x_k*) at |w| = 1e300 overflow: OutOfRangeError naming W, never inf;
    at representable points the gap is the closed form."""
    from fltheory.errors import OutOfRangeError
    from fltheory.theory import suboptimality_gaps

    H = np.array([[[2.0, 0.0], [0.0, 1.0]], [[1.0, 0.5], [0.5, 3.0]]])
    fed = QuadraticFederation(H, np.array([[1.0, -1.0], [0.0, 2.0]]))
    with pytest.raises(OutOfRangeError, match=r"overflows float64 at W with max \|W\| = 1e\+300"):
        suboptimality_gaps(fed, np.full(2, 1e300))
    w = np.array([0.5, 0.25])
    xs = fed.client_optima()
    want = [0.5 * (w - xs[k]) @ H[k] @ (w - xs[k]) for k in range(2)]
    np.testing.assert_allclose(suboptimality_gaps(fed, w), want, rtol=1e-13)
