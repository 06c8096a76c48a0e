"""Symbolic derivations (sympy) held against the numeric routines."""

import numpy as np
import pytest
import sympy as sp

from fltheory.errors import InvalidHyperparameterError
from fltheory.problems import QuadraticFederation
from fltheory.theory import fedopt_quadratic_fixed_point, fedopt_small_rate_limit
from fltheory.theory import symbolic as S
from fltheory.theory.bounds import elasticnet_constants

HESS, OPT, N_SAMPLES = np.array([1.0, 3.0, 0.5]), np.array([2.0, -1.0, 0.5]), [2, 1, 3]
C, P, TAU = np.array([1.0, 0.5, 2.0]), np.array([1.0, 2.0, 0.7]), (2, 3, 4)


def _scalar_fed():
    return QuadraticFederation(HESS[:, None, None], (HESS * OPT)[:, None], n_samples=N_SAMPLES)


def _subs(sym, fed, h=None):
    vals = {}
    for i in range(3):
        vals.update({sym["p"][i]: fed.weights[i], sym["hess"][i]: HESS[i], sym["e"][i]: HESS[i] * OPT[i],
                     sym["c"][i]: C[i], sym["P"][i]: P[i]})
        if "tau" in sym and sym["tau"][i] not in vals and "tau_values" not in sym:
            vals[sym["tau"][i]] = TAU[i]
    if h is not None:
        vals[sym["h"]] = h
    return vals


@pytest.mark.parametrize("h", [0.01, 0.1, 0.2])
def test_scalar_fixed_point_matches_closed_form(h):
    fed = _scalar_fed()
    expr, sym = S.scalar_fixed_point(3)
    value = float(expr.subs(_subs(sym, fed, h)))
    numeric = fedopt_quadratic_fixed_point(fed, C * h, np.array(TAU), P[:, None]).x[0]
    assert value == pytest.approx(numeric, rel=1e-12)


def test_series_constant_term_is_eq8_and_first_order_is_accurate():
    fed = _scalar_fed()
    ser, sym = S.fixed_point_series(3, order=2, tau=TAU)
    vals = _subs(sym, fed)
    h = sym["h"]
    f = sp.lambdify(h, ser.subs(vals))
    limit = fedopt_small_rate_limit(fed, C, np.array(TAU), P[:, None])[0]
    assert f(0.0) == pytest.approx(limit, rel=1e-12)
    errs = [abs(f(hh) - fedopt_quadratic_fixed_point(fed, C * hh, np.array(TAU), P[:, None]).x[0])
            for hh in (1e-3, 5e-4)]
    assert 3.6 < errs[0] / errs[1] < 4.4          # remainder O(h^2)


def test_diagonal_fixed_point_matches_closed_form():
    expr, sym = S.diagonal_fixed_point(2, 2)
    rng = np.random.default_rng(0)
    Hd = 0.5 + rng.random((2, 2))
    Pd = 0.5 + rng.random((2, 2))
    e = rng.standard_normal((2, 2))
    eta, tau = np.array([0.1, 0.3]), np.array([3, 2])
    fed = QuadraticFederation(np.einsum("ni,ij->nij", Hd, np.eye(2)), e, weights=[0.3, 0.7])
    vals = {}
    for i in range(2):
        vals.update({sym["p"][i]: fed.weights[i], sym["eta"][i]: eta[i], sym["tau"][i]: int(tau[i])})
        for j in range(2):
            vals.update({sym["hess"][i, j]: Hd[i, j], sym["P"][i, j]: Pd[i, j], sym["e"][i, j]: e[i, j]})
    got = np.array([float(v) for v in expr.subs(vals)])
    np.testing.assert_allclose(got, fedopt_quadratic_fixed_point(fed, eta, tau, Pd).x, rtol=1e-12)


@pytest.mark.parametrize("eta,tau", [(0.05, 3), (0.3, 2), (0.6, 5)])
def test_sgd_contraction_factor(eta, tau):
    factor, q_opt, sym = S.sgd_contraction_factor()
    mu, L = 0.5, 3.0
    H = np.diag([mu, 1.7, L])
    numeric = np.linalg.norm(np.linalg.matrix_power(np.eye(3) - eta * H, tau), 2)
    f = float(factor.subs({sym["eta"]: eta, sym["mu"]: mu, sym["L"]: L, sym["tau"]: tau}))
    assert f == pytest.approx(numeric, rel=1e-12)
    eta_opt = 2 / (mu + L)
    assert float(q_opt.subs({sym["mu"]: mu, sym["L"]: L})) == pytest.approx(
        np.linalg.norm(np.eye(3) - eta_opt * H, 2), rel=1e-12)


