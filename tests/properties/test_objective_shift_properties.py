"""Property tests of EFL Theorem 2 (seed 000 eq. 10-11) over the whole hypothesis space:
random quadratic federations (every client L-smooth and mu-strongly convex, condition
numbers up to 1e6, client optima spread up to 1e2, sample counts 1..1e6 so that
n_a/n ranges over (0, 1) including both edges) and ridge-logistic federations."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.problems import QuadraticFederation
from fltheory.testing import check_bound, logistic_federations, quadratic_federations
from fltheory.theory import objective_shift

SIZES = st.one_of(st.integers(1, 10), st.integers(1, 10 ** 6))
CONSTS = dict(L=st.floats(1.0, 1e3), mu=st.floats(1e-3, 1.0), heterogeneity=st.floats(0.0, 1e2))


def _fed(n_clients, dim):
    return quadratic_federations(
        n_clients=n_clients, dim=dim,
        n_samples=st.lists(SIZES, min_size=n_clients, max_size=n_clients), **CONSTS)


def _atol(res):
    """Floating-point noise of ||w* - w^*||^2: each optimum is solved to about
    kappa * eps * ||w|| (kappa = L/mu), so the squared shift carries an absolute
    error up to (2 kappa eps (||w*|| + ||w^*||))^2; a factor 100 of margin."""
    kappa = res.terms["L"] / res.terms["mu"]
    scale = np.linalg.norm(res.terms["w_star"]) + np.linalg.norm(res.terms["w_hat"]) + 1.0
    return (200 * kappa * np.finfo(float).eps * scale) ** 2


@st.composite
def departures(draw):
    N = draw(st.integers(2, 5))
    fed = draw(_fed(N, draw(st.integers(1, 4))))
    return fed, draw(st.integers(0, N - 1))


@st.composite
def arrivals(draw):
    N, d = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return draw(_fed(N, d)), draw(_fed(1, d))


@given(departures())
def test_departure_eq10_holds_as_printed_and_derived(case):
    """Finding (constant): the proof gives 2 in place of the printed 8, so eq. (10) holds
    with ratio <= 1/4 (mu of the printed reading <= mu of F before the shift); the
    constant 2 is attained (tests/theory/test_objective_shift.py)."""
    fed, a = case
    for variant in ("as_printed", "derived"):
        res = objective_shift(fed, a, kind="depart", variant=variant)
        check_bound(res.measured, res, rtol=1e-8, atol=_atol(res), label=f"eq. 10 {variant}", instance=fed)
        if variant == "as_printed":
            assert res.measured <= 0.25 * res.value * (1 + 1e-8) + _atol(res), str(res)


@given(arrivals())
def test_join_derived_bound_holds(case):
    fed, new = case
    res = objective_shift(fed, kind="join", other=new, variant="derived")
    check_bound(res.measured, res, rtol=1e-8, atol=_atol(res), label="eq. 11 derived", instance=fed.with_client(new))


@st.composite
def small_arrivals(draw):
    """Arrivals with n_a <= n (n = samples before the shift)."""
    N, d = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    fed = draw(_fed(N, d))
    n_a = draw(st.integers(1, int(fed.n_samples.sum())))
    return fed, draw(quadratic_federations(n_clients=1, dim=d, n_samples=[n_a], **CONSTS))


@given(small_arrivals())
def test_join_eq11_as_printed_holds_when_the_newcomer_is_not_larger(case):
    """Proof: grad F_old(w^*) = -(n_a/n) grad F_a(w^*) gives ||w* - w^*||^2 <=
    2 L (n_a/n)^2 D^_a / mu_old^2 <= 8 L (n_a/(n + n_a))^2 D^_a / mu^2 iff
    (1 + n_a/n)^2 <= 4, i.e. n_a <= n (mu <= mu_old)."""
    fed, new = case
    res = objective_shift(fed, kind="join", other=new, variant="as_printed")
    check_bound(res.measured, res, rtol=1e-8, atol=_atol(res), label="eq. 11 as printed, n_a <= n",
                instance=fed.with_client(new))


@given(logistic_federations(), st.data())
def test_logistic_departure_and_join(fed, data):
    a = data.draw(st.integers(0, fed.n_clients - 1))
    res = objective_shift(fed, a, kind="depart")
    check_bound(res.measured, res, rtol=1e-6, atol=_atol(res), label="eq. 10 logistic", instance=fed)
    res = objective_shift(fed.without_client(a), kind="join",
                          other=_single(fed, a), variant="derived")
    check_bound(res.measured, res, rtol=1e-6, atol=_atol(res), label="eq. 11 derived logistic", instance=fed)


def _single(fed, a):
    from fltheory.problems.logistic import LogisticFederation
    return LogisticFederation([fed.features[a]], [fed.labels[a]], reg=fed.reg)


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: EFL eq. (11) as printed (D^_a at the new optimum, 'with respect to the new "
    "objective') fails when the arriving client holds more data than the federation "
    "(n_a > n).  Scalar clients f(x) = x^2/2 (n = 1) and f_a(x) = (x - 1)^2/2 (n_a = 100), "
    "L = mu = 1: w* = 0, w^* = q = n_a/(n + n_a), ||w* - w^*||^2 = q^2, D^_a = (1 - q)^2/2, "
    "bound = 4 q^2 (1 - q)^2, ratio 1/(4 (1 - q)^2) = 2550.25 > 1 for q = 100/101; in this "
    "family the ratio exceeds 1 exactly when n_a > n."))
def test_join_eq11_as_printed_counterexample():
    fed = QuadraticFederation(np.ones((1, 1, 1)), np.zeros((1, 1)), n_samples=[1])
    new = QuadraticFederation(np.ones((1, 1, 1)), np.ones((1, 1)), n_samples=[100])
    res = objective_shift(fed, kind="join", other=new, variant="as_printed")
    assert res.valid                                   # every hypothesis holds
    q = 100 / 101
    assert res.ratio == pytest.approx(1 / (4 * (1 - q) ** 2), rel=1e-9)
    check_bound(res.measured, res, label="eq. 11 as printed", instance=fed.with_client(new))
