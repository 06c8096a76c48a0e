"""Helper logic of experiments/te_targets.py and its recorded finding."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from experiments import te_targets as te
from fltheory.reproduce import experiment_rng
from fltheory.problems import LogisticFederation


def _results(gaps_base, gaps_te, margin=0.02, window=2):
    """Minimal results dict: constant-in-time gaps per seed for both pairs."""
    R = 5
    def traj(g):
        return [np.full(R + 1, v) for v in g]
    return {"window": window, "rounds": R, "margin": margin, "instance_seed": 1, "run_seeds": [1, 2, 3],
            "dim_params": 3, "L_max": 1.0, "f_star": 0.0,
            "loss_gap": {"FedProx": traj(gaps_base), "FedProx-TE": traj(gaps_te),
                         "FedCurv": traj(gaps_base), "FedCurv-TE": traj(gaps_base)},
            "reduction": {"FedProx": {"max_abs_diff": 0.0, "max_abs_x": 1.0, "rounds": 3}},
            "reduction_tol": 1e-12}


def test_paired_matches_a_one_sided_t_interval_on_log_ratios():
    base, tgt = [1.0, 2.0, 4.0, 3.0], [0.9, 2.2, 3.0, 2.7]
    p = te._paired(_results(base, tgt), "FedProx", "FedProx-TE")
    logs = np.log(np.array(tgt) / np.array(base))
    sem = stats.sem(logs)
    lo, hi = stats.t.interval(0.90, len(logs) - 1, loc=logs.mean(), scale=sem)   # two-sided 90% = one-sided 95%
    assert p["geomean"] == pytest.approx(np.exp(logs.mean()), rel=1e-12)
    assert p["lower"] == pytest.approx(np.exp(lo), rel=1e-12)
    assert p["upper"] == pytest.approx(np.exp(hi), rel=1e-12)
    assert p["wins"] == 3


def test_verdicts_cover_the_three_outcomes():
    better = te.checks(_results([1.0, 1.0, 1.0], [0.5, 0.6, 0.55]))[0]
    assert better.status == "holds" and better.ratio < 1
    worse = te.checks(_results([1.0, 1.0, 1.0], [1.5, 1.6, 1.55]))[0]
    assert worse.status == "violated" and "instance seed" in worse.detail
    noisy = te.checks(_results([1.0, 1.0, 1.0], [0.5, 2.5, 1.3]))[0]
    assert noisy.status == "not checkable" and noisy.ratio > 1
    red = te.checks(_results([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]))[-1]
    assert red.theorem == "beta0-reduction" and red.status == "holds"


def test_test_metrics_match_the_logistic_federation_loss():
    rng = np.random.default_rng(3)
    n, f, C = 40, 4, 3
    A = np.hstack([rng.standard_normal((n, f - 1)), np.ones((n, 1))])
    y = rng.integers(0, C, size=n)
    X = rng.standard_normal((3, f * C))
    acc, ce = te._test_metrics(X, A, y, C)
    fed = LogisticFederation([A], [y], n_classes=C)
    for r in range(3):
        assert ce[r] == pytest.approx(fed.loss(X[r]), rel=1e-12)
        pred = np.argmax(A @ X[r].reshape(f, C), axis=1)
        assert acc[r] == pytest.approx(np.mean(pred == y))


@pytest.mark.xfail(strict=True, reason=(
    "finding: on the QUICK instance (Dirichlet(1)-split Synthetic(1,1), 10 clients, 2 sampled, seed 002 "
    "Table 2 MNIST coefficients) FedProx-TE ends with a larger training loss gap than FedProx on every "
    "seed; seed 002 sec. 4.2 claims TE never decreases performance"))
def test_fedprox_te_is_not_worse_than_fedprox_on_the_quick_instance():
    res = te.run(dict(te.QUICK), experiment_rng(0, te.NAME))
    verdict = {c.theorem: c for c in te.checks(res)}["prox-te-not-worse"]
    assert verdict.status != "violated", verdict.detail
