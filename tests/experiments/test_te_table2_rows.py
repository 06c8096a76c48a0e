"""experiments/te_table2_rows.py: the decayed-rate runner against the library's run, the paired
statistics, the verdict logic and the FedProx-TE finding under Table 2's second row."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import te_table2_rows as exp
from fltheory.reproduce import experiment_rng
from fltheory.algorithms import FedProx, FedProxTE, run
from fltheory.participation import FullParticipation, UniformSampling

_SMALL = dict(exp.QUICK, n_devices=6, dim=4, n_classes=3, n_clients=4, rounds=6, local_steps=3)


@pytest.mark.parametrize("make", [lambda: FedProx(lr=0.1, local_steps=3, mu=2.0),
                                  lambda: FedProxTE(beta=0.4, lr=0.1, local_steps=3, mu=2.0)])
def test_without_decay_the_runner_is_the_library_run(make):
    fed = exp.instance(_SMALL, 3)
    f_star = float(fed.loss(fed.optimum()))
    got = exp.run_decayed(make(), fed, 6, participation=UniformSampling(2), seed=5, decay=1.0, f_star=f_star)
    hist = run(make(), fed, 6, participation=UniformSampling(2), seed=5)
    np.testing.assert_allclose(got, hist.loss_gap, rtol=1e-12, atol=1e-14)


def test_decay_multiplies_the_rate_of_round_t_by_decay_to_the_t():
    fed = exp.instance(_SMALL, 3)
    f_star = float(fed.loss(fed.optimum()))
    got = exp.run_decayed(FedProx(lr=0.1, local_steps=3, mu=2.0), fed, 5, participation=FullParticipation(),
                          seed=0, decay=0.9, f_star=f_star)
    x = np.zeros(fed.dim)
    ref = [float(fed.loss(x)) - f_star]
    for t in range(5):                     # FedProx's state is the model alone: one round per rate
        x = run(FedProx(lr=0.1 * 0.9 ** t, local_steps=3, mu=2.0), fed, 1, x0=x).x[-1]
        ref.append(float(fed.loss(x)) - f_star)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)


def test_paired_statistics_by_hand():
    p = exp.paired(np.array([1.0, 2.0, 4.0]), np.array([2.0, 4.0, 8.0]))
    assert p["geomean"] == pytest.approx(2.0) and p["lower"] == pytest.approx(2.0) and p["wins"] == 0
    q = exp.paired(np.array([1.0, 1.0]), np.array([0.5, 2.0]))
    assert q["geomean"] == pytest.approx(1.0) and q["lower"] < 1 < q["upper"]


_FINDING = ("FINDING: seed 002 says the TE target never makes its base worse; with Table 2's FedProx(-TE) "
            "row "
            "(alpha, beta) = (0.4, 0.4) and the 0.99 per-round rate decay, FedProx-TE's final training gap "
            "is "
            "1.20x FedProx's (95% lower bound 1.14, worse on 4/4 seeds) on the quick instance (experiment "
            "seed 0: instance seed 1752662065)")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=_FINDING)
def test_finding_fedprox_te_is_worse_on_table2_row_with_rate_decay():
    cfg = dict(exp.QUICK, prox_rows=[[0.4, 0.4]], curv_rows=[])
    res = exp.run(cfg, experiment_rng(0, exp.NAME))
    assert res["instance_seed"] == 1752662065
    row = res["rows"][0]
    assert row["lower"] <= 1 + cfg["margin"]
