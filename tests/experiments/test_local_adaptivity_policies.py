"""experiments/local_adaptivity_policies.py: ideal preconditioners against the hand derivation, the
rounds helper, the verdict logic, and the synchronised-state finding on the quick instance."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from experiments import local_adaptivity_policies as exp
from fltheory.reproduce import experiment_rng
from fltheory import optim
from fltheory.algorithms import run
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation


def test_ideal_preconditioners_land_on_the_mean_of_client_optima_in_one_round():
    # f_1 = (x - 1)^2 (H = 2), f_2 = 4 (x + 1)^2 / 2 (H = 4), equal weights: x_i* = 1, -1, so
    # x~ = 0 while x* = (2 - 4)/6 = -1/3; eta = 0.5, tau = 3: c = 1 - 0.5^3 = 0.875, eta_s = 1/c
    fed = QuadraticFederation(np.array([[[2.0]], [[4.0]]]), np.array([[2.0], [-4.0]]))
    cfg = dict(exp.QUICK, ideal_lr=0.5, local_steps=3)
    res = exp.ideal_one_round(fed, cfg, np.array([7.0]))
    assert res["c"] == pytest.approx(0.875) and res["server_lr"] == pytest.approx(1 / 0.875)
    assert res["err_round1"] < 1e-15 and res["err_round2"] < 1e-15
    assert res["closed_form_gap"] < 1e-15
    assert fed.optimum()[0] == pytest.approx(-1 / 3)
    # plain GD needs the rounds its rate predicts (within one)
    assert abs(res["gd_rounds_measured"] - res["gd_rounds_predicted"]) <= 1


def test_rounds_to_and_the_grid_search():
    assert exp.rounds_to(np.array([5.0, 2.0, 0.5, 0.1]), 0.5) == 2
    assert exp.rounds_to(np.array([5.0, 2.0]), 0.1) is None


def _fake():
    return {"seed": 1, "N": 2, "d": 2, "local_steps": 2, "rounds": 10, "loose_tol": 0.1,
    "one_round_tol": 1e-12,
            "policies": {"level": 0.5, "adagrad_rate": 0.1,
                         "best": {"fedavg": {"rounds": 8, "rate": 0.01, "trials": [[0.01, 8]]},
                                  "restart": {"rounds": 4, "rate": 0.1, "trials": [[0.1, 4]]}},
                         "curves": {}, "final_gap": {"restart": 0.1, "persist": 0.2, "synchronise": 0.3}},
            "ideal": {"err_round1": 1e-16, "err_round2": 1e-16, "server_lr": 1.0, "closed_form_gap": 0.0,
                      "gd_rounds_measured": 5, "gd_rounds_predicted": 5, "gd_rate": 0.1}}


def test_checks_hold_then_flag():
    res = _fake()
    c = {x.theorem: x for x in exp.checks(res)}
    assert {k: v.status for k, v in c.items()} == {"restart-faster": "holds", "sync-not-better": "holds",
                                                    "ideal-one-round": "holds"}
    assert c["restart-faster"].ratio == pytest.approx(0.5)
    assert c["sync-not-better"].ratio == pytest.approx(1 / 3)
    bad = copy.deepcopy(res)
    bad["policies"]["best"]["restart"]["rounds"] = None
    bad["ideal"]["err_round1"] = 1e-6
    c = {x.theorem: x.status for x in exp.checks(bad)}
    assert c["restart-faster"] == "not checkable" and c["ideal-one-round"] == "violated"


_FINDING = ("FINDING: seed 001 sec. 6 says synchronising client AdaGrad states is not better than "
            "restarting; "
            "on the quick instance (experiment seed 0: random_quadratic(4, 2, L=100, mu=1, heterogeneity=1, "
            "seed=515207367), tau = 5, AdaGrad rate 3.0, 150 rounds, deterministic gradients) synchronised "
            "states end with F - F* = 0.057 against 0.94 for restarted ones: the shared accumulator keeps "
            "growing, the effective rate decays and the non-vanishing bias shrinks")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=_FINDING)
def test_finding_synchronised_states_beat_restarted_ones_on_a_deterministic_quadratic():
    rng = experiment_rng(0, exp.NAME)
    seed = int(rng.integers(0, 2**31 - 1))
    assert seed == 515207367
    cfg = exp.QUICK
    fed = random_quadratic(cfg["n_clients"], cfg["dim"], L=cfg["L"], mu=cfg["mu"],
                           heterogeneity=cfg["heterogeneity"], seed=seed, constants="clients")
    u = rng.standard_normal(cfg["dim"])
    x0 = fed.optimum() + cfg["init_distance"] * u / np.linalg.norm(u)
    gap = {p: run(exp._fedopt(optim.adagrad(3.0), cfg["local_steps"], p), fed, cfg["rounds"],
    x0=x0).loss_gap[-1]
           for p in ("restart", "synchronise")}
    assert gap["restart"] <= gap["synchronise"]