def test_elasticnet_identity_and_threshold():
    out = S.elasticnet_kappa_identity()
    assert out["identity_holds"]
    r = out["kappa0_threshold_value"]
    assert 26 < r < 27                       # the seed's 27 is sufficient, not sharp
    beta = 1.0
    assert elasticnet_constants(beta, (r + 1e-6) * beta, 10, 5)["kappa_0"] > 0
    assert elasticnet_constants(beta, (r - 1e-6) * beta, 10, 5)["kappa_0"] < 0
    assert sp.simplify(out["kappa0_threshold"] - (25 + sp.sqrt(825)) / 2) == 0     # 26.86
    # lambda_2 = (27 + u) beta: numerator beta^2 (u^2 + 29 u + 4) > 0, every kappa positive
    b, u = out["symbols"]["beta"], out["u"]
    assert sp.expand(out["numerator_above_27"] - b ** 2 * (u ** 2 + 29 * u + 4)) == 0
    # the threshold is an iff only above 5 beta: below, kappa_0 > 0 again but kappa' < 0
    low = elasticnet_constants(beta, 1.0 * beta, 10, 5)
    assert low["kappa_0"] > 0 and low["kappa_prime"] < 0 and low["kappa"] < 0
    sym = out["symbols"]
    num = elasticnet_constants(2.0, 60.0, 10, 4)
    vals = {sym["beta"]: 2.0, sym["lambda_2"]: 60.0, sym["m"]: 10, sym["P"]: 4}
    for key, name in (("kappa", "kappa"), ("kappa_0", "kappa_0"), ("kappa_prime", "kappa_prime")):
        assert float(out[key].subs(vals)) == pytest.approx(num[name], rel=1e-12)


def test_efl_step_size_condition():
    out = S.efl_step_size_condition()
    assert sp.simplify(out["extreme_ratio"] - 1) == 0
    assert sp.simplify(out["extreme_ratio_theta_branch"] - 1) == 0
    sym = out["symbols"]
    rng = np.random.default_rng(1)
    for _ in range(5):
        vals = {s: float(v) for s, v in zip(sym.values(), 0.1 + 5 * rng.random(len(sym)))}
        assert float(out["ratio"].subs(vals)) < 1
        assert all(float(d.subs(vals)) < 0 for d in out["derivatives"])


def test_latex_export():
    expr, _ = S.scalar_fixed_point(2)
    text = S.latex(expr)
    assert "\\frac" in text and "tau" in text


# ----------------------------------------------------------- bad input (issue 16, item 3)
@pytest.mark.parametrize(("call", "message"), [
    (lambda: S.scalar_fixed_point(0), r"scalar_fixed_point: n_clients must be an integer >= 1 and <= 32, got 0"),
    (lambda: S.scalar_fixed_point(10**12), r"n_clients must be an integer >= 1 and <= 32, got 1000000000000"),
    (lambda: S.scalar_fixed_point(2.0), r"n_clients must be an integer, got 2.0"),
    (lambda: S.fixed_point_series(3, order=-1), r"fixed_point_series: order must be an integer >= 1"),
    (lambda: S.fixed_point_series(3, tau=(2, 3)), r"tau must be None or a tuple of 3 local step counts"),
    (lambda: S.fixed_point_series(2, tau=(2, 0)), r"tau\[1\] must be an integer >= 1"),
    (lambda: S.fixed_point_series(2, tau="ab"), r"tau must be None or a tuple of 2"),
    (lambda: S.diagonal_fixed_point(True, 2), r"diagonal_fixed_point: dim must be an integer, got True"),
    (lambda: S.diagonal_fixed_point(2, float("nan")), r"diagonal_fixed_point: n_clients must be an integer"),
])
def test_bad_sizes_give_typed_errors_naming_the_argument(call, message):
    with pytest.raises(InvalidHyperparameterError, match=message):
        call()


def test_a_list_of_steps_is_the_same_as_a_tuple():
    a, _ = S.fixed_point_series(2, order=2, tau=(2, 3))
    b, _ = S.fixed_point_series(2, order=2, tau=[np.int64(2), 3])
    assert sp.simplify(a - b) == 0
