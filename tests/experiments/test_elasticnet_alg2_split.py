"""experiments/elasticnet_alg2_split.py: the model/control split of Algorithm 2's uplink against a
readable loop of seed 003's Algorithm 2, the verdict logic, and the pooled-uplink finding."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import elasticnet_alg2_split as exp
from fltheory.reproduce import experiment_rng
from fltheory.problems.generators import random_quadratic


def _readable_alg2(fed, x0, lambda1, cfg):
    """Seed 003 Algorithm 2 (eq. 7, option II controls, eps-thresholded Delta_k, dense Delta c_k),
    one client at a time; returns the non-zero counts of the model and control messages."""
    N, d = fed.n_clients, fed.dim
    lr, K, lam2, eps = cfg["lr"], cfg["local_steps"], cfg["lambda2"], cfg["eps"]
    x, c, ci = np.array(x0, dtype=float), np.zeros(d), np.zeros((N, d))
    nnz_model = nnz_control = 0
    for _ in range(cfg["rounds"]):
        sent, dcs = [], []
        for i in range(N):
            y = x.copy()
            for _ in range(K):
                g = fed.H[i] @ y - fed.e[i]
                y = y - lr * (g - ci[i] + c + lam2 * (y - x) + lambda1 * np.sign(y - x))
            delta = y - x
            s = np.where(np.abs(delta) <= eps, 0.0, delta)
            ci_new = ci[i] - c + (x - y) / (K * lr)
            sent.append(s)
            dcs.append(ci_new - ci[i])
            nnz_model += np.count_nonzero(s)
            nnz_control += np.count_nonzero(ci_new - ci[i])
        x = x + np.mean(sent, axis=0)
        c = c + np.sum(dcs, axis=0) / N
        ci = ci + np.array(dcs)
    return nnz_model, nnz_control


@pytest.mark.parametrize("lambda1", [0.0, 0.05])
def test_split_counts_match_a_readable_algorithm_2(lambda1):
    fed = random_quadratic(3, 4, L=1.0, mu=0.2, heterogeneity=1.0, seed=7, constants="clients")
    cfg = dict(exp.QUICK, rounds=4, eps=0.02, lr=0.1, local_steps=3, lambda2=0.5)
    x0 = fed.optimum() + np.array([1.0, -0.5, 0.3, 0.0])
    model, control = _readable_alg2(fed, x0, lambda1, cfg)
    entries = cfg["rounds"] * fed.n_clients * fed.dim
    got = exp.alg2_split(fed, x0, lambda1, cfg)
    assert got["model"] == pytest.approx(model / entries, abs=1e-12)
    assert got["control"] == pytest.approx(control / entries, abs=1e-12)
    assert got["uplink"] == pytest.approx((model + control) / (2 * entries), abs=1e-12)
    assert 0 < model < entries                 # the threshold zeroed some entries, not all


def _fake(model, control):
    uplink = [(m + c) / 2 for m, c in zip(model, control, strict=True)]
    return {"seed": 1, "N": 2, "d": 3, "eps": 1e-3, "lambda2": 1.0, "rounds": 5, "lambda1": [0.0, 0.1, 1.0],
            "model": model, "control": control, "uplink": uplink, "final_gap": [0.0, 0.0, 0.0]}


def test_checks_report_the_model_and_pooled_fractions_apart():
    c = {x.theorem: x for x in exp.checks(_fake([0.2, 0.15, 0.1], [0.5, 1.0, 1.0]))}
    assert c["alg2-model-sparsity"].status == "holds"
    assert c["alg2-model-sparsity"].ratio == pytest.approx(0.75)
    assert c["alg2-uplink-sparsity"].status == "violated"
    assert c["alg2-uplink-sparsity"].ratio == pytest.approx(0.575 / 0.35)
    zero = {x.theorem: x.status for x in exp.checks(_fake([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]))}
    assert zero == {"alg2-model-sparsity": "not checkable", "alg2-uplink-sparsity": "not checkable"}


def test_full_instance_model_changes_get_sparser_with_lambda1():
    cfg = dict(exp.FULL, **{"lambda1": [0.0, 0.01, 1.0]})
    res = exp.run(cfg, experiment_rng(0, exp.NAME))
    assert res["model"][1] < res["model"][0] and res["model"][2] < 0.6 * res["model"][0]
    assert res["control"][1] == 1.0 and res["control"][0] < 0.9    # dense controls once lambda_1 > 0


_FINDING = ("FINDING: on the FULL instance (seed 0 of the experiment: random_quadratic seed 881251954, "
            "m = 20, d = 60, eps = 1e-3, lambda_2 = 1, 100 rounds) Algorithm 2 sends more uplink non-zeros "
            "at lambda_1 = 0.01 (0.556) than at 0 (0.452): the control changes, sent unthresholded, are "
            "dense once lambda_1 > 0, although the model changes get sparser")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=_FINDING)
def test_finding_pooled_uplink_of_algorithm_2_is_not_sparser_with_lambda1():
    cfg = dict(exp.FULL, **{"lambda1": [0.0, 0.01]})
    res = exp.run(cfg, experiment_rng(0, exp.NAME))
    assert res["seed"] == 881251954
    assert res["uplink"][1] <= res["uplink"][0]
