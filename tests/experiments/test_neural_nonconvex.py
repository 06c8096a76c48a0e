"""The derived local-correction bound of experiments/neural_nonconvex.py: its
formula, its validity where every constant is exact (quadratic and logistic
federations with their analytic L and F*), and the verdict logic."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import neural_nonconvex as E
from fltheory import optim
from fltheory.algorithms import FedOpt, run
from fltheory.problems import LogisticFederation, random_quadratic


def test_bound_formula():
    # 4 * 3 / (0.1 * 10) + 3 * (2^2 0.05^2 1.5^2 * 4*3*7/6)
    expected = 12.0 + 3 * (4 * 0.0025 * 2.25 * 14)
    assert E.bound(3.5, 0.5, 0.1, 10, 2.0, 0.05, 1.5, 4) == pytest.approx(expected, rel=1e-14)
    assert E.bound(1.0, 0.0, 0.5, 4, 9.0, 0.1, 3.0, 1) == pytest.approx(2.0, rel=1e-14)   # tau = 1: no drift


def _check_instance(fed, F_inf, L, eta, tau, T, rng):
    eta_s = 0.25 / (L * eta)                            # gamma L = 1/4, the largest step allowed
    client = optim.adagrad(eta, initial_accumulator=0.05)
    alg = FedOpt(client_optimizer=client, server_optimizer=optim.sgd(eta_s), local_steps=tau,
                 correction="local")
    hist = run(alg, fed, T, x0=rng.standard_normal(fed.dim), seed=0)
    X = np.asarray(hist.x)
    G = 0.0
    for t in range(T):
        x_next, g = E._rerun_round(fed, X[t], client, tau, eta, eta_s)
        np.testing.assert_allclose(x_next, X[t + 1], rtol=1e-12, atol=1e-14)
        G = max(G, g)
    measured = float(np.min(np.asarray(hist.grad_norm2)[:T]))
    return measured, E.bound(float(fed.loss(X[0])), F_inf, eta_s * eta, T, L, eta, G, tau)


@pytest.mark.parametrize("seed", range(4))
def test_derived_bound_holds_with_exact_constants(seed):
    rng = np.random.default_rng(seed)
    fed = random_quadratic(3, 5, L=4.0, mu=0.2, heterogeneity=2.0, seed=seed, constants="clients")
    measured, B = _check_instance(fed, fed.optimal_value(), 4.0, 0.05, 4, 25, rng)
    assert measured <= B
    feats = [rng.standard_normal((n, 4)) for n in (20, 30)]
    labels = [2.0 * rng.integers(0, 2, f.shape[0]) - 1 for f in feats]
    log = LogisticFederation(feats, labels, reg=0.05)
    L = max(log.constants().L, float(np.max(log.constants().client_L)))
    measured, B = _check_instance(log, 0.0, L, 0.1, 3, 25, rng)
    assert measured <= B


def _results(**kw):
    base = {"rounds": 10, "local_steps": 3, "client_lr": 0.1, "server_lr": 1.0, "L": 1.0, "G": 1.0,
            "gamma_L": 0.1, "min_grad_norm2": 0.5, "bound": 2.0, "bound_optimization_term": 1.0,
            "bound_drift_term": 1.0, "grad_norm2": [4.0, 0.5], "rerun_deviation": 0.0}
    return {**base, **kw}


def test_verdicts():
    ok, rerun = E.checks(_results())
    assert ok.status == "holds" and ok.ratio == pytest.approx(0.25) and "0.5x ||grad F(x_0)||^2" in ok.detail
    assert rerun.status == "holds"
    assert E.checks(_results(min_grad_norm2=3.0))[0].status == "violated"
    assert E.checks(_results(gamma_L=0.3))[0].status == "not checkable"
    assert E.checks(_results(rerun_deviation=1e-6))[1].status == "violated"
