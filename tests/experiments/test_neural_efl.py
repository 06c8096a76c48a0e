"""Verdicts of experiments/neural_efl.py and its finding (seed 000 EFL on the MNIST MLP)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import neural_efl as E
from fltheory.reproduce import experiment_rng


def _results(acc0=0.5, acc_best=0.6, loss_printed=(2.3, 1.9), acc_low=0.5):
    runs = [f"lambda={lam:g}" for lam in (0.0, 1.0)] + ["lambda=0 as printed", "EFL low participation",
                                                        "FedAvg low participation"]
    acc = {"lambda=0": [0.1, acc0], "lambda=1": [0.1, acc_best], "lambda=0 as printed": [0.1, 0.05],
           "EFL low participation": [0.1, acc_low], "FedAvg low participation": [0.1, 0.5]}
    loss = {r: [2.3, 1.5] for r in runs}
    loss["lambda=0 as printed"] = list(loss_printed)
    return {"majority_acc": 0.1, "lambdas": [0.0, 1.0], "lam_low": 1.0, "runs": runs, "acc": acc,
            "loss": loss, "q": 0.25, "rounds": 2}


def test_verdicts():
    by = {c.theorem: c for c in E.checks(_results())}
    assert by["learns"].status == "holds"          # the as-printed run is judged by its own check only
    assert by["lambda-helps"].status == "holds" and by["lambda-helps"].ratio == pytest.approx(0.4 / 0.5)
    assert by["low-participation"].status == "holds"
    printed = by["as-printed-stable"]
    assert printed.status == "holds" and printed.ratio == pytest.approx(1.9 / 2.3)
    by = {c.theorem: c for c in E.checks(_results(acc_best=0.4, loss_printed=(2.3, 5.0), acc_low=0.05))}
    assert by["lambda-helps"].status == "violated"
    assert by["as-printed-stable"].status == "violated"
    assert by["low-participation"].status == "violated"


FINDING = ("FINDING: EFL (seed 000 Alg. 1) with the server copy update as printed (x <- x + Delta^G, "
           "residuals counted again) raises the training loss on the QUICK MNIST MLP instance of "
           "neural_efl (seed 0): lambda = 0, ST q = 0.25 with error feedback, lr 0.05, 5 local steps, "
           "minibatch 20, 10 Dirichlet(0.3) clients, 1000 images at 14x14; measured 2.436 -> 4.315 in 20 "
           "rounds, while the consistent update goes 2.436 -> 1.64")


@pytest.mark.xfail(strict=True, reason=FINDING)
def test_efl_as_printed_server_update_does_not_increase_the_loss():
    res = E.run(dict(E.QUICK), experiment_rng(0, E.NAME))
    check = next(c for c in E.checks(res) if c.theorem == "as-printed-stable")
    assert check.status == "holds", check.detail
    assert np.isfinite(check.ratio)
