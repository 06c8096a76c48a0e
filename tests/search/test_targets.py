"""Built-in targets: the exact mean squared error of the seed-001 target against a
readable per-client loop and a Monte Carlo simulation; the objective-shift builders."""

import numpy as np
import pytest

from fltheory.search import evaluate_point, get_target, registered_targets
from fltheory.search.targets import build_shift_instance, fedopt_theorem1_exact_errors
from fltheory.testing import build_quadratic


def _reference_errors(fed, lr, tau, sigma2, eta_s, x0, xt, rounds):
    """Per-client loop with matrix powers (the obvious construction)."""
    d = fed.dim
    A = (1 - eta_s) * np.eye(d)
    C = np.zeros((d, d))
    for k in range(fed.n_clients):
        Mk = np.eye(d) - lr[k] * fed.H[k]
        A += eta_s * fed.weights[k] * np.linalg.matrix_power(Mk, int(tau[k]))
        C += eta_s ** 2 * fed.weights[k] ** 2 * lr[k] ** 2 * sigma2[k] / d * sum(
            np.linalg.matrix_power(Mk, 2 * j) for j in range(int(tau[k])))
    P = np.outer(x0 - xt, x0 - xt)
    out = [np.trace(P)]
    for _ in range(rounds):
        P = A @ P @ A.T + C
        out.append(np.trace(P))
    return np.array(out)


def test_exact_errors_match_the_reference_loop_and_a_simulation():
    fed = build_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=2.0, n_samples=[1, 2, 3], seed=7)
    lr, tau, sigma2 = np.array([0.2, 0.1, 0.3]), np.array([2, 4, 1]), np.array([1.0, 0.0, 3.0])
    x0, xt, R = np.array([3.0, -1.0]), np.array([0.5, 0.2]), 6
    fast = fedopt_theorem1_exact_errors(fed, lr, tau, sigma2, 0.7, x0, xt, R)
    np.testing.assert_allclose(fast, _reference_errors(fed, lr, tau, sigma2, 0.7, x0, xt, R), rtol=1e-12)
    # Monte Carlo of the noisy rounds around x~ = xt (the error recursion is affine in e)
    rng = np.random.default_rng(0)
    M = 4000
    sq = np.zeros((R + 1, M))
    for m in range(M):
        e = x0 - xt
        sq[0, m] = e @ e
        for t in range(R):
            new = (1 - 0.7) * e
            for k in range(3):
                y = e.copy()
                for _ in range(tau[k]):
                    y = y - lr[k] * (fed.H[k] @ y + np.sqrt(sigma2[k] / 2) * rng.standard_normal(2))
                new = new + 0.7 * fed.weights[k] * y
            e = new
            sq[t + 1, m] = e @ e
    se = sq.std(axis=1, ddof=1) / np.sqrt(M)
    assert np.all(np.abs(sq.mean(axis=1) - fast) <= 5 * se + 1e-12)


def test_fedopt_target_reports_the_worst_round():
    point = {"N": 2, "d": 2, "L": 4.0, "mu": 0.5, "heterogeneity": 2.0, "step": 0.8, "tau": 3,
             "sigma2": 2.0, "server_lr": 0.6, "form": "squared"}
    res = evaluate_point("fedopt_theorem1", point, 11)
    assert res.valid
    exact, bound = res.terms["exact_per_round"], res.terms["per_round"]
    t = res.terms["round"]
    assert t >= 1
    assert res.ratio == pytest.approx(max(exact[1:] / bound[1:]), rel=1e-15)
    assert res.measured == exact[t] and res.value == bound[t]


def test_shift_builders_give_the_declared_shares():
    point = {"N": 3, "d": 2, "share": 2.5, "L": 10.0, "mu": 0.1, "heterogeneity": 1.0}
    fed, new = build_shift_instance(point, 0, "join")
    assert fed.n_clients == 3 and new.n_clients == 1
    assert new.n_samples[0] / fed.n_samples.sum() == pytest.approx(2.5)
    fed, none = build_shift_instance(point, 0, "depart")
    assert none is None and fed.n_samples[0] / fed.n_samples[1:].sum() == pytest.approx(2.5)
    assert np.all(fed.client_L <= 10.0 + 1e-9) and np.all(fed.client_mu >= 0.1 - 1e-12)


def test_registry_holds_the_builtin_targets():
    names = set(registered_targets())
    assert {"efl_eq10_depart", "efl_eq11_join", "efl_eq11_join_derived", "fedopt_theorem1"} <= names
    assert get_target("efl_eq11_join").space.names()[:2] == ["N", "d"]
